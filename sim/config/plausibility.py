"""Plausibility of a validated scenario: values inside a field's range that are unusual for its
unit, and the unit slip that likely made them (``run.deadline_s = 100``: milliseconds given as
seconds; ``network.noise_dbm = 1e-13``: watts given as dBm).

Validation (:mod:`wflsim.sim.config.schema`) refuses what is impossible; this module flags what is
possible but improbable. The rules are data, :data:`RULES`: per field a plausible range, why,
and the units a value beyond each end was likely given in. :func:`findings` checks every value a
scenario can produce against them (a number, every value of a list, the bounds of a
distribution). ``docs/scenario.md`` ("Plausibility warnings") holds :func:`markdown_table`'s
output (a test keeps the two equal). Pure: no warnings, no I/O; the application
(``wflsim.app.scenario``) turns findings into warnings, or with ``strict`` into errors.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from ..world.system import DeviceArrays
from .distributions import Choice, LogUniform, Normal, Uniform
from .schema import Scenario

#: A normal law without clipping is checked at mean -/+ this many standard deviations
#: (99.7 % of its draws lie between).
NORMAL_SPREAD_STD = 3.0


@dataclass(frozen=True)
class Slip:
    """A unit a value may have been given in by mistake.

    Attributes:
        unit: the unit as the message writes it (``"ms"``).
        name: the unit's name in the question (``"milliseconds"``).
        scale: linear units: the value in the field's unit is the given value x ``scale``.
        kind: ``"scale"`` (linear), ``"w_to_dbm"`` (a power in W given for dBm:
            10 log10(x) + 30) or ``"dbm_to_w"`` (a power in dBm given for W: 10^(x/10) / 1000).
    """

    unit: str
    name: str
    scale: float = 1.0
    kind: Literal["scale", "w_to_dbm", "dbm_to_w"] = "scale"

    def text(self) -> str:
        """The slip as the docs' table writes it: ``ms (x 0.001)``, ``W (10 log10(x) + 30)``."""
        how = {
            "scale": f"x {_num(self.scale)}",
            "w_to_dbm": "10 log10(x) + 30",
            "dbm_to_w": "10^(x/10) / 1000",
        }[self.kind]
        return f"{self.unit or self.name} ({how})"

    def convert(self, value: float) -> float:
        """``value`` read in this unit, in the field's unit (NaN where it has no meaning)."""
        if self.kind == "w_to_dbm":
            return 10.0 * math.log10(value) + 30.0 if value > 0 else math.nan
        if self.kind == "dbm_to_w":  # above 3000 dBm: beyond any float (and any range)
            return 10.0 ** (value / 10.0) / 1000.0 if value <= 3000.0 else math.inf
        return value * self.scale


@dataclass(frozen=True)
class Limit:
    """One end of a plausible range.

    Attributes:
        bound: the end, in the field's unit (a value beyond it is a finding; the end itself is
            plausible).
        problem: why a value beyond it is implausible (``"unusual for a round deadline"``).
        slips: the units such a value was likely given in, most likely first; the message
            suggests the first whose conversion lands in the plausible range.
        otherwise: the fix when no slip lands in the range (default: the plausible range).
    """

    bound: float
    problem: str
    slips: tuple[Slip, ...] = ()
    otherwise: str = ""


