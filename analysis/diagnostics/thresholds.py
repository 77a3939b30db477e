"""The thresholds of the diagnostics (:mod:`wflsim.analysis.diagnostics`): a finding is flagged
beyond them."""

#: A stale server's step per applied update above this many times the synchronous one is
#: flagged (the warning before the run uses the same limit,
#: ``wflsim.sim.config.plausibility.MAX_STEP_RATIO``; a test keeps the two equal).
MAX_STEP_RATIO = 3.0
#: A shared uplink whose uploads shared the band with more than this factor times (or fewer
#: than 1 / this factor times) the planned ``planned_concurrent_uploads`` is flagged.
CONCURRENCY_FACTOR = 2.0
#: Training diverged: a non-finite test loss, or a final loss above this factor times the
#: initial one (the initial cross-entropy of C classes is about ln C; twice it is no model).
DIVERGED_LOSS_FACTOR = 2.0
#: The accuracy fell: the final accuracy lies more than :data:`FELL_MIN` below the best one
#: reached and has lost more than this share of the gain from the initial accuracy to the best.
FELL_SHARE = 0.5
#: The smallest fall of the accuracy that is flagged (a fraction: 0.05 is 5 points).
FELL_MIN = 0.05
#: A device is flagged for never taking part only in runs of at least this many slots.
MIN_SLOTS_FOR_ABSENCE = 20
#: At most this many devices are named in one diagnostic (the rest are counted).
NAMED_DEVICES = 5
#: Slots in which devices were online but none took part are flagged when a whole frame is
#: such, or when they make up at least this share of the run's slots.
IDLE_SHARE = 0.1
#: A computation of at least this share of ``run.deadline_s`` fills the slot: the upload is left
#: too little time for any power up to the peak (the warning before the run uses the same
#: share, ``wflsim.sim.config.plausibility.COMPUTE_FILL_SHARE``; a test keeps the two equal).
COMPUTE_FILL_SHARE = 0.9
#: LTE's lowest MCS decodes nothing below this SNR over the band, dB: ``snr_min_db`` of the
#: ``truncated_shannon`` rate model's fit to ns-3's LTE uplink (docs/ns3.md; a test keeps the
#: two equal).
LTE_MIN_SNR_DB = -2.95
#: Co-band cells planned on the noise alone are flagged at an outage rate above this.
INTERFERENCE_OUTAGE = 0.5
