"""Stale updates: model versions, server steps taken lazily, gradients batched across versions.

Under ``[server] mode = "semi_sync" | "async"`` (``wflsim.sim.servers.stale``) a device's update is
computed on the model version it downloaded, and the server applies updates in steps. The
engine announces, in virtual time: an update starts (``start``: device, the version now, its
minibatch key), is dropped (``drop``), or is applied in a step (``apply``: the updates and
their staleness weights). Nothing is computed then.

The model is **materialised** (the pending steps are taken) only when something reads it: a frame
start or end (the update rule's frame state, e.g. freezing's frame-start model and stability
scores), an evaluation, a checkpoint,
:meth:`~wflsim.models.learner.core.TorchLearner.global_params`. Taking the steps
``m + 1, m + 2, ...`` in order from the materialised version ``m``: every gradient that a pending
step needs and whose version is already materialised is computed in **one batched call** (whatever
step it belongs to), then the steps whose gradients are all there are taken. With FedAsync (one
update per step, staleness about ``N - 1``) this computes about ``N`` gradients per call, as a
synchronous slot does; semi-synchronous slots compute each slot's uploads together, as the
synchronous learner does. Only updates in a pending step are ever computed: an update dropped,
discarded as too stale, or still in flight or in the server's buffer when the run ends costs no
gradient.

Memory: the materialised model, and each older version an update not yet computed started on
(:attr:`StaleUpdates.versions_kept`); versions between them are never stored. Computed
gradients wait for their step (at most the pending steps' updates).

The update rule (:class:`~wflsim.models.learner.rules.base.StaleRule`) keeps, per frame, a view
of what updates started in it need (freezing's masks, Top-K's ``K``, pruning's kept counts,
quantisation's bits, FjORD's widths), and, per kept version, its state at that version (pruning's
aggregated gradient, FjORD's BatchNorm tiers). After a batched call it forms the uploads in the
order the updates started (increasing key), so that state carried from one upload of a device to
its next (Top-K's residual) follows the device's own updates whatever the batches were; for such
a rule, an update is not formed while an earlier update of its device is neither applied nor
dropped (the server never asks it: a device has one update in flight, and an update that arrived
is applied in the same step as any later one of its device, or earlier).
"""

from __future__ import annotations

from collections import Counter, deque
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

import numpy as np
import torch

from .air import privacy_gain
from .local import local_updates
from .privacy import STALE_STEP
from .rules.base import StaleUpdate
from .strategies import checked_vector, rule_mean_over, step_rows, wants_upload_mask

if TYPE_CHECKING:
    from .gradients import GradientPaths
    from .privacy import LearnerPrivacy
    from .rules.base import UpdateRule
    from .sampling import LocalData
    from .stable_fraction import StableFraction
    from .strategies import Strategy


class StaleOwner(Protocol):
    """What :class:`StaleUpdates` reads of the learner it serves
    (:class:`~wflsim.models.learner.core.TorchLearner`, which builds it) and, when steps are taken,
    updates: the model ``_w`` ``(D,)`` and ``buffers``, the update rule and strategy, the data,
    gradient paths and step counts, the learning rate and Fig. 1 metric."""

    _w: torch.Tensor
    buffers: dict[str, torch.Tensor]
    batch_sizes: np.ndarray
    data: LocalData
    device: torch.device
    local_steps: np.ndarray
    logs_steps: bool
    num_devices: int
    num_params: int
    paths: GradientPaths
    privacy: LearnerPrivacy | None
    rule: UpdateRule
    stability: StableFraction
    strategy: Strategy
    strategy_rows: list[dict[str, np.ndarray]]

    def lr_at(self, slot: int) -> float:
        """The learning rate of slot ``slot``."""
        ...


class _Version:
    """A materialised model version: parameters ``(D,)``, buffers (never changed in place), the
    update rule's state at it (``at``:
    :meth:`~wflsim.models.learner.rules.base.StaleRule.version_state`) and the strategy's
    (``strategy``: :meth:`~wflsim.models.learner.strategies.Strategy.version_state`, e.g.
    SCAFFOLD's server control variate)."""

    __slots__ = ("w", "buffers", "at", "strategy", "clip")

    def __init__(
        self,
        w: torch.Tensor,
        buffers: dict[str, torch.Tensor],
        at: Any = None,
        strategy: Any = None,
        clip: float = float("nan"),
    ) -> None:
        self.w = w
        self.buffers = buffers
        self.at = at
        self.strategy = strategy
        #: the clip ``C`` broadcast with the version (``[privacy]``; NaN: none)
        self.clip = clip