@dataclass(frozen=True)
class Rule:
    """The plausible range of one field.

    Attributes:
        field: dotted name of the field (``"devices.cpu_hz"``).
        unit: the field's unit as messages write it (``"Hz"``; ``""`` for none).
        low: the lower end (None: no lower end).
        high: the upper end (None: no upper end).
        reason: one line for the docs: where the range comes from.
        zero_ok: 0 is a deliberate setting (``devices.capacitance = 0``: free computation),
            never a slip.
    """

    field: str
    unit: str
    low: Limit | None
    high: Limit | None
    reason: str
    zero_ok: bool = False

    def range_text(self) -> str:
        """``0.001 to 10 s``, ``at most 50 m/s``, ``at least 1 m``."""
        unit = f" {self.unit}" if self.unit else ""
        if self.low is not None and self.high is not None:
            return f"{_num(self.low.bound)} to {_num(self.high.bound)}{unit}"
        if self.high is not None:
            return f"at most {_num(self.high.bound)}{unit}"
        assert self.low is not None
        return f"at least {_num(self.low.bound)}{unit}"

    def contains(self, value: float) -> bool:
        """Whether ``value`` is plausible (the ends included)."""
        if self.zero_ok and value == 0:
            return True
        above = self.low is None or value >= self.low.bound
        return above and (self.high is None or value <= self.high.bound)


_MS = Slip("ms", "milliseconds", 1e-3)
_US = Slip("µs", "microseconds", 1e-6)
_KM = Slip("km", "kilometres", 1e3)
_KHZ = Slip("kHz", "kHz", 1e3)
_MHZ = Slip("MHz", "MHz", 1e6)

