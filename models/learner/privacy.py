"""Client-level differential privacy on the learning side (``[privacy]``, docs/privacy.md, "The
learner"): every update a device sends is clipped to the current clip ``C_t`` (L2 over the
entries it sends, update units), and Gaussian noise is added where the spec says:

* ``local``: each device adds ``N(0, (z_delta C_t)^2)`` to every entry it sends, after clipping
  (:func:`~wflsim.sim.privacy.mechanism.local_noise_std`);
* ``central``: the server adds ``N(0, sigma^2)`` to every entry of the step's aggregate (entries
  nobody sent included), ``sigma`` = :func:`~wflsim.sim.privacy.mechanism.central_noise_std`
  with the step's weights (``B_n``, times the staleness discount in stale steps), before the
  strategy's server step; under a per-coordinate mean the noise is on the weighted sum before the
  division by the weight of those who sent each entry;
* ``over_the_air``: clipping only here; the receiver's noise is the radio's.

Adaptive clipping (Andrew et al., NeurIPS 2021): after each server step with ``k`` updates,
``b = (sum of unclipped indicators + N(0, sigma_b^2)) / k`` and
``C <- C exp(-eta_C (b - gamma))`` (:func:`~wflsim.sim.privacy.mechanism.adaptive_clip`).

Randomness: every draw comes from the run's stream ``privacy_noise`` keyed by what it is for
(``CENTRAL``, ``LOCAL``, ``COUNT``), the learner's edge (0 without a hierarchy) and the step's or
the update's key (the slot in sync, the version the step makes in stale steps; a device's upload:
its device and minibatch key); no global random state, so a resumed run draws what the
uninterrupted one does. The learner never accounts: it reports what each applied update got
(:meth:`LearnerPrivacy.record`, the trace's ``dp_clip`` rows).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from wflsim.sim.privacy.compose import refusal
from wflsim.sim.privacy.mechanism import (
    PrivacySpec,
    adaptive_clip,
    central_noise_std,
    clip_scale,
    local_noise_std,
)

from .strategies import Strategy

#: A clip: one ``C`` for every row, or one per row ``(n,)``.
ArrayOrFloat = float | np.ndarray

#: What a draw is for (the first spawn-key component of the ``privacy_noise`` stream).
CENTRAL, LOCAL, COUNT = 0, 1, 2
#: The key's second component: a synchronous slot's step, a stale step (the version it makes).
SYNC_STEP, STALE_STEP = 0, 1


def noise_seed(streams: Any, kind: int, *keys: int) -> int:
    """A 63-bit torch seed for the draw ``kind`` keyed by ``keys`` (ints >= 0) on the run's
    ``privacy_noise`` stream (a fixed seed sequence without streams: tests)."""
    if streams is not None and hasattr(streams, "device"):
        gen = streams.device("privacy_noise", int(kind), *map(int, keys))
    else:
        gen = np.random.Generator(np.random.PCG64([23, int(kind), *map(int, keys)]))
    return int(gen.integers(0, 2**63 - 1))


def normal(num: int, seed: int, device: torch.device) -> torch.Tensor:
    """``num`` standard normal float32 draws of the CPU generator seeded ``seed``, on
    ``device`` (the same numbers on every device type)."""
    gen = torch.Generator(device="cpu").manual_seed(seed)
    return torch.randn(num, generator=gen, dtype=torch.float32).to(device)


def clip_rows(uploads: torch.Tensor, clip_norm: ArrayOrFloat) -> tuple[torch.Tensor, np.ndarray]:
    """Each row of ``uploads`` ``(n, D)`` (entries not sent are 0) scaled to L2 norm at most its
    clip (one ``C`` or ``(n,)``): ``u min(1, C / |u|)``; returns the clipped rows and their
    norms before clipping ``(n,)`` float64. Rows within the clip are returned unchanged."""
    norms = torch.linalg.vector_norm(uploads.to(torch.float64), dim=1).cpu().numpy()
    if uploads.shape[0] == 0:
        return uploads, norms
    clip = np.broadcast_to(np.asarray(clip_norm, dtype=np.float64), norms.shape)
    scale = np.array([float(clip_scale(nm, c)) for nm, c in zip(norms, clip, strict=True)])
    if (scale < 1.0).any():
        # float32 rounding may leave |u s| a hair above C: shrink by one part in 10^6 more
        scale = np.where(scale < 1.0, scale * (1.0 - 1e-6), 1.0)
        factor = torch.as_tensor(scale, dtype=uploads.dtype, device=uploads.device)
        uploads = uploads * factor[:, None]
    return uploads, norms


class LearnerPrivacy:
    """A learner's (or an edge server's) privacy: the spec, the current clip ``C_t``, the noise
    it draws and the ``dp_clip`` rows of the updates applied (the module docstring).

    Args:
        spec: the run's resolved ``[privacy]``.
        streams: the run's random streams (None: a fixed seed sequence, for tests).
        edge: the edge server's index under a hierarchy (0 otherwise), part of every key.
    """

    def __init__(self, spec: PrivacySpec, streams: Any = None, edge: int = 0) -> None:
        self.spec = spec
        self.streams = streams
        self.edge = int(edge)
        #: ``C_t``, update units (adaptive: moves after every step with updates)
        self.clip_norm = float(spec.clip_norm)
        #: the ``dp_clip`` rows of the updates applied, not yet taken
        self.rows: list[dict[str, np.ndarray]] = []
        z = spec.update_multiplier  # raises here where sigma_b leaves no budget to the update
        self._z = 0.0 if z is None else float(z)

    # ------------------------------------------------------------------ what the spec says
    @property
    def mechanism(self) -> str:
        """``central``, ``local`` or ``over_the_air``."""
        return self.spec.mechanism

    @property
    def update_multiplier(self) -> float:
        """``z_delta``, the update's own noise multiplier (0 where the spec has none: over the
        air, ``channel_only``)."""
        return self._z

    def check(self, rule: str | None, strategy: Any) -> None:
        """Refuse what does not compose (:func:`~wflsim.sim.privacy.compose.refusal` for the
        built-ins; for a strategy of one's own: device vectors under any mechanism, an
        aggregate of its own under central or over-the-air noise).

        Raises:
            ValueError: one line naming ``privacy.mechanism`` (or ``privacy.clipping``).
        """
        name = getattr(strategy, "registered_name", None) or getattr(strategy, "name", None)
        found = refusal(self.mechanism, rule=rule, strategy=name, adaptive=self.spec.adaptive)
        if found is not None:
            raise ValueError(found.line())
        if getattr(strategy, "device_vectors", False):
            raise ValueError(
                f'privacy.mechanism: "{self.mechanism}" noise with strategy {name!r}: its '
                "devices keep vectors that travel with their updates, a second data-dependent "
                "message no noise here covers; use another strategy.name"
            )
        if self.mechanism != "local" and type(strategy).aggregate is not Strategy.aggregate:
            raise ValueError(
                f'privacy.mechanism: "{self.mechanism}" noise with strategy {name!r}: it '
                "aggregates in its own way, whose sensitivity is not the weighted mean's the "
                'noise is calibrated on; use mechanism = "local" or another strategy.name'
            )

    # ------------------------------------------------------------------ the devices' side
    def form(
        self,
        uploads: torch.Tensor,
        sent: torch.Tensor | None,
        devices: np.ndarray,
        keys: np.ndarray,
        clip_norm: ArrayOrFloat | None = None,
    ) -> tuple[torch.Tensor, np.ndarray]:
        """What the devices send: their uploads ``(n, D)`` clipped to ``clip_norm`` (default
        the current ``C_t``; ``(n,)`` under stale updates, each its version's), then under local
        noise ``N(0, (z_delta C)^2)`` on each entry it sends (``sent`` ``(n, D)`` bool, None:
        every entry), drawn for ``(device, key)``. Returns them and the norms before clipping
        ``(n,)``."""
        clip = self.clip_norm if clip_norm is None else clip_norm
        clipped, norms = clip_rows(uploads, clip)
        if self.mechanism != "local" or uploads.shape[0] == 0:
            return clipped, norms
        cs = np.broadcast_to(np.asarray(clip, dtype=np.float64), norms.shape)
        d = uploads.shape[1]
        # a new tensor: the rule may hold the one it formed (Top-K's pending uploads)
        out = clipped.clone() if clipped is uploads else clipped
        for row, (n, k, c) in enumerate(zip(devices, keys, cs, strict=True)):
            e = normal(d, noise_seed(self.streams, LOCAL, self.edge, int(n), int(k)), out.device)
            if sent is not None:
                e = e * sent[row].to(e.dtype)
            out[row].add_(e.to(out.dtype), alpha=local_noise_std(self.update_multiplier, float(c)))
        return out, norms

    # ------------------------------------------------------------------ the server's side
    def noise_aggregate(
        self,
        g: torch.Tensor,
        weights: np.ndarray,
        normalisation: float,
        gain: torch.Tensor | None,
        key: tuple[int, int],
        clips: np.ndarray | None = None,
    ) -> tuple[torch.Tensor, float]:
        """Central noise on a step's aggregate ``g`` ``(D,)``: ``sigma`` =
        :func:`central_noise_std` of the step's ``weights`` ``(k,)`` (its updates' shares
        ``w_n / sum w``), rescaled to an aggregate normalised by ``normalisation`` instead of
        ``sum w`` (a stale step's ``sum_n B_n s_n u_n / sum_n B_n``), times ``gain`` ``(D,)``
        per entry (a per-coordinate mean's ``sum B / sum of B of those who sent it``, 1 where
        nobody did; None: 1); drawn for ``key``. ``clips`` ``(k,)``: the clip each update was
        clipped at (stale updates: their versions'; None: the current ``C_t``); ``sigma`` is
        taken at the largest, so every update's multiplier is at least the one the ledger
        accounts, ``central_multipliers(z_delta, weights)``. Returns the noised aggregate and ``sigma``
        (update units, per entry before the gain). Under another mechanism: ``g``, 0."""
        if self.mechanism != "central" or g.numel() == 0:
            return g, 0.0
        w = np.asarray(weights, dtype=np.float64)
        clip = self.clip_norm if clips is None else float(np.max(clips, initial=0.0))
        sigma = central_noise_std(self.update_multiplier, clip, w)
        if normalisation > 0.0:
            sigma *= float(w.sum()) / float(normalisation)
        e = normal(g.shape[0], noise_seed(self.streams, CENTRAL, self.edge, *key), g.device)
        noise = e * sigma if gain is None else e * sigma * gain.to(e.dtype)
        return g + noise.to(g.dtype), float(sigma)

    def after_step(self, norms: np.ndarray, clips: np.ndarray, key: tuple[int, int]) -> None:
        """Adaptive clipping after a server step whose updates had ``norms`` ``(k,)`` before
        clipping at ``clips`` ``(k,)``: ``b = (unclipped + N(0, sigma_b^2)) / k``, ``C`` moves
        (:func:`adaptive_clip`); nothing under fixed clipping or without updates."""
        k = int(np.asarray(norms).size)
        if not self.spec.adaptive or k == 0:
            return
        sigma_b = float(self.spec.clipped_count_std or 0.0)
        unclipped = float(np.count_nonzero(np.asarray(norms) <= np.asarray(clips)))
        seed = noise_seed(self.streams, COUNT, self.edge, *key)
        count_noise = float(np.random.Generator(np.random.PCG64(seed)).normal(0.0, sigma_b))
        self.clip_norm = adaptive_clip(
            self.clip_norm,
            (unclipped + count_noise) / k,
            self.spec.target_quantile,
            self.spec.clip_learning_rate,
        )

    def record(
        self, devices: np.ndarray, norms: np.ndarray, clips: np.ndarray, noise_std: float
    ) -> None:
        """The ``dp_clip`` rows of a step's applied updates: ``device``, ``dp_update_norm``
        (before clipping), ``dp_clip_norm`` (the ``C`` used), ``dp_clipped``, ``dp_noise_std``
        (local: each device's own ``z_delta C``; central and over the air: ``noise_std``, the
        step aggregate's per entry)."""
        n = np.asarray(norms, dtype=np.float64)
        c = np.broadcast_to(np.asarray(clips, dtype=np.float64), n.shape).copy()
        if self.mechanism == "local":
            std = self.update_multiplier * c
        else:
            std = np.full(n.shape, float(noise_std))
        self.rows.append(
            {
                "device": np.asarray(devices, dtype=np.int64).copy(),
                "dp_update_norm": n.copy(),
                "dp_clip_norm": c,
                "dp_clipped": n > c,
                "dp_noise_std": std,
            }
        )

    def take_rows(self) -> list[dict[str, np.ndarray]]:
        """The rows recorded since the last call."""
        rows, self.rows = self.rows, []
        return rows

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        """The current clip (numbers only)."""
        return {"clip_norm": float(self.clip_norm)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        c = float(state["clip_norm"])
        if not (np.isfinite(c) and c > 0.0):
            raise ValueError(f"saved clip_norm must be a finite number > 0, got {c}")
        self.clip_norm = c
