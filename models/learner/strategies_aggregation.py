"""Server strategies that change how a step's uploads are aggregated (:meth:`Strategy.aggregate
<wflsim.models.learner.strategies.Strategy.aggregate>`), each then stepping as FedAvg does
(``w <- w - lr g``).

Byzantine-robust aggregates, unweighted as in their papers:

* ``fedmedian`` -- the coordinate-wise median (Yin et al., "Byzantine-robust distributed
  learning: towards optimal statistical rates", ICML 2018); with an even count the mean of the
  two middle values (NumPy's convention);
* ``fedtrimmedavg`` -- the coordinate-wise ``beta``-trimmed mean (Yin et al. 2018): of a
  coordinate's ``c`` values the ``floor(beta c)`` largest and smallest are dropped and the rest
  averaged;
* ``krum`` -- Krum and Multi-Krum (Blanchard et al., "Machine learning with adversaries:
  Byzantine tolerant gradient descent", NeurIPS 2017): upload ``i``'s score is the sum of its
  squared distances to its ``k - f - 2`` nearest other uploads; the ``m`` uploads of lowest score
  (ties: the lower row) are kept and aggregated by the update rule. With fewer than ``2 f + 3``
  uploads the score is undefined and every upload is kept.

And one for heterogeneous local work:

* ``fednova`` -- FedNova for local SGD (Wang et al., "Tackling the objective inconsistency problem
  in heterogeneous federated optimization", NeurIPS 2020): each upload normalised by its local
  steps, ``d_i = upload_i / E_i``, aggregated by the update rule and scaled by
  ``tau_eff = sum_i p_i E_i``, ``p_i = B_i / sum_j B_j`` (eq. 3's weights). With equal ``E_i`` it
  is FedAvg.

Per-coordinate rules (``learning.aggregation = "per_coordinate"``, pruning's
``aggregation = "per_coordinate"``, FjORD): the median and the trimmed mean of a coordinate are
taken over the devices that sent it, and a coordinate nobody sent gives 0. Otherwise every upload
counts in every coordinate, an entry a device did not send as 0 (as eq. 3 counts it). Krum and
FedNova aggregate through the rule, so they inherit its treatment.
"""

from __future__ import annotations

import numpy as np
import torch

from wflsim.sim.strategies import KrumParams, TrimmedMeanParams

from .strategies import RuleMean, Strategy