#: The plausibility rules, one per field (``docs/scenario.md``, "Plausibility warnings", is
#: :func:`markdown_table` of them). Ranges are deliberately wider than the studies of the
#: literature; what lies beyond is usually a unit slip.
RULES: tuple[Rule, ...] = (
    Rule(
        "run.deadline_s",
        "s",
        Limit(1e-3, "too short for a computation and an upload in one round"),
        Limit(10.0, "unusual for a round deadline in wireless FL", (_MS, _US)),
        "rounds of wireless FL last milliseconds to seconds (the paper: 0.8 s)",
    ),
    Rule(
        "network.noise_dbm",
        "dBm",
        Limit(
            -144.0,
            "below the thermal noise over any usable band (-174 dBm/Hz over 1 kHz)",
            otherwise="did you give a density in dBm/Hz? set it as uplink.noise_psd_dbm_hz",
        ),
        Limit(
            -50.0,
            "far above a receiver's noise (-174 dBm/Hz plus a noise figure: -104 dBm over 10 MHz)",
            (Slip("W", "watts", kind="w_to_dbm"),),
        ),
        "thermal noise is -174 dBm/Hz: -144 dBm over 1 kHz, -74 dBm over 1 GHz",
    ),
    Rule(
        "uplink.noise_psd_dbm_hz",
        "dBm/Hz",
        Limit(-175.0, "below the thermal noise density at room temperature (-174 dBm/Hz)"),
        Limit(
            -140.0,
            "above -174 dBm/Hz plus any receiver's noise figure",
            otherwise="did you give the noise power over the band in dBm? set it as "
            "network.noise_dbm",
        ),
        "thermal noise is -174 dBm/Hz; receivers add a noise figure of 5 to 30 dB",
    ),
    Rule(
        "network.bandwidth_hz",
        "Hz",
        Limit(1e3, "narrower than any channel that uploads a model", (_MHZ, _KHZ)),
        Limit(1e10, "wider than any radio channel (5G mmWave carriers are 400 MHz)"),
        "channels are 180 kHz (NB-IoT) to 400 MHz (5G mmWave); the paper: 10 MHz",
    ),
    Rule(
        "network.cell_radius_m",
        "m",
        Limit(10.0, "smaller than any cell", (_KM,)),
        Limit(35_000.0, "larger than the largest macro cells (about 35 km)"),
        "femtocells reach 10 to 50 m, macro cells up to about 35 km; the paper: 1000 m",
    ),
    Rule(
        "network.min_distance_m",
        "m",
        Limit(1.0, "closer than any antenna separation the path-loss models hold for", (_KM,)),
        None,
        "path-loss models hold from about 1 m (indoor) or 10 m (3GPP outdoor); the paper: 10 m",
    ),
    Rule(
        "devices.cpu_hz",
        "Hz",
        Limit(1e6, "slower than any processor that trains a model", (_MHZ, _KHZ)),
        Limit(1e10, "faster than any CPU clock"),
        "CPUs run at 1e8 to 6e9 Hz, microcontrollers from about 1e7; the paper: 2e9",
    ),
    Rule(
        "devices.cycles_per_sample",
        "cycles",
        Limit(
            1e3, "fewer than any network needs per sample", (Slip("Mcycles", "megacycles", 1e6),)
        ),
        Limit(
            1e11,
            "more than a device spends on one sample (ResNet-50 needs about 1e10)",
            otherwise="did you give the cycles of a whole batch? c counts one sample "
            "(devices.batch_size gives the samples)",
        ),
        "a small MLP needs about 1e4 cycles per sample, MNIST CNNs 1e6 to 1e7; the paper: 2e6",
    ),
    Rule(
        "devices.capacitance",
        "",
        Limit(1e-29, "below any measured effective capacitance"),
        Limit(1e-25, "above any measured effective capacitance"),
        "measured values are 1e-28 to 1e-26 (0, free computation, is allowed)",
        zero_ok=True,
    ),
    Rule(
        "devices.batch_size",
        "samples",
        Limit(
            1.0,
            "rounds to 1 sample",
            otherwise="batch_size counts samples per local gradient, not a share of the data",
        ),
        Limit(1e5, "more samples per local gradient than a device holds"),
        "minibatches are 1 to a few thousand samples; the paper: 512",
    ),
    Rule(
        "devices.peak_power_w",
        "W",
        Limit(1e-6, "weaker than any radio transmitter (-30 dBm)"),
        Limit(
            10.0,
            "above what a device transmits (phones: at most 0.2 W = 23 dBm)",
            (Slip("dBm", "dBm", kind="dbm_to_w"), Slip("mW", "milliwatts", 1e-3)),
        ),
        "devices transmit 1e-5 W (-20 dBm) to 0.2 W (23 dBm); the paper: 1 W",
    ),
    Rule(
        "devices.energy_budget_j",
        "J",
        Limit(1e-4, "too little for any computation or upload in a slot"),
        Limit(
            100.0,
            "per slot, more than a device spends (100 W over a 1 s round)",
            (Slip("mJ", "millijoules", 1e-3),),
        ),
        "a budget per slot: the paper's 0.30 to 0.45 J over 0.8 s rounds",
    ),
    Rule(
        "mobility.speed_mps",
        "m/s",
        None,
        Limit(50.0, "faster than road traffic (180 km/h)", (Slip("km/h", "km/h", 1 / 3.6),)),
        "pedestrians walk about 1.4 m/s, cars drive up to about 40 m/s",
    ),
    Rule(
        "channel.pathloss.slope_db",
        "dB/decade",
        Limit(
            15.0,
            "flatter than any measured path loss",
            (Slip("", "the path-loss exponent", 10.0),),
        ),
        Limit(70.0, "steeper than any measured path loss"),
        "10 x the path-loss exponent, measured 2 to 6; the paper: 37.6",
    ),
    Rule(
        "channel.shadowing.decorrelation_m",
        "m",
        Limit(1.0, "shorter than any measured decorrelation distance", (_KM,)),
        Limit(1000.0, "longer than any measured decorrelation distance"),
        "measured decorrelation distances are 10 to 100 m (TR 38.901: 10 to 50 m)",
    ),
)


@dataclass(frozen=True)
class Finding:
    """A value that passes validation but is implausible for its unit.

    Attributes:
        field: dotted name of the value, with its place in a list or distribution
            (``"devices.cpu_hz"``, ``"devices.cpu_hz[3]"``, ``"devices.cpu_hz.low"``).
        value: the value, in the field's unit.
        problem: what is implausible (``"100 s is above 10 s: unusual for a round deadline"``).
        fix: the likely unit slip, or the plausible range.
    """

    field: str
    value: float
    problem: str
    fix: str

    def one_line(self) -> str:
        """``field: problem (fix)``."""
        return f"{self.field}: {self.problem} ({self.fix})"


