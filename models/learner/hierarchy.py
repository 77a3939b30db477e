"""Hierarchical aggregation on the learning side (``[server.hierarchy]``,
:mod:`wflsim.sim.servers.hierarchy`): one edge server per cell, each a
:class:`~wflsim.models.learner.core.TorchLearner` of its own (model, buffers, update rule state,
strategy state, stale-update versions) sharing the data, the network and the gradient paths, and
a cloud model averaged from theirs.

:class:`HierarchicalLearner` is what the engine sees (the :class:`wflsim.sim.learner.Learner`
protocol, the stale-update and probing ones): it routes each device's calls to the edge of its
cell (:meth:`assign_edges`, at every frame start), and takes the cloud rounds the engine times
(:meth:`cloud_send`, :meth:`cloud_receive`). The model it evaluates (and saves) is the cloud's,
as of the last round (the initial model before the first); the edges' models are reachable too
(:meth:`edge_params`, :meth:`sync_edge_model`; the API's views ``edge_params`` and
``edge_models``), and the checkpoint holds them.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import torch

from wflsim.sim.updates import OverTheAir

from .core import AirNoise, TorchLearner
from .stale import StaleUpdates


def edge_copy(base: TorchLearner) -> TorchLearner:
    """A learner sharing ``base``'s data, network, gradient paths and test split, with its own
    model, buffers, update rule, strategy, Fig. 1 metric and stale-update bookkeeping (taken
    before the first frame: the rule and strategy are set on each copy afterwards)."""
    e = copy.copy(base)
    e._w = base._w.clone()
    e.buffers = {k: v.clone() for k, v in base.buffers.items()}
    e.stability = copy.deepcopy(base.stability)
    e.rule = copy.deepcopy(base.rule)
    e.strategy = copy.deepcopy(base.strategy)
    e.strategy_rows = []
    e.privacy = copy.deepcopy(base.privacy)
    e.device_buffers = {}
    e._clear_slot()
    e.stale = StaleUpdates(e)
    return e


class HierarchicalLearner:
    """Edge servers and a cloud (module docstring).

    Args:
        base: the run's learner (its model is the initial one of every edge and of the cloud).
        num_edges: ``C``, the cells.
    """

    def __init__(self, base: TorchLearner, num_edges: int) -> None:
        if num_edges < 1:
            raise ValueError("num_edges must be >= 1")
        self.base = base
        self.edges = [edge_copy(base) for _ in range(int(num_edges))]
        #: the next apply's over-the-air sums, and the last apply's error per edge (NaN:
        #: nothing aggregated there; None: not over the air)
        self._air: OverTheAir | None = None
        self.last_aggregation_mse: np.ndarray | None = None
        #: the last apply's normalisation and noise per edge (None: not over the air there)
        self.last_air_noise: list[AirNoise | None] | None = None
        self.num_params = base.num_params
        self.num_samples = base.num_samples
        self.local_steps = base.local_steps
        self.batch_sizes = base.batch_sizes
        self.device = base.device
        n = base.num_devices
        #: each device's edge (its cell; set at every frame start)
        self.edge_of = np.zeros(n, dtype=np.int64)
        #: data weight each edge aggregated since the last cloud round (sum of B_n)
        self.weights = np.zeros(len(self.edges))
        self.cloud_w = base._w.clone()
        self.cloud_buffers = {k: v.clone() for k, v in base.buffers.items()}
        #: the models the edges sent in the round in flight (None: none)
        self._sent: list[torch.Tensor] | None = None
        #: each update in flight: (its edge, its device)
        self._key_edge: dict[int, tuple[int, int]] = {}

    # ------------------------------------------------------------------ routing
    def assign_edges(self, edge_of_device: np.ndarray) -> None:
        """Each device's edge from now on (its serving cell, ``(N,)``)."""
        e = np.asarray(edge_of_device, dtype=np.int64)
        if e.shape != self.edge_of.shape or (e < 0).any() or (e >= len(self.edges)).any():
            raise ValueError("edge_of_device must give each device an edge in [0, C)")
        self.edge_of = e.copy()

    def _groups(self, ids: np.ndarray) -> list[tuple[int, np.ndarray]]:
        ids = np.asarray(ids, dtype=np.int64)
        edge = self.edge_of[ids]
        return [(c, ids[edge == c]) for c in range(len(self.edges))]

    # ------------------------------------------------------------------ setup and frames
    def set_update_rule(self, rule: Any) -> None:
        """The scheme's update rule, on every edge."""
        for e in self.edges:
            e.set_update_rule(rule)

    def set_strategy(self, spec: Any) -> None:
        """The server strategy, one instance per edge (each edge server keeps its own state)."""
        for e in self.edges:
            e.set_strategy(spec)

    @property
    def logs_steps(self) -> bool:
        """Whether the edges' server steps leave strategy rows."""
        return self.edges[0].logs_steps

    def take_strategy_rows(self) -> list[dict[str, np.ndarray]]:
        """The strategy rows of every edge's steps since the last call, edge by edge."""
        return [row for e in self.edges for row in e.take_strategy_rows()]

    def set_privacy(self, spec: Any) -> None:
        """``[privacy]`` on every edge server: each clips its devices' updates, adds its own
        noise (its edge index in every key) and, under adaptive clipping, keeps its own clip."""
        for c, e in enumerate(self.edges):
            e.set_privacy(spec, edge=c)

    @property
    def clip_norm(self) -> float | None:
        """The largest of the edges' clips (every update sent is within it; None without
        privacy)."""
        clips = [e.clip_norm for e in self.edges]
        return None if any(c is None for c in clips) else max(c for c in clips if c is not None)

    def take_privacy_rows(self) -> list[dict[str, np.ndarray]]:
        """The ``dp_clip`` rows of every edge's steps since the last call, edge by edge."""
        return [row for e in self.edges for row in e.take_privacy_rows()]

    @property
    def stable_fraction(self) -> float:
        """The Fig. 1 metric of the edges' models, their mean (NaN while unknown)."""
        values = np.array([e.stable_fraction for e in self.edges], dtype=np.float64)
        return float(np.mean(values)) if np.isfinite(values).all() else float("nan")

    def begin_frame(self, frame: int, update: Any) -> None:
        """Every edge opens the frame (its rule fixes the frame's state on its model)."""
        for e in self.edges:
            e.begin_frame(frame, update)

    def end_frame(self, frame: int) -> None:
        """Every edge closes the frame."""
        for e in self.edges:
            e.end_frame(frame)

    # ------------------------------------------------------------------ synchronous slots
    def compute(self, slot: int, device_ids: np.ndarray) -> None:
        """Each edge computes its devices' uploads on its model."""
        for c, ids in self._groups(device_ids):
            self.edges[c].compute(slot, ids)

    def receive_over_the_air(self, air: OverTheAir) -> None:
        """The next :meth:`apply`'s over-the-air sums (``[uplink] mode = "aircomp"``): each
        edge receives its own cell's (``air.group``: the devices' cells, the edges' order)."""
        self._air = air

    def apply(self, slot: int, success_ids: np.ndarray) -> None:
        """Each edge aggregates the uploads of its devices that arrived (or, over the air, the
        sum its base station received) and steps its model."""
        air, self._air = self._air, None
        ids = np.asarray(success_ids, dtype=np.int64)
        mse = np.full(len(self.edges), np.nan)
        noise: list[AirNoise | None] = [None] * len(self.edges)
        for c, ok in self._groups(success_ids):
            if air is not None:
                mine = np.isin(ids, ok)
                self.edges[c].receive_over_the_air(
                    OverTheAir(
                        slot=slot,
                        ratio=air.ratio[mine],
                        noise_std=float(air.noise_stds[c]) if c < air.noise_stds.size else 0.0,
                        stream_index=slot * len(self.edges) + c,  # each edge's own noise
                        clip_scale_values=air.clip_scale_values,
                    )
                )
            self.edges[c].apply(slot, ok)
            if air is not None and self.edges[c].last_aggregation_mse is not None:
                mse[c] = self.edges[c].last_aggregation_mse
            noise[c] = self.edges[c].last_air_noise
            self.weights[c] += float(self.batch_sizes[ok].sum())
        self.last_aggregation_mse = None if air is None else mse
        self.last_air_noise = None if air is None else noise

    def upload_moments(self, device_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each device's mean and standard deviation of its sent entries, from its edge
        (:meth:`TorchLearner.upload_moments`)."""
        ids = np.asarray(device_ids, dtype=np.int64)
        mu, sigma = np.empty(ids.size), np.empty(ids.size)
        for c, group in self._groups(ids):
            if group.size:
                mine = np.isin(ids, group)
                mu[mine], sigma[mine] = self.edges[c].upload_moments(group)
        return mu, sigma

    def probe_losses(self, slot: int, device_ids: np.ndarray) -> np.ndarray:
        """``power_of_choice``'s probes, each on its device's edge model."""
        ids = np.asarray(device_ids, dtype=np.int64)
        out = np.empty(ids.size)
        for c, group in self._groups(ids):
            if group.size:
                out[np.isin(ids, group)] = self.edges[c].probe_losses(slot, group)
        return out

    # ------------------------------------------------------------------ stale updates
    @property
    def versions_kept(self) -> int:
        """Model copies the edges hold now."""
        return sum(e.versions_kept for e in self.edges)

    def start_update(self, key: int, device: int, sample_key: int, slot: int = 0) -> None:
        """``device`` downloads its edge's model for update ``key`` (applied by that edge)."""
        c = int(self.edge_of[int(device)])
        self._key_edge[int(key)] = (c, int(device))
        self.edges[c].start_update(key, device, sample_key, slot)

    def drop_update(self, key: int) -> None:
        """The update ``key`` will never be applied."""
        self.edges[self._key_edge.pop(int(key))[0]].drop_update(key)

    def apply_updates(
        self, slot: int, keys: np.ndarray, weights: np.ndarray, server_lr: float
    ) -> None:
        """A server step of each edge with its updates among ``keys``."""
        keys = np.asarray(keys, dtype=np.int64)
        wts = np.asarray(weights, dtype=np.float64)
        held = np.array([self._key_edge[int(k)] for k in keys], dtype=np.int64).reshape(-1, 2)
        for c in range(len(self.edges)):
            mine = held[:, 0] == c
            if mine.any():
                self.edges[c].apply_updates(slot, keys[mine], wts[mine], server_lr)
                self.weights[c] += float(self.batch_sizes[held[mine, 1]].sum())
        for k in keys.tolist():
            self._key_edge.pop(int(k), None)

    def materialise(self) -> None:
        """Every edge takes its announced steps."""
        for e in self.edges:
            e.materialise()

    # ------------------------------------------------------------------ the cloud
    def cloud_send(self) -> None:
        """The edges send their models: the cloud model is their average weighted by the data
        each aggregated since the last round (unchanged if none aggregated anything)."""
        if self._sent is not None:
            raise RuntimeError("a cloud round is already in flight")
        self.materialise()
        sent = [e._w.clone() for e in self.edges]
        total = float(self.weights.sum())
        if total > 0.0:
            wts = [float(a) / total for a in self.weights]
            w = torch.zeros_like(self.cloud_w)
            for a, m in zip(wts, sent, strict=True):
                if a > 0.0:
                    w = w + a * m
            self.cloud_w = w
            bufs = {}
            for name, ref in self.cloud_buffers.items():
                if ref.is_floating_point():
                    acc = torch.zeros_like(ref)
                    for a, e in zip(wts, self.edges, strict=True):
                        if a > 0.0:
                            acc = acc + a * e.buffers[name]
                    bufs[name] = acc
                else:  # counters (BatchNorm's batches tracked): the largest
                    bufs[name] = torch.stack([e.buffers[name] for e in self.edges]).max(0).values
            self.cloud_buffers = bufs
        self.weights[:] = 0.0
        self._sent = sent

    def cloud_receive(self) -> None:
        """The cloud model reaches the edges: each adopts it with the updates it applied since
        it sent its model (``w_c <- w_cloud + (w_c - w_c_sent)``; its buffers become the
        cloud's)."""
        if self._sent is None:
            raise RuntimeError("no cloud round in flight")
        for e, sent in zip(self.edges, self._sent, strict=True):
            e.materialise()
            moved = e._w - sent
            w = self.cloud_w if not bool(moved.any()) else self.cloud_w + moved
            e.replace_model(w, self.cloud_buffers)
        self._sent = None

    # ------------------------------------------------------------------ the cloud model
    def evaluate(self) -> tuple[float, float]:
        """The cloud model's ``(loss, accuracy)`` on the test split."""
        return self.edges[0].evaluate_model(self.cloud_w, self.cloud_buffers)

    def global_params(self) -> torch.Tensor:
        """A copy of the cloud model, flat ``(D,)``."""
        return self.cloud_w.clone()

    def sync_model(self) -> torch.nn.Module:
        """The cloud model in the network module (for saving it)."""
        return self._in_module(self.cloud_w, self.cloud_buffers)

    def _in_module(self, w: torch.Tensor, buffers: dict[str, torch.Tensor]) -> torch.nn.Module:
        """The flat model ``w`` with ``buffers`` in the network module."""
        model = self.base.model
        with torch.no_grad():
            for k, v in self.base.net.param_dict(w).items():
                model.get_parameter(k).copy_(v)
            for k, v in buffers.items():
                model.get_buffer(k).copy_(v)
        return model

    def edge_params(self) -> list[torch.Tensor]:
        """A copy of every edge's model, flat ``(D,)`` each, in the edges' (cells') order: as
        of now, with the steps each has announced taken."""
        self.materialise()
        return [e._w.clone() for e in self.edges]

    def sync_edge_model(self, edge: int) -> torch.nn.Module:
        """Edge ``edge``'s model in the network module (parameters and buffers of now)."""
        e = self.edges[int(edge)]
        e.materialise()
        return self._in_module(e._w, e.buffers)

    def is_finite(self) -> bool:
        """Whether every edge's model and the cloud's are finite."""
        return all(e.is_finite() for e in self.edges) and bool(torch.isfinite(self.cloud_w).all())

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        """Every edge's state, the cloud model, the weights since the last round, the edge of
        each device and of each update in flight, and the models of a round in flight."""
        return {
            "edges": [e.state_dict() for e in self.edges],
            "cloud_w": self.cloud_w.cpu().numpy(),
            "cloud_buffers": {k: v.cpu().numpy() for k, v in self.cloud_buffers.items()},
            "weights": self.weights.copy(),
            "edge_of": self.edge_of.copy(),
            "key_edge": np.array(
                [(k, c, d) for k, (c, d) in sorted(self._key_edge.items())], dtype=np.int64
            ).reshape(-1, 3),
            "sent": None if self._sent is None else torch.stack(self._sent).cpu().numpy(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        if len(state["edges"]) != len(self.edges):
            raise ValueError("saved state is for another number of edges")
        for e, s in zip(self.edges, state["edges"], strict=True):
            e.load_state_dict(s)
        dev = self.device
        self.cloud_w = torch.as_tensor(np.asarray(state["cloud_w"]), device=dev).float().clone()
        self.cloud_buffers = {
            k: torch.as_tensor(np.asarray(v), device=dev).clone()
            for k, v in state["cloud_buffers"].items()
        }
        self.weights = np.asarray(state["weights"], dtype=np.float64).copy()
        self.edge_of = np.asarray(state["edge_of"], dtype=np.int64).copy()
        rows = np.asarray(state["key_edge"], dtype=np.int64).reshape(-1, 3)
        self._key_edge = {int(k): (int(c), int(d)) for k, c, d in rows}
        sent = state.get("sent")
        self._sent = (
            None
            if sent is None
            else [torch.as_tensor(m, device=dev).float().clone() for m in np.asarray(sent)]
        )
