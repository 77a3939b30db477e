"""The event trace: one typed Parquet schema, written as one complete file per frame.

Every row is one event. Columns that do not apply to an event are null. The schema below is the
single source of truth: ``docs/trace.md`` is generated from it (``python -m wflsim.sim.trace``) and a test
checks that the two agree.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .parts import EVENTS_DIR as EVENTS_DIR
from .parts import MAX_SHARDS as MAX_SHARDS
from .parts import list_parts as list_parts
from .parts import part_frame as part_frame
from .parts import part_name as part_name
from .parts import shard_name as shard_name
from .privacy.columns import PRIVACY_COLUMNS

# 2: device_slot and upload_planned_s; 3: availability events; 4: stale updates ([server]);
# 5: selected ([strategy.selection]); 6: probe_loss and probe_energy_j (power_of_choice);
# 7: strategy rows (kept, prox_term, control_update_norm, server_step_norm); 8: [cells] (cell,
# previous_cell, handover rows) and [server.hierarchy] (cloud_round rows, backhaul_s,
# backhaul_energy_j); 9: [uplink] mode = "aircomp" (aircomp rows, eta_w, n_aligned, n_truncated,
# aircomp_mse, aggregation_mse); 10: [uplink] mode = "ns3_lte" (ns3_bytes, ns3_tbs, ns3_harq_retx,
# ns3_tb_errors, ns3_mcs_mean, ns3_rb_mean, ns3_goodput_bps, ns3_loss_db, ns3_tx_dbm); 11: what
# the newest models did: sinr_db and interference_w ([cells]); edge_model rows, edge,
# edge_data_weight, cloud_weight, backhaul_up_s, backhaul_down_s ([server.hierarchy]);
# aircomp_scale, aircomp_noise_std, aircomp_noise_mean, aircomp_noise_rms, update_mean,
# update_std ([uplink] mode = "aircomp", learning runs); 12: [privacy] (privacy, dp_clip and
# dp_budget_spent rows, dp_noise_multiplier, dp_epsilon, dp_update_norm, dp_clip_norm,
# dp_clipped, dp_noise_std)
TRACE_SCHEMA_VERSION = "12"

#: What a run's trace records (``[trace] level``): every event (the paper's) or, for large
#: network studies, the device events of a slot folded into one ``device_slot`` row per device.
TraceLevel = Literal["events", "device_slots"]
TRACE_LEVELS: tuple[str, ...] = ("events", "device_slots")
#: Parquet compression codecs a trace may be written with (``[trace] compression``).
Compression = Literal["lz4", "zstd", "snappy", "none"]
COMPRESSIONS: tuple[str, ...] = ("lz4", "zstd", "snappy", "none")

#: Event names, in the order they occur within a slot (the trace's documented tie order), then
#: the events of devices that come and go (``[availability]``): a device's change of state comes
#: before its other events at the same instant.
EVENTS: dict[str, str] = {
    "device_config": "t = 0, one per device: its resolved hardware, budget and local data size",
    "frame_start": "server: a frame begins",
    "position": "one per device at each frame start: position, distance, large-scale gain",
    "freeze": "one per device at each frame start: the scheme's freezing fraction gamma (and controller state)",
    "slot_start": "server: a slot begins",
    "decision": "one per device per slot: channel draw and the scheme's decision (participate, power); under [server] semi_sync / async one per idle device at the slot's start and one when a device starts again within the slot",
    "compute_start": "participating device starts its local gradient",
    "compute_end": "participating device finishes its local gradient",
    "upload_start": "participating device starts uploading (a shared uplink's TDMA may make it "
    "wait after its compute_end)",
    "upload_end": "participating device stops uploading: arrived in time (success) or cut at the deadline",
    "deadline": "server: the deadline tau_0 of the slot (deadline-enforcing schemes only)",
    "aggregate": "server: the global model is updated with the uploads that arrived in time",
    "energy": "one per device per slot, at the slot's end: energy spent, outcome, queue after the update (under [server] semi_sync / async: the energy of the device's upload cycles that ended in the slot; participating: one ended, success: one entered the server's buffer)",
    "eval": "server: test loss and accuracy of the global model",
    "frame_end": "server: a frame ends",
    "device_slot": "[trace] level = 'device_slots' only, in place of decision .. upload_end, dropped and energy: one per device per slot, at the slot's start: the decision and outcome columns of both (under [server] semi_sync / async: the decision of a device idle at the slot's start, null for one busy with an earlier cycle; the outcome of its cycles that ended in the slot, as its energy row)",
    "online": "[availability] only: the device comes online (at t = 0: one online or offline row per device, its initial state)",
    "offline": "[availability] only: the device goes offline",
    "dropped": "[availability] only: a participating device went offline during its compute or upload; its work is lost (compute_s: time computed, upload_s: time transmitted)",
    "flush": "[server] mode semi_sync / async only, in place of aggregate: the server applies its buffer of updates (n_success of them; at every slot's end in semi_sync, every buffer_size arrivals in async); model_version is the new version",
    "stale": "[server] mode semi_sync / async only: an update arrived more than max_staleness server steps after its model version and is discarded",
    "strategy": "[strategy] other than fedavg, learning runs only: one per upload a server step applied, what the strategy decided about it (kept, prox_term, control_update_norm) and the step's size (server_step_norm); at the aggregate's time (sync) or the slot's end, when the learner takes the slot's steps (semi_sync / async); at both trace levels",
    "handover": "[cells] only: at a frame start, one per device that changes its serving cell (cell: the new one, previous_cell: the old one), after the position rows; a first association is not a handover",
    "cloud_round": "[server.hierarchy] only: after every cloud_every_slots slots, the edges send their models to the cloud (time_s: when they send; backhaul_s: until the cloud model reaches the last edge; backhaul_energy_j: the backhaul's energy, both ways)",
    "edge_model": "[server.hierarchy] only: at each cloud round, right after its cloud_round row, one per edge server (edge): the model it sends, what it aggregated since the last round (edge_data_weight, n_success), its weight in the cloud's average (cloud_weight) and the round's latencies drawn for it (backhaul_up_s, backhaul_down_s); the models themselves are not trace data (the API's edge_params / edge_models, the checkpoint)",
    "aircomp": "[uplink] mode = 'aircomp' only: at a slot's end, before its aggregate row: the over-the-air sum (eta_w, n_aligned, n_truncated, the closed-form aircomp_mse and, with training, the measured aggregation_mse)",
    "privacy": "[privacy] only, network side: one per device per server step that applied its update, at the step's time (after its aggregate or flush row): the noise multiplier the step is accounted at for the device (dp_noise_multiplier) and its epsilon after it (dp_epsilon); under amplification = 'uniform_selection' one per device at every step; at both trace levels",
    "dp_clip": "[privacy] only, learning runs: one per update a server step applied, what clipping and noise did to it (dp_update_norm, dp_clip_norm, dp_clipped, dp_noise_std); learner-side, taken as the strategy rows (at the aggregate's time in sync, at the slot's end under semi_sync / async); at both trace levels",
    "dp_budget_spent": "[privacy] with an epsilon budget only: a device stops taking part because one more update could take its epsilon past the budget (once per device; dp_epsilon: its epsilon then; slot -1: before the first slot); from then on it is no candidate, as a device offline",
}

# name -> (arrow type, unit, description)
COLUMNS: dict[str, tuple[pa.DataType, str, str]] = {
    "time_s": (pa.float64(), "s", "simulated time of the event"),
    "frame": (pa.int32(), "-", "frame index k (0-based)"),
    "slot": (pa.int64(), "-", "global slot index t (0-based); -1 for events before the first slot"),
    "device": (pa.int32(), "-", "device index n (0-based); null for server events"),
    "event": (pa.dictionary(pa.int8(), pa.string()), "-", "event name (see the event table)"),
    "x_m": (
        pa.float64(),
        "m",
        "device x position (server, or with [cells] the layout, at the origin)",
    ),
    "y_m": (pa.float64(), "m", "device y position"),
    "distance_m": (
        pa.float64(),
        "m",
        "device-server distance (with [cells]: to its serving site; before clipping at min_distance_m)",
    ),
    "large_scale_gain": (
        pa.float64(),
        "linear",
        "large-scale channel power gain H = 10^(-(PL + S)/10) (S: shadowing, 0 without)",
    ),
    "shadowing_db": (
        pa.float64(),
        "dB",
        "log-normal shadowing S of the frame (position rows; null without shadowing)",
    ),
    "los": (
        pa.bool_(),
        "-",
        "line-of-sight state of the frame (position rows; null for path-loss models without one)",
    ),
    "cell": (
        pa.int32(),
        "-",
        "[cells] only: the device's serving cell in the frame (position rows) or the cell it hands over to (handover rows)",
    ),
    "previous_cell": (
        pa.int32(),
        "-",
        "handover rows: the cell the device leaves",
    ),
    "backhaul_s": (
        pa.float64(),
        "s",
        "cloud_round rows: from the edges sending their models to the cloud model reaching the last edge",
    ),
    "backhaul_energy_j": (
        pa.float64(),
        "J",
        "cloud_round rows: the backhaul's energy for the round (every edge's model up and the cloud's down)",
    ),
    "edge": (
        pa.int32(),
        "-",
        "[server.hierarchy] only: the edge server (its cell's index) that receives and applies the upload (upload_end, dropped and device_slot rows of a device that uploaded: its serving cell when it started; under semi_sync / async device_slot rows, that of its last cycle that ended), or that an edge_model row is about",
    ),
    "edge_data_weight": (
        pa.float64(),
        "sample",
        "edge_model rows: the data weight A_c the edge aggregated since the last cloud round, the sum of B_n over the uploads it applied (an upload applied in the slot that ends with the round counts)",
    ),
    "cloud_weight": (
        pa.float64(),
        "fraction",
        "edge_model rows: the edge model's weight in the cloud's average, A_c / sum A; null when no edge aggregated anything (the cloud model stays as it was)",
    ),
    "backhaul_up_s": (
        pa.float64(),
        "s",
        "edge_model rows: the one-way latency drawn for the edge's model to the cloud in this round (its transfer S / R excluded: backhaul_s = max_c(up_c) + S / R + max_c(down_c) + S / R)",
    ),
    "backhaul_down_s": (
        pa.float64(),
        "s",
        "edge_model rows: the one-way latency drawn for the cloud's model back to the edge (transfer excluded, as backhaul_up_s)",
    ),
    "channel_gain": (
        pa.float64(),
        "linear",
        "channel power gain h = g H of the slot: what the world applies (rate, success, energy)",
    ),
    "seen_channel_gain": (
        pa.float64(),
        "linear",
        "channel power gain the scheme decided on (decision rows; = channel_gain under perfect CSI, the estimate under [channel] csi)",
    ),
    "gamma": (
        pa.float64(),
        "fraction",
        "fraction of parameters the device froze in the frame (the scheme's choice rounded to whole parameters; 0 in frame 0)",
    ),
    "payload_bits": (
        pa.float64(),
        "bit",
        "upload payload of the scheme's cost model ((1 - gamma) S under freezing), times the [strategy]'s upload factor (1 but for a strategy that sends more than the model)",
    ),
    "compute_fraction": (
        pa.float64(),
        "fraction",
        "freeze rows: share of a full local gradient's c B cycles the device runs in the frame (1 - gamma under freezing and pruning, 1 for Top-K and FedHQ-like, the sub-model's FLOP share for FjORD)",
    ),
    "sent_values": (
        pa.int64(),
        "value",
        "freeze rows: values in one upload (unfrozen parameters; Top-K's K; pruning's kept parameters; FedHQ-like's D; FjORD's sub-model parameters)",
    ),
    "bits_per_value": (
        pa.float64(),
        "bit",
        "freeze rows: bits per uploaded value, indices included (Top-K: 32 + index bits; FedHQ-like: b_n, plus 64 bits per upload for the norm and the error)",
    ),
    "width": (
        pa.float64(),
        "fraction",
        "freeze rows, FjORD: width p of the device's sub-model (null for other schemes)",
    ),
    "min_tx_power_w": (
        pa.float64(),
        "W",
        "power that lands the upload exactly on the deadline on the gain the scheme sees, seen_channel_gain (inf: impossible)",
    ),
    "max_tx_power_w": (pa.float64(), "W", "the controller's power threshold p_max of the frame"),
    "tx_power_w": (pa.float64(), "W", "transmit power (0: not transmitting)"),
    "participating": (pa.bool_(), "-", "the device computes and uploads in this slot"),
    "selected": (
        pa.bool_(),
        "-",
        "decision/device_slot rows, [strategy.selection] rules but all: the strategy asked the device, one the slot's plan let take part (false: the plan let it, the rule did not ask it, so it is not participating); null where the plan did not let it take part, and under the rule all",
    ),
    "probe_loss": (
        pa.float64(),
        "nat",
        "decision/device_slot rows, [strategy.selection] rule power_of_choice: the device's loss probe at the slot's start, its mean cross-entropy on the current global model over a minibatch of B_n of its samples (one forward pass); null where it ran none (not among the d candidates drawn, or the draw had no choice to make) and under every other rule",
    ),
    "kept": (
        pa.bool_(),
        "-",
        "strategy rows: the strategy's aggregate used the upload (krum: among the m uploads with the lowest score; true for every other strategy)",
    ),
    "prox_term": (
        pa.float64(),
        "-",
        "strategy rows, fedprox: the proximal term at the end of the update's local steps, (mu / 2) |w_E - w_0|^2 = (mu / 2) lr^2 |u|^2 (u the upload as formed, lr its local rate), in the loss's units (nat); null for the other strategies",
    ),
    "control_update_norm": (
        pa.float64(),
        "-",
        "strategy rows, scaffold: |dc_i|_2, the norm of the control-variate update the upload carried (dc_i = u / E_i - c, 0 on coordinates not trained); null for the other strategies",
    ),
    "server_step_norm": (
        pa.float64(),
        "-",
        "strategy rows: |w_(t+1) - w_t|_2, the size of the server step that applied the upload (the same on every row of a step; the server optimisers' decision)",
    ),
    "probe_energy_j": (
        pa.float64(),
        "J",
        "decision/device_slot rows, as probe_loss: the probe's energy, (alpha/2) (c B_n / 3) f^2 (a forward pass, a third of a gradient's cycles); it is part of the slot's energy_compute_j (and so of energy_j and the queue update), asked or not",
    ),
    "available": (
        pa.bool_(),
        "-",
        "decision/device_slot rows: the device was online at the slot's start (null without [availability]: always online)",
    ),
    "compute_s": (
        pa.float64(),
        "s",
        "computation latency tau_cmp = u c' B E_n / f, E_n the device's local steps (1: FedSGD; [learning] local_steps / local_epochs), c' = c + X / B with X the [strategy]'s extra cycles per local step (0 for FedAvg and the server-side strategies; fedprox: 2 D) (decision/compute_end rows)",
    ),
    "upload_s": (
        pa.float64(),
        "s",
        "upload latency: full tau_com on decision rows, time actually transmitted on upload_end/energy/device_slot rows",
    ),
    "upload_planned_s": (
        pa.float64(),
        "s",
        "device_slot rows: full upload latency tau_com of the decision (what upload_s is on decision rows)",
    ),
    "energy_compute_j": (
        pa.float64(),
        "J",
        "computation energy of the slot ((alpha/2) u c' B E_n f^2 when not slowed; c' as in compute_s), plus probe_energy_j under power_of_choice selection",
    ),
    "energy_upload_j": (
        pa.float64(),
        "J",
        "upload energy of the slot (= tx_power_w * upload_s, except late uploads under trace.late_upload_energy = 'full', charged for the whole payload)",
    ),
    "energy_j": (
        pa.float64(),
        "J",
        "total energy of the slot = energy_compute_j + energy_upload_j",
    ),
    "wasted_energy_j": (
        pa.float64(),
        "J",
        "energy of a participation whose upload was not aggregated (= energy_j of a participating device with success = false, else 0)",
    ),
    "success": (pa.bool_(), "-", "the upload arrived by the deadline and was aggregated"),
    "dropped": (
        pa.bool_(),
        "-",
        "energy/device_slot rows: the device went offline during its compute or upload and lost its work (null without [availability])",
    ),
    "queue_j": (
        pa.float64(),
        "J",
        "energy-deficit queue Q (freeze: at frame start; energy: after this slot's update)",
    ),
    "energy_budget_j": (pa.float64(), "J", "per-slot average energy budget E_bar"),
    "conv_error": (
        pa.float64(),
        "-",
        "per-slot convergence-error term X = lam * 1{success} * B * (gamma - 1) (+0.0, never -0.0, without a success)",
    ),
    # Q E is J x J and X is dimensionless, so V and the cost are in J^2 (the drift is Q^2 / 2)
    "cost": (pa.float64(), "J^2", "per-slot drift-plus-penalty cost z = V X + Q E (V in J^2)"),
    "expected_cost": (
        pa.float64(),
        "J^2",
        "controller's expected per-slot cost Z(gamma) of the frame",
    ),
    "iterations": (pa.int32(), "-", "MM iterations used by the controller"),
    "cpu_hz": (pa.float64(), "cycle/s", "CPU frequency f"),
    "cycles_per_sample": (pa.float64(), "cycle", "CPU cycles per sample c"),
    "capacitance": (pa.float64(), "-", "effective capacitance coefficient alpha"),
    "batch_size": (pa.int32(), "sample", "local batch size B per slot"),
    "peak_power_w": (pa.float64(), "W", "peak transmit power P_bar"),
    "num_samples": (
        pa.int64(),
        "sample",
        "size of the device's local dataset (null in network-only runs)",
    ),
    "n_participants": (pa.int32(), "-", "devices that computed and uploaded in the slot"),
    "n_success": (
        pa.int32(),
        "-",
        "uploads aggregated in the slot (flush rows: in the step; edge_model rows: by the edge since the last cloud round)",
    ),
    "slot_duration_s": (pa.float64(), "s", "wall-clock (simulated) length of the slot"),
    "stable_fraction": (
        pa.float64(),
        "fraction",
        "parameters of the global model stable by the paper's Fig. 1 rule (last I = 10 updates < 0.5 % of the total absolute update); null before 10 slots and without training",
    ),
    "eta_w": (
        pa.float64(),
        "W",
        "aircomp rows: the receiver's denoising factor eta (the sum arrives scaled by sqrt(eta)); 0 when nobody transmits",
    ),
    "n_aligned": (pa.int32(), "-", "aircomp rows: devices the power rule let transmit in the sum"),
    "n_truncated": (
        pa.int32(),
        "-",
        "aircomp rows: devices the scheme let take part that the power rule kept silent (gain under the threshold)",
    ),
    "aircomp_mse": (
        pa.float64(),
        "-",
        "aircomp rows: the closed-form MSE per entry of the sum the server reconstructs from the devices that made it into it, for unit-variance updates: (sum_n (c_n - a_n)^2 + N / eta) / s^2 with the true gains, the noise N the receiver heard (interference included) and s the weight those devices carry (Cao et al., eq. 8, for s = 1); null when nobody made it",
    ),
    "aggregation_mse": (
        pa.float64(),
        "(update units)^2",
        "aircomp rows, learning runs: the mean squared error per entry between the aggregate the server applied and the same aggregation of the exact uploads (with [cells] and a flat server every cell's row carries the one aggregate's; under [server.hierarchy] each edge's own); null without training or when nothing was aggregated",
    ),
    "aircomp_scale": (
        pa.float64(),
        "update units",
        "aircomp rows, learning runs: the common scale sigma_bar the devices in the aggregate normalised their updates by (the largest update_std among them; docs/decisions.md); learner-side, as aggregation_mse; null when nothing was aggregated",
    ),
    "aircomp_noise_std": (
        pa.float64(),
        "update units",
        "aircomp rows, learning runs: the standard deviation per entry of the receiver noise drawn for the aggregate, sigma_bar sqrt(sum_s (W_s sqrt(N_s / eta_s) / a_s)^2) over its sums s (W_s: the sum's share of the weight; one sum: sigma_bar sqrt(N / eta) / a); 0 without noise",
    ),
    "aircomp_noise_mean": (
        pa.float64(),
        "update units",
        "aircomp rows, learning runs: the mean of the noise the aggregate received, over the entries anyone sent (the drawn noise after the rule's per-entry normalisation; ~ 0)",
    ),
    "aircomp_noise_rms": (
        pa.float64(),
        "update units",
        "aircomp rows, learning runs: the root mean square of that noise over the same entries (~ aircomp_noise_std under eq. 3's aggregation)",
    ),
    "update_mean": (
        pa.float64(),
        "update units",
        "[uplink] mode = 'aircomp', learning runs, upload_end and device_slot rows of a device in the slot's sum: the mean mu_n of the entries it sent (its side information; the sum carries (u - mu_n) / sigma_bar); learner-side",
    ),
    "update_std": (
        pa.float64(),
        "update units",
        "as update_mean: the standard deviation sigma_n of the entries it sent (aircomp_scale is the largest of its sum's)",
    ),
    "ns3_bytes": (
        pa.int64(),
        "bytes",
        "[uplink] mode = 'ns3_lte' only (upload_end, dropped and device_slot rows): the application bytes of the upload ns-3 delivered to the server by its end (its payload when it arrived; under stale updates an upload in flight at a frame boundary counts the bytes of both processes)",
    ),
    "ns3_tbs": (
        pa.int64(),
        "-",
        "ns3_lte only: the uplink transport blocks of the device its base station received during the upload (first transmissions and HARQ retransmissions)",
    ),
    "ns3_harq_retx": (
        pa.int64(),
        "-",
        "ns3_lte only: of ns3_tbs, the HARQ retransmissions",
    ),
    "ns3_tb_errors": (
        pa.int64(),
        "-",
        "ns3_lte only: of ns3_tbs, those received in error (each retransmitted by HARQ, or a grant the device left unused)",
    ),
    "ns3_mcs_mean": (
        pa.float64(),
        "-",
        "ns3_lte only: the mean MCS index (0-28) of the upload's transport blocks; null if none",
    ),
    "ns3_rb_mean": (
        pa.float64(),
        "resource blocks",
        "ns3_lte only: the mean number of resource blocks per uplink grant of the upload; null if none",
    ),
    "ns3_goodput_bps": (
        pa.float64(),
        "bit/s",
        "ns3_lte only: 8 ns3_bytes over the time from the upload's start to its end (or stop)",
    ),
    "ns3_loss_db": (
        pa.float64(),
        "dB",
        "ns3_lte only: the loss ns-3 applied to the device's link to its serving base station at the upload's start, read back from ns-3's propagation model: -10 log10 of the slot's channel_gain (the gain to the serving site with [cells])",
    ),
    "ns3_tx_dbm": (
        pa.float64(),
        "dBm",
        "ns3_lte only: the device's transmit power in ns-3 at the upload's start: 10 log10(tx_power_w) + 30",
    ),
    "sinr_db": (
        pa.float64(),
        "dB",
        "[cells] whose uploads interact (a cell shares its band, or cells share one), upload_end, dropped and device_slot rows of an upload that transmitted: the SINR p h / ((N0' + I') b) at its serving site that its rate used, summarised over the upload as the constant SINR of its mean spectral efficiency, 10 log10(2^((1/T) int log2(1 + SINR(t)) dt) - 1) (T: upload_s, the time it transmitted; the SINR itself where it stayed constant); b is its band (W, or W / k under OFDMA), N0' the noise spectral density, I' the interference's",
    ),
    "interference_w": (
        pa.float64(),
        "W",
        "as sinr_db: the inter-cell interference power at the upload's serving site within its band b, I' b, averaged over the time it transmitted ((1/T) int I(t) dt; docs/cells.md: each co-band upload m of another cell a adds p_m g[m, site] b / B_a)",
    ),
    "model_version": (
        pa.int64(),
        "-",
        "[server] semi_sync / async: the model version a device downloaded (decision, compute_end, upload_start, upload_end, dropped, stale rows) or the server made (flush rows); versions count server steps from 0",
    ),
    "staleness": (
        pa.int64(),
        "step",
        "[server] semi_sync / async, upload_end and stale rows: server steps between the update's model version and its arrival (the step that applies it)",
    ),
    "staleness_weight": (
        pa.float64(),
        "-",
        "[server] semi_sync / async, upload_end rows of updates kept: the weight w(staleness) the update enters the aggregate with",
    ),
    **PRIVACY_COLUMNS,  # [privacy] (sim/privacy/columns.py)
    "loss": (pa.float64(), "nat", "test cross-entropy of the global model"),
    "accuracy": (pa.float64(), "fraction", "test accuracy of the global model"),
}

SCHEMA = pa.schema([pa.field(name, typ) for name, (typ, _, _) in COLUMNS.items()])
_EVENT_CODE = {name: i for i, name in enumerate(EVENTS)}
_EVENT_DICT = pa.array(list(EVENTS), pa.string())


class TraceBuffer:
    """Columnar buffer of events; one frame's rows, written as one part file.

    :meth:`add` takes a block of rows for one event: ``device`` and any column may be a scalar
    (broadcast) or an array of the block's length. Missing columns are null.
    """

    def __init__(self) -> None:
        self._blocks: list[tuple[int, dict[str, Any]]] = []
        self.num_rows = 0

    def add(
        self,
        event: str | np.ndarray,
        time_s: Any,
        frame: Any,
        slot: Any,
        device: Any = None,
        **cols: Any,
    ) -> None:
        """Add a block of rows. ``event`` is one event name, or an ``int8`` array of event codes
        (:func:`event_code`) for a block that mixes events (columns may then be masked arrays)."""
        if isinstance(event, str) and event not in EVENTS:
            raise KeyError(f"unknown event {event!r}")
        n = 1
        for v in (event, time_s, device, *cols.values()):
            if isinstance(v, np.ndarray) and v.ndim > 0:
                n = len(v)
                break
        if n == 0:
            return
        block = {
            "time_s": time_s,
            "frame": frame,
            "slot": slot,
            "device": device,
            "event": event,
            **cols,
        }
        unknown = set(block) - set(COLUMNS)
        if unknown:
            raise KeyError(f"unknown trace columns {sorted(unknown)}")
        for name, v in block.items():
            if isinstance(v, np.ndarray) and v.ndim > 0:
                _check_column(name, v, n)
        self._blocks.append((n, block))
        self.num_rows += n

    def insert(
        self,
        position: int,
        event: str | np.ndarray,
        time_s: Any,
        frame: Any,
        slot: Any,
        device: Any = None,
        **cols: Any,
    ) -> None:
        """:meth:`add`, with the block put at ``position`` (a :attr:`position` taken earlier)
        instead of after the others: rows logged later but timed earlier, e.g. a stale server's
        ``device_slot`` rows at their slot's start."""
        before = len(self._blocks)
        self.add(event, time_s, frame, slot, device, **cols)
        if len(self._blocks) > before:
            self._blocks.insert(position, self._blocks.pop())

    @property
    def position(self) -> int:
        """Where the next block goes (for :meth:`insert`)."""
        return len(self._blocks)

    def to_table(self) -> pa.Table:
        """The buffered rows as an Arrow table with :data:`SCHEMA`; empties the buffer.

        Each column is built once, in its final Arrow layout, from buffers no one else holds (so
        the writer thread never sees an array that is changed later): a column no block sets
        shares one zeroed buffer with the others; any other is one NumPy array of all the rows,
        filled block by block, whose memory becomes the Arrow data buffer without a copy, with a
        validity bitmap packed by NumPy where some rows are null (booleans packed the same way).
        Nothing is done per row in Python, and per column only a loop over the blocks that set
        it."""
        blocks, total = self._blocks, self.num_rows
        starts = np.cumsum([0] + [n for n, _ in blocks])
        # per column, the blocks that set it, in block order: one pass over the blocks' own
        # columns rather than one over every block per column of the schema
        by_column: dict[str, list[tuple[int, int, Any]]] = {}
        for (n, b), lo in zip(blocks, starts.tolist(), strict=False):
            for name, v in b.items():
                if v is not None:
                    by_column.setdefault(name, []).append((lo, n, v))
        # one zeroed buffer, as long as the widest column: data and validity of every null column
        zeros = pa.py_buffer(np.zeros(max(8 * total, 1), np.uint8))
        arrays: list[pa.Array] = []
        for name, (typ, _, _) in COLUMNS.items():
            if name == "event":
                idx = np.empty(total, np.int8)
                for (n, b), lo in zip(blocks, starts, strict=False):
                    ev = b["event"]
                    idx[lo : lo + n] = _EVENT_CODE[ev] if isinstance(ev, str) else ev
                arrays.append(pa.DictionaryArray.from_arrays(pa.array(idx, pa.int8()), _EVENT_DICT))
                continue
            present = by_column.get(name)
            if not present:
                arrays.append(pa.Array.from_buffers(typ, total, [zeros, zeros], null_count=total))
                continue
            arrays.append(_column(typ, total, present))
        table = pa.Table.from_arrays(arrays, schema=SCHEMA)
        self._blocks, self.num_rows = [], 0  # only once the table is built
        return table


