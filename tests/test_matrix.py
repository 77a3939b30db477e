"""The combination matrix: server mode x uplink x availability x scheme x training x trace level
x cells.

Each cell is a small scenario that either runs to its end or is refused, before anything runs,
with a one-line :class:`~wflsim.sim.errors.ScenarioError` that names the field. A refusal must be
listed in :data:`REFUSED` (over the air: stale updates and digital payloads, with their physical
reasons); a cell refused for anything else, or a listed cell that runs, fails its test (so the
table stays the truth).

The default run covers the 960 cells in one cell without ns-3 (480 network only, 480 with
training on the digits MLP) and 12 of the 480 over ns-3's LTE; ``pytest -m slow`` the 960 on
two cells' edge servers and the other 468 over ns-3 (2,400 cells in all). The cells dimension: one cell, or two sites on one band (the uplink
dimension in each cell, inter-cell interference, devices that may hand over) whose base
stations are edge servers under a cloud every 2 slots ([server.hierarchy]: one edge model per
cell, the server mode per edge). The [privacy] cells: each mechanism (central, local, over the
air) x server mode x uplink x availability x scheme (its update rule) x training x trace level,
and each mechanism x strategy x scheme over a digital uplink and over the air; a cell runs with a
finite epsilon or is refused in one line naming its cause (:func:`private_refusal`, written from
docs/privacy.md's table): 9 in the default run, the other 3,471 and 12 on edge servers with
``-m slow``. ``python tests/test_matrix.py`` prints the whole matrix: how many cells run, how
many are refused, and why.
"""

from __future__ import annotations

import itertools
import math
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from conftest import run_in_memory  # noqa: E402
from wflsim.sim.errors import ScenarioError  # noqa: E402
from wflsim.sim.registry import SCHEMES  # noqa: E402

SERVERS = ("sync", "semi_sync", "async")
UPLINKS = ("dedicated", "ofdma", "tdma", "aircomp", "ns3_lte")
AVAILABILITY = (False, True)
LEVELS = ("events", "device_slots")
CELLS = ("one", "two")


def scenario(
    server: str,
    uplink: str,
    churn: bool,
    scheme: str,
    training: bool,
    level: str,
    cells: str = "one",
) -> dict[str, Any]:
    """The cell's scenario: 5 devices, 2 frames of 3 slots, fading, unequal batches."""
    data: dict[str, Any] = {
        "name": "matrix",
        "seed": 7,
        "run": {"frames": 2, "slots_per_frame": 3, "deadline_s": 0.2},
        "network": {"num_devices": 5, "cell_radius_m": 500.0, "bandwidth_hz": 2e6},
        "channel": {"fading": "rayleigh"},
        "mobility": {"model": "static"},
        "devices": {"batch_size": [16, 16, 24, 24, 32], "energy_budget_j": 0.05},
        "learning": {"dataset": "digits", "model": "mlp", "lr": 0.3, "eval_every_slots": 3}
        if training
        else {"enabled": False, "dataset": "digits", "model": "mlp"},
        "scheme": {"name": scheme},
        "trace": {"level": level},
    }
    if server == "async":
        data["server"] = {"mode": "async", "buffer_size": 2}
    elif server == "semi_sync":
        data["server"] = {"mode": "semi_sync"}
    if uplink != "dedicated":
        data["uplink"] = {"mode": uplink, "planned_concurrent_uploads": 2}
    if uplink == "ns3_lte":  # LTE's channel nearest the others' 2 MHz: 3 MHz, 15 resource blocks
        data["network"]["bandwidth_hz"] = 3e6
    if churn:
        data["availability"] = {
            "model": "markov",
            "online_s": {"dist": "exponential", "mean": 0.5},
            "offline_s": {"dist": "exponential", "mean": 0.2},
        }
    if cells == "two":
        data["cells"] = {"sites_m": [[-250.0, 0.0], [250.0, 0.0]], "hysteresis_db": 0.0}
        data["mobility"] = {"model": "random_waypoint", "speed_mps": [50.0, 100.0]}
        data.setdefault("server", {})["hierarchy"] = {
            "cloud_every_slots": 2,
            "backhaul_latency_s": 0.02,
            "backhaul_energy_j_per_bit": 1e-9,
        }
    return data


#: Schemes whose uploads are digital payloads (quantised bits, Top-K with indices): an
#: over-the-air sum carries real values on common symbols (docs/aircomp.md).
DIGITAL_UPLOADS = ("fedhq", "topk_ef")
#: Schemes that promise no outage (a synchronous slot waits for its last upload): over ns-3's
#: LTE a device below the lowest MCS never arrives on a channel fixed within the slot.
NO_OUTAGE = ("ideal", "only_pf")


