"""Progress bars for runs (one step a slot) and sweeps (one step a point), through
``tqdm.auto``: a text bar on a terminal, a widget in a Jupyter notebook."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from wflsim.sim.engine import ProgressFn, RunStats


def wanted(progress: bool | None) -> bool:
    """Whether to draw a bar: ``True`` / ``False`` as given; ``None`` (auto) in a notebook or
    when the standard error is a terminal."""
    if progress is not None:
        return bool(progress)
    return "ipykernel" in sys.modules or sys.stderr.isatty()


class SlotBar:
    """A run's bar: called after every slot with the global slot index and the totals so far
    (the engine's progress callback); shows the frame, last accuracy, energy and outage rate.
    A resumed run's bar starts at its checkpoint."""

    def __init__(
        self,
        total_slots: int,
        slots_per_frame: int,
        *,
        disable: bool = False,
        label: str | None = None,
    ) -> None:
        from tqdm.auto import tqdm

        self.slots_per_frame = slots_per_frame
        self.total = total_slots
        self.bar = tqdm(
            total=total_slots,
            unit="slot",
            disable=disable,
            dynamic_ncols=True,
            file=sys.stderr,
            desc=label,
        )

    def __call__(self, t: int, st: RunStats) -> None:
        bar = self.bar
        if bar.n == 0 and t > 0:  # a resumed run starts at its checkpoint
            bar.update(t)
        bar.update(1)
        if t % 5 == 0 or t == self.total - 1:
            bar.set_postfix(
                frame=t // self.slots_per_frame,
                acc=f"{st.last_accuracy:.3f}",
                energy_J=f"{st.energy_j:.3g}",
                outage=f"{st.outage_rate:.3f}",
                refresh=False,
            )

    def close(self) -> None:
        self.bar.close()


class PointBar:
    """A sweep's bar: called with each point's name and result as it ends."""

    def __init__(self, total_points: int, *, disable: bool = False) -> None:
        from tqdm.auto import tqdm

        self.bar = tqdm(
            total=total_points, unit="run", disable=disable, dynamic_ncols=True, file=sys.stderr
        )

    def __call__(self, name: str, result: dict[str, Any]) -> None:
        self.bar.update(1)
        self.bar.set_postfix_str(f"{name}: {result.get('status')}", refresh=False)

    def close(self) -> None:
        self.bar.close()


def callback(
    progress: bool | ProgressFn | None, total_slots: int, slots_per_frame: int
) -> tuple[ProgressFn | None, Callable[[], None]]:
    """The engine's progress callback for the API's ``progress`` argument (a function is used as
    it is; ``True`` / ``False`` / ``None``: a bar, none, or a bar where one can be seen) and the
    function that closes it."""
    if callable(progress):
        return progress, lambda: None
    if not wanted(progress):
        return None, lambda: None
    bar = SlotBar(total_slots, slots_per_frame)
    return bar, bar.close