class _Pending(NamedTuple):
    """An update started and not yet computed (or dropped)."""

    device: int
    version: int
    sample_key: int
    frame: int  #: the frame whose rule state (view) it holds
    slot: int  #: the slot it started in (its local steps' learning rate)


class _Step(NamedTuple):
    """A server step announced and not yet taken."""

    slot: int
    keys: np.ndarray
    weights: np.ndarray
    server_lr: float


class _Computed(NamedTuple):
    """An update's upload, computed, waiting for its step."""

    device: int
    upload: torch.Tensor  #: ``(D,)``, frozen entries 0
    frozen: torch.Tensor | None  #: ``(D,)`` bool (None: nothing frozen)
    buffers: dict[str, torch.Tensor]  #: the device's buffers after its pass
    aux: Any  #: what the rule sends with the upload (e.g. a quantisation error)
    strategy: Any  #: the strategy's state at the update's version (``_Version.strategy``)
    local_lr: float  #: the learning rate of its local steps
    #: the strategy vector its device had as it started (SCAFFOLD's ``c_i``; None: none kept)
    start_row: torch.Tensor | None
    #: ``[privacy]``: the upload's norm before clipping and the clip of its version (NaN: none)
    dp_norm: float = float("nan")
    dp_clip: float = float("nan")


def _start_rows(done: list[_Computed]) -> torch.Tensor | None:
    """The strategy vectors the updates of a step started from, ``(k, D)`` (None: not kept)."""
    rows = [c.start_row for c in done]
    if any(r is None for r in rows):
        return None
    return torch.stack([r for r in rows if r is not None])


