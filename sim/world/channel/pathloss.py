"""Path-loss models: the paper's log-distance model and 3GPP TR 38.901's UMa and UMi street
canyon (LOS, NLOS, and the LOS probability).

The TR 38.901 formulas are pure, vectorised functions of the 2D distance (metres), the carrier
frequency (GHz) and the antenna heights (metres), as written in Table 7.4.1-1 (path loss) and
Table 7.4.2-1 (LOS probability); the classes wrap them with their parameters.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ... import fmath
from .. import physics
from .base import F64, PathLossModel

#: Propagation speed TR 38.901 uses in the breakpoint distance (Table 7.4.1-1, note 1), m/s.
C_38901_MPS = 3.0e8
#: Effective environment height ``h_E`` of the breakpoint distance, m: 1 m for UMi, and for UMa
#: whenever the UT is at most 13 m high (Table 7.4.1-1, note 1).
ENV_HEIGHT_M = 1.0
#: TR 38.901's base-station heights, m (Table 7.4.1-1).
UMA_BS_HEIGHT_M = 25.0
UMI_BS_HEIGHT_M = 10.0
#: Range of 2D distances where Table 7.4.1-1 holds, m; shorter distances are clipped to 10 m.
MIN_2D_DISTANCE_M = 10.0
MAX_2D_DISTANCE_M = 5000.0

LosMode = Literal["los", "nlos", "probabilistic"]


def distance_3d_m(distance_2d_m: ArrayLike, bs_height_m: float, ut_height_m: float) -> F64:
    """``d_3D = sqrt(d_2D^2 + (h_BS - h_UT)^2)``, metres, shape of ``distance_2d_m``."""
    d = np.asarray(distance_2d_m, dtype=np.float64)
    return np.hypot(d, bs_height_m - ut_height_m)


def breakpoint_distance_m(bs_height_m: float, ut_height_m: float, carrier_ghz: float) -> float:
    """``d'_BP = 4 h'_BS h'_UT f_c / c`` with ``h' = h - h_E``, ``h_E = 1 m``, ``f_c`` in Hz and
    ``c = 3e8 m/s`` (TR 38.901 Table 7.4.1-1, note 1), metres."""
    return (
        4.0
        * (bs_height_m - ENV_HEIGHT_M)
        * (ut_height_m - ENV_HEIGHT_M)
        * carrier_ghz
        * 1e9
        / C_38901_MPS
    )


def _dual_slope_db(
    d2d: F64,
    carrier_ghz: float,
    bs_height_m: float,
    ut_height_m: float,
    intercept_db: float,
    slope1_db: float,
    bp_coeff_db: float,
) -> F64:
    """The LOS dual-slope shape of UMa and UMi: ``PL1`` up to ``d'_BP``, ``PL2`` beyond."""
    d3d = distance_3d_m(d2d, bs_height_m, ut_height_m)
    dbp = breakpoint_distance_m(bs_height_m, ut_height_m, carrier_ghz)
    fc_term = 20.0 * fmath.log10(carrier_ghz)
    pl1 = intercept_db + slope1_db * fmath.log10(d3d) + fc_term
    pl2 = (
        intercept_db
        + 40.0 * fmath.log10(d3d)
        + fc_term
        - bp_coeff_db * fmath.log10(dbp**2 + (bs_height_m - ut_height_m) ** 2)
    )
    return np.where(d2d <= dbp, pl1, pl2)


def uma_los_db(
    distance_2d_m: ArrayLike,
    carrier_ghz: float,
    ut_height_m: float = 1.5,
    bs_height_m: float = UMA_BS_HEIGHT_M,
) -> F64:
    """UMa LOS path loss, dB (TR 38.901 Table 7.4.1-1):
    ``PL1 = 28.0 + 22 log10(d_3D) + 20 log10(f_c)`` for ``10 m <= d_2D <= d'_BP``,
    ``PL2 = 28.0 + 40 log10(d_3D) + 20 log10(f_c) - 9 log10(d'_BP^2 + (h_BS - h_UT)^2)`` for
    ``d'_BP <= d_2D <= 5 km``; distances in metres, ``f_c`` in GHz; shape of ``distance_2d_m``."""
    d = np.asarray(distance_2d_m, dtype=np.float64)
    return _dual_slope_db(d, carrier_ghz, bs_height_m, ut_height_m, 28.0, 22.0, 9.0)


