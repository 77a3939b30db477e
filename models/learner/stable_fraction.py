"""The paper's Fig. 1 metric on the global model: the fraction of stable parameters."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

#: Fig. 1 of the paper: window I of updates and threshold of the "stable parameter" rule.
STABLE_WINDOW = 10
STABLE_THRESHOLD = 0.005


class StableFraction:
    """A parameter is stable if its cumulative absolute update over the last ``STABLE_WINDOW``
    (I = 10) slots is below ``STABLE_THRESHOLD`` (0.5 %) of its total cumulative absolute update;
    :attr:`value` is NaN until I slots have passed. An analysis metric only: it does not drive
    the freezing."""

    def __init__(self, num_params: int, device: torch.device) -> None:
        self.num_params = num_params
        self.device = device
        self.window: torch.Tensor | None = None
        self.total: torch.Tensor | None = None
        self.updates = 0
        self._value = float("nan")
        self._stale = False  # a step was tracked since the value was computed

    @property
    def value(self) -> float:
        """The fraction of stable parameters after the last step (NaN before I steps); computed
        when read (under stale updates the server steps many times per slot and the value is
        read once a slot at most)."""
        if self._stale and self.window is not None and self.total is not None:
            recent = self.window.sum(dim=0)
            stable = (self.total > 0) & (recent < STABLE_THRESHOLD * self.total)
            self._value = float(stable.float().mean())
            self._stale = False
        return self._value

    def track(self, w_t: torch.Tensor, w_next: torch.Tensor) -> None:
        """Account one slot's move of the global model."""
        delta = (w_next - w_t).abs()
        if self.window is None or self.total is None:
            self.window = torch.zeros(STABLE_WINDOW, self.num_params, device=self.device)
            self.total = torch.zeros(self.num_params, device=self.device)
        self.window[self.updates % STABLE_WINDOW] = delta
        self.total += delta
        self.updates += 1
        self._stale = self.updates >= STABLE_WINDOW

    def state_dict(self) -> dict[str, Any]:
        """Window, total, update count and the current value."""
        return {
            "window": None if self.window is None else self.window.cpu().numpy(),
            "total": None if self.total is None else self.total.cpu().numpy(),
            "updates": self.updates,
            "value": self.value,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`."""

        def tensor(v: Any) -> torch.Tensor | None:
            return None if v is None else torch.as_tensor(np.asarray(v), device=self.device)

        self.window, self.total = tensor(state["window"]), tensor(state["total"])
        self.updates = int(state["updates"])
        self._value = float(state["value"])
        self._stale = False