def _sorted_sent(
    uploads: torch.Tensor, uploaded: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Each coordinate's sent values in ascending order, the others (+inf) after them, ``(k, D)``,
    and each coordinate's count of sent values ``(D,)`` int64."""
    k = uploads.shape[0]
    if uploaded is None:
        counts = torch.full((uploads.shape[1],), k, dtype=torch.int64, device=uploads.device)
        return torch.sort(uploads, dim=0).values, counts
    filled = torch.where(uploaded, uploads, torch.inf)
    return torch.sort(filled, dim=0).values, uploaded.sum(dim=0)


def coordinate_median(uploads: torch.Tensor, uploaded: torch.Tensor | None) -> torch.Tensor:
    """The coordinate-wise median ``(D,)`` of ``uploads`` ``(k, D)`` over the rows that sent each
    coordinate (``uploaded`` ``(k, D)`` bool; None: every row); with an even count the mean of the
    two middle values; 0 where no row sent the coordinate."""
    ordered, counts = _sorted_sent(uploads, uploaded)
    c = counts.clamp_min(1)
    lo = torch.gather(ordered, 0, ((c - 1) // 2).unsqueeze(0)).squeeze(0)
    hi = torch.gather(ordered, 0, (c // 2).unsqueeze(0)).squeeze(0)
    median = torch.where(c % 2 == 1, lo, (lo + hi) * 0.5)
    return torch.where(counts > 0, median, 0.0)


def coordinate_trimmed_mean(
    uploads: torch.Tensor, uploaded: torch.Tensor | None, beta: float
) -> torch.Tensor:
    """The coordinate-wise ``beta``-trimmed mean ``(D,)``: of each coordinate's ``c`` sent values
    (``uploaded``, None: every row) the ``floor(beta c)`` largest and smallest dropped, the rest
    averaged; 0 where no row sent the coordinate (``0 <= beta < 0.5`` keeps at least one)."""
    ordered, counts = _sorted_sent(uploads, uploaded)
    trim = torch.floor(counts.to(torch.float64) * beta).to(torch.int64)
    pos = torch.arange(uploads.shape[0], device=uploads.device).unsqueeze(1)
    keep = (pos >= trim) & (pos < counts - trim)
    total = torch.where(keep, ordered, 0.0).sum(dim=0)
    kept = (counts - 2 * trim).clamp_min(1).to(uploads.dtype)
    return torch.where(counts > 0, total / kept, 0.0)


def krum_scores(uploads: torch.Tensor, f: int) -> np.ndarray:
    """Krum's score of each upload ``(k,)`` float64: the sum of its squared distances to its
    ``k - f - 2`` nearest other uploads (``k >= 2 f + 3``)."""
    k = uploads.shape[0]
    near = k - f - 2
    # all pairwise squared distances from one Gram matrix in float64 (|u_i|^2 + |u_j|^2 -
    # 2 u_i . u_j): one matrix product instead of k passes over the (k, D) uploads
    u = uploads.to(torch.float64)
    sq = (u * u).sum(dim=1)
    d2 = (sq[:, None] + sq[None, :] - 2.0 * (u @ u.T)).clamp_min(0.0)
    d2.fill_diagonal_(float("inf"))  # an upload is not its own neighbour
    return torch.sort(d2, dim=1).values[:, :near].sum(dim=1).cpu().numpy()


def krum_rows(uploads: torch.Tensor, f: int, m: int) -> np.ndarray:
    """The rows Krum keeps: the ``min(m, k)`` lowest scores (ties: the lower row), in increasing
    row order; every row when ``k < 2 f + 3`` (the score is undefined)."""
    k = uploads.shape[0]
    if k < 2 * f + 3:
        return np.arange(k)
    order = np.argsort(krum_scores(uploads, f), kind="stable")
    return np.sort(order[: min(m, k)])


class FedMedian(Strategy):
    """``fedmedian``: ``g`` the coordinate-wise median of the uploads (module docstring)."""

    name = "fedmedian"
    needs_upload_mask = True

    def aggregate(
        self,
        uploads: torch.Tensor,
        weights: torch.Tensor,
        steps: np.ndarray,
        uploaded: torch.Tensor | None,
        rule_mean: RuleMean,
    ) -> torch.Tensor:
        """The coordinate-wise median (unweighted)."""
        return coordinate_median(uploads, uploaded)


class FedTrimmedAvg(Strategy):
    """``fedtrimmedavg``: ``g`` the coordinate-wise ``beta``-trimmed mean (module docstring)."""

    name = "fedtrimmedavg"
    needs_upload_mask = True
    params: TrimmedMeanParams

    def aggregate(
        self,
        uploads: torch.Tensor,
        weights: torch.Tensor,
        steps: np.ndarray,
        uploaded: torch.Tensor | None,
        rule_mean: RuleMean,
    ) -> torch.Tensor:
        """The coordinate-wise trimmed mean (unweighted)."""
        return coordinate_trimmed_mean(uploads, uploaded, self.params.beta)


class Krum(Strategy):
    """``krum``: the update rule's aggregate of the ``m`` uploads of lowest Krum score (module
    docstring; ``m = 1`` Krum, ``m > 1`` Multi-Krum)."""

    name = "krum"
    params: KrumParams

    def aggregate(
        self,
        uploads: torch.Tensor,
        weights: torch.Tensor,
        steps: np.ndarray,
        uploaded: torch.Tensor | None,
        rule_mean: RuleMean,
    ) -> torch.Tensor:
        """The rule's aggregate of the kept rows."""
        rows = krum_rows(uploads, self.params.f, self.params.m)
        self._kept = np.zeros(uploads.shape[0], dtype=bool)
        self._kept[rows] = True
        return rule_mean(rows)

    def step_columns(self, uploads: torch.Tensor, local_lr: np.ndarray) -> dict[str, np.ndarray]:
        """``kept``: the uploads Krum's score kept."""
        return {"kept": self._kept}


class FedNova(Strategy):
    """``fednova``: ``g = tau_eff * rule_mean(upload_i / E_i)``, ``tau_eff = sum_i p_i E_i``
    (module docstring)."""

    name = "fednova"

    def aggregate(
        self,
        uploads: torch.Tensor,
        weights: torch.Tensor,
        steps: np.ndarray,
        uploaded: torch.Tensor | None,
        rule_mean: RuleMean,
    ) -> torch.Tensor:
        """The normalised uploads' aggregate, scaled by the effective local steps."""
        e = np.asarray(steps, dtype=np.int64)
        b = weights.detach().cpu().numpy().astype(np.float64)
        tau_eff = float((b * e).sum() / b.sum())
        div = torch.as_tensor(e, dtype=uploads.dtype, device=uploads.device)
        return tau_eff * rule_mean(range(uploads.shape[0]), uploads / div[:, None])


#: The aggregating strategies' classes, by name (the names of ``wflsim.sim.strategies``).
AGGREGATING: dict[str, type[Strategy]] = {
    cls.name: cls for cls in (FedMedian, FedTrimmedAvg, Krum, FedNova)
}