def _refused() -> dict[tuple[Any, ...], str]:
    """Over the air (docs/aircomp.md): stale updates have no common transmission instant
    (``server.mode``); quantised and Top-K uploads are digital (``scheme.name``). Over ns-3's
    LTE (docs/ns3.md): a synchronous slot that waits for its last upload (``scheme.name``)."""
    out: dict[tuple[Any, ...], str] = {}
    for server, churn, scheme, training, level, layout in itertools.product(
        SERVERS, AVAILABILITY, sorted(SCHEMES), (False, True), LEVELS, CELLS
    ):
        key = (server, "aircomp", churn, scheme, training, level, layout)
        if server != "sync":
            out[key] = "server.mode"
        elif scheme in DIGITAL_UPLOADS:
            out[key] = "scheme.name"
        if server == "sync" and scheme in NO_OUTAGE:
            out[(server, "ns3_lte", churn, scheme, training, level, layout)] = "scheme.name"
    return out


#: What the matrix refuses, by (server, uplink, churn, scheme, training, level, cells) -> the field
REFUSED: dict[tuple[Any, ...], str] = _refused()


def expected_refusal(
    server: str, uplink: str, churn: bool, scheme: str, training: bool, level: str, cells: str
) -> str | None:
    """The field a cell is refused on (None: it runs)."""
    return REFUSED.get((server, uplink, churn, scheme, training, level, cells))


def cells(training: bool, layouts: tuple[str, ...] = CELLS) -> list[tuple[Any, ...]]:
    """Every cell of the matrix with or without training (in the layouts ``layouts``)."""
    return list(
        itertools.product(
            SERVERS,
            UPLINKS,
            AVAILABILITY,
            sorted(SCHEMES),
            (training,),
            LEVELS,
            layouts,
        )
    )


def outcome(cell: tuple[Any, ...]) -> tuple[str, str]:
    """``("ran", "")`` or ``("refused", "field: message")`` for one cell."""
    try:
        run_in_memory(scenario(*cell))
    except ScenarioError as err:
        assert err.field and str(err).startswith(f"{err.field}: "), str(err)
        return "refused", str(err)
    return "ran", ""


def _check(cell: tuple[Any, ...]) -> None:
    kind, message = outcome(cell)
    field = expected_refusal(*cell)
    if field is None:
        assert kind == "ran", f"{cell}: refused ({message})"
        return
    assert kind == "refused", f"{cell}: ran, but {field} is expected to refuse it"
    assert message.startswith(f"{field}:") and "\n" not in message, message


def _ids(cells_: list[tuple[Any, ...]]) -> list[str]:
    return ["-".join(str(x) for x in c) for c in cells_]


def _digital(cells_: list[tuple[Any, ...]], ns3: bool) -> list[tuple[Any, ...]]:
    """The cells over ns-3's LTE (``ns3``) or over the other uplinks."""
    return [c for c in cells_ if (c[1] == "ns3_lte") == ns3]


#: The ns-3 cells of the default run (the rest run with the slow tests): every server mode and
#: availability, each with the paper's scheme network only at trace level events and a
#: no-outage scheme (refused under sync) with training at trace level device_slots.
NS3_DEFAULT = [
    (server, "ns3_lte", churn, scheme, training, level, "one")
    for server, churn, (scheme, training, level) in itertools.product(
        SERVERS,
        AVAILABILITY,
        (("two_timescale", False, "events"), ("ideal", True, "device_slots")),
    )
]


@pytest.mark.parametrize(
    "cell",
    _digital(cells(False, ("one",)), False),
    ids=_ids(_digital(cells(False, ("one",)), False)),
)
def test_network_only_cell_runs_or_is_refused_with_its_field(cell):
    """A network-only cell runs to its end, or is refused in one line naming the expected field."""
    _check(cell)


@pytest.mark.slow
@pytest.mark.parametrize(
    "cell",
    _digital(cells(False, ("two",)), False),
    ids=_ids(_digital(cells(False, ("two",)), False)),
)
def test_network_only_cell_with_edge_servers_runs_or_is_refused_with_its_field(cell):
    """A network-only cell on two cells' edge servers runs, or is refused in one line naming the expected field."""
    _check(cell)


@pytest.mark.parametrize(
    "cell", _digital(cells(True, ("one",)), False), ids=_ids(_digital(cells(True, ("one",)), False))
)
def test_training_cell_runs_or_is_refused_with_its_field(cell):
    """A cell with training (digits MLP) runs, or is refused in one line naming the expected field."""
    _check(cell)