class StaleUpdates:
    """The stale-update bookkeeping of a :class:`~wflsim.models.learner.core.TorchLearner` (module
    docstring); the learner delegates ``start_update``, ``drop_update``, ``apply_updates`` and
    ``versions_kept`` here and materialises before it reads its model.

    Args:
        owner: the learner (its model ``_w``, ``buffers``, rule, data, gradient paths, learning
            rate and Fig. 1 metric are read and, when steps are taken, updated).
    """

    def __init__(self, owner: StaleOwner) -> None:
        self.owner = owner
        self.version = 0  #: the model's version as the server sees it (steps announced)
        self.materialised = 0  #: the version ``owner._w`` is
        self._steps: deque[_Step] = deque()  # versions materialised + 1 .. version
        self._pending: dict[int, _Pending] = {}
        self._computed: dict[int, _Computed] = {}
        self._refs: Counter[int] = Counter()  # version -> pending updates on it, not computed
        self._kept: dict[int, _Version] = {}  # materialised versions with refs
        self._views: dict[int, Any] = {}  # frame -> the rule's frame view
        self._view_refs: Counter[int] = Counter()  # frame -> pending updates holding its view
        self._view_frame: int | None = None
        #: the devices' strategy vectors (SCAFFOLD's ``c_i``) as updates not yet computed
        #: started, kept where a step changed them since (key -> ``(D,)``)
        self._pinned: dict[int, torch.Tensor] = {}
        #: gradients computed so far (one per applied update), and batched calls made
        self.computed = 0
        self.calls = 0

    # ------------------------------------------------------------------ the engine's calls
    @property
    def views_kept(self) -> int:
        """Frame states (freezing's frame-start model and masks) held now."""
        return len(self._views)

    @property
    def versions_kept(self) -> int:
        """Model copies held now: the materialised model and the older versions that updates
        not yet computed started on."""
        return len(self._kept.keys() | {self.materialised})

    def _rule(self) -> Any:
        rule = self.owner.rule
        if not hasattr(rule, "frame_view"):
            raise ValueError(
                f"update rule {type(rule).__name__} cannot compute stale updates "
                "(server.mode semi_sync / async)"
            )
        return rule

    def start(self, key: int, device: int, sample_key: int, slot: int = 0) -> None:
        """``device`` downloads version :attr:`version` in slot ``slot`` for the update ``key``."""
        rule = self._rule()
        key = int(key)
        if key in self._pending or key in self._computed:
            raise ValueError(f"update {key} already started")
        if not 0 <= device < self.owner.num_devices:
            raise ValueError(f"device {device} outside [0, {self.owner.num_devices})")
        frame = -1 if rule.frame is None else int(rule.frame)
        if frame != self._view_frame:
            old = self._view_frame
            if old is not None and self._view_refs.get(old, 0) == 0:
                self._views.pop(old, None)  # no update holds the last frame's state
            self._views[frame] = rule.frame_view()
            self._view_frame = frame
        self._view_refs[frame] += 1
        v = self.version
        if v == self.materialised and v not in self._kept:
            self._kept[v] = self._current(rule)
        self._refs[v] += 1
        self._pending[key] = _Pending(int(device), v, int(sample_key), frame, int(slot))

    def drop(self, key: int) -> None:
        """The update ``key`` will never be applied: release what it holds."""
        p = self._pending.pop(int(key))
        self._pinned.pop(int(key), None)
        self._release(p)

    def apply(self, slot: int, keys: np.ndarray, weights: np.ndarray, server_lr: float) -> None:
        """Announce a server step with the updates ``keys`` (possibly none) and their weights;
        the model's version advances, the step is taken when the model is next read."""
        self._rule()
        keys = np.asarray(keys, dtype=np.int64).reshape(-1).copy()
        wts = np.asarray(weights, dtype=np.float64).reshape(-1).copy()
        if wts.shape != keys.shape:
            raise ValueError("one weight per update")
        unknown = [int(k) for k in keys if int(k) not in self._pending]
        if unknown:
            raise ValueError(f"updates {unknown} were not started (or already applied)")
        self._steps.append(_Step(int(slot), keys, wts, float(server_lr)))
        self.version += 1

    # ------------------------------------------------------------------ taking the steps
    def materialise(self) -> None:
        """Take every pending step (module docstring): the learner's model is then version
        :attr:`version`."""
        while self._steps:
            m = self.materialised
            todo = [
                int(k)
                for step in self._steps
                for k in step.keys
                if int(k) not in self._computed and self._pending[int(k)].version <= m
            ]
            if todo:
                self._check_order(todo)
                self._compute(todo)
            while self._steps and all(int(k) in self._computed for k in self._steps[0].keys):
                self._take(self._steps.popleft())

    def _compute(self, keys: list[int]) -> None:
        """The uploads of ``keys`` (their versions materialised) in one batched call (one per
        local step: :func:`~wflsim.models.learner.local.local_updates`, each device at the learning
        rate of the slot its update started in)."""
        own = self.owner
        rule = self._rule()
        todo = [self._pending.pop(k) for k in keys]
        ids = np.array([p.device for p in todo], dtype=np.int64)
        versions = [self._model(p.version) for p in todo]
        views = [self._views[p.frame] for p in todo]
        frozen_rows = [
            view.frozen(int(n), v.at) for view, v, n in zip(views, versions, ids, strict=True)
        ]
        if all(f is None for f in frozen_rows) and len({id(v.w) for v in versions}) == 1:
            params = versions[0].w
        else:
            params = torch.stack(
                [
                    view.local_params(v.w, int(n), v.at)
                    for view, v, n in zip(views, versions, ids, strict=True)
                ]
            )
        starts = [
            view.local_buffers(v.buffers, int(n), v.at)
            for view, v, n in zip(views, versions, ids, strict=True)
        ]
        bufs = starts[0]
        local_bufs = None
        if bufs and len({id(b) for b in starts}) > 1:
            local_bufs = {name: torch.stack([b[name] for b in starts]) for name in bufs}
        steps = own.local_steps[ids]
        batches = own.data.draw_steps(
            np.array([p.sample_key for p in todo], dtype=np.int64), ids, steps
        )
        trained = None
        if len(batches) > 1 and any(f is not None for f in frozen_rows):
            none = torch.zeros(own.num_params, dtype=torch.bool, device=own.device)
            trained = ~torch.stack([none if f is None else f for f in frozen_rows])
        lr = np.array([own.lr_at(p.slot) for p in todo])
        strategy = own.strategy
        drift = None
        rows = None
        if strategy.device_vectors:  # the devices' own state as each update started
            rows = strategy.device_rows(ids)
            if rows is not None:
                for row, k in enumerate(keys):
                    pinned = self._pinned.pop(k, None)
                    if pinned is not None:
                        rows[row] = pinned
            drift = strategy.local_drift(ids, [v.strategy for v in versions], rows)
        grads, _losses, new_bufs = local_updates(
            own.paths,
            params,
            batches,
            steps,
            lr,
            trained,
            bufs,
            local_bufs,
            strategy.local_correction,
            drift,
        )
        self.computed += len(todo)
        self.calls += 1
        masked = [
            grads[row] if frozen is None else grads[row].masked_fill(frozen, 0.0)
            for row, frozen in enumerate(frozen_rows)
        ]
        # the uploads are formed in the order the updates started (the module docstring)
        order = sorted(range(len(todo)), key=lambda row: keys[row])
        formed, aux = rule.stale_uploads(
            [masked[row] for row in order],
            [
                StaleUpdate(
                    keys[row],
                    todo[row].device,
                    todo[row].sample_key,
                    todo[row].slot,
                    views[row],
                    versions[row].at,
                )
                for row in order
            ],
        )
        sent, dp_norms, dp_clips = self._private(
            formed,
            [todo[row] for row in order],
            [versions[row].clip for row in order],
            [frozen_rows[row] for row in order],
        )
        for i, row in enumerate(order):
            p = todo[row]
            self._computed[keys[row]] = _Computed(
                p.device,
                sent[i],
                frozen_rows[row],
                {k: b[row] for k, b in new_bufs.items()},
                aux[i],
                versions[row].strategy,
                float(lr[row]),
                None if rows is None else rows[row].clone(),
                float(dp_norms[i]),
                float(dp_clips[i]),
            )
        for p in todo:
            self._release(p)

    def _private(
        self,
        formed: list[torch.Tensor],
        todo: list[_Pending],
        version_clips: list[float],
        frozen: list[torch.Tensor | None],
    ) -> tuple[list[torch.Tensor], np.ndarray, np.ndarray]:
        """``[privacy]``: what the updates ``todo`` (in start order) send, their rule-formed
        uploads clipped to the clip of the version each downloaded (and noised, local; keyed by
        device and minibatch key), their norms before clipping and those clips; as formed,
        NaN, NaN without privacy."""
        dp = self.owner.privacy
        nan = np.full(len(formed), np.nan)
        if dp is None or not formed:
            return formed, nan, nan
        clips = np.array(version_clips, dtype=np.float64)
        clips = np.where(np.isfinite(clips), clips, dp.clip_norm)
        sent = None
        if dp.mechanism == "local" and any(f is not None for f in frozen):
            sent = torch.stack(
                [
                    torch.ones_like(u, dtype=torch.bool) if f is None else ~f
                    for u, f in zip(formed, frozen, strict=True)
                ]
            )
        out, norms = dp.form(
            torch.stack(formed),
            sent,
            np.array([p.device for p in todo], dtype=np.int64),
            np.array([p.sample_key for p in todo], dtype=np.int64),
            clips,
        )
        return list(out.unbind(0)), norms, clips

    def _take(self, step: _Step) -> None:
        """One server step from the materialised model (its uploads computed)."""
        own = self.owner
        rule = self._rule()
        w_t = own._w
        if step.keys.size:
            done = [self._computed.pop(int(k)) for k in step.keys]
            uploads = raw = torch.stack([c.upload for c in done])
            frozen = None
            if any(c.frozen is not None for c in done):
                zeros = torch.zeros(own.num_params, dtype=torch.bool, device=own.device)
                frozen = torch.stack([zeros if c.frozen is None else c.frozen for c in done])
            if not np.all(step.weights == 1.0):
                scale = torch.as_tensor(step.weights, dtype=uploads.dtype, device=own.device)
                uploads = uploads * scale[:, None]
            ids = np.array([c.device for c in done], dtype=np.int64)
            bw = torch.as_tensor(own.batch_sizes[ids], dtype=torch.float32, device=own.device)
            aux = [c.aux for c in done]

            def call(index: np.ndarray | None, values: torch.Tensor) -> torch.Tensor:
                if index is None:  # every row: the rule's call without strategies
                    return rule.aggregate_stale(values, frozen, bw, aux)
                pick = torch.as_tensor(index, device=bw.device)
                sub = None if frozen is None else frozen[pick]
                return rule.aggregate_stale(values, sub, bw[pick], [aux[i] for i in index])

            uploaded = None
            if frozen is not None and wants_upload_mask(own.strategy, rule):
                uploaded = ~frozen
            g = own.strategy.aggregate(
                uploads, bw, own.local_steps[ids], uploaded, rule_mean_over(uploads, call)
            )
            dp_std = 0.0
            if own.privacy is not None:  # central: on the step's aggregate, every entry
                sent = None if frozen is None else ~frozen
                b = bw.detach().cpu().numpy().astype(np.float64)
                g, dp_std = own.privacy.noise_aggregate(
                    g,
                    b * step.weights,
                    float(b.sum()),
                    privacy_gain(own.rule, call, sent, bw),
                    (STALE_STEP, self.materialised + 1),
                    np.array([c.dp_clip for c in done], dtype=np.float64),
                )
            note = getattr(rule, "server_gradient", None)  # optional (PlainRule: nothing)
            if note is not None:
                note(g)
            g = checked_vector(own.strategy, "aggregate", g, w_t)
            w_next = checked_vector(
                own.strategy,
                "server_step",
                own.strategy.server_step(w_t, g, own.lr_at(step.slot) * step.server_lr),
                w_t,
            )
            if own.strategy.device_vectors:  # the uploads arrived: the devices' state follows
                self._pin(ids)
                own.strategy.arrived(
                    ids,
                    raw,
                    own.local_steps[ids],
                    None if frozen is None else ~frozen,
                    [c.strategy for c in done],
                    _start_rows(done),
                )
            if own.logs_steps:
                lr = np.array([c.local_lr for c in done])
                own.strategy_rows.append(step_rows(own.strategy, ids, raw, lr, w_t, w_next))
            if own.buffers:
                stacked = {k: torch.stack([c.buffers[k] for c in done]) for k in own.buffers}
                rows = torch.arange(len(done), device=own.device)
                own.buffers = rule.aggregate_buffers_stale(own.buffers, stacked, rows, aux)
            if own.privacy is not None:
                norms = np.array([c.dp_norm for c in done])
                clips = np.array([c.dp_clip for c in done])
                own.privacy.record(ids, norms, clips, dp_std)
                own.privacy.after_step(norms, clips, (STALE_STEP, self.materialised + 1))
        else:
            w_next = w_t
        rule.after_step(w_t, w_next)
        own.stability.track(w_t, w_next)
        own._w = w_next
        self.materialised += 1
        if self._refs.get(self.materialised, 0) > 0:
            self._kept[self.materialised] = self._current(rule)

    # ------------------------------------------------------------------ bookkeeping
    def _current(self, rule: Any) -> _Version:
        """The materialised version, with the rule's and the strategy's state at it."""
        own = self.owner
        return _Version(
            own._w,
            own.buffers,
            rule.version_state(own._w),
            own.strategy.version_state(),
            float("nan") if own.privacy is None else own.privacy.clip_norm,
        )

    def _pin(self, devices: np.ndarray) -> None:
        """Before a step changes the strategy vectors of ``devices``: keep them for the updates
        of those devices not yet computed that started before the step (they read the vectors
        as they were then)."""
        mine = set(int(n) for n in devices)
        keys = [
            k
            for k, p in self._pending.items()
            if p.device in mine and p.version <= self.materialised and k not in self._pinned
        ]
        if not keys:
            return
        rows = self.owner.strategy.device_rows(
            np.array([self._pending[k].device for k in keys], dtype=np.int64)
        )
        if rows is None:
            return
        for row, k in enumerate(keys):
            self._pinned[k] = rows[row].clone()

    def _model(self, version: int) -> _Version:
        if version == self.materialised:
            return self._kept.get(version) or self._current(self._rule())
        return self._kept[version]

    def _check_order(self, todo: list[int]) -> None:
        """For a rule whose uploads carry state from one update of a device to its next: refuse
        to form an update's upload while an earlier update of its device is neither applied nor
        dropped (nor formed in the same batch)."""
        if not getattr(self.owner.rule, "ordered_uploads", False):
            return
        batch = set(todo)
        last: dict[int, int] = {}
        for k in todo:
            n = self._pending[k].device
            last[n] = max(last.get(n, k), k)
        for k, p in self._pending.items():
            if k not in batch and p.device in last and k < last[p.device]:
                raise RuntimeError(
                    f"update {last[p.device]} of device {p.device} is applied, but the device's "
                    f"earlier update {k} is neither applied nor dropped: its upload starts from "
                    "the state that update leaves (announce the earlier update's step, or drop it)"
                )

    def _release(self, p: _Pending) -> None:
        """``p`` no longer needs its version (computed or dropped)."""
        self._refs[p.version] -= 1
        if self._refs[p.version] <= 0:
            del self._refs[p.version]
            self._kept.pop(p.version, None)
        self._view_refs[p.frame] -= 1
        if self._view_refs[p.frame] <= 0:
            del self._view_refs[p.frame]
            if p.frame != self._view_frame:
                self._views.pop(p.frame, None)

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        """The updates in flight and the versions and frame views they hold (numpy), after
        :meth:`materialise` (the learner's ``state_dict`` calls it first)."""
        if self._steps or self._computed:
            raise RuntimeError("materialise the pending steps before saving")
        keys = sorted(self._pending)
        pend = [self._pending[k] for k in keys]
        rule: Any = self.owner.rule
        models: dict[str, dict[str, Any]] = {}
        for v, kept in sorted(self._kept.items()):
            if v == self.materialised:
                continue
            models[str(v)] = {
                "w": kept.w.cpu().numpy(),
                "buffers": {k: b.cpu().numpy() for k, b in kept.buffers.items()},
            }
            if kept.at is not None:  # the rule's state at the version (none for freezing)
                models[str(v)]["at"] = rule.version_state_dict(kept.at)
            if kept.strategy is not None:  # the strategy's (SCAFFOLD's c)
                models[str(v)]["strategy"] = self.owner.strategy.version_state_dict(kept.strategy)
            if np.isfinite(kept.clip):  # the clip broadcast with it ([privacy])
                models[str(v)]["clip"] = float(kept.clip)
        pinned = sorted(self._pinned)
        return {
            "version": self.version,
            "keys": np.array(keys, dtype=np.int64),
            "devices": np.array([p.device for p in pend], dtype=np.int64),
            "versions": np.array([p.version for p in pend], dtype=np.int64),
            "sample_keys": np.array([p.sample_key for p in pend], dtype=np.int64),
            "frames": np.array([p.frame for p in pend], dtype=np.int64),
            "slots": np.array([p.slot for p in pend], dtype=np.int64),
            "models": models,
            "views": {str(f): self._views[f].state_dict() for f in sorted({p.frame for p in pend})},
            "computed": self.computed,
            "calls": self.calls,
            "pinned_keys": np.array(pinned, dtype=np.int64),
            "pinned": np.stack([self._pinned[k].cpu().numpy() for k in pinned])
            if pinned
            else np.zeros((0, self.owner.num_params), dtype=np.float32),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` (the learner's model and buffers restored first)."""
        own = self.owner
        dev = own.device
        self.version = self.materialised = int(state["version"])
        self._steps.clear()
        self._computed = {}
        rule: Any = self._rule() if len(state["keys"]) else own.rule
        self._kept = {}
        for v, m in state["models"].items():
            w = torch.as_tensor(np.asarray(m["w"]), dtype=torch.float32, device=dev)
            self._kept[int(v)] = _Version(
                w,
                {k: torch.as_tensor(np.asarray(b), device=dev) for k, b in m["buffers"].items()},
                rule.version_state_from(m["at"], w) if "at" in m else None,
                own.strategy.version_state_from(m["strategy"]) if "strategy" in m else None,
                float(m.get("clip", float("nan"))),
            )
        self._views = {int(f): rule.view_from_state(v) for f, v in state["views"].items()}
        self._view_frame = None
        self._pending = {}
        self._refs = Counter()
        self._view_refs = Counter()
        # a checkpoint of a version without local steps has no slots (their rate was not used)
        slots = state.get("slots", np.zeros(len(state["keys"]), dtype=np.int64))
        for k, n, v, sk, f, sl in zip(
            state["keys"],
            state["devices"],
            state["versions"],
            state["sample_keys"],
            state["frames"],
            slots,
            strict=True,
        ):
            self._pending[int(k)] = _Pending(int(n), int(v), int(sk), int(f), int(sl))
            self._refs[int(v)] += 1
            self._view_refs[int(f)] += 1
        if self._refs.get(self.materialised, 0) > 0:
            self._kept[self.materialised] = self._current(rule)
        self.computed = int(state["computed"])
        self.calls = int(state["calls"])
        self._pinned = {}
        if "pinned_keys" in state:  # a checkpoint of a version without strategy vectors has none
            rows = np.asarray(state["pinned"], dtype=np.float32)
            for k, row in zip(state["pinned_keys"], rows, strict=True):
                if int(k) not in self._pending:
                    raise ValueError(f"saved strategy vector of update {int(k)}, not in flight")
                self._pinned[int(k)] = torch.as_tensor(row, device=dev).clone()
