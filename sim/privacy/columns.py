"""The trace's ``[privacy]`` columns (name -> (arrow type, unit, description)), part of
:data:`wflsim.sim.trace.COLUMNS` (the schema's single table, docs/trace.md generated from it):
the ``privacy`` rows' accounting, the ``dp_clip`` rows' clipping and noise."""

from __future__ import annotations

import pyarrow as pa

PRIVACY_COLUMNS: dict[str, tuple[pa.DataType, str, str]] = {
    "dp_noise_multiplier": (
        pa.float64(),
        "-",
        "privacy rows: the noise multiplier the step is accounted at for the device, the noise's standard deviation over the device's L2 sensitivity in the step (w_n C / sum w), composed with the clipped count's noise under adaptive clipping; at least the run's z (but over the air with air_noise = 'channel_only': measured); inf: the step released nothing of the device",
    ),
    "dp_epsilon": (
        pa.float64(),
        "-",
        "privacy and dp_budget_spent rows: the device's epsilon after the step, at the run's privacy.delta, by the run's accountant (RDP or PLD), every step it took part in composed",
    ),
    "dp_update_norm": (
        pa.float64(),
        "update units",
        "dp_clip rows: the L2 norm of the device's update before clipping (the gradient's units, or the pseudo-gradient's after local steps); learner-side",
    ),
    "dp_clip_norm": (
        pa.float64(),
        "update units",
        "dp_clip rows: the clip C the update was clipped to (under adaptive clipping the step's)",
    ),
    "dp_clipped": (
        pa.bool_(),
        "-",
        "dp_clip rows: whether the update was scaled down to dp_clip_norm (its norm exceeded it)",
    ),
    "dp_noise_std": (
        pa.float64(),
        "update units",
        "dp_clip rows: the standard deviation per entry of the Gaussian noise on this update: under local noise its own, under central noise and over the air the noise on the step's aggregate",
    ),
}