def uma_nlos_db(
    distance_2d_m: ArrayLike,
    carrier_ghz: float,
    ut_height_m: float = 1.5,
    bs_height_m: float = UMA_BS_HEIGHT_M,
) -> F64:
    """UMa NLOS path loss, dB (TR 38.901 Table 7.4.1-1): ``max(PL_UMa-LOS, PL'_UMa-NLOS)`` with
    ``PL' = 13.54 + 39.08 log10(d_3D) + 20 log10(f_c) - 0.6 (h_UT - 1.5)``."""
    d = np.asarray(distance_2d_m, dtype=np.float64)
    d3d = distance_3d_m(d, bs_height_m, ut_height_m)
    pl_nlos = (
        13.54
        + 39.08 * fmath.log10(d3d)
        + 20.0 * fmath.log10(carrier_ghz)
        - 0.6 * (ut_height_m - 1.5)
    )
    return np.maximum(uma_los_db(d, carrier_ghz, ut_height_m, bs_height_m), pl_nlos)


def umi_los_db(
    distance_2d_m: ArrayLike,
    carrier_ghz: float,
    ut_height_m: float = 1.5,
    bs_height_m: float = UMI_BS_HEIGHT_M,
) -> F64:
    """UMi street canyon LOS path loss, dB (TR 38.901 Table 7.4.1-1):
    ``PL1 = 32.4 + 21 log10(d_3D) + 20 log10(f_c)`` for ``10 m <= d_2D <= d'_BP``,
    ``PL2 = 32.4 + 40 log10(d_3D) + 20 log10(f_c) - 9.5 log10(d'_BP^2 + (h_BS - h_UT)^2)``
    beyond; distances in metres, ``f_c`` in GHz."""
    d = np.asarray(distance_2d_m, dtype=np.float64)
    return _dual_slope_db(d, carrier_ghz, bs_height_m, ut_height_m, 32.4, 21.0, 9.5)


def umi_nlos_db(
    distance_2d_m: ArrayLike,
    carrier_ghz: float,
    ut_height_m: float = 1.5,
    bs_height_m: float = UMI_BS_HEIGHT_M,
) -> F64:
    """UMi street canyon NLOS path loss, dB (TR 38.901 Table 7.4.1-1):
    ``max(PL_UMi-LOS, PL'_UMi-NLOS)`` with
    ``PL' = 35.3 log10(d_3D) + 22.4 + 21.3 log10(f_c) - 0.3 (h_UT - 1.5)``."""
    d = np.asarray(distance_2d_m, dtype=np.float64)
    d3d = distance_3d_m(d, bs_height_m, ut_height_m)
    pl_nlos = (
        35.3 * fmath.log10(d3d) + 22.4 + 21.3 * fmath.log10(carrier_ghz) - 0.3 * (ut_height_m - 1.5)
    )
    return np.maximum(umi_los_db(d, carrier_ghz, ut_height_m, bs_height_m), pl_nlos)


def uma_los_probability(distance_2d_m: ArrayLike, ut_height_m: float = 1.5) -> F64:
    """UMa LOS probability (TR 38.901 Table 7.4.2-1, outdoor users): 1 for ``d_2D <= 18 m``, else
    ``[18/d + exp(-d/63) (1 - 18/d)] [1 + C'(h_UT) 5/4 (d/100)^3 exp(-d/150)]`` with
    ``C' = 0`` for ``h_UT <= 13 m`` and ``((h_UT - 13)/10)^1.5`` up to 23 m."""
    d = np.maximum(np.asarray(distance_2d_m, dtype=np.float64), 18.0)
    c = 0.0 if ut_height_m <= 13.0 else ((ut_height_m - 13.0) / 10.0) ** 1.5
    base = 18.0 / d + fmath.exp(-d / 63.0) * (1.0 - 18.0 / d)
    return base * (1.0 + c * 1.25 * fmath.power(d / 100.0, 3.0) * fmath.exp(-d / 150.0))