def _column(typ: pa.DataType, total: int, present: list[tuple[int, int, Any]]) -> pa.Array:
    """One column of ``total`` rows from the blocks that set it, ``(first row, rows, value)``
    (a scalar, an array or a masked array); the other rows are null. The values under a null
    are never read (Parquet does not store them): they are left as they are, not zeroed."""
    values: np.ndarray = np.empty(total, _NUMPY_TYPES[typ])
    covered = sum(n for _, n, _ in present) == total
    masked = any(isinstance(v, np.ma.MaskedArray) for _, _, v in present)
    valid = None if covered and not masked else np.zeros(total, np.bool_)
    for lo, n, v in present:
        if isinstance(v, np.ma.MaskedArray):
            values[lo : lo + n] = np.ma.getdata(v)
            valid[lo : lo + n] = ~np.ma.getmaskarray(v)  # type: ignore[index]
        else:
            values[lo : lo + n] = v
            if valid is not None:
                valid[lo : lo + n] = True
    bitmap = None if valid is None else pa.py_buffer(np.packbits(valid, bitorder="little"))
    if values.dtype == np.bool_:  # Arrow's booleans are bits
        values = np.packbits(values, bitorder="little")
    return pa.Array.from_buffers(typ, total, [bitmap, pa.py_buffer(values)])