@pytest.mark.parametrize("cell", NS3_DEFAULT, ids=_ids(NS3_DEFAULT))
def test_ns3_cell_runs_or_is_refused_with_its_field(cell, ns3):
    """A cell over ns-3's LTE runs, or is refused in one line naming the expected field."""
    _check(cell)


_NS3_REST = [c for c in _digital(cells(False) + cells(True), True) if c not in NS3_DEFAULT]


@pytest.mark.slow
@pytest.mark.parametrize("cell", _NS3_REST, ids=_ids(_NS3_REST))
def test_every_other_ns3_cell_runs_or_is_refused_with_its_field(cell, ns3):
    """Every other cell over ns-3's LTE (both layouts) runs, or is refused in one line naming the
    expected field."""
    _check(cell)


@pytest.mark.slow
@pytest.mark.parametrize(
    "cell", _digital(cells(True, ("two",)), False), ids=_ids(_digital(cells(True, ("two",)), False))
)
def test_training_cell_with_edge_servers_runs_or_is_refused_with_its_field(cell):
    """A cell with training on two cells' edge servers runs, or is refused in one line naming the expected field."""
    _check(cell)


# ------------------------------------------------------------------ [privacy]

#: ``[privacy] mechanism``
MECHANISMS = ("central", "local", "over_the_air")
#: The uplinks of the privacy cells (ns-3's LTE carries the digital mechanisms as any uplink)
PRIVACY_UPLINKS = ("dedicated", "ofdma", "tdma", "aircomp")
#: The server strategies (``strategy.name``)
STRATEGY_NAMES = (
    "fedadagrad", "fedadam", "fedavg", "fedavgm", "fedmedian", "fednova", "fedprox",
    "fedtrimmedavg", "fedyogi", "krum", "scaffold",
)  # fmt: skip
#: The update rule a scheme sends that a mechanism's sensitivity does not cover
RULE_OF = {"fedhq": "quantisation", "topk_ef": "topk_ef"}
#: Refused by mechanism (docs/privacy.md, "What composes"): a rule whose message shows more than
#: the clipped update (local) or whose weights depend on the raw update (central), and
#: aggregates of another sensitivity than the weighted mean's (central, over the air)
PRIVATE_RULES = {"local": ("topk_ef", "quantisation"), "central": ("quantisation",)}
_OTHER_SENSITIVITY = ("fedmedian", "fedtrimmedavg", "krum", "fednova", "scaffold")
PRIVATE_STRATEGIES = {
    "central": _OTHER_SENSITIVITY,
    "over_the_air": _OTHER_SENSITIVITY,
    "local": ("scaffold",),
}
#: Strategies an over-the-air sum cannot serve (each device's update is needed), without privacy
AIR_STRATEGIES = ("fedmedian", "fedtrimmedavg", "krum", "scaffold")


def private_scenario(
    mechanism: str,
    server: str,
    uplink: str,
    churn: bool,
    scheme: str,
    strategy: str,
    training: bool,
    level: str,
    cells: str = "one",
) -> dict[str, Any]:
    """The cell's scenario with ``[privacy]``: clip 1, noise multiplier 1."""
    data = scenario(server, uplink, churn, scheme, training, level, cells)
    data["privacy"] = {"mechanism": mechanism, "clip_norm": 1.0, "noise_multiplier": 1.0}
    if strategy != "fedavg":
        data["strategy"] = {"name": strategy}
    return data


def private_refusal(
    mechanism: str,
    server: str,
    uplink: str,
    churn: bool,
    scheme: str,
    strategy: str,
    training: bool,
    level: str,
    cells: str = "one",
) -> tuple[str, str] | None:
    """(the field, a word its reason must name) a privacy cell is refused on; None: it runs.
    In the order the scenario's resolution checks: the over-the-air sum's own refusals, then
    the mechanism's update rule and strategy, then over the air without AirComp."""
    base = expected_refusal(server, uplink, churn, scheme, training, level, cells)
    if base is not None:
        return base, {"server.mode": server, "scheme.name": scheme}[base]
    if uplink == "aircomp" and strategy in AIR_STRATEGIES:
        return "strategy.name", strategy
    rule = RULE_OF.get(scheme)
    if rule in PRIVATE_RULES.get(mechanism, ()):
        return "privacy.mechanism", rule
    if strategy in PRIVATE_STRATEGIES[mechanism]:
        return "privacy.mechanism", strategy
    if mechanism == "over_the_air" and uplink != "aircomp":
        return "privacy.mechanism", "aircomp"
    return None


