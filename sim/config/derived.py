"""The constants a run derives from its scenario, computed and checked before anything runs.

Every field can be valid on its own while a product of several overflows (``capacitance = 1e300``
makes the compute energy infinite) or underflows (``noise_dbm = -1e6`` makes the noise power 0,
so every rate is infinite). :func:`check_derived` computes what the engine and the controller will
compute from the resolved scenario, per device where it differs per device, and refuses any that
is not finite (or not positive where it must be), naming the field most likely at fault. It runs
in ``wflsim validate`` and before every run, so such a scenario fails with exit code 2 and writes
nothing, instead of failing (or silently producing NaN) in the middle of a run.
:func:`check_slot_wait`, run once the scheme is built, refuses a scheme that waits for the last
upload where a device at the cell edge would make a slot wait longer than
:data:`~wflsim.sim.config.limits.MAX_SLOT_WAIT_S`.
"""

from __future__ import annotations

import math

import numpy as np

from .. import fmath
from ..errors import ScenarioError
from ..radio import rates
from ..world import physics
from ..world.availability import Availability, MarkovAvailability
from ..world.channel import Channel
from ..world.mobility.base import Mobility
from ..world.mobility.random_waypoint import RandomWaypoint
from ..world.system import DeviceArrays, SystemConstants
from .limits import MAX_SLOT_WAIT_S, MAX_WAIT_EVENTS
from .schema import Scenario

#: Largest value a trace column of type int32 holds (frame, device, batch_size, iterations).
INT32_MAX = 2**31 - 1

#: The defaults of the per-device fields, to tell which field of a product is extreme.
_DEVICE_DEFAULTS = {
    "cpu_hz": 2e9,
    "cycles_per_sample": 2e6,
    "capacitance": 2e-28,
    "batch_size": 512.0,
    "peak_power_w": 1.0,
}


def _culprit(devices: DeviceArrays, fields: tuple[str, ...], n: int) -> str:
    """The field among ``fields`` whose value for device ``n`` is farthest (in decades) from its
    default: the one to name when their product is not finite."""

    def decades(name: str) -> float:
        v = abs(float(getattr(devices, name)[n]))
        return abs(math.log10(v / _DEVICE_DEFAULTS[name])) if v > 0 else math.inf

    return "devices." + max(fields, key=decades)


def _bad(values: np.ndarray, positive: bool = False) -> int | None:
    """The first index whose value is not finite (or not > 0 with ``positive``), else None."""
    with np.errstate(invalid="ignore"):
        bad = ~np.isfinite(values) | ((values <= 0) if positive else False)
    idx = np.flatnonzero(bad)
    return int(idx[0]) if idx.size else None


