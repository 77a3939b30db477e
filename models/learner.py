"""The federated learner: FedSGD with per-device parameter freezing (paper eqs. 1-6).

:class:`TorchLearner` implements :class:`sim.learner.Learner`. Notation: ``N`` devices, ``D``
trainable parameters (flattened in ``model.named_parameters()`` order), ``n`` devices in one
call, ``B_n`` the batch size of device ``n``.

State, all on the learner's torch device:

* ``w`` ``(D,)``: the global model ``w^t``; ``w_frame`` ``(D,)``: the model broadcast at the start
  of the current frame, ``w^{kT}`` (every device holds it at frame start).
* ``mask`` ``(N, D)`` bool, ``True`` = frozen for the frame (``None`` while nothing is frozen).
  Device ``n``'s local model is ``w_tilde_n = where(mask_n, w_frame, w)`` (eq. 1): frozen entries
  keep their frame-start value, active ones follow the broadcast every slot.
* ``dU``, ``dU_abs`` ``(N, D)`` (or ``(1, D)`` while nothing is frozen: then all devices'
  accumulators are equal and one row is kept), eq. 5; ``scores`` ``(N, D)`` or ``(1, D)``, eq. 6.

One slot:

* ``compute(t, ids)``: every device in ``ids`` draws ``B_n`` indices of its local data (without
  replacement if it holds at least ``B_n`` samples, else with replacement) from its own
  ``sampling`` stream, and the gradients of all of them (eq. 2, mean cross-entropy over the
  device's own samples, at ``w_tilde_n``) come from ``vmap(grad(loss))`` calls over devices,
  in chunks of about ``vmap_chunk_samples`` samples. Unequal ``B_n`` are padded to ``max B_n``
  with per-sample weights ``1/B_n`` (0 for padding). When fewer than two devices fit a chunk
  (on a CPU: ``B_n > 256``, e.g. the paper's 512), the gradients come instead from one plain
  autograd pass per device at ``w_tilde_n`` (same maths: a vmap over one device at a time is a
  loop with functorch's overhead, and needs more memory). Frozen entries of a gradient are set
  to 0 (not trained, not uploaded).
* ``apply(t, ok)``: eq. 3 over the successful devices, ``g = sum B_n g_n / sum B_n``
  (``aggregation="per_coordinate"``: each coordinate divided by the ``B`` weight of the devices that
  uploaded it, 0 where none did), ``w <- w - lr_t g`` (eq. 4; no step when ``ok`` is empty), then
  eq. 5 for EVERY device: ``dU_n += w_tilde_n - w_next``, ``dU_abs_n += |w_tilde_n - w_next|``.
* ``begin_frame(k, gamma)``: device ``n`` freezes the ``rint(gamma_n * D)`` parameters with the
  smallest score of the previous frame (ties broken by parameter index). Frame 0 (or any frame
  without scores from a previous ``end_frame``) freezes nothing: a documented warm-up.
* ``end_frame(k)``: ``s = |dU| / dU_abs`` with ``0/0 -> unmoved_stability`` (default 1: a parameter
  that never moved counts as unstable, so it is re-checked rather than frozen forever).

BatchNorm models (``mobilenet_v2``, ``resnet20``): each device normalises with its own batch
statistics and updates its own copy of the running statistics; ``apply`` averages the running
statistics of the successful devices into the global buffers (buffers are not counted in ``D``).
With unequal ``B_n`` such models are run as one ``vmap`` call per distinct batch size (padding
would leak into the batch statistics).

Randomness: the partition uses ``streams.global_("partition")``, device ``n``'s minibatches
``streams.device("sampling", n, t)`` for device n's batch of slot t, the initial weights from the
CPU generator seeded with ``streams.int_seed("torch_init")`` inside ``torch.random.fork_rng``
(the global torch RNG is left untouched).
Same seed, same hardware and thread count => bit-identical results.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, grad, vmap

from models import data as _data
from models.nets import build_model

LR_SCHEDULES = ("constant", "half_life")
AGGREGATIONS = ("weighted", "per_coordinate")
#: ``vmap_chunk_samples="auto"`` per torch device type. On a CPU, 512 samples at a time keep the
#: activations of the paper's CNNs in cache: one vmap over 30 x 512 samples ran at half the
#: speed of 30 chunks of 512 (``benchmarks/learner_overhead.py --chunk``). A GPU wants large
#: batches; 16,384 bounds its memory.
AUTO_CHUNK_SAMPLES: dict[str, int] = {"cpu": 512, "cuda": 16384}


#: Fig. 1 of the paper: window I of updates and threshold of the "stable parameter" rule.
STABLE_WINDOW = 10
STABLE_THRESHOLD = 0.005


def resolve_device(device: str | torch.device) -> torch.device:
    """``"cpu"`` | ``"cuda"`` | ``"cuda:i"`` | ``"auto"`` (CUDA when available) -> a device."""
    if str(device) == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"learning device {str(device)!r} requested but CUDA is not available")
    return dev


def stability_scores(
    dU: torch.Tensor, dU_abs: torch.Tensor, unmoved_stability: float = 1.0
) -> torch.Tensor:
    """Paper eq. 6: ``s = |dU| / dU_abs`` elementwise, ``0/0 -> unmoved_stability``.

    ``s`` lies in ``[0, 1]``: near 0 the updates of the frame cancelled out (stable), 1 means they
    all pointed the same way. Any shape; returns the same shape.
    """
    moved = dU_abs > 0
    return torch.where(
        moved,
        dU.abs() / torch.where(moved, dU_abs, torch.ones_like(dU_abs)),
        torch.full_like(dU_abs, float(unmoved_stability)),
    )


def freeze_masks(scores: torch.Tensor, counts: np.ndarray) -> torch.Tensor:
    """Masks freezing, per device, the ``counts[n]`` parameters with the smallest score.

    Args:
        scores: ``(N, D)`` or ``(1, D)`` (one score vector shared by all devices).
        counts: ``(N,)`` ints in ``[0, D]``.

    Returns:
        ``(N, D)`` bool, ``True`` = frozen; ties are broken by the lower parameter index.
    """
    n_dev, d = counts.shape[0], scores.shape[1]
    order = torch.argsort(scores, dim=1, stable=True)
    ranks = torch.empty_like(order)
    ranks.scatter_(1, order, torch.arange(d, device=scores.device).expand_as(order))
    k = torch.as_tensor(counts, dtype=ranks.dtype, device=scores.device).view(n_dev, 1)
    return ranks < k  # broadcasts (1, D) ranks against (N, 1) counts


def _images_on(
    x: torch.Tensor | _data.CompactImages, dev: torch.device
) -> torch.Tensor | _data.CompactImages:
    """Images on ``dev``: a float tensor as ``float32``, :class:`CompactImages` kept compact."""
    if isinstance(x, _data.CompactImages):
        return x.to(dev)
    return x.to(dev, torch.float32)


class TorchLearner:
    """FedSGD over ``N`` simulated devices with per-device parameter freezing (see module doc).

    Use :meth:`from_config` (what ``sim.learner.build_learner`` calls); the constructor takes
    ready tensors, a model and a partition, which the tests use with tiny synthetic models.
    """

    def __init__(
        self,
        *,
        model: nn.Module,
        x_train: torch.Tensor,
        y_train: torch.Tensor,
        x_test: torch.Tensor,
        y_test: torch.Tensor,
        parts: Sequence[np.ndarray],
        batch_sizes: np.ndarray | Sequence[int],
        lr: float,
        sampling_rngs: Sequence[np.random.Generator] | None = None,
        sampling_streams: Any = None,
        lr_schedule: str = "constant",
        total_slots: int | None = None,
        device: str | torch.device = "cpu",
        eval_max_samples: int | None = None,
        unmoved_stability: float = 1.0,
        aggregation: str = "weighted",
        vmap_chunk_samples: int | str | None = "auto",
        eval_batch_size: int = 2048,
    ) -> None:
        """Args (shapes): ``x_*`` ``(M, ...)`` float (or :class:`models.data.CompactImages`,
        normalised when indexed), ``y_*`` ``(M,)`` int64 class labels,
        ``parts`` ``N`` index arrays into the training set, ``batch_sizes`` ``(N,)`` ints >= 1,
        ``sampling_rngs`` ``N`` generators (device ``n``'s minibatch draws, in order), or
        ``sampling_streams`` a :class:`sim.rng.Streams`: device ``n``'s batch of slot ``t`` is then
        drawn from ``streams.device("sampling", n, t)``, so it does not depend on which slots the
        device took part in before (common random numbers across schemes).
        ``vmap_chunk_samples``: at most about this many samples (devices x padded batch) go
        through the network at once (``vmap`` ``chunk_size``). When fewer than two devices fit a
        chunk, each device gets one plain autograd pass instead, and a model without BatchNorm
        splits a device's batch into micro-batches of this size and sums their gradients (exact:
        the loss is a weighted sum over samples). ``None`` = no bound (one vmap); ``"auto"``
        (default) = :data:`AUTO_CHUNK_SAMPLES` of the torch device type. It bounds memory, and
        on a CPU it is what keeps the working set in cache: see ``docs/performance.md``.
        """
        self.device = resolve_device(device)
        b = np.asarray(batch_sizes)
        if b.ndim != 1 or b.size == 0 or not np.issubdtype(b.dtype, np.integer) or (b < 1).any():
            raise ValueError("batch_sizes must be a non-empty 1-D integer array of values >= 1")
        n_dev = b.size
        if sampling_rngs is None and sampling_streams is None:
            raise ValueError("give sampling_rngs or sampling_streams")
        n_rngs = n_dev if sampling_rngs is None else len(sampling_rngs)
        if len(parts) != n_dev or n_rngs != n_dev:
            raise ValueError(f"{n_dev} batch sizes but {len(parts)} partitions / {n_rngs} rngs")
        if any(len(p) == 0 for p in parts):
            raise ValueError("every device needs at least one training sample")
        if not (np.isfinite(lr) and lr > 0):
            raise ValueError(f"lr must be a finite number > 0, got {lr}")
        if lr_schedule not in LR_SCHEDULES:
            raise ValueError(f"unknown lr_schedule {lr_schedule!r}; known: {list(LR_SCHEDULES)}")
        if lr_schedule == "half_life" and not (total_slots and total_slots > 0):
            raise ValueError("lr_schedule 'half_life' needs total_slots > 0")
        if aggregation not in AGGREGATIONS:
            raise ValueError(f"unknown aggregation {aggregation!r}; known: {list(AGGREGATIONS)}")
        if eval_max_samples is not None and eval_max_samples < 1:
            raise ValueError("eval_max_samples must be None or >= 1")
        if vmap_chunk_samples == "auto":
            vmap_chunk_samples = AUTO_CHUNK_SAMPLES.get(self.device.type, 8192)
        if vmap_chunk_samples is not None and (
            isinstance(vmap_chunk_samples, str | bool) or vmap_chunk_samples < 1
        ):
            raise ValueError(
                f"vmap_chunk_samples must be 'auto', None or >= 1, got {vmap_chunk_samples!r}"
            )

        self.num_devices = n_dev
        self.batch_sizes = b.astype(np.int64)
        self.lr = float(lr)
        self.lr_schedule = lr_schedule
        self.total_slots = total_slots
        self.aggregation = aggregation
        self.unmoved_stability = float(unmoved_stability)
        self.eval_max_samples = eval_max_samples
        self.vmap_chunk_samples = vmap_chunk_samples
        self.eval_batch_size = int(eval_batch_size)
        self._parts = [np.asarray(p, dtype=np.int64) for p in parts]
        self._rngs = None if sampling_rngs is None else list(sampling_rngs)
        self._sampling_streams = sampling_streams
        # Fig. 1's stability metric of the global model: |w_{t+1} - w_t| over the last
        # STABLE_WINDOW updates against the total since the start.
        self._delta_window: torch.Tensor | None = None
        self._delta_total: torch.Tensor | None = None
        self._updates = 0
        self.stable_fraction = float("nan")

        dev = self.device
        self._x_train = _images_on(x_train, dev)
        self._y_train = y_train.to(dev, torch.int64)
        self._x_test = _images_on(x_test, dev)
        self._y_test = y_test.to(dev, torch.int64)

        self.model = model.to(dev)
        named = [(k, p) for k, p in self.model.named_parameters() if p.requires_grad]
        self._names = [k for k, _ in named]
        self._shapes = [tuple(p.shape) for _, p in named]
        self._sizes = [p.numel() for _, p in named]
        self.num_params = int(sum(self._sizes))
        with torch.no_grad():
            self._w = torch.cat([p.detach().reshape(-1) for _, p in named]).to(torch.float32)
        self._frozen_params = {
            k: p.detach() for k, p in self.model.named_parameters() if not p.requires_grad
        }
        self._buffers = {k: v.detach().clone() for k, v in self.model.named_buffers()}
        self._has_bn = any(
            isinstance(m, nn.modules.batchnorm._BatchNorm) for m in self.model.modules()
        )

        d = self.num_params
        self._w_frame = self._w.clone()
        self._mask: torch.Tensor | None = None
        self._dU = torch.zeros(1, d, device=dev)
        self._dU_abs = torch.zeros(1, d, device=dev)
        self._scores: torch.Tensor | None = None
        self.frame: int | None = None
        self._clear_slot()

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_config(
        cls,
        *,
        dataset: str,
        data_dir: str | os.PathLike[str] | None,
        model: str,
        partition: str,
        dirichlet_alpha: float | None,
        batch_sizes: np.ndarray | Sequence[int],
        lr: float,
        lr_schedule: str = "constant",
        total_slots: int | None,
        streams: Any,
        device: str = "cpu",
        eval_max_samples: int | None = None,
        unmoved_stability: float = 1.0,
        aggregation: str = "weighted",
        vmap_chunk_samples: int | str | None = "auto",
    ) -> TorchLearner:
        """Build data, partition, model and learner from scenario values.

        ``streams`` is a :class:`sim.rng.Streams` (an ``int`` seed is accepted too);
        ``partition`` is ``"iid"`` or ``"dirichlet"`` (then ``dirichlet_alpha > 0``);
        ``batch_sizes`` ``(N,)`` gives ``N``. See the module docstring for the rest.
        """
        if isinstance(streams, int | np.integer):
            from sim.rng import Streams

            streams = Streams(int(streams))
        if partition == "dirichlet" and dirichlet_alpha is None:
            raise ValueError("partition 'dirichlet' needs dirichlet_alpha > 0")
        b = np.asarray(batch_sizes)
        x_tr, y_tr, x_te, y_te = _data.load_dataset(dataset, data_dir, compact=True)
        parts = _data.partition(
            y_tr.numpy(),
            b.size,
            partition,
            1.0 if dirichlet_alpha is None else float(dirichlet_alpha),
            streams.global_("partition"),
        )
        with torch.random.fork_rng(devices=[]):
            torch.default_generator.manual_seed(streams.int_seed("torch_init"))
            net = build_model(model, dataset)
        return cls(
            model=net,
            x_train=x_tr,
            y_train=y_tr,
            x_test=x_te,
            y_test=y_te,
            parts=parts,
            batch_sizes=b,
            lr=lr,
            sampling_streams=streams,
            lr_schedule=lr_schedule,
            total_slots=total_slots,
            device=device,
            eval_max_samples=eval_max_samples,
            unmoved_stability=unmoved_stability,
            aggregation=aggregation,
            vmap_chunk_samples=vmap_chunk_samples,
        )

    # ------------------------------------------------------------------ views
    @property
    def parts(self) -> list[np.ndarray]:
        """The partition: device ``n``'s training-sample indices (sorted, int64)."""
        return list(self._parts)

    @property
    def masks(self) -> torch.Tensor:
        """``(N, D)`` bool, ``True`` where device ``n`` has frozen parameter ``d`` this frame."""
        if self._mask is None:
            return torch.zeros(self.num_devices, self.num_params, dtype=torch.bool)
        return self._mask.detach().cpu()

    @property
    def scores(self) -> np.ndarray | None:
        """``(N, D)`` stability scores of the last finished frame (``None`` before the first)."""
        if self._scores is None:
            return None
        return self._scores.expand(self.num_devices, -1).cpu().numpy().copy()

    @property
    def stability_accumulators(self) -> tuple[np.ndarray, np.ndarray]:
        """``(dU, dU_abs)``, each ``(N, D)``, accumulated so far in the current frame."""
        n, d = self.num_devices, self.num_params
        return (
            self._dU.expand(n, d).cpu().numpy().copy(),
            self._dU_abs.expand(n, d).cpu().numpy().copy(),
        )

    @property
    def gradients(self) -> torch.Tensor:
        """``(n, D)`` uploads of the last ``compute`` (rows in ``computed_ids`` order)."""
        return self._grads

    @property
    def computed_ids(self) -> np.ndarray:
        """Devices of the last ``compute`` (the rows of :attr:`gradients`)."""
        return self._ids.copy()

    @property
    def last_batches(self) -> list[np.ndarray]:
        """Training-set indices each device of the last ``compute`` drew (length ``B_n`` each)."""
        return list(self._batches)

    @property
    def last_train_loss(self) -> np.ndarray:
        """``(n,)`` minibatch losses of the last ``compute`` (at each device's local model)."""
        return self._losses.copy()

    def frozen_fraction(self) -> np.ndarray:
        """``(N,)`` fraction of parameters each device has frozen in the current frame."""
        if self._mask is None:
            return np.zeros(self.num_devices)
        return (self._mask.sum(dim=1).cpu().numpy() / self.num_params).astype(np.float64)

    def global_params(self) -> torch.Tensor:
        """A copy of the global model ``w^t``, flat ``(D,)``."""
        return self._w.clone()

    def set_global_params(self, w: torch.Tensor) -> None:
        """Overwrite the global model with a flat ``(D,)`` vector (tests, checkpoints)."""
        if tuple(w.shape) != (self.num_params,):
            raise ValueError(f"expected shape ({self.num_params},), got {tuple(w.shape)}")
        self._w = w.detach().to(self.device, torch.float32).clone()

    def sync_model(self) -> nn.Module:
        """Copy the global parameters and buffers into :attr:`model` (which the learner itself
        never reads) and return it, e.g. to save a checkpoint with ``model.state_dict()``."""
        with torch.no_grad():
            for k, v in self.param_dict(self._w).items():
                self.model.get_parameter(k).copy_(v)
            for k, v in self._buffers.items():
                self.model.get_buffer(k).copy_(v)
        return self.model

    def local_params(self, device_ids: np.ndarray | Sequence[int]) -> torch.Tensor:
        """``(n, D)`` local models ``w_tilde_n`` (eq. 1) of ``device_ids`` in this slot."""
        ids = self._check_ids(device_ids)
        if self._mask is None:
            return self._w.expand(ids.size, -1).clone()
        rows = torch.as_tensor(ids, device=self.device)
        return torch.where(self._mask[rows], self._w_frame, self._w)

    def param_dict(self, flat: torch.Tensor) -> dict[str, torch.Tensor]:
        """Split a flat ``(..., D)`` vector into ``{name: (..., *shape)}`` views."""
        lead = flat.shape[:-1]
        pieces = torch.split(flat, self._sizes, dim=-1)
        triples = zip(self._names, pieces, self._shapes, strict=True)
        return {k: p.reshape(*lead, *s) for k, p, s in triples}

    def lr_at(self, slot: int) -> float:
        """Learning rate of slot ``t``: ``lr`` or ``lr * 0.5 ** (t / total_slots)``."""
        if self.lr_schedule == "half_life":
            return self.lr * 0.5 ** (slot / self.total_slots)
        return self.lr

    # ------------------------------------------------------------------ protocol
    def begin_frame(self, frame: int, gamma: np.ndarray) -> None:
        """Fix the frame's masks from the previous frame's scores; reset the accumulators.

        ``gamma`` ``(N,)`` in ``[0, 1]``. Frame 0 (no scores yet) freezes nothing.
        """
        gamma = np.asarray(gamma, dtype=np.float64)
        if gamma.shape != (self.num_devices,):
            raise ValueError(f"gamma must have shape ({self.num_devices},), got {gamma.shape}")
        if not np.all((gamma >= 0) & (gamma <= 1)):
            raise ValueError("gamma must lie in [0, 1]")
        self.frame = int(frame)
        self._w_frame = self._w.clone()
        counts = np.rint(gamma * self.num_params).astype(np.int64)
        if self._scores is None or not counts.any():
            self._mask = None
        else:
            self._mask = freeze_masks(self._scores, counts)
        rows = 1 if self._mask is None else self.num_devices
        self._dU = torch.zeros(rows, self.num_params, device=self.device)
        self._dU_abs = torch.zeros(rows, self.num_params, device=self.device)

    def compute(self, slot: int, device_ids: np.ndarray) -> None:
        """Draw minibatches and compute the uploads of ``device_ids`` (batched, see module doc)."""
        ids = self._check_ids(device_ids)
        self._clear_slot()
        self._ids = ids
        if ids.size == 0:
            return
        b = self.batch_sizes[ids]
        b_max = int(b.max())
        idx = np.empty((ids.size, b_max), dtype=np.int64)
        wts = np.zeros((ids.size, b_max), dtype=np.float32)
        batches = []
        for row, n in enumerate(ids):  # index sampling only; the maths below is batched
            local = self._parts[n]
            rng = (
                self._rngs[n]
                if self._rngs is not None
                else self._sampling_streams.device("sampling", n, slot)
            )
            pick = rng.choice(local.size, size=b[row], replace=local.size < b[row])
            batches.append(local[pick])
            idx[row, : b[row]] = local[pick]
            idx[row, b[row] :] = local[pick[0]]
            wts[row, : b[row]] = 1.0 / b[row]
        self._batches = batches

        rows_t = torch.as_tensor(ids, device=self.device)
        frozen = self._mask is not None and bool(self._mask[rows_t].any())
        params = self.local_params(ids) if frozen else self._w
        cap = self.vmap_chunk_samples
        if cap is not None and cap < 2 * b_max:
            # At most one device fits a chunk: a vmap would run over one device at a time, i.e.
            # a loop with functorch's overhead (MobileNetV2, 512 CIFAR images: 1.4x the time and
            # 1.7x the activation memory of plain autograd). Plain autograd per device instead.
            grads, losses, new_bufs = self._per_device_grads(params, idx, b)
        else:
            grads, losses, new_bufs = self._vmap_grads(params, idx, wts, b)
        if frozen:
            grads = grads.masked_fill(self._mask[rows_t], 0.0)
        self._grads = grads
        self._losses = losses.cpu().numpy()
        self._dev_buffers = new_bufs

    def apply(self, slot: int, success_ids: np.ndarray) -> None:
        """Aggregate the successful uploads (eq. 3), step (eq. 4), accumulate eq. 5."""
        ok = self._check_ids(success_ids)
        w_t = self._w
        if ok.size:
            pos = {int(n): r for r, n in enumerate(self._ids)}
            missing = [int(n) for n in ok if int(n) not in pos]
            if missing:
                raise ValueError(f"devices {missing} succeeded but computed nothing in this slot")
            rows = torch.as_tensor([pos[int(n)] for n in ok], device=self.device)
            bw = torch.as_tensor(self.batch_sizes[ok], dtype=torch.float32, device=self.device)
            total = bw @ self._grads[rows]  # (D,)
            if self.aggregation == "per_coordinate" and self._mask is not None:
                ok_t = torch.as_tensor(ok, device=self.device)
                denom = bw @ (~self._mask[ok_t]).to(torch.float32)
                g = torch.where(denom > 0, total / denom.clamp_min(1e-30), 0.0)
            else:
                g = total / bw.sum()
            w_next = w_t - self.lr_at(slot) * g
            self._average_buffers(rows)
        else:
            w_next = w_t
        self._accumulate(w_t, w_next)
        self._track_stability(w_t, w_next)
        self._w = w_next
        self._clear_slot()

    def evaluate(self) -> tuple[float, float]:
        """``(mean cross-entropy, accuracy)`` of the global model on the test split."""
        m = self._x_test.shape[0]
        if self.eval_max_samples is not None:
            m = min(m, self.eval_max_samples)
        params = {**self.param_dict(self._w), **self._frozen_params}
        loss_sum, correct = 0.0, 0
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.no_grad():
                for start in range(0, m, self.eval_batch_size):
                    stop = min(m, start + self.eval_batch_size)
                    logits = functional_call(
                        self.model, (params, self._buffers), (self._x_test[start:stop],)
                    )
                    y = self._y_test[start:stop]
                    loss_sum += float(F.cross_entropy(logits, y, reduction="sum"))
                    correct += int((logits.argmax(dim=1) == y).sum())
        finally:
            self.model.train(was_training)
        return loss_sum / m, correct / m

    def end_frame(self, frame: int) -> None:
        """Stability scores of the frame (eq. 6) from the accumulators, which are then reset."""
        self._scores = stability_scores(self._dU, self._dU_abs, self.unmoved_stability)
        self._dU = torch.zeros_like(self._dU)
        self._dU_abs = torch.zeros_like(self._dU_abs)

    # ------------------------------------------------------------------ internals
    def _check_ids(self, device_ids: np.ndarray | Sequence[int]) -> np.ndarray:
        ids = np.asarray(device_ids, dtype=np.int64).reshape(-1)
        if ids.size and (ids.min() < 0 or ids.max() >= self.num_devices):
            raise ValueError(f"device ids must lie in [0, {self.num_devices}), got {ids}")
        if np.unique(ids).size != ids.size:
            raise ValueError(f"duplicate device ids: {ids}")
        return ids

    def _clear_slot(self) -> None:
        self._ids = np.empty(0, dtype=np.int64)
        self._grads = torch.empty(0, self.num_params, device=self.device)
        self._losses = np.empty(0)
        self._batches: list[np.ndarray] = []
        self._dev_buffers: dict[str, torch.Tensor] = {}

    def _vmap_grads(
        self, params: torch.Tensor, idx: np.ndarray, wts: np.ndarray, b: np.ndarray
    ) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        """Uploads of ``n`` devices by :meth:`_batched_grads` (one call per distinct ``B_n`` for a
        BatchNorm model with unequal batches, where padding would leak into the batch statistics).

        ``params`` ``(D,)`` shared or ``(n, D)``; ``idx``, ``wts`` ``(n, max B_n)`` padded sample
        indices and weights; ``b`` ``(n,)``. Returns ``(n, D)``, ``(n,)`` and ``{name: (n, ...)}``.
        """
        n, dev = b.size, self.device
        per_row = params.dim() == 2
        idx_t = torch.as_tensor(idx, device=dev)
        wts_t = torch.as_tensor(wts, device=dev)
        if self._has_bn and (b != b.max()).any():
            groups = [np.flatnonzero(b == v) for v in np.unique(b)]
        else:
            groups = [np.arange(n)]
        grads = torch.empty(n, self.num_params, device=dev)
        losses = torch.empty(n, device=dev)
        new_bufs: dict[str, torch.Tensor] = {}
        for g in groups:
            g_t = torch.as_tensor(g, device=dev)
            width = int(b[g].max())
            sel = idx_t[g_t, :width]
            gr, ls, bufs = self._batched_grads(
                params[g_t] if per_row else params,
                self._x_train[sel],
                self._y_train[sel],
                wts_t[g_t, :width],
            )
            grads[g_t] = gr
            losses[g_t] = ls
            for k, v in bufs.items():
                if k not in new_bufs:
                    new_bufs[k] = torch.empty(n, *v.shape[1:], dtype=v.dtype, device=v.device)
                new_bufs[k][g_t] = v
        return grads, losses, new_bufs

    def _per_device_grads(
        self, params: torch.Tensor, idx: np.ndarray, b: np.ndarray
    ) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        """Uploads of ``n`` devices, one plain autograd pass per device (same maths as
        :meth:`_batched_grads`: mean cross-entropy of the device's own ``B_n`` samples at its own
        parameters, BatchNorm with the device's batch statistics and its own running statistics).

        A model without BatchNorm splits a batch larger than ``vmap_chunk_samples`` into
        micro-batches whose weighted-sum losses and gradients add up exactly. Arguments and
        returns as :meth:`_vmap_grads`.
        """
        n, dev = b.size, self.device
        model, fixed = self.model, self._frozen_params
        cap = self.vmap_chunk_samples
        grads = torch.empty(n, self.num_params, device=dev)
        losses = torch.empty(n, device=dev)
        new_bufs = {
            k: torch.empty(n, *v.shape, dtype=v.dtype, device=dev) for k, v in self._buffers.items()
        }
        idx_t = torch.as_tensor(idx, device=dev)
        shared = params.dim() == 1
        if shared:  # nothing frozen: one leaf (and one parameter dict) serves every device
            leaf = params.detach().requires_grad_(True)
            pdict = {**self.param_dict(leaf), **fixed}
        model.train()
        for row in range(n):
            if not shared:
                leaf = params[row].detach().requires_grad_(True)
                pdict = {**self.param_dict(leaf), **fixed}
            bufs = {k: v.clone() for k, v in self._buffers.items()}
            b_n = int(b[row])
            step = b_n if (self._has_bn or cap is None) else cap
            for start in range(0, b_n, step):
                sel = idx_t[row, start : min(b_n, start + step)]
                logits = functional_call(model, (pdict, bufs), (self._x_train[sel],))
                loss = F.cross_entropy(logits, self._y_train[sel], reduction="sum") / b_n
                (g,) = torch.autograd.grad(loss, leaf)
                if start == 0:
                    grads[row], losses[row] = g, loss.detach()
                else:
                    grads[row] += g
                    losses[row] += loss.detach()
            for k, v in bufs.items():
                new_bufs[k][row] = v
        return grads, losses, new_bufs

    def _batched_grads(
        self, params: torch.Tensor, x: torch.Tensor, y: torch.Tensor, wts: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        """One ``vmap(grad)`` call over devices.

        ``params`` ``(D,)`` shared (``in_dims=None``) or ``(n, D)`` per device; ``x``
        ``(n, B, ...)``, ``y`` ``(n, B)``, ``wts`` ``(n, B)``. Returns ``(n, D)`` gradients,
        ``(n,)`` losses and the per-device updated buffers ``{name: (n, ...)}``.
        """
        model, fixed = self.model, self._frozen_params
        n, width = x.shape[0], x.shape[1]
        p_dim = 0 if params.dim() == 2 else None
        pdict = self.param_dict(params)
        bufs = {k: v.expand(n, *v.shape).clone() for k, v in self._buffers.items()}

        def loss_fn(p, b, xb, yb, wb):
            logits = functional_call(model, ({**p, **fixed}, b), (xb,))
            loss = (F.cross_entropy(logits, yb, reduction="none") * wb).sum()
            return loss, (loss.detach(), b)

        cap = self.vmap_chunk_samples
        chunk = None
        if cap is not None:
            chunk = max(1, cap // width)
            chunk = None if chunk >= n else chunk
        model.train()
        g, (loss, new_b) = vmap(
            grad(loss_fn, has_aux=True),
            in_dims=(p_dim, 0 if bufs else None, 0, 0, 0),
            chunk_size=chunk,
        )(pdict, bufs, x, y, wts)
        flat = torch.cat([g[k].reshape(n, -1) for k in self._names], dim=1)
        return flat, loss, new_b

    def _average_buffers(self, rows: torch.Tensor) -> None:
        """Global buffers <- mean over the successful devices (integer counters: max)."""
        for k, v in self._dev_buffers.items():
            sel = v[rows]
            if sel.is_floating_point():
                self._buffers[k] = sel.mean(dim=0)
            else:
                self._buffers[k] = sel.max(dim=0).values

    def _track_stability(self, w_t: torch.Tensor, w_next: torch.Tensor) -> None:
        """Fig. 1's rule on the global model: a parameter is stable if its cumulative absolute
        update over the last ``STABLE_WINDOW`` (I = 10) slots is below ``STABLE_THRESHOLD``
        (0.5 %) of its total cumulative absolute update; NaN until I slots have passed."""
        delta = (w_next - w_t).abs()
        if self._delta_window is None:
            self._delta_window = torch.zeros(STABLE_WINDOW, self.num_params, device=self.device)
            self._delta_total = torch.zeros(self.num_params, device=self.device)
        self._delta_window[self._updates % STABLE_WINDOW] = delta
        self._delta_total += delta
        self._updates += 1
        if self._updates < STABLE_WINDOW:
            return
        recent = self._delta_window.sum(dim=0)
        stable = (self._delta_total > 0) & (recent < STABLE_THRESHOLD * self._delta_total)
        self.stable_fraction = float(stable.float().mean())

    def _accumulate(self, w_t: torch.Tensor, w_next: torch.Tensor) -> None:
        """Eq. 5 for every device: ``dU += w_tilde - w_next``, ``dU_abs += |...|``."""
        if self._mask is None:
            diff = (w_t - w_next).unsqueeze(0)
        else:
            diff = torch.where(self._mask, self._w_frame - w_next, w_t - w_next)
        self._dU += diff
        self._dU_abs += diff.abs()