def _check_column(name: str, v: np.ndarray, n: int) -> None:
    """Refuse an array that does not fit its column: a length other than the block's, or values
    that an integer, boolean or event column cannot hold exactly (out of range, fractional,
    NaN), which a plain NumPy assignment would wrap or truncate."""
    if v.shape != (n,):
        raise ValueError(f"trace column {name!r}: shape {v.shape} for a block of {n} rows")
    if name == "event":
        codes = np.ma.getdata(v)
        if codes.size and (codes.min() < 0 or codes.max() >= len(EVENTS)):
            raise ValueError("trace column 'event': codes outside the event dictionary")
        return
    dtype = _NUMPY_TYPES[COLUMNS[name][0]]
    data = np.ma.getdata(v)
    if dtype is np.float64 or np.can_cast(data.dtype, dtype, "safe"):
        return
    kept = data[~np.ma.getmaskarray(v)] if isinstance(v, np.ma.MaskedArray) else data
    with np.errstate(invalid="ignore", over="ignore"):
        exact = np.array_equal(kept.astype(dtype).astype(kept.dtype), kept)
    if not exact:
        raise ValueError(f"trace column {name!r}: values that {np.dtype(dtype).name} cannot hold")


#: The NumPy dtype that holds each Arrow type of the schema.
_NUMPY_TYPES = {pa.float64(): np.float64, pa.int32(): np.int32, pa.int64(): np.int64,
                pa.bool_(): np.bool_, pa.int8(): np.int8}  # fmt: skip