def umi_los_probability(distance_2d_m: ArrayLike) -> F64:
    """UMi street canyon LOS probability (TR 38.901 Table 7.4.2-1, outdoor users): 1 for
    ``d_2D <= 18 m``, else ``18/d + exp(-d/36) (1 - 18/d)``."""
    d = np.maximum(np.asarray(distance_2d_m, dtype=np.float64), 18.0)
    return 18.0 / d + fmath.exp(-d / 36.0) * (1.0 - 18.0 / d)


class LogDistance(PathLossModel):
    """``PL[dB] = intercept_db + slope_db log10(max(d, d_min) / d_ref)``.

    The defaults are the paper's ``128.1 + 37.6 log10(d[km])`` (Sec. VI, d in kilometres: with
    metres the SNRs would be absurd, see ``docs/decisions.md``). No LOS state.

    Args:
        intercept_db: path loss at ``d_ref``, dB.
        slope_db: dB per decade of distance (``10 n`` for a path-loss exponent ``n``), > 0.
        reference_distance_m: ``d_ref``, metres, > 0.
        min_distance_m: distances below it are clipped to it, metres, > 0.
    """

    los_mode = None
    carrier_ghz = None

    def __init__(
        self,
        intercept_db: float = physics.PATHLOSS_INTERCEPT_DB,
        slope_db: float = physics.PATHLOSS_SLOPE_DB,
        reference_distance_m: float = 1000.0,
        min_distance_m: float = 10.0,
    ) -> None:
        if not slope_db > 0 or not reference_distance_m > 0 or not min_distance_m > 0:
            raise ValueError("slope_db, reference_distance_m and min_distance_m must be > 0")
        self.intercept_db = float(intercept_db)
        self.slope_db = float(slope_db)
        self.reference_distance_m = float(reference_distance_m)
        self.min_distance_m = float(min_distance_m)

    def path_loss_db(self, distance_m: F64, los: NDArray[np.bool_] | None = None) -> F64:
        """Path loss, dB (see the class docstring; ``los`` is ignored)."""
        return physics.path_loss_db(
            distance_m,
            self.min_distance_m,
            self.intercept_db,
            self.slope_db,
            self.reference_distance_m,
        )

    def describe(self) -> dict[str, Any]:
        """``{"model": "log_distance", ...parameters}``."""
        return {
            "model": "log_distance",
            "intercept_db": self.intercept_db,
            "slope_db": self.slope_db,
            "reference_distance_m": self.reference_distance_m,
            "min_distance_m": self.min_distance_m,
        }