def check_derived(
    scenario: Scenario,
    devices: DeviceArrays,
    channel: Channel,
    num_params: int,
) -> None:
    """Compute the run's derived constants and refuse non-finite or overflowing ones.

    Checked: the run's horizon and integer ranges; the noise power; the large-scale gains at the
    minimum distance and at the cell edge; the best SNR and rate; the payload; each device's
    full compute time and energy and its peak upload energy; the controller's weight
    ``V lam B`` and its energy term ``Q e_cmp`` at a queue of one slot's worst energy.

    Raises:
        ScenarioError: naming the field (the one most likely at fault for a product) and why.
    """
    run, net, learning = scenario.run, scenario.network, scenario.learning
    fix_range = "use a value in a physically meaningful range (see docs/scenario.md)"

    # integers that end up in int32 trace columns or int64 arithmetic
    if run.frames > INT32_MAX:
        raise ScenarioError("run.frames", f"must be at most {INT32_MAX}", fix_range)
    if run.frames * run.slots_per_frame > 2**62:
        raise ScenarioError(
            "run.slots_per_frame", "frames x slots_per_frame overflows the slot counter", fix_range
        )
    horizon_s = float(run.frames) * float(run.slots_per_frame) * run.deadline_s
    if not math.isfinite(horizon_s):
        raise ScenarioError(
            "run.deadline_s", "frames x slots_per_frame x deadline_s is not finite", fix_range
        )

    # radio
    noise_field = (
        "network.noise_dbm"
        if scenario.uplink.noise_psd_dbm_hz is None
        else "uplink.noise_psd_dbm_hz"
    )
    noise_w = float(physics.dbm_to_w(scenario.uplink.noise_dbm(net)))
    if not (math.isfinite(noise_w) and noise_w > 0):
        raise ScenarioError(
            noise_field,
            f"gives a noise power of {noise_w:g} W (must be finite and > 0)",
            fix_range,
        )
    probe = np.array([net.min_distance_m, net.cell_radius_m])
    with np.errstate(all="ignore"):
        gains = np.asarray(channel.median_gain(probe), dtype=np.float64)
    i = _bad(gains, positive=True)
    if i is not None:
        where = "the minimum distance" if i == 0 else "the cell edge"
        raise ScenarioError(
            "channel.pathloss",
            f"gives a large-scale gain of {gains[i]:g} at {where} (must be finite and > 0)",
            fix_range,
        )
    bits = float(learning.bits_per_param) * float(num_params)
    if not (math.isfinite(bits) and bits < 2.0**53):
        raise ScenarioError(
            "learning.bits_per_param", "bits_per_param x num_params overflows", fix_range
        )
    with np.errstate(all="ignore"):
        snr = devices.peak_power_w * float(gains.max()) / noise_w
        rate = net.bandwidth_hz * fmath.log2(1.0 + snr)
    i = _bad(snr)
    if i is not None or _bad(rate) is not None:
        m = i if i is not None else int(_bad(rate) or 0)
        field = "devices.peak_power_w" if devices.peak_power_w[m] > 1e6 else noise_field
        raise ScenarioError(
            field,
            f"device {m}'s best signal-to-noise ratio (peak power x gain at the minimum "
            "distance / noise power) is not finite",
            fix_range,
        )

    # computation and energy, per device
    with np.errstate(all="ignore"):
        t_cmp = devices.full_compute_time_s()
        e_cmp = devices.full_compute_energy_j()
        e_up = devices.peak_power_w * run.deadline_s
    n = _bad(t_cmp)
    if n is not None:
        raise ScenarioError(
            _culprit(devices, ("cycles_per_sample", "batch_size", "cpu_hz"), n),
            f"device {n}'s compute time c B E / f is not finite",
            fix_range,
        )
    n = _bad(e_cmp)
    if n is not None:
        raise ScenarioError(
            _culprit(devices, ("capacitance", "cycles_per_sample", "batch_size", "cpu_hz"), n),
            f"device {n}'s compute energy (alpha / 2) c B E f^2 is not finite",
            fix_range,
        )
    n = _bad(e_up)
    if n is not None:
        raise ScenarioError(
            "devices.peak_power_w",
            f"device {n}'s peak upload energy P_bar tau_0 is not finite",
            fix_range,
        )

    # the controller's inputs: I = V B lam - Q e_cmp with Q up to a slot's worst energy
    params = scenario.scheme.params
    v = float(params.get("V", 100.0))
    lam_raw = params.get("lam")
    lam = float(lam_raw) if lam_raw is not None else 1.0 / float(np.sum(devices.batch_size))
    worst = e_cmp + e_up
    with np.errstate(all="ignore"):
        weight = v * lam * devices.batch_size
        energy_term = worst * worst
        cost = weight + energy_term
    n = _bad(weight)
    if n is not None or _bad(cost) is not None:
        field = (
            "scheme.lam"
            if lam_raw is not None and abs(math.log10(lam)) > abs(math.log10(v) if v > 0 else 0.0)
            else "scheme.V"
        )
        raise ScenarioError(
            field,
            "the controller's weight V x lam x B (or its energy term) is not finite",
            "lower scheme.V or scheme.lam (only their product matters)",
        )


def edge_wait_s(
    system: SystemConstants, edge_gain: float, uplink_mode: str = "dedicated"
) -> tuple[float, int]:
    """How long a slot that waits for its last upload lasts when every device is at the cell
    edge, with the large-scale gain ``edge_gain`` (linear) and fading power 1, and sends its
    full payload ``S`` at its peak power ``P_bar``: ``(wait, device)``, s, with the device
    that sets it.

    A device's time is its full compute time ``c B E / f`` plus its upload time; on dedicated
    bands ``S / (W log2(1 + P_bar H / N0))`` (eq. 10), the wait the slowest device's. Under
    ``uplink_mode = "tdma"`` the uploads go one after another: the longest compute time plus
    the sum of the upload times. Under ``"ofdma"`` all ``N`` share the band at once: each its
    ``W / N`` with noise ``N0 / N``, ``S N / (W log2(1 + N P_bar H / N0))``. ``inf``: an upload
    that never ends (its rate is 0 in float64).
    """
    dev = system.devices
    n = dev.num_devices
    share = n if uplink_mode == "ofdma" else 1
    with np.errstate(all="ignore"):
        rate = rates.rate_bps(
            dev.peak_power_w,
            edge_gain,
            system.bandwidth_hz / share,
            system.noise_w / share,
            system.rate_model,
        )
        upload = rates.upload_time_s(np.full(n, system.full_payload_bits), rate)
        compute = dev.full_compute_time_s()
        if uplink_mode == "tdma":
            worst = int(np.argmax(upload))
            return float(np.max(compute) + np.sum(upload)), worst
        total = compute + upload
    worst = int(np.argmax(total))
    return float(total[worst]), worst


