"""Data placement and minibatch sampling: each device's local data and its per-slot batches."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import torch

from .. import data as _data


class DeviceStreams(Protocol):
    """The random streams the learner draws from (``wflsim.sim.rng.Streams`` satisfies it)."""

    def device(self, name: str, device: int, *sub: int) -> np.random.Generator: ...

    def global_(self, name: str) -> np.random.Generator: ...

    def int_seed(self, name: str, index: int = ...) -> int: ...


def images_on(
    x: torch.Tensor | _data.CompactImages, dev: torch.device
) -> torch.Tensor | _data.CompactImages:
    """Images on ``dev``: a float tensor as ``float32``, :class:`~wflsim.models.data.CompactImages`
    kept compact."""
    if isinstance(x, _data.CompactImages):
        return x.to(dev)
    return x.to(dev, torch.float32)


@dataclass(frozen=True)
class Batch:
    """The minibatches of ``n`` devices in one slot.

    ``ids`` ``(n,)`` devices; ``sizes`` ``(n,)`` their ``B_n``; ``idx`` ``(n, max B_n)`` training
    set indices, padded with each device's first index; ``weights`` ``(n, max B_n)`` float32
    per-sample weights ``1 / B_n`` (0 for padding); ``samples`` the ``n`` index arrays.
    """

    ids: np.ndarray
    sizes: np.ndarray
    idx: np.ndarray
    weights: np.ndarray
    samples: list[np.ndarray]


class LocalData:
    """The training set on the learner's torch device and its partition across devices.

    Device ``n`` draws ``B_n`` indices of its local data for each local step of a slot it trains
    in: without replacement if it holds at least ``B_n`` samples, else with replacement. Its
    draws come from ``sampling_rngs[n]`` (in order) or, with ``sampling_streams``, from
    ``streams.device("sampling", n, t)`` for slot ``t``, so a batch does not depend on which slots
    the device took part in before (common random numbers across schemes).

    Args (shapes): ``x_train`` ``(M, ...)`` float or :class:`wflsim.models.data.CompactImages`;
    ``y_train`` ``(M,)`` int64; ``parts`` ``N`` index arrays; ``batch_sizes`` ``(N,)`` ints >= 1.
    """

    def __init__(
        self,
        x_train: torch.Tensor | _data.CompactImages,
        y_train: torch.Tensor,
        parts: Sequence[np.ndarray],
        batch_sizes: np.ndarray,
        device: torch.device,
        sampling_rngs: Sequence[np.random.Generator] | None = None,
        sampling_streams: Any = None,
    ) -> None:
        n_dev = batch_sizes.size
        if sampling_rngs is None and sampling_streams is None:
            raise ValueError("give sampling_rngs or sampling_streams")
        n_rngs = n_dev if sampling_rngs is None else len(sampling_rngs)
        if len(parts) != n_dev or n_rngs != n_dev:
            raise ValueError(f"{n_dev} batch sizes but {len(parts)} partitions / {n_rngs} rngs")
        if any(len(p) == 0 for p in parts):
            raise ValueError("every device needs at least one training sample")
        self.batch_sizes = batch_sizes
        self.parts = [np.asarray(p, dtype=np.int64) for p in parts]
        self.rngs = None if sampling_rngs is None else list(sampling_rngs)
        self.streams = sampling_streams
        self.x_train = images_on(x_train, device)
        self.y_train = y_train.to(device, torch.int64)

    @property
    def num_samples(self) -> np.ndarray:
        """``(N,)`` local data sizes."""
        return np.array([p.size for p in self.parts], dtype=np.int64)

    def draw(self, slot: int | np.ndarray, ids: np.ndarray) -> Batch:
        """The minibatches of devices ``ids`` in slot ``slot`` (index sampling only); ``slot``
        may be one key per device (``(n,)`` ints: stale updates key each device's draw by its
        own slot or cycle)."""
        return self.draw_steps(slot, ids, np.ones(ids.size, dtype=np.int64))[0]

    def draw_steps(self, slot: int | np.ndarray, ids: np.ndarray, steps: np.ndarray) -> list[Batch]:
        """The minibatches of ``steps[i]`` local steps of each device ``ids[i]`` (``(n,)`` ints
        ``>= 1``): element ``e`` holds the devices with more than ``e`` steps, in ``ids`` order.

        Each device draws its steps' batches in order from one generator (its slot's stream),
        so its first batch is the one :meth:`draw` gives (FedSGD's) and step ``e + 1`` is that
        stream's next draw; ``slot`` as in :meth:`draw`.
        """
        keys = np.broadcast_to(np.asarray(slot, dtype=np.int64), ids.shape)
        rngs = [
            self.rngs[n] if self.rngs is not None else self.streams.device("sampling", n, int(k))
            for n, k in zip(ids, keys, strict=True)
        ]
        out = []
        for e in range(int(steps.max())):
            rows = np.flatnonzero(steps > e)
            out.append(self._batch(ids[rows], [rngs[r] for r in rows]))
        return out

    def draw_probe(self, slot: int, ids: np.ndarray) -> Batch:
        """The loss-probe minibatches of devices ``ids`` in slot ``slot`` (``power_of_choice``):
        ``B_n`` samples each, drawn as a training batch is but from
        ``streams.device("probe_sampling", n, slot)``, so the training batches do not change.

        Raises:
            ValueError: the data was built with ``sampling_rngs`` (no streams to key it by).
        """
        if self.streams is None:
            raise ValueError("loss probes need sampling_streams (keyed by slot and device)")
        rngs = [self.streams.device("probe_sampling", int(n), int(slot)) for n in ids]
        return self._batch(ids, rngs)

    def _batch(self, ids: np.ndarray, rngs: list[np.random.Generator]) -> Batch:
        """One minibatch of each device ``ids[i]``, drawn from ``rngs[i]``."""
        b = self.batch_sizes[ids]
        b_max = int(b.max())
        idx = np.empty((ids.size, b_max), dtype=np.int64)
        wts = np.zeros((ids.size, b_max), dtype=np.float32)
        samples = []
        for row, (n, rng) in enumerate(zip(ids, rngs, strict=True)):
            local = self.parts[n]
            pick = rng.choice(local.size, size=b[row], replace=local.size < b[row])
            samples.append(local[pick])
            idx[row, : b[row]] = local[pick]
            idx[row, b[row] :] = local[pick[0]]
            wts[row, : b[row]] = 1.0 / b[row]
        return Batch(ids=ids, sizes=b, idx=idx, weights=wts, samples=samples)


def per_device_samples(batches: list[Batch], steps: np.ndarray) -> list[list[np.ndarray]]:
    """:meth:`LocalData.draw_steps`'s batches regrouped per device: for device ``i`` of the
    call, the training-set indices of each of its ``steps[i]`` local steps, in order."""
    out: list[list[np.ndarray]] = [[] for _ in range(steps.size)]
    for e, batch in enumerate(batches):
        for row, samples in zip(np.flatnonzero(steps > e), batch.samples, strict=True):
            out[row].append(samples)
    return out