def event_code(name: str) -> int:
    """The dictionary code of an event name in the ``event`` column."""
    return _EVENT_CODE[name]


def trace_metadata(metadata: Mapping[str, str]) -> dict[bytes, bytes]:
    """The key-value metadata stored in every part: ``metadata`` plus the schema version."""
    meta = {k.encode(): v.encode() for k, v in metadata.items()}
    meta[b"wflsim.trace_schema_version"] = TRACE_SCHEMA_VERSION.encode()
    return meta


#: Columns whose row-group statistics (min, max, nulls) a part stores: the keys a reader
#: filters on (DuckDB and pyarrow skip row groups by them). Statistics of the other columns
#: cost about a tenth of the encoding time and serve no query of the analysis library.
STATISTICS_COLUMNS = ("time_s", "frame", "slot", "device")
#: Integer columns with few distinct values in a row group (one frame, a few slots), which a
#: dictionary stores as a run of one code: smaller and about ten times faster to encode.
DICTIONARY_COLUMNS = ("frame", "slot")
#: Values the Parquet encoder takes per batch: Arrow's default of 1,024 costs about 7 % more
#: encoding time for the same bytes.
WRITE_BATCH_SIZE = 65_536


def parquet_options(schema: pa.Schema, compression: Compression = "lz4") -> dict[str, Any]:
    """The Parquet writer settings of every part (``pyarrow.parquet.ParquetWriter`` keywords):
    ``compression`` (``[trace] compression``); dictionary encoding for string-like columns and :data:`DICTIONARY_COLUMNS` only (a
    dictionary over float columns of distinct values is built, overflows and is thrown away, at
    about a third of the encoding time); statistics on :data:`STATISTICS_COLUMNS`; batches of
    :data:`WRITE_BATCH_SIZE` values (the bytes do not depend on it)."""
    names = set(schema.names)
    return {
        "compression": compression,
        "use_dictionary": [
            f.name
            for f in schema
            if f.name in DICTIONARY_COLUMNS
            or pa.types.is_dictionary(f.type)
            or pa.types.is_string(f.type)
        ],
        "write_statistics": [c for c in STATISTICS_COLUMNS if c in names],
        "write_batch_size": WRITE_BATCH_SIZE,
    }