def edge_distance_m(scenario: Scenario) -> tuple[float, str, str]:
    """The distance of a device at the cell edge from its base station, m, with the field that
    sizes the cells and how a message writes it: ``network.cell_radius_m`` for one cell; with
    ``[cells]`` in hexagonal rings, the hexagons' circumradius ``cells.inter_site_distance_m /
    sqrt 3`` (``network.cell_radius_m`` with the default spacing); with explicit sites,
    ``network.cell_radius_m`` (how far the default ``cells.area_radius_m`` reaches beyond the
    farthest site)."""
    net, cells = scenario.network, scenario.cells
    radius = float(net.cell_radius_m)
    if cells is None:
        return radius, "network.cell_radius_m", f"network.cell_radius_m = {radius:g} m"
    if cells.rings is not None:
        isd = cells.isd_m(radius)
        default = " (the default, sqrt 3 network.cell_radius_m)"
        return (
            isd / math.sqrt(3.0),
            "cells.inter_site_distance_m",
            f"hexagonal cells of cells.inter_site_distance_m = {isd:g} m"
            + (default if cells.inter_site_distance_m is None else ""),
        )
    return (
        radius,
        "cells.area_radius_m",
        f"network.cell_radius_m = {radius:g} m from a site, the reach of cells.area_radius_m "
        "beyond the farthest site by default",
    )


def check_slot_wait(
    scenario: Scenario,
    system: SystemConstants,
    channel: Channel,
    closes_at: str,
    events_per_s: dict[str, float] | None = None,
) -> None:
    """Refuse a scenario whose slots would wait longer than the clock may wait at once
    (:func:`longest_wait_s`: :data:`MAX_SLOT_WAIT_S`, or less where ``events_per_s``,
    :func:`wait_events_per_s`, makes a wait costly) for their last upload: with a scheme that
    closes the slot at the last upload (``closes_at = "last_upload"``: ``ideal``, ``only_pf``)
    and the synchronous server, when a device at the cell edge needs longer than that
    (:func:`edge_wait_s`, on the path loss alone at :func:`edge_distance_m`). A deeper fade
    during the run stops it instead (:class:`wflsim.sim.errors.SlotTooLong`).

    Raises:
        ScenarioError: naming the field farthest (in decades, in the direction that slows the
            upload) from its default, with the values of the others; or the field that makes
            waiting costly.
    """
    if closes_at != "last_upload" or scenario.server.mode != "sync":
        return
    events = events_per_s or {}
    limit_s, why = longest_wait_s(events)
    net, learning = scenario.network, scenario.learning
    edge_m, edge_field, edge_text = edge_distance_m(scenario)
    with np.errstate(all="ignore"):
        edge = float(np.asarray(channel.median_gain(np.array([edge_m])))[0])
    wait, n = edge_wait_s(system, edge, scenario.uplink.mode)
    if wait <= limit_s:
        return
    dev = system.devices
    noise_dbm = scenario.uplink.noise_dbm(net)
    noise_field = (
        "network.noise_dbm"
        if scenario.uplink.noise_psd_dbm_hz is None
        else "uplink.noise_psd_dbm_hz"
    )
    compute = float(dev.full_compute_time_s()[n])
    if why is not None and wait <= MAX_SLOT_WAIT_S:
        field = why
    elif compute > limit_s:
        field = _culprit(dev, ("cycles_per_sample", "batch_size", "cpu_hz"), n)
    else:  # the upload: how many decades each factor slows it, against its default
        slower = {
            "devices.peak_power_w": -math.log10(float(dev.peak_power_w[n])),
            noise_field: (noise_dbm + 104.0) / 10.0,
            edge_field: -math.log10(max(edge, 1e-300)) - 12.81,
            "network.bandwidth_hz": -math.log10(system.bandwidth_hz / 1e7),
        }
        if not learning.enabled:
            slower["learning.num_params"] = math.log10(system.num_params / 440_812)
        field = max(slower, key=lambda k: slower[k])
    took = "never ends" if not math.isfinite(wait) else f"takes {wait:.3g} s"
    fix = (
        "raise devices.peak_power_w or network.bandwidth_hz, lower the noise or "
        f"{edge_field}, or use a scheme that closes the slot at the deadline (e.g. "
        'scheme.name = "only_pc"); docs/scenario.md, "Slots that wait"'
    )
    if field == why:
        fix = f"{costly_wait_fix(why)}, or {fix}"
    raise ScenarioError(
        field,
        f"scheme {scenario.scheme.name!r} waits for the last upload, and at the cell edge "
        f"({edge_text}) device {n}'s slot {took} "
        f"(compute {compute:.3g} s, then {system.full_payload_bits:,.0f} bits at "
        f"devices.peak_power_w = {float(dev.peak_power_w[n]):g} W over "
        f"{noise_field} = {noise_dbm:g} dBm and network.bandwidth_hz = "
        f"{system.bandwidth_hz:g} Hz); {wait_limit_text('a slot', limit_s, why, events)}",
        fix,
    )