def private_cells() -> list[tuple[Any, ...]]:
    """Every mechanism x server mode x uplink x availability x scheme x trace level, network
    only and with training (fedavg, one cell), and every mechanism x strategy x scheme over a
    digital uplink and over the air (sync, training, trace level events)."""
    main = itertools.product(
        MECHANISMS, SERVERS, PRIVACY_UPLINKS, AVAILABILITY, sorted(SCHEMES), ("fedavg",),
        (False, True), LEVELS,
    )  # fmt: skip
    strategies = itertools.product(
        MECHANISMS, ("sync",), ("dedicated", "aircomp"), (False,), sorted(SCHEMES),
        [s for s in STRATEGY_NAMES if s != "fedavg"], (True,), ("events",),
    )  # fmt: skip
    return list(main) + list(strategies)


def _check_private(cell: tuple[Any, ...]) -> None:
    """A privacy cell runs with a finite epsilon (positive once an update was applied), or is
    refused in one line on the expected field with a reason naming the cause."""
    want = private_refusal(*cell)
    try:
        table, stats = run_in_memory(private_scenario(*cell))
    except ScenarioError as err:
        message = str(err)
        assert want is not None, f"{cell}: refused ({message})"
        assert message.startswith(f"{want[0]}:") and "\n" not in message, message
        assert want[1] in message, f"{cell}: {message} does not name {want[1]}"
        return
    assert want is None, f"{cell}: ran, but {want[0]} is expected to refuse it"
    assert math.isfinite(stats.epsilon_max) and stats.epsilon_max >= 0
    accounted = table.filter(pc.equal(table["event"], "privacy")).num_rows
    assert (stats.epsilon_max > 0) == (accounted > 0)


#: The privacy cells of the default run: each mechanism running (digital and over the air,
#: each server mode once, with training once), and one of each kind of refusal
PRIVATE_DEFAULT = [
    ("central", "sync", "dedicated", False, "ideal", "fedavg", False, "events"),
    ("local", "semi_sync", "ofdma", True, "two_timescale", "fedavg", False, "device_slots"),
    ("central", "async", "tdma", False, "random_freezing", "fedavg", True, "events"),
    ("over_the_air", "sync", "aircomp", True, "two_timescale", "fedavg", True, "events"),
    ("over_the_air", "sync", "dedicated", False, "ideal", "fedavg", False, "events"),
    ("local", "sync", "dedicated", False, "topk_ef", "fedavg", False, "events"),
    ("central", "sync", "dedicated", False, "fedhq", "fedavg", False, "events"),
    ("central", "sync", "dedicated", False, "ideal", "krum", True, "events"),
    ("local", "sync", "dedicated", False, "ideal", "scaffold", True, "events"),
]
_PRIVATE_REST = [c for c in private_cells() if c not in PRIVATE_DEFAULT]


@pytest.mark.parametrize("cell", PRIVATE_DEFAULT, ids=_ids(PRIVATE_DEFAULT))
def test_privacy_cell_runs_or_is_refused_with_its_reason(cell):
    """A [privacy] cell runs with a finite epsilon, or is refused in one line naming its cause."""
    _check_private(cell)


@pytest.mark.slow
@pytest.mark.parametrize("cell", _PRIVATE_REST, ids=_ids(_PRIVATE_REST))
def test_every_other_privacy_cell_runs_or_is_refused_with_its_reason(cell):
    """Every other [privacy] cell runs with a finite epsilon, or is refused in one line naming
    its cause."""
    _check_private(cell)


@pytest.mark.slow
@pytest.mark.parametrize("mechanism", MECHANISMS)
@pytest.mark.parametrize("uplink", ("dedicated", "aircomp"))
@pytest.mark.parametrize("training", (False, True))
def test_privacy_on_edge_servers_runs_or_is_refused_with_its_reason(mechanism, uplink, training):
    """Each mechanism on two cells' edge servers (the paper's scheme, sync) runs with a finite
    epsilon, or is refused in one line naming its cause."""
    cell = (mechanism, "sync", uplink, False, "two_timescale", "fedavg", training, "events", "two")
    _check_private(cell)


def main() -> None:
    """Print the matrix: cells run and refused, by reason."""
    counts: Counter[str] = Counter()
    reasons: Counter[str] = Counter()
    for training in (False, True):
        for cell in cells(training):
            kind, message = outcome(cell)
            counts[kind] += 1
            if kind == "refused":
                reasons[message.split(" (fix:")[0][:160]] += 1
    total = sum(counts.values())
    print(f"{total} cells: {counts['ran']} run, {counts['refused']} refused")
    for reason, n in reasons.most_common():
        print(f"  {n:4d}  {reason}")


if __name__ == "__main__":
    main()