class Tr38901(PathLossModel):
    """TR 38.901 UMa or UMi street canyon path loss with a LOS state.

    Distances are 2D device-server distances, clipped below at ``max(min_distance_m, 10 m)``
    (Table 7.4.1-1 starts at 10 m); the base station is at TR 38.901's height (25 m UMa, 10 m
    UMi). The LOS state of each device is given to :meth:`path_loss_db` (all LOS, all NLOS, or
    drawn by the channel from :meth:`los_probability`). TR 38.901's shadow-fading parameters of
    the scenario are :attr:`shadowing_sigma_db` and :attr:`shadowing_decorrelation_m`
    (``(LOS, NLOS)``).

    Args:
        scenario: ``"uma"`` or ``"umi"``.
        carrier_ghz: ``f_c``, GHz, in ``[0.5, 100]``.
        los: ``"los"``, ``"nlos"`` or ``"probabilistic"``.
        ut_height_m: ``h_UT``, metres (UMa 1.5..13, UMi 1.5..22.5).
        min_distance_m: distances below it are clipped (and never below 10 m), metres.
    """

    #: Shadow-fading standard deviations (LOS, NLOS), dB: TR 38.901 Table 7.4.1-1.
    SIGMA_DB = {"uma": (4.0, 6.0), "umi": (4.0, 7.82)}
    #: Shadow-fading decorrelation distances (LOS, NLOS), m: TR 38.901 Table 7.5-6 (Part 1).
    DECORRELATION_M = {"uma": (37.0, 50.0), "umi": (10.0, 13.0)}
    #: Correlation distance of the LOS state, m: TR 38.901 Table 7.6.3.1-2 (UMa and UMi: 50 m).
    LOS_DECORRELATION_M = {"uma": 50.0, "umi": 50.0}

    def __init__(
        self,
        scenario: Literal["uma", "umi"],
        carrier_ghz: float,
        los: LosMode = "probabilistic",
        ut_height_m: float = 1.5,
        min_distance_m: float = 10.0,
    ) -> None:
        if scenario not in ("uma", "umi"):
            raise ValueError(f"scenario must be 'uma' or 'umi', got {scenario!r}")
        if not 0.5 <= carrier_ghz <= 100.0:
            raise ValueError(f"carrier_ghz must be in [0.5, 100] GHz, got {carrier_ghz}")
        top = 13.0 if scenario == "uma" else 22.5
        if not 1.5 <= ut_height_m <= top:
            raise ValueError(f"ut_height_m must be in [1.5, {top}] m, got {ut_height_m}")
        if los not in ("los", "nlos", "probabilistic"):
            raise ValueError(f"los must be 'los', 'nlos' or 'probabilistic', got {los!r}")
        self.scenario = scenario
        self.carrier_ghz: float = float(carrier_ghz)
        self.los_mode = los
        self.ut_height_m = float(ut_height_m)
        self.bs_height_m = UMA_BS_HEIGHT_M if scenario == "uma" else UMI_BS_HEIGHT_M
        self.min_distance_m = max(float(min_distance_m), MIN_2D_DISTANCE_M)
        self.shadowing_sigma_db = self.SIGMA_DB[scenario]
        self.shadowing_decorrelation_m = self.DECORRELATION_M[scenario]
        self.los_decorrelation_m = self.LOS_DECORRELATION_M[scenario]

    def _d2d(self, distance_m: F64) -> F64:
        return np.maximum(np.asarray(distance_m, dtype=np.float64), self.min_distance_m)

    def path_loss_db(self, distance_m: F64, los: NDArray[np.bool_] | None = None) -> F64:
        """Path loss, dB, of devices at 2D distances ``distance_m`` (m) in LOS state ``los``
        (``(N,)`` bool; None: the model's fixed state, ``"los"`` or ``"nlos"``)."""
        d = self._d2d(distance_m)
        fn_los, fn_nlos = (
            (uma_los_db, uma_nlos_db) if self.scenario == "uma" else (umi_los_db, umi_nlos_db)
        )
        fc, h_ut, h_bs = self.carrier_ghz, self.ut_height_m, self.bs_height_m
        if los is None:
            if self.los_mode == "probabilistic":
                raise ValueError("a probabilistic LOS state needs the devices' LOS states")
            fn = fn_los if self.los_mode == "los" else fn_nlos
            return fn(d, fc, h_ut, h_bs)
        return np.where(los, fn_los(d, fc, h_ut, h_bs), fn_nlos(d, fc, h_ut, h_bs))

    def los_probability(self, distance_m: F64) -> F64:
        """Table 7.4.2-1's LOS probability at 2D distances ``distance_m`` (m), ``(N,)``."""
        d = np.asarray(distance_m, dtype=np.float64)
        if self.scenario == "uma":
            return uma_los_probability(d, self.ut_height_m)
        return umi_los_probability(d)

    def describe(self) -> dict[str, Any]:
        """The model, its parameters and TR 38.901's fixed values."""
        return {
            "model": self.scenario,
            "standard": "3GPP TR 38.901 Table 7.4.1-1 (path loss), Table 7.4.2-1 (LOS probability)",
            "carrier_ghz": self.carrier_ghz,
            "los": self.los_mode,
            "ut_height_m": self.ut_height_m,
            "bs_height_m": self.bs_height_m,
            "min_distance_m": self.min_distance_m,
            "los_decorrelation_m": self.los_decorrelation_m,
        }