#: Mean distance between two points drawn uniformly in a disc of radius R, over R:
#: ``128 / (45 pi)`` (the mean random-waypoint leg, its start and end both uniform in the disc).
MEAN_LEG_OVER_RADIUS = 128.0 / (45.0 * math.pi)


def wait_events_per_s(
    mobility: Mobility | None, availability: Availability | None, simulated_clock: bool
) -> dict[str, float]:
    """The events each second of simulated time costs on average, all devices together, by the
    field that sets them: ``availability.online_s`` (``markov``: two changes per on-off cycle,
    ``2 / (a E[on] + b E[off])`` per device with its scales ``a``, ``b``) and, with
    ``simulated_clock``, ``mobility.speed_mps`` (random waypoint: one leg per ``E[L] E[1/v] +
    pause`` s per device, ``E[L] = 128 R / (45 pi)`` in a disc of radius ``R``, ``E[1/v] =
    ln(hi / lo) / (hi - lo)`` for speeds uniform in ``[lo, hi]``). Fields that cost nothing
    over a wait are absent (``always``, traces, static devices, the nominal clock)."""
    out: dict[str, float] = {}
    if isinstance(availability, MarkovAvailability):
        cfg = availability.config
        cycle_s = (
            availability.online_scale * cfg.online_s.expected_s()
            + availability.offline_scale * cfg.offline_s.expected_s()
        )
        with np.errstate(divide="ignore"):
            out["availability.online_s"] = float(np.sum(2.0 / cycle_s))
    if simulated_clock and isinstance(mobility, RandomWaypoint):
        lo, hi = mobility.speed_range_mps
        inverse_speed = 1.0 / lo if hi == lo else math.log(hi / lo) / (hi - lo)
        leg_s = MEAN_LEG_OVER_RADIUS * mobility.radius_m * inverse_speed + mobility.pause_s
        out["mobility.speed_mps"] = mobility.num_devices / leg_s
    return out


def longest_wait_s(events_per_s: dict[str, float]) -> tuple[float, str | None]:
    """The longest the simulated clock may wait at once, s: :data:`MAX_SLOT_WAIT_S`, or less
    where the wait would cost more than :data:`MAX_WAIT_EVENTS` events on average
    (:func:`wait_events_per_s`); with the field that sets the limit (None: the time cap)."""
    rate = sum(events_per_s.values())
    if rate > 0 and MAX_WAIT_EVENTS / rate < MAX_SLOT_WAIT_S:
        return MAX_WAIT_EVENTS / rate, max(events_per_s, key=lambda k: events_per_s[k])
    return MAX_SLOT_WAIT_S, None


def wait_limit_text(
    what: str, limit_s: float, why: str | None, events_per_s: dict[str, float]
) -> str:
    """Why ``what`` (``"a slot"``) may wait at most ``limit_s``, for an error message."""
    if why is None:
        return f"{what} may wait at most {MAX_SLOT_WAIT_S:g} s"
    rate = sum(events_per_s.values())
    what = "availability changes" if why.startswith("availability") else "random-waypoint legs"
    return (
        f"{what} may wait at most {limit_s:.3g} s here: the devices make "
        f"{rate:.3g} events per s ({what} set by {why}), and a wait may cost at most "
        f"{MAX_WAIT_EVENTS:,} of them"
    )


def costly_wait_fix(why: str) -> str:
    """How to make a wait cost fewer events, for the field :func:`longest_wait_s` names."""
    if why.startswith("availability"):
        return "lengthen availability.online_s and offline_s"
    return 'lower mobility.speed_mps, raise mobility.pause_s, or use mobility.clock = "nominal"'