def findings(scenario: Scenario) -> list[Finding]:
    """Every implausible value of ``scenario``, in the order of :data:`RULES`: for each rule and
    each place its field holds values (the number; a list, as one finding per end naming the
    first value beyond it and how many more are; a uniform, log-uniform or clipped normal
    law's ``low`` and ``high``; an unclipped normal's mean -/+ 3 std; a choice's ``values``).
    Fields a scenario does not have (``channel.shadowing`` absent, a path-loss model without
    ``slope_db``) and text values (``"3gpp"``) are skipped.
    """
    out: list[Finding] = []
    for rule in RULES:
        for where, values in _places(_lookup(scenario, rule.field), rule.field):
            out.extend(_check(rule, where, values))
    return out


#: A stale server whose step per applied update exceeds the synchronous server's by more than
#: this factor (:meth:`~wflsim.sim.servers.config.ServerConfig.step_ratio`) is flagged: "a few
#: times" the step the learning rate was tuned for. Measured on the quick start (async,
#: ``buffer_size = 5``, 30 devices): ratio 6 (``server_lr = 1``) ends at accuracy 0.12, ratio 1
#: reaches 0.93 (docs/decisions.md, "Warnings across fields").
MAX_STEP_RATIO = 3.0

#: A device whose full computation (``c' B E_n / f``, nothing frozen) takes at least this share
#: of ``run.deadline_s`` is flagged: the upload is left a tenth of the slot or less, too little
#: for any power up to the peak from most of the cell, so a slot that freezes nothing (every
#: slot of a scheme that never freezes, the paper's controller's first frame) may pass without
#: a participant (docs/decisions.md, "Idle slots").
COMPUTE_FILL_SHARE = 0.9


def cross_findings(scenario: Scenario, devices: DeviceArrays) -> list[Finding]:
    """Findings that no field shows alone, only the fields together (``docs/scenario.md``,
    "Warnings across fields"), on the resolved devices and channel:

    * a shared uplink (``ofdma``, ``tdma``) with ``planned_concurrent_uploads = 1`` and more
      than one device: the controller plans every upload alone on the whole band W that up to
      N uploads share, so uploads planned to end at the deadline end after it;
    * a stale server (``semi_sync``, ``async``) whose step per applied update is more than
      :data:`MAX_STEP_RATIO` times the synchronous one (``server_lr`` against
      ``buffer_size / N``);
    * a device whose full computation takes at least :data:`COMPUTE_FILL_SHARE` of the
      deadline: a slot that freezes nothing leaves its upload too little time;
    * cells that share a band planned on the noise alone (``cells.plan_on = "noise"``, the
      default): their interference is left out of every required power, so uploads planned to
      end at the deadline end after it.

    A deadline shorter than a device's full computation is an error, not a finding
    (:func:`wflsim.sim.config.resolve.check_deadline`). The scenario's channel and model size
    are not read: a deadline too short for an upload from the cell edge on the median channel
    is the paper's own setting (the scheme waits for a good fade), not a slip.

    Args:
        devices: the resolved devices with their local steps and the strategy's extra cycles,
            ``(N,)`` per field.
    """
    out: list[Finding] = []
    out.extend(_compute_fill(scenario, devices))
    out.extend(_co_band_on_noise(scenario))
    n = devices.num_devices
    up, server = scenario.uplink, scenario.server
    if up.mode in ("ofdma", "tdma") and up.planned_concurrent_uploads == 1 and n > 1:
        out.append(
            Finding(
                "uplink.planned_concurrent_uploads",
                1.0,
                f"1 with uplink.mode = {up.mode!r} and {n} devices: the controller plans each "
                "upload alone on the whole band W, which up to "
                f"{n} uploads share, so uploads planned to end at the deadline arrive late",
                f"set it to the expected number of concurrent uploads, at most {n} "
                "(docs/scenario.md, [uplink])",
            )
        )
    ratio = server.step_ratio(n)
    if ratio > MAX_STEP_RATIO:
        same = 1.0 if server.mode == "semi_sync" else server.buffer_size / n
        out.append(
            Finding(
                "server.server_lr",
                float(server.server_lr),
                f"{_num(server.server_lr)} under mode = {server.mode!r}"
                + (
                    f" with buffer_size = {server.buffer_size} and {n} devices"
                    if server.mode == "async"
                    else ""
                )
                + f": each applied update moves the model {_num(ratio)} times as far as under "
                "the synchronous server, with the learning rate tuned for it",
                f"server_lr = {_num(same)} gives the synchronous step per update; or lower "
                "learning.lr",
            )
        )
    return out