def encode_part(
    table: pa.Table, metadata: Mapping[bytes, bytes], compression: Compression = "lz4"
) -> bytes:
    """One frame's rows as the bytes of a complete Parquet file (:func:`parquet_options`, the
    schema's metadata)."""
    sink = pa.BufferOutputStream()
    options = parquet_options(table.schema, compression)
    pq.write_table(table.replace_schema_metadata(metadata), sink, **options)
    return sink.getvalue().to_pybytes()


def temporary_path(path: Path) -> Path:
    """The hidden name a file is written under before it is renamed to ``path`` (in the same
    folder, so the rename is atomic; the pid keeps two writers apart; never listed as a part)."""
    return path.with_name(f".{path.name}.{os.getpid()}.tmp")


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that a crash leaves the old file or the new one, never half:
    a hidden temporary file in the same folder, fsync, rename, fsync of the folder.

    A failed write (a full disk, a file-size limit) removes its temporary file and raises."""
    path = Path(path)
    tmp = temporary_path(path)
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def fsync_dir(folder: Path) -> None:
    """Make a rename in ``folder`` durable (best effort where folders cannot be opened)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def strict_json(obj: Any) -> Any:
    """``obj`` with every NaN or infinite float replaced by None, numpy scalars and arrays as
    Python values, paths as strings: what strict JSON can hold."""
    if isinstance(obj, dict):
        return {str(k): strict_json(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [strict_json(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return strict_json(obj.tolist())
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, Path):
        return str(obj)
    return obj


def json_text(obj: Any) -> str:
    """``obj`` as strict JSON text (``null`` for NaN; :func:`strict_json`)."""
    return json.dumps(strict_json(obj), indent=2, allow_nan=False) + "\n"


def write_json_atomic(path: Path, obj: Any) -> None:
    """Write ``obj`` as strict JSON (:func:`json_text`) to ``path`` atomically (:func:`write_atomic`)."""
    write_atomic(Path(path), json_text(obj).encode("utf-8"))


def markdown_doc() -> str:
    """The column-by-column documentation of the trace (the content of ``docs/trace.md``)."""
    lines = [
        "# The event trace (`events/`)",
        "",
        "<!-- generated by `python -m wflsim.sim.trace > docs/trace.md`; do not edit by hand -->",
        "",
        f"Schema version {TRACE_SCHEMA_VERSION}. One row per event; columns that do not apply to an",
        "event are null. A run folder holds the trace as one Parquet file per completed frame,",
        "`events/part-000000.parquet`, `events/part-000001.parquet`, ... (each written to a hidden",
        "temporary name, fsynced and renamed, so a file that is there is complete). A frame of many",
        "rows (200,000 or more, expected from its first slots, on a machine of several cores) is",
        "written as several shard files instead, `part-000003-00.parquet`, `part-000003-01.parquet`,",
        "..., each a contiguous run of the frame's slots encoded by a thread of its own; the file",
        "names sort in row order, sharded frames or not. Together the files are",
        'one table, rows in frame order: `pd.read_parquet(run / "events")`, DuckDB\'s',
        "`read_parquet('run/events/*.parquet')` or `analysis.load_events(run)`. Runs of wflsim before",
        "0.3 wrote one file, `events.parquet`, with the same schema (`analysis` reads both). Each file's",
        "key-value metadata holds the scenario (as given and as resolved), the seed, the package",
        "versions and the channel models with what the controller assumes (`wflsim.channel`);",
        "`manifest.json` beside it holds the same plus the run's status, the parts with their row",
        'counts and BLAKE3 hashes (a sharded frame\'s entry lists its shards in `"files"`, each with',
        'its rows and hash; `"sha256"` in folders written before issue 49, still',
        "verified), the fingerprint of what produced the run, a heartbeat and wall time.",
        "A run with `[channel] record = true` also writes `channel/part-000000.parquet`, ... the same",
        "way: every device's channel in every slot (its layout is in `docs/scenario.md`, \"The channel",
        'table").',
        "",
        "`analysis.load_events(run)` (and every reader of `wflsim.analysis` and `wflsim.load_run`)",
        "reads exactly the parts the manifest lists, each checked against its hash (`verify=False`:",
        "its row count), and refuses with one line naming the file and the fix a part that is",
        "missing, damaged, replaced by another run's or not listed (copied in); the part of the frame",
        "in flight when an unfinished run stopped is not listed and not read. Reading the folder with",
        "pandas or DuckDB directly checks nothing. `events.parquet` of wflsim before 0.3 and a folder",
        "of parts with neither a manifest nor the run marker are read as they are.",
        "",
        "Types: `analysis.load_events(run)` (and `wflsim.load_run(run).events`) gives every column",
        "the type of the table below as a nullable Arrow dtype (`device` is `int32[pyarrow]`, null",
        "for server events), except `event`: a pandas `category` of the event names (the file stores",
        "them dictionary-encoded; a category is as small and fast to filter; `.astype(str)` gives",
        "plain strings). Plain `pd.read_parquet` gives other types: an integer column with nulls",
        "(`device`, ...) becomes `float64`, and `event` a `category`. With plain pandas, the",
        "documented types (`event` as `string`) of exactly the parts the manifest lists, unchecked:",
        "",
        "```python",
        "import json",
        "from pathlib import Path",
        "",
        "import pandas as pd",
        "",
        'run = Path("runs/quickstart")',
        'manifest = json.loads((run / "manifest.json").read_text())',
        '# a frame of many rows may be written as several shard files, listed in its "files"',
        'parts = [run / f["file"] for p in manifest["parts"] for f in p.get("files", [p])]',
        'ev = pd.read_parquet(parts, dtype_backend="pyarrow").astype({"event": "string[pyarrow]"})',
        "```",
        "",
        "Rows are written in simulated-time order (up to floating-point rounding: an upload accepted",
        "within the deadline's 1e-9 relative tolerance may end a hair after its `deadline` row). Within",
        "a frame and a slot, events at the same instant appear in the order of the event table below",
        "(e.g. an upload that ends exactly at the deadline is logged, and counted as in time, before the",
        "`deadline` row); the initial evaluation (`slot = -1`) comes right after the `device_config` rows.",
        "",
        "## Events",
        "",
        "| event | meaning |",
        "|---|---|",
    ]
    lines += [f"| `{k}` | {v} |" for k, v in EVENTS.items()]
    lines += ["", "## Columns", "", "| column | type | unit | meaning |", "|---|---|---|---|"]
    for name, (typ, unit, desc) in COLUMNS.items():
        t = "string" if name == "event" else str(typ)
        lines.append(f"| `{name}` | {t} | {unit} | {desc} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":  # pragma: no cover
    print(markdown_doc(), end="")
