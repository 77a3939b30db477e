"""The federated learner: FedSGD (or FedAvg) over ``N`` simulated devices (paper eqs. 1-6).

:class:`TorchLearner` implements :class:`wflsim.sim.learner.Learner` by composing one part per
concern:

* :class:`~wflsim.models.learner.sampling.LocalData` -- the training set on the torch device, its
  partition and each device's minibatch of a slot;
* :class:`~wflsim.models.learner.gradients.GradientPaths` -- every participating device's gradient
  in batched ``vmap`` calls or plain autograd per device;
* :func:`~wflsim.models.learner.local.local_updates` -- ``E_n`` local SGD steps per device (FedAvg;
  ``E_n = 1``, the default, is FedSGD) and their pseudo-gradient as the upload;
* an update rule (:mod:`wflsim.models.learner.rules`, named by the scheme) -- where devices train,
  what they upload, how the server aggregates (:mod:`wflsim.models.learner.aggregate`), per-device
  state;
* a server strategy (:mod:`wflsim.models.learner.strategies`, ``[strategy]``; FedAvg until
  :meth:`~TorchLearner.set_strategy` names another) -- how the server turns the aggregated
  uploads into the next model;
* :func:`~wflsim.models.learner.evaluation.evaluate` and the Fig. 1 metric
  (:class:`~wflsim.models.learner.stable_fraction.StableFraction`).

Notation: ``D`` trainable parameters (flattened in ``model.named_parameters()`` order), ``n``
devices in one call, ``B_n`` the batch size of device ``n``. Global state on the torch device:
the model ``w`` ``(D,)`` and the buffers (BatchNorm running statistics, not counted in ``D``).

One slot: ``compute(t, ids)`` draws the devices' batches, computes their gradients at the rule's
local parameters (or takes their local steps at the slot's learning rate and forms the
pseudo-gradients) and turns them into uploads; ``apply(t, ok)`` aggregates the uploads of the
devices that made the deadline, steps ``w <- w - lr_t g`` (eq. 4, or the strategy's step; no step
when ``ok`` is empty),
averages their BatchNorm statistics, and lets the rule account the move (eq. 5).

Randomness: the partition uses ``streams.global_("partition")``, device ``n``'s minibatches of
slot ``t`` (one per local step, in order) come from ``streams.device("sampling", n, t)``, its
loss-probe minibatch of slot ``t`` (``power_of_choice`` selection) from
``streams.device("probe_sampling", n, t)``, the initial weights from the CPU generator seeded with ``streams.int_seed("torch_init")`` inside
``torch.random.fork_rng`` (the global torch RNG is left untouched). Same seed, same hardware and thread count => bit-identical results.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from wflsim.sim.config.catalogue import MODELS, DatasetError, epoch_steps
from wflsim.sim.privacy.mechanism import PrivacySpec
from wflsim.sim.strategies import NoParams
from wflsim.sim.updates import OverTheAir, UpdateInputs

from .. import data as _data
from ..registry import build_model, build_rule, build_strategy
from .aggregate import computed_rows
from .air import AirNoise, moments, noise_gain, over_the_air_uploads, privacy_gain, sent_entries
from .evaluation import eval_batch_for, evaluate
from .flat import FlatModel
from .gradients import PRECISIONS, GradientPaths
from .local import local_updates
from .privacy import SYNC_STEP, LearnerPrivacy
from .rules import AGGREGATIONS, Freezing, UpdateRule
from .sampling import DeviceStreams, LocalData, images_on, per_device_samples
from .stable_fraction import StableFraction
from .stale import StaleUpdates
from .strategies import (
    FedAvg,
    RuleCall,
    Strategy,
    StrategySettings,
    checked_vector,
    rule_mean_over,
    step_rows,
    wants_upload_mask,
)

LR_SCHEDULES = ("constant", "half_life")
#: ``vmap_chunk_samples="auto"`` per torch device type. On a CPU, 512 samples at a time keep the
#: activations of the paper's CNNs in cache: one vmap over 30 x 512 samples ran at half the
#: speed of 30 chunks of 512 (``benchmarks/learner_overhead.py --chunk``). A GPU wants large
#: batches; 16,384 bounds its memory.
AUTO_CHUNK_SAMPLES: dict[str, int] = {"cpu": 512, "cuda": 16384}


def resolve_device(device: str | torch.device) -> torch.device:
    """``"cpu"`` | ``"cuda"`` | ``"cuda:i"`` | ``"auto"`` (CUDA when available) -> a device."""
    if str(device) == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"learning device {str(device)!r} requested but CUDA is not available")
    return dev


class TorchLearner:
    """FedSGD over ``N`` simulated devices with a scheme's update rule (see the module doc).

    Use :meth:`from_config` (what ``wflsim.app.run.make_learner`` calls); the constructor takes
    ready tensors, a model and a partition, which the tests use with tiny synthetic models. The
    update rule is per-device freezing by stability until :meth:`set_update_rule` names another.

    Args (shapes): ``x_*`` ``(M, ...)`` float (or :class:`wflsim.models.data.CompactImages`,
    normalised when indexed), ``y_*`` ``(M,)`` int64 class labels, ``parts`` ``N`` index arrays into
    the training set, ``batch_sizes`` ``(N,)`` ints >= 1, ``sampling_rngs`` ``N`` generators (device
    ``n``'s minibatch draws, in order) or ``sampling_streams`` the run's streams (device ``n``'s
    batch of slot ``t`` from ``streams.device("sampling", n, t)``). ``vmap_chunk_samples``: at most
    about this many samples (devices x padded batch) go through the network at once; fewer than two
    devices in a chunk selects the per-device path (:mod:`wflsim.models.learner.gradients`);
    ``None`` = no bound; ``"auto"`` (default) = :data:`AUTO_CHUNK_SAMPLES` of the device type.
    ``aggregation``: ``"weighted"`` (eq. 3) or ``"per_coordinate"``. ``unmoved_stability``: the
    stability score of a parameter that did not move in a frame. ``local_steps``: ``E_n``, the local
    SGD steps of every device per update (one int, or ``(N,)`` ints >= 1; 1: FedSGD).
    ``eval_batch_size``: test images per forward pass of :meth:`evaluate`; ``"auto"`` (default) =
    :data:`~wflsim.models.learner.evaluation.AUTO_EVAL_BATCH` of the device type.
    """

    def __init__(
        self,
        *,
        model: nn.Module,
        x_train: torch.Tensor | _data.CompactImages,
        y_train: torch.Tensor,
        x_test: torch.Tensor | _data.CompactImages,
        y_test: torch.Tensor,
        parts: Sequence[np.ndarray],
        batch_sizes: np.ndarray | Sequence[int],
        lr: float,
        sampling_rngs: Sequence[np.random.Generator] | None = None,
        sampling_streams: DeviceStreams | None = None,
        lr_schedule: str = "constant",
        total_slots: int | None = None,
        device: str | torch.device = "cpu",
        eval_max_samples: int | None = None,
        unmoved_stability: float = 1.0,
        aggregation: str = "weighted",
        vmap_chunk_samples: int | str | None = "auto",
        eval_batch_size: int | str = "auto",
        architecture: tuple[str, str] | None = None,
        local_steps: int | np.ndarray | Sequence[int] = 1,
        precision: str = "float32",
    ) -> None:
        self.device = resolve_device(device)
        if precision not in PRECISIONS:
            raise ValueError(f"unknown precision {precision!r}; known: {list(PRECISIONS)}")
        b = np.asarray(batch_sizes)
        if b.ndim != 1 or b.size == 0 or not np.issubdtype(b.dtype, np.integer) or (b < 1).any():
            raise ValueError("batch_sizes must be a non-empty 1-D integer array of values >= 1")
        steps = np.broadcast_to(np.asarray(local_steps), b.shape)
        if not np.issubdtype(steps.dtype, np.integer) or (steps < 1).any():
            raise ValueError("local_steps must be an integer >= 1 or one per device")
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
        self.num_devices = b.size
        self.batch_sizes = b.astype(np.int64)
        #: ``(N,)`` ``E_n``: local SGD steps of each device per update (1: FedSGD)
        self.local_steps = steps.astype(np.int64)
        self.lr = float(lr)
        self.lr_schedule = lr_schedule
        self.total_slots = total_slots
        self.aggregation = aggregation
        self.unmoved_stability = float(unmoved_stability)
        self.eval_max_samples = eval_max_samples
        self.vmap_chunk_samples: int | None = vmap_chunk_samples
        self.eval_batch_size = eval_batch_for(eval_batch_size, self.device)
        self.streams = sampling_streams
        #: ``(model, dataset)`` of the catalogue network, for rules that need its layer table
        self.architecture = architecture

        dev = self.device
        self.data = LocalData(
            x_train, y_train, parts, self.batch_sizes, dev, sampling_rngs, sampling_streams
        )
        self.x_test = images_on(x_test, dev)
        self.y_test = y_test.to(dev, torch.int64)
        self.model = model.to(dev)
        self.net = FlatModel(self.model)
        self.num_params = self.net.num_params
        self.paths = GradientPaths(
            self.net, self.data.x_train, self.data.y_train, vmap_chunk_samples, dev
        )
        #: the arithmetic of the passes (``learning.precision``; float32: exact)
        self.precision = precision
        self.paths.precision = precision
        self._w = self.net.initial_params()
        self.buffers: dict[str, torch.Tensor] = self.net.initial_buffers()
        self.stability = StableFraction(self.num_params, dev)
        self.rule: UpdateRule = Freezing(
            self.num_devices,
            self.num_params,
            dev,
            aggregation=aggregation,
            unmoved_stability=unmoved_stability,
            streams=sampling_streams,
        )
        #: the server's step (``[strategy]``; FedAvg until :meth:`set_strategy`)
        self.strategy: Strategy = FedAvg(
            NoParams(), StrategySettings(self.num_params, self.device, self.num_devices)
        )
        #: whether the server steps' strategy rows are kept for the trace (not under FedAvg)
        self.logs_steps = False
        #: the pending over-the-air sum of the next apply (None: digital uploads)
        self._air: OverTheAir | None = None
        #: the last apply's MSE per entry, received vs exact aggregate (None: not over the air)
        self.last_aggregation_mse: float | None = None
        #: the last over-the-air apply's normalisation and noise (:class:`AirNoise`; None: not
        #: over the air, or nothing aggregated)
        self.last_air_noise: AirNoise | None = None
        #: the strategy rows of the steps taken, not yet taken by the engine
        self.strategy_rows: list[dict[str, np.ndarray]] = []
        self._started = False
        self._ids = np.empty(0, dtype=np.int64)
        self._uploads = torch.empty(0, self.num_params, device=dev)
        #: the computed devices' ``uploaded`` masks for the strategy (None: not asked for)
        self._trained: torch.Tensor | None = None
        #: what the slot's devices downloaded with the model for the strategy (its version state)
        self._strategy_at: Any = None
        self._losses = np.empty(0)
        self._batches: list[list[np.ndarray]] = []
        #: the devices' BatchNorm buffers after the last compute, ``{name: (n, ...)}``
        self.device_buffers: dict[str, torch.Tensor] = {}
        #: ``(N,)`` each device's local data size (the trace's ``device_config.num_samples``)
        self.num_samples: np.ndarray | None = self.data.num_samples
        #: client-level DP (``[privacy]``; None until :meth:`set_privacy`)
        self.privacy: LearnerPrivacy | None = None
        #: the name of the update rule of :meth:`set_update_rule` (None: the default freezing)
        self._rule_name: str | None = None
        self._clear_slot()
        #: stale updates (server.mode semi_sync / async): versions, pending steps, lazily
        self.stale = StaleUpdates(self)

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
        streams: DeviceStreams,
        device: str = "cpu",
        eval_max_samples: int | None = None,
        unmoved_stability: float = 1.0,
        aggregation: str = "weighted",
        vmap_chunk_samples: int | str | None = "auto",
        local_steps: int = 1,
        local_epochs: int | None = None,
        precision: str = "float32",
    ) -> TorchLearner:
        """Build data, partition, model and learner from scenario values.

        ``streams`` is the run's :class:`wflsim.sim.rng.Streams` (or anything with its ``device``,
        ``global_`` and ``int_seed`` methods); ``partition`` is ``"iid"`` or ``"dirichlet"``
        (then ``dirichlet_alpha > 0``); ``batch_sizes`` ``(N,)`` gives ``N``. Local steps:
        ``local_steps`` for every device, or with ``local_epochs = k``
        ``E_n = k ceil(D_n / B_n)`` on the partition made here.
        """
        if partition == "dirichlet" and dirichlet_alpha is None:
            raise ValueError("partition 'dirichlet' needs dirichlet_alpha > 0")
        b = np.asarray(batch_sizes)
        x_tr, y_tr, x_te, y_te = _data.load_dataset(dataset, data_dir, compact=True)
        if b.size > len(y_tr):
            raise DatasetError(
                "network.num_devices",
                f"{b.size} devices but dataset {dataset!r} has {len(y_tr)} training samples; "
                "every device needs at least one",
                f"use at most {len(y_tr)} devices, or a larger dataset",
            )
        parts = _data.partition(
            y_tr.numpy(),
            b.size,
            partition,
            1.0 if dirichlet_alpha is None else float(dirichlet_alpha),
            streams.global_("partition"),
        )
        if local_epochs is not None:
            sizes = np.array([p.size for p in parts], dtype=np.int64)
            local_steps_n: int | np.ndarray = epoch_steps(local_epochs, sizes, b)
        else:
            local_steps_n = local_steps
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
            architecture=(model, dataset) if model in MODELS else None,
            local_steps=local_steps_n,
            precision=precision,
        )

    def set_update_rule(self, rule: Any) -> None:
        """Use the scheme's update rule (a ``wflsim.sim.updates.UpdateRuleSpec``: name and
        parameters).

        Raises:
            RuntimeError: after the first frame began (the rule owns per-device state).
        """
        if self._started:
            raise RuntimeError("the update rule can only be set before the first frame")
        self.rule = build_rule(
            rule.name,
            rule.params,
            num_devices=self.num_devices,
            num_params=self.num_params,
            device=self.device,
            aggregation=self.aggregation,
            unmoved_stability=self.unmoved_stability,
            streams=self.streams,
            model=self.model,
            architecture=self.architecture,
        )
        self._rule_name = str(rule.name)
        self._check_privacy()

    def set_strategy(self, spec: Any) -> None:
        """Use the server strategy ``spec`` (a ``wflsim.sim.strategies.StrategySpec``: name and
        parameters) for every server step.

        Raises:
            RuntimeError: after the first frame began (the strategy owns the server's state).
            ValueError: an unknown strategy or bad parameters.
        """
        if self._started:
            raise RuntimeError("the strategy can only be set before the first frame")
        self.strategy = build_strategy(
            spec, StrategySettings(self.num_params, self.device, self.num_devices)
        )
        # FedAvg decides nothing beyond eq. 4: its traces have no strategy rows
        self.logs_steps = type(self.strategy) is not FedAvg
        self._check_privacy()

    def set_privacy(self, spec: PrivacySpec, edge: int = 0) -> None:
        """Clip every update a device sends and add the Gaussian noise ``spec`` places
        (:mod:`wflsim.models.learner.privacy`); ``edge``: the edge server's index under a
        hierarchy (its own noise).

        Raises:
            RuntimeError: after the first frame began (the clip is state).
            ValueError: the update rule or the strategy does not compose with the mechanism
                (one line naming ``privacy.mechanism``, :mod:`wflsim.sim.privacy.compose`).
        """
        if self._started:
            raise RuntimeError("privacy can only be set before the first frame")
        self.privacy = LearnerPrivacy(spec, self.streams, edge)
        self._check_privacy()

    def _check_privacy(self) -> None:
        """Refuse a rule or strategy that does not compose with the privacy set (if any)."""
        if self.privacy is not None:
            self.privacy.check(self._rule_name, self.strategy)

    @property
    def clip_norm(self) -> float | None:
        """The current clip ``C_t`` (update units; None without :meth:`set_privacy`)."""
        return None if self.privacy is None else self.privacy.clip_norm

    def take_privacy_rows(self) -> list[dict[str, np.ndarray]]:
        """The trace's ``dp_clip`` rows of the updates applied since the last call, one block
        per server step (none without :meth:`set_privacy`)."""
        return [] if self.privacy is None else self.privacy.take_rows()

    def take_strategy_rows(self) -> list[dict[str, np.ndarray]]:
        """The trace's ``strategy`` rows of the server steps taken since the last call, one
        block per step (:func:`~wflsim.models.learner.strategies.step_rows`; none under FedAvg)."""
        rows, self.strategy_rows = self.strategy_rows, []
        return rows

    # ------------------------------------------------------------------ views
    @property
    def parts(self) -> list[np.ndarray]:
        """The partition: device ``n``'s training-sample indices (sorted, int64)."""
        return list(self.data.parts)

    @property
    def stable_fraction(self) -> float:
        """Fig. 1's stable fraction of the global model after the last ``apply`` (NaN before
        ten slots)."""
        return self.stability.value

    @property
    def gradients(self) -> torch.Tensor:
        """``(n, D)`` uploads of the last ``compute`` (rows in ``computed_ids`` order)."""
        return self._uploads

    @property
    def computed_ids(self) -> np.ndarray:
        """Devices of the last ``compute`` (the rows of :attr:`gradients`)."""
        return self._ids.copy()

    @property
    def last_batches(self) -> list[np.ndarray]:
        """Training-set indices each device of the last ``compute`` drew for its first (with
        FedSGD: only) step (length ``B_n`` each)."""
        return [steps[0] for steps in self._batches]

    @property
    def last_local_batches(self) -> list[list[np.ndarray]]:
        """Per device of the last ``compute``, the indices of each of its ``E_n`` local steps."""
        return [list(steps) for steps in self._batches]

    @property
    def last_train_loss(self) -> np.ndarray:
        """``(n,)`` minibatch losses of the last ``compute`` (at each device's local model, the
        first local step's)."""
        return self._losses.copy()

    def global_params(self) -> torch.Tensor:
        """A copy of the global model ``w^t``, flat ``(D,)``."""
        self.stale.materialise()
        return self._w.clone()

    def set_global_params(self, w: torch.Tensor) -> None:
        """Overwrite the global model with a flat ``(D,)`` vector (tests, checkpoints)."""
        if tuple(w.shape) != (self.num_params,):
            raise ValueError(f"expected shape ({self.num_params},), got {tuple(w.shape)}")
        self._w = w.detach().to(self.device, torch.float32).clone()

    def sync_model(self) -> nn.Module:
        """Copy the global parameters and buffers into :attr:`model` (which the learner itself
        never reads) and return it, e.g. to save a checkpoint with ``model.state_dict()``."""
        self.stale.materialise()
        with torch.no_grad():
            for k, v in self.net.param_dict(self._w).items():
                self.model.get_parameter(k).copy_(v)
            for k, v in self.buffers.items():
                self.model.get_buffer(k).copy_(v)
        return self.model

    def local_params(self, device_ids: np.ndarray | Sequence[int]) -> torch.Tensor:
        """``(n, D)`` local models of ``device_ids`` in this slot (eq. 1 under freezing)."""
        ids = self._check_ids(device_ids)
        p = self.rule.local_params(self._w, ids)
        return p.expand(ids.size, -1).clone() if p.dim() == 1 else p

    def param_dict(self, flat: torch.Tensor) -> dict[str, torch.Tensor]:
        """Split a flat ``(..., D)`` vector into ``{name: (..., *shape)}`` views."""
        return self.net.param_dict(flat)

    def lr_at(self, slot: int) -> float:
        """Learning rate of slot ``t``: ``lr`` or ``lr * 0.5 ** (t / total_slots)``."""
        if self.lr_schedule == "half_life":
            assert self.total_slots is not None
            return self.lr * 0.5 ** (slot / self.total_slots)
        return self.lr

    # ------------------------------------------------------------------ protocol
    def begin_frame(self, frame: int, update: UpdateInputs) -> None:
        """Open frame ``frame``: the rule takes the scheme's per-device inputs."""
        self.stale.materialise()
        self._started = True
        self.rule.begin_frame(frame, self._w, update)

    def compute(self, slot: int, device_ids: np.ndarray) -> None:
        """Draw minibatches and compute the uploads of ``device_ids`` (batched): their
        gradients, or after ``E_n > 1`` local steps at the slot's learning rate their
        pseudo-gradients (:mod:`wflsim.models.learner.local`)."""
        ids = self._check_ids(device_ids)
        self._clear_slot()
        self._ids = ids
        if ids.size == 0:
            return
        steps = self.local_steps[ids]
        batches = self.data.draw_steps(slot, ids, steps)
        self._batches = per_device_samples(batches, steps)
        params = self.rule.local_params(self._w, ids)
        local_bufs = self.rule.local_buffers(self.buffers, ids) if self.buffers else None
        masks = wants_upload_mask(self.strategy, self.rule)
        vectors = self.strategy.device_vectors
        trained = self.rule.trained(ids) if len(batches) > 1 or masks or vectors else None
        drift = None
        if vectors:  # what the devices downloaded with the model, and their own state now
            self._strategy_at = self.strategy.version_state()
            drift = self.strategy.local_drift(ids, [self._strategy_at] * ids.size, None)
        grads, losses, new_bufs = local_updates(
            self.paths,
            params,
            batches,
            steps,
            np.full(ids.size, self.lr_at(slot)),
            trained if len(batches) > 1 else None,
            self.buffers,
            local_bufs,
            self.strategy.local_correction,
            drift,
        )
        self._trained = trained if masks or vectors else None
        self._uploads = self.rule.uploads(grads, ids, slot)
        if self.privacy is not None:  # what leaves the devices: clipped (and noised, local)
            sent = None
            if self.privacy.mechanism == "local":
                rows = torch.arange(ids.size, device=self._uploads.device)
                sent = self._sent_entries(ids, rows, self._trained, self._uploads)
            self._uploads, self._dp_norms = self.privacy.form(
                self._uploads, sent, ids, np.full(ids.size, slot, dtype=np.int64)
            )
        self._losses = losses.cpu().numpy()
        self.device_buffers = new_bufs

    def probe_losses(self, slot: int, device_ids: np.ndarray) -> np.ndarray:
        """``power_of_choice``'s loss probes: each device's mean cross-entropy on the current
        global model (under stale updates the materialised one) over a minibatch of ``B_n`` of
        its samples keyed by ``(slot, device)`` on its own stream, ``(n,)`` float64; one batched
        forward pass, nothing of the model, its buffers or the training batches changes."""
        ids = self._check_ids(device_ids)
        if ids.size == 0:
            return np.empty(0)
        self.stale.materialise()
        batch = self.data.draw_probe(slot, ids)
        return self.paths.losses(self._w, batch, self.buffers).double().cpu().numpy()

    def receive_over_the_air(self, air: OverTheAir) -> None:
        """The next :meth:`apply` aggregates what an over-the-air sum delivers
        (:class:`~wflsim.sim.learner.OverTheAir`; ``[uplink] mode = "aircomp"``)."""
        std = air.noise_stds
        if air.ratio.ndim != 1 or not np.isfinite(air.ratio).all() or not (std >= 0).all():
            raise ValueError("an over-the-air sum needs finite ratios (k,) and noise_std >= 0")
        if air.groups.shape != air.ratio.shape or (
            air.groups.size and air.groups.max() >= std.size
        ):
            raise ValueError("an over-the-air sum needs a sum per device within noise_std")
        self._air = air

    def _sent_entries(
        self,
        ok: np.ndarray,
        rows: torch.Tensor,
        trained: torch.Tensor | None,
        uploads: torch.Tensor,
    ) -> torch.Tensor:
        """:func:`~wflsim.models.learner.air.sent_entries` of this slot's rule and devices."""
        return sent_entries(self.rule, self._ids, ok, rows, trained, uploads)

    def upload_moments(self, device_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Over the air: the mean ``mu_n`` and standard deviation ``sigma_n`` of the entries
        each of ``device_ids`` sends of its upload of this slot (computed, not yet applied),
        the side information it normalises its update by (update units, ``(k,)`` each)."""
        ids = self._check_ids(device_ids)
        if ids.size == 0:
            return np.empty(0), np.empty(0)
        pos = {int(n): r for r, n in enumerate(self._ids)}
        rows = torch.as_tensor([pos[int(n)] for n in ids], device=self.device)
        uploads, trained = computed_rows(self._ids, self._uploads, self._trained, ids, rows)
        sent = self._sent_entries(ids, rows, trained, uploads)
        mu, _, sigma = moments(uploads, sent)
        return (
            mu.squeeze(1).double().cpu().numpy(),
            sigma.double().cpu().numpy(),
        )

    def _over_the_air(
        self, uploads: torch.Tensor, air: OverTheAir, weights: torch.Tensor, sent: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The uploads as the sum weighs them and the receiver's noise
        (:func:`~wflsim.models.learner.air.over_the_air_uploads`), its record kept as
        :attr:`last_air_noise`."""
        weighed, noise, self.last_air_noise = over_the_air_uploads(
            uploads, air, weights, sent, self.streams, getattr(self, "clip_norm", None)
        )
        return weighed, noise

    def apply(self, slot: int, success_ids: np.ndarray) -> None:
        """Aggregate the uploads that arrived (eq. 3), step (eq. 4 or the strategy's), let the
        rule account it; after :meth:`receive_over_the_air`, the sum the air delivered."""
        self.last_aggregation_mse = None
        self.last_air_noise = None
        ok = self._check_ids(success_ids)
        w_t = self._w
        if ok.size:
            pos = {int(n): r for r, n in enumerate(self._ids)}
            missing = [int(n) for n in ok if int(n) not in pos]
            if missing:
                raise ValueError(f"devices {missing} succeeded but computed nothing in this slot")
            rows = torch.as_tensor([pos[int(n)] for n in ok], device=self.device)
            bw = torch.as_tensor(self.batch_sizes[ok], dtype=torch.float32, device=self.device)
            uploads, trained = computed_rows(self._ids, self._uploads, self._trained, ok, rows)
            air, self._air = self._air, None
            if air is not None:  # what the air delivers: the exact uploads kept for the error
                exact_uploads = uploads
                bw_air = torch.as_tensor(self.batch_sizes[ok], dtype=torch.float32)
                sent = self._sent_entries(ok, rows, trained, uploads)
                uploads, noise = self._over_the_air(uploads, air, bw_air, sent)

            def call(index: np.ndarray | None, values: torch.Tensor) -> torch.Tensor:
                if index is None:  # every row: the rule's call without strategies
                    return self.rule.aggregate(values, ok, bw)
                return self.rule.aggregate(
                    values, ok[index], bw[torch.as_tensor(index, device=bw.device)]
                )

            uploaded = trained if wants_upload_mask(self.strategy, self.rule) else None
            g = self.strategy.aggregate(
                uploads, bw, self.local_steps[ok], uploaded, rule_mean_over(uploads, call)
            )
            if air is not None:
                added = noise * noise_gain(call, sent, bw)
                g = g + added
                assert self.last_air_noise is not None
                self.last_air_noise.measure(added[sent.any(dim=0)])
                exact = self.strategy.aggregate(  # the same aggregation of the exact uploads
                    exact_uploads,
                    bw,
                    self.local_steps[ok],
                    uploaded,
                    rule_mean_over(exact_uploads, call),
                )
                self.last_aggregation_mse = float(torch.mean((g - exact) ** 2))
            if self.privacy is not None:
                g, dp_std = self._privacy_noise(g, call, ok, rows, trained, uploads, bw, slot)
            note = getattr(self.rule, "server_gradient", None)  # optional (PlainRule: nothing)
            if note is not None:
                note(g)
            g = checked_vector(self.strategy, "aggregate", g, w_t)
            w_next = checked_vector(
                self.strategy,
                "server_step",
                self.strategy.server_step(w_t, g, self.lr_at(slot)),
                w_t,
            )
            if self.strategy.device_vectors:  # the uploads arrived: the devices' state follows
                self.strategy.arrived(
                    ok, uploads, self.local_steps[ok], trained, [self._strategy_at] * ok.size
                )
            if self.logs_steps:
                lr = np.full(ok.size, self.lr_at(slot))
                self.strategy_rows.append(step_rows(self.strategy, ok, uploads, lr, w_t, w_next))
            self.buffers = self.rule.aggregate_buffers(self.buffers, self.device_buffers, rows)
            if self.privacy is not None:
                norms = self._dp_norms[rows.cpu().numpy()]
                clip = np.full(ok.size, self.privacy.clip_norm)
                if air is not None and self.last_air_noise is not None:
                    dp_std = self.last_air_noise.noise_std
                self.privacy.record(ok, norms, clip, dp_std)
                self.privacy.after_step(norms, clip, (SYNC_STEP, int(slot)))
        else:
            w_next = w_t
        self.rule.settle(ok)
        self.rule.after_step(w_t, w_next)
        self.stability.track(w_t, w_next)
        self._w = w_next
        self._clear_slot()

    def _privacy_noise(
        self,
        g: torch.Tensor,
        call: RuleCall,
        ok: np.ndarray,
        rows: torch.Tensor,
        trained: torch.Tensor | None,
        uploads: torch.Tensor,
        bw: torch.Tensor,
        slot: int,
    ) -> tuple[torch.Tensor, float]:
        """Central noise on the slot's aggregate ``g`` (:meth:`LearnerPrivacy.noise_aggregate`,
        weights ``B_n``; under a per-coordinate mean on the weighted sum before the division);
        returns it and the noise's standard deviation per entry (0: not central)."""
        assert self.privacy is not None
        if self.privacy.mechanism != "central":
            return g, 0.0
        gain = None
        if getattr(self.rule, "aggregation", None) == "per_coordinate":
            sent = self._sent_entries(ok, rows, trained, uploads)
            gain = privacy_gain(self.rule, call, sent, bw)
        b = bw.detach().cpu().numpy().astype(np.float64)
        return self.privacy.noise_aggregate(g, b, float(b.sum()), gain, (SYNC_STEP, int(slot)))

    # ------------------------------------------------------------------ stale updates
    @property
    def versions_kept(self) -> int:
        """Model copies held for stale updates now
        (:class:`~wflsim.models.learner.stale.StaleUpdates`)."""
        return self.stale.versions_kept

    @property
    def version(self) -> int:
        """The global model's version: server steps through :meth:`apply_updates`."""
        return self.stale.version

    def start_update(self, key: int, device: int, sample_key: int, slot: int = 0) -> None:
        """``device`` downloads the model in slot ``slot`` for the update ``key`` (nothing is
        computed; its local steps, if any, take that slot's learning rate)."""
        self._started = True
        self.stale.start(key, device, sample_key, slot)

    def drop_update(self, key: int) -> None:
        """The update ``key`` will never be applied."""
        self.stale.drop(key)

    def apply_updates(
        self, slot: int, keys: np.ndarray, weights: np.ndarray, server_lr: float
    ) -> None:
        """A server step with the updates ``keys`` (computed when the model is next needed)."""
        self.stale.apply(slot, keys, weights, server_lr)

    def materialise(self) -> None:
        """Take the steps announced so far (:meth:`StaleUpdates.materialise`)."""
        self.stale.materialise()

    def is_finite(self) -> bool:
        """Whether every parameter and BatchNorm buffer of the global model is finite."""
        if not bool(torch.isfinite(self._w).all()):
            return False
        return all(
            bool(torch.isfinite(v).all()) for v in self.buffers.values() if v.is_floating_point()
        )

    def evaluate(self) -> tuple[float, float]:
        """``(mean cross-entropy, accuracy)`` of the global model on the test split."""
        self.stale.materialise()
        return evaluate(
            self.net,
            self._w,
            self.buffers,
            self.x_test,
            self.y_test,
            max_samples=self.eval_max_samples,
            batch_size=self.eval_batch_size,
            precision=self.precision,
        )

    def evaluate_model(
        self, w: torch.Tensor, buffers: dict[str, torch.Tensor]
    ) -> tuple[float, float]:
        """``(mean cross-entropy, accuracy)`` of the model ``w`` ``(D,)`` with ``buffers`` on
        the test split (a model the learner does not hold: the cloud's, under a hierarchy)."""
        return evaluate(
            self.net,
            w,
            buffers,
            self.x_test,
            self.y_test,
            max_samples=self.eval_max_samples,
            batch_size=self.eval_batch_size,
            precision=self.precision,
        )

    def replace_model(self, w: torch.Tensor, buffers: dict[str, torch.Tensor]) -> None:
        """Make ``w`` ``(D,)`` (and ``buffers``) the model from now on, as a new version that is
        no server step (a cloud model arriving at an edge): the steps announced so far are taken
        first; updates started before keep the version they started on; neither the update
        rule's accumulators nor the Fig. 1 metric see it."""
        self.stale.materialise()
        self.stale.version += 1
        self.stale.materialised = self.stale.version
        self._w = w.detach().to(self.device, torch.float32).clone()
        self.buffers = {k: v.clone() for k, v in buffers.items()}

    def end_frame(self, frame: int) -> None:
        """Close the frame (the rule computes what the next frame needs)."""
        self.stale.materialise()
        self.rule.end_frame()

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        """Global model, buffers, the Fig. 1 metric, the rule's and the strategy's state (numpy,
        no torch)."""
        self.stale.materialise()
        return {
            "w": self._w.cpu().numpy(),
            "buffers": {k: v.cpu().numpy() for k, v in self.buffers.items()},
            "stable_fraction": self.stability.state_dict(),
            "rule": self.rule.state_dict(),
            "stale": self.stale.state_dict(),
            "strategy": self.strategy.state_dict(),
            **({} if self.privacy is None else {"privacy": self.privacy.state_dict()}),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` (a learner built from the same scenario and seed, its
        strategy set; a state without ``"strategy"`` leaves the strategy fresh)."""
        w = np.asarray(state["w"])
        if w.shape != (self.num_params,):
            raise ValueError(f"saved model has {w.shape} parameters, this one ({self.num_params},)")
        self._w = torch.as_tensor(w, dtype=torch.float32, device=self.device).clone()
        bufs = state["buffers"]
        if set(bufs) != set(self.buffers):
            raise ValueError("saved buffers do not match the model's")
        self.buffers = {
            k: torch.as_tensor(np.asarray(v), device=self.device).clone() for k, v in bufs.items()
        }
        self.stability.load_state_dict(state["stable_fraction"])
        self.rule.load_state_dict(state["rule"])
        if "strategy" in state:  # before the updates in flight: their versions read it
            self.strategy.load_state_dict(state["strategy"])
        if self.privacy is not None and "privacy" in state:  # before them too (their clips)
            self.privacy.load_state_dict(state["privacy"])
        if "stale" in state:
            self.stale.load_state_dict(state["stale"])
        self._started = True

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
        self._uploads = torch.empty(0, self.num_params, device=self.device)
        self._trained = None
        self._strategy_at = None
        self._losses = np.empty(0)
        self._batches = []
        self.device_buffers = {}
        self._dp_norms = np.empty(0)