def _compute_fill(scenario: Scenario, devices: DeviceArrays) -> list[Finding]:
    """The finding of a device whose full computation takes :data:`COMPUTE_FILL_SHARE` of the
    deadline or more (none below it)."""
    deadline = scenario.run.deadline_s
    t = devices.full_compute_time_s()
    worst = int(np.argmax(t))
    if t[worst] < COMPUTE_FILL_SHARE * deadline:
        return []
    lc = scenario.learning
    steps = int(devices.local_steps[worst])
    if lc.local_epochs is not None:
        field, fix = "learning.local_epochs", "fewer local epochs (or learning.local_steps)"
    elif steps > 1:
        field, fix = "learning.local_steps", "fewer local steps"
    else:
        field, fix = "run.deadline_s", "a longer deadline"
    return [
        Finding(
            field,
            float(steps if field != "run.deadline_s" else deadline),
            f"device {worst}'s full computation of {steps} local step(s) takes "
            f"{_num(float(t[worst]))} s of the {_num(deadline)} s deadline, leaving "
            f"{_num(deadline - float(t[worst]))} s for its upload: a slot that freezes nothing "
            "(every slot of a scheme that never freezes, the paper's controller's first frame) "
            "may need more than the peak power and pass without a participant",
            f"{fix}, or raise run.deadline_s or devices.cpu_hz",
        )
    ]


def _co_band_on_noise(scenario: Scenario) -> list[Finding]:
    """The finding of cells that share a band planned on the noise alone (none otherwise)."""
    cells = scenario.cells
    if cells is None or cells.plan_on != "noise":
        return []
    from ..radio.cells.config import cell_uplink_mode
    from ..radio.cells.layout import build_layout

    layout = build_layout(
        cells, scenario.network.cell_radius_m, cell_uplink_mode(scenario.uplink.mode)
    )
    if not layout.interferes:
        return []
    pairs = int(layout.co_band.sum()) // 2
    return [
        Finding(
            "cells.plan_on",
            0.0,
            f'"noise" with {layout.num_cells} cells of which {pairs} pair(s) share a band: the '
            "controller plans every upload on the noise alone while the co-band cells' uploads "
            "interfere, so uploads planned to end at the deadline end after it (most are lost)",
            'set it to "mean_interference" (or "margin" with cells.margin_db), or separate the '
            "bands (cells.reuse_factor)",
        )
    ]


def _lookup(scenario: Scenario, field: str) -> Any:
    """The value at the dotted ``field`` (None if the scenario has no such field)."""
    value: Any = scenario
    for part in field.split("."):
        value = getattr(value, part, None)
        if value is None:
            return None
    return value


def _places(value: Any, field: str) -> Iterator[tuple[str, np.ndarray]]:
    """``(name, values)`` for every place ``value`` holds numbers: ``(field, [x])`` for a
    number, ``(field[i] prefix, the list)`` for a list or tuple (the name gets the index of
    the value reported), a distribution's parameters as ``field.low`` etc."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return
    if isinstance(value, int | float):
        yield field, np.array([float(value)])
    elif isinstance(value, list | tuple):
        yield f"{field}[]", np.asarray(value, dtype=np.float64)
    elif isinstance(value, Uniform | LogUniform):
        yield f"{field}.low", np.array([value.low])
        yield f"{field}.high", np.array([value.high])
    elif isinstance(value, Normal):
        spread = NORMAL_SPREAD_STD * value.std
        for end, clip, sign in (("low", value.low, -1.0), ("high", value.high, 1.0)):
            bulk = value.mean + sign * spread
            if clip is not None and sign * (bulk - clip) >= 0:  # clipped inside the bulk
                yield f"{field}.{end}", np.array([clip])
            else:
                yield f"{field} (mean {'-+'[sign > 0]} {NORMAL_SPREAD_STD:g} std)", np.array([bulk])
    elif isinstance(value, Choice):
        yield f"{field}.values[]", np.asarray(value.values, dtype=np.float64)


def _check(rule: Rule, where: str, values: np.ndarray) -> Iterator[Finding]:
    """The findings of the values at ``where`` (``...[]``: a list, named by the first value
    beyond each end), at most one per end."""
    zero = (values == 0) if rule.zero_ok else np.zeros(values.shape, dtype=bool)
    for limit, beyond, word in (
        (rule.low, lambda b: values < b, "below"),
        (rule.high, lambda b: values > b, "above"),
    ):
        if limit is None:
            continue
        bad = beyond(limit.bound) & ~zero
        if not bad.any():
            continue
        i = int(np.argmax(bad))
        value = float(values[i])
        field = where[:-2] + f"[{i}]" if where.endswith("[]") else where
        unit = f" {rule.unit}" if rule.unit else ""
        problem = f"{_num(value, 6)}{unit} is {word} {_num(limit.bound)}{unit}: {limit.problem}"
        more = int(bad.sum()) - 1
        if more:
            problem += f" (and {more} more value{'s' if more > 1 else ''} of the list)"
        yield Finding(field, value, problem, _fix(rule, limit, value))


def _fix(rule: Rule, limit: Limit, value: float) -> str:
    """The first slip of ``limit`` that makes ``value`` plausible, as a question; else the
    limit's own fix, else the plausible range."""
    unit = f" {rule.unit}" if rule.unit else ""
    for slip in limit.slips:
        converted = slip.convert(value)
        if math.isfinite(converted) and rule.contains(converted):
            given = f"{_num(value, 6)} {slip.unit}".rstrip()
            return f"did you give {slip.name}? {given} is {_num(converted)}{unit}"
    if limit.otherwise:
        return limit.otherwise
    return f"plausible values are {rule.range_text()}; check the value and its unit"


def _num(x: float, digits: int = 3) -> str:
    """``x`` rounded to ``digits`` significant digits, written out up to 6 digits and with a
    short exponent beyond (``0.2``, ``5000``, ``1e7``, ``2.5e-13``, ``-100``)."""
    if x != 0 and math.isfinite(x):
        x = round(x, digits - 1 - math.floor(math.log10(abs(x))))
    text = f"{x:.6g}"
    mantissa, e, exponent = text.partition("e")
    if not e:
        return text
    sign = "-" if exponent.startswith("-") else ""
    return f"{mantissa}e{sign}{exponent.lstrip('+-').lstrip('0') or '0'}"


def markdown_table() -> str:
    """The rules as the Markdown table of ``docs/scenario.md`` ("Plausibility warnings")."""
    lines = [
        "| field | plausible | below it, likely given in | above it, likely given in | why |",
        "|---|---|---|---|---|",
    ]
    for rule in RULES:
        lines.append(
            f"| `{rule.field}` | {rule.range_text()} | {_slips_text(rule.low)} | "
            f"{_slips_text(rule.high)} | {rule.reason} |"
        )
    return "\n".join(lines) + "\n"


def _slips_text(limit: Limit | None) -> str:
    if limit is None:
        return "-"
    names = [s.text() for s in limit.slips]
    if limit.otherwise:
        names.append(limit.otherwise)
    return "; ".join(names) or "-"
