"""Hostile inputs about the simulated clock, lax types and small surfaces: every wait the clock
can take (a slot that waits for its last upload, a cloud round) is bounded before the run, by
time and by the events it costs (availability changes, random-waypoint legs); integer choices
refuse true/false and floats; the converters, ``wflsim init`` and registered extensions fail
with one line that names what to fix."""

from __future__ import annotations

import math
import shlex
from pathlib import Path
from typing import Annotated, Any, Literal, get_args, get_origin

import numpy as np
import pytest
import torch
from pydantic import BaseModel, TypeAdapter, ValidationError
from test_extensions import _forget_registrations  # noqa: F401 (autouse: nothing stays registered)
from test_hostile_config import _cli, _refused
from torch import nn

import wflsim
from conftest import REPO, base_scenario
from wflsim.sim.errors import ScenarioError

Q = str(REPO / "wflsim" / "scenarios" / "quickstart.toml")
#: The quick start with a hexagonal ring of cells, the cloud every slot (sync edges).
RING = ["--set", "cells.rings=1", "--set", "server.hierarchy.cloud_every_slots=1"]
#: The quick start's model on the wire: D = 9,610 parameters of 32 bits.
QUICK_BITS = 9_610 * 32


def _validate(*sets: str) -> list[str]:
    args = ["validate", Q]
    for s in sets:
        args += ["--set", s]
    return args


# -- cloud rounds --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "latency",
    [
        '{dist="choice",values=[1e300]}',
        '{dist="choice",values=[0.01,86401]}',
        '{dist="uniform",low=0,high=1e6}',
        '{dist="loguniform",low=1e-3,high=1e300}',
    ],
)
def test_every_latency_a_distribution_can_draw_is_bounded(latency):
    """A backhaul latency distribution that can draw more than a day is refused by validate,
    as a fixed latency is (the issue's choice of 1e300 with the simulated clock)."""
    err = _refused(
        [*_validate(f"server.hierarchy.backhaul_latency_s={latency}", 'mobility.clock="simulated"'),
         *RING],
        "server.hierarchy.backhaul_latency_s",
    )  # fmt: skip
    assert "86400" in err, err


def test_a_backhaul_too_slow_for_the_model_names_the_least_rate():
    """backhaul_rate_bps = 1e-300 under sync edges is refused before the run, with the least
    rate that keeps a round within 1e9 s: 2 S / 1e9 = 2 x 307,520 / 1e9 bit/s."""
    err = _refused(
        [*_validate("server.hierarchy.backhaul_rate_bps=1e-300"), *RING],
        "server.hierarchy.backhaul_rate_bps",
    )
    assert f"at least {2 * QUICK_BITS / 1e9:.3g} bit/s" in err, err


def test_a_day_long_cloud_round_under_fast_availability_is_refused():
    """A round of 2 x 86,400 s while 30 devices change state every 0.5 s (60 changes per s:
    a wait may last 1e6 / 60 = 1.67e4 s) is refused naming the availability, not run."""
    err = _refused(
        [
            *_validate(
                "server.hierarchy.backhaul_latency_s=86400",
                'availability={model="markov",online_s=0.5,offline_s=0.5}',
            ),
            *RING,
        ],
        "availability.online_s",
    )
    assert "at most 1.67e+04 s" in err and "60 events per s" in err, err


def test_a_day_long_cloud_round_that_costs_no_events_is_accepted():
    """The same round with devices always online and static: the wait costs nothing but
    simulated time, and validate accepts it."""
    code, err = _cli(
        [*_validate("server.hierarchy.backhaul_latency_s=86400", 'mobility.model="static"'), *RING]
    )
    assert code == 0, err


# -- random waypoint over a slot's wait ----------------------------------------------------

#: The quick start's walkers (R = 1000 m, speeds U[0.5, 1.5] m/s, pauses of 5 s), 30 of them:
#: a leg lasts 128 R / (45 pi) x ln(3) / 1 + 5 s on average.
QUICK_LEG_S = 128 * 1000 / (45 * math.pi) * math.log(3.0) + 5.0


def test_a_slot_that_walks_a_million_legs_is_refused():
    """A slot that waits 1.38e8 s at the cell edge (under the 1e9 s cap) with the simulated
    clock would walk 4e6 legs; validate refuses it naming mobility.speed_mps and the longest
    wait, 1e6 legs / (30 / mean leg) s."""
    err = _refused(
        _validate(
            'mobility.clock="simulated"', "devices.peak_power_w=1e-6", "network.noise_dbm=-60"
        ),
        "mobility.speed_mps",
    )
    assert f"at most {1e6 * QUICK_LEG_S / 30:.3g} s" in err, err


def test_the_same_slot_on_the_nominal_clock_is_accepted():
    """With mobility.clock = "nominal" the positions are read at k T tau_0: the wait walks
    nothing, and only the 1e9 s cap applies."""
    code, err = _cli(_validate("devices.peak_power_w=1e-6", "network.noise_dbm=-60"))
    assert code == 0, err


def test_legs_walked_per_second_match_the_closed_form():
    """wait_events_per_s's legs per second, E[L] E[1/v] + pause per leg with E[L] = 128 R /
    (45 pi), agrees with the distance random waypoint walks: odometer / time = E[L] x legs/s
    (within 2 % over 400 devices and about 500 legs each)."""
    from wflsim.sim.config.derived import wait_events_per_s
    from wflsim.sim.world.mobility.random_waypoint import RandomWaypoint

    n, radius, speed, pause = 400, 100.0, (1.0, 3.0), 2.0
    rngs = [np.random.default_rng([7, d]) for d in range(n)]
    walker = RandomWaypoint(np.zeros((n, 2)), radius, speed, pause, rngs)
    legs_per_s = wait_events_per_s(walker, None, simulated_clock=True)["mobility.speed_mps"]
    horizon_s = 500 * (128 * radius / (45 * math.pi) * math.log(3.0) / 2.0 + pause)
    walked = float(walker.odometer_m(horizon_s).sum())
    mean_leg_m = 128 * radius / (45 * math.pi)
    assert walked / horizon_s == pytest.approx(legs_per_s * mean_leg_m, rel=0.02)
    assert wait_events_per_s(walker, None, simulated_clock=False) == {}


def test_the_runs_wait_limit_is_the_one_validate_applies():
    """The engine stops a slot (SlotTooLong) at the same limit the pre-run check uses: 1e6 legs
    for the quick start's walkers on the simulated clock, the 1e9 s cap on the nominal one."""
    from wflsim.app.assemble import build_engine, make_learner

    for clock, limit in (("simulated", 1e6 * QUICK_LEG_S / 30), ("nominal", 1e9)):
        prep = wflsim.prepare(
            Q, overrides=[f'mobility.clock="{clock}"', "learning.enabled=false", "run.frames=1"]
        )
        engine = build_engine(prep, make_learner(prep))
        assert engine.max_wait_s == pytest.approx(limit, rel=1e-12)


# -- cells ---------------------------------------------------------------------------------


def test_a_slot_too_long_under_cells_names_the_cells_spacing():
    """With [cells] in rings, a slot that waits too long because the cells are huge names
    cells.inter_site_distance_m (and its edge, ISD / sqrt 3), not network.cell_radius_m."""
    err = _refused(
        _validate(
            "learning.enabled=false",
            "learning.num_params=440812",
            "cells.rings=1",
            "cells.inter_site_distance_m=1e6",
            "network.noise_dbm=-60",
        ),
        "cells.inter_site_distance_m",
    )
    assert "network.cell_radius_m" not in err.split("(fix:")[1], err


# -- lax types -----------------------------------------------------------------------------


def _models(tp: Any, out: set[type[BaseModel]]) -> None:
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        if tp not in out:
            out.add(tp)
            for f in tp.model_fields.values():
                _models(f.annotation, out)
        return
    for arg in get_args(tp):
        _models(arg, out)


def _whole_numbers(tp: Any) -> list[int]:
    """The ints a field's type admits (1 for ``int``, a Literal's int values)."""
    if tp is int:
        return [1]
    if get_origin(tp) is Literal:
        return [a for a in get_args(tp) if type(a) is int]
    return [x for a in get_args(tp) for x in _whole_numbers(a)]


def _integer_fields() -> list[tuple[str, str, Any, list[int]]]:
    from wflsim.sim.config.schema import Scenario
    from wflsim.sim.registry import SCHEMES, STRATEGIES

    models: set[type[BaseModel]] = set()
    _models(Scenario, models)
    for name in list(SCHEMES):
        _models(SCHEMES[name].Params, models)
    for name in list(STRATEGIES):
        _models(STRATEGIES[name].params, models)
    out = []
    for model in sorted(models, key=lambda m: m.__name__):
        for name, field in model.model_fields.items():
            ints = _whole_numbers(field.annotation)
            if ints:
                typ = Annotated[field.annotation, *field.metadata] if field.metadata else None
                out.append((model.__name__, name, typ or field.annotation, ints))
    return out


@pytest.mark.parametrize("model,name,typ,ints", _integer_fields(), ids=lambda v: str(v)[:30])
def test_no_integer_field_takes_a_bool_or_a_float(model, name, typ, ints):
    """Every field of the scenario, a scheme's or a strategy's parameters that takes whole
    numbers refuses true, false and a float of the same value (types refused, not converted)."""
    adapter = TypeAdapter(typ)
    for value in (True, False, float(ints[0])):
        with pytest.raises(ValidationError):
            adapter.validate_python(value, strict=True)


@pytest.mark.parametrize(
    "sets,field",
    [
        (['uplink.mode="aircomp"', "uplink.values_per_symbol=true"], "uplink.values_per_symbol"),
        (['uplink.mode="aircomp"', "uplink.values_per_symbol=2.0"], "uplink.values_per_symbol"),
        (["cells.rings=1", "cells.reuse_factor=true"], "cells.reuse_factor"),
        (["cells.rings=1", "cells.reuse_factor=3.0"], "cells.reuse_factor"),
        (['scheme.name="topk_ef"', "scheme.index_bits=false"], "scheme.index_bits"),
        (['scheme.name="topk_ef"', "scheme.index_bits=32.0"], "scheme.index_bits"),
    ],
)
def test_integer_choices_refuse_bools_and_floats_on_the_command_line(sets, field):
    """values_per_symbol, reuse_factor and index_bits given as true/false or x.0 are exit 2
    naming the field (index_bits = false was read as 0)."""
    err = _refused(_validate(*sets), field)
    assert "whole number" in err, err


def test_a_site_beyond_a_thousand_kilometres_is_refused():
    """cells.sites_m = [[1e300, 0]] is refused as out of range, like cells.area_radius_m."""
    _refused(_validate("cells.sites_m=[[1e300, 0]]"), "cells.sites_m")


def test_a_sites_file_with_a_column_twice_is_refused(tmp_path):
    """A sites file whose header names x_m twice is refused (which one holds the sites?)."""
    sites = tmp_path / "sites.csv"
    sites.write_text("x_m,y_m,x_m\n0,0,5000\n")
    err = _refused(_validate(f'cells.sites_file="{sites}"'), "cells.sites_file")
    assert "x_m more than once" in err, err


# -- convert-availability ------------------------------------------------------------------


def _changes(tmp_path: Path) -> Path:
    src = tmp_path / "changes.csv"
    src.write_text("device,time_s,online\n0,0,1\n0,1000,0\n1,5,1\n")
    return src


def test_a_time_scale_that_pushes_times_past_the_cap_is_refused(tmp_path):
    """--time-scale 1e9 on a change at 1000 s would write 1e12 s (over the 1e10 s a trace may
    hold): exit 2 naming --time-scale with the largest scale that fits (1e10 / 1000)."""
    out = tmp_path / "av.csv"
    args = ["convert-availability", str(_changes(tmp_path)), "--format", "state-changes"]
    err = _refused([*args, "--devices", "2", "--out", str(out), "--time-scale", "1e9"],
                   "--time-scale", out)  # fmt: skip
    assert "at most 1e+07" in err, err


def test_an_output_the_system_will_not_write_is_exit_2(tmp_path):
    """--out under /proc/self is one line naming --out, exit 2, not an internal error."""
    args = ["convert-availability", str(_changes(tmp_path)), "--format", "state-changes"]
    _refused([*args, "--devices", "2", "--out", "/proc/self/x.csv"], "--out")


def test_a_write_that_fails_is_exit_2_and_leaves_nothing(tmp_path, monkeypatch):
    """A write the system refuses at the last moment (a full disk) is exit 2 naming the flag,
    and the file is not there."""
    import wflsim.app.convert as convert

    def full(path, data):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(convert, "write_atomic", full)
    out = tmp_path / "av.csv"
    args = ["convert-availability", str(_changes(tmp_path)), "--format", "state-changes"]
    err = _refused([*args, "--devices", "2", "--out", str(out)], "--out", out)
    assert "No space left" in err, err


# -- wflsim init ---------------------------------------------------------------------------


def test_init_prints_a_cd_that_runs_nothing_its_name_holds(tmp_path, monkeypatch, capsys):
    """`wflsim init 'x;touch PWNED'` prints the next command with the folder quoted: a shell
    reads it as `cd <the folder>` and no `touch`."""
    from wflsim.app.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(["init", "x;touch PWNED"]) == 0
    line = capsys.readouterr().out.split("next: ", 1)[1].strip()
    words = shlex.split(line)
    assert words[:3] == ["cd", "x;touch PWNED", "&&"], line
    assert "touch" not in words[3:], line


# -- registered strategies and models ------------------------------------------------------

LEARN = base_scenario(
    run={"frames": 1, "slots_per_frame": 2},
    network={"num_devices": 4, "cell_radius_m": 300.0},
    devices={"batch_size": 16},
    scheme={"name": "ideal"},
)
LEARN["learning"] = {"enabled": True, "dataset": "digits", "model": "mlp", "eval_every_slots": 2}


@pytest.mark.parametrize(
    "step,got",
    [
        (lambda w, g, lr: w[:5], "float32 tensor of shape (5,)"),
        (lambda w, g, lr: (w - lr * g).numpy(), "a ndarray"),
        (lambda w, g, lr: (w - lr * g).double(), "float64 tensor of shape (9610,)"),
    ],
)
def test_a_strategys_bad_step_names_the_strategy_and_what_it_returned(tmp_path, step, got):
    """A registered strategy whose server_step returns the wrong thing stops the run with an
    error naming the strategy, the hook, what it returned and the (D,) float32 expected."""
    from wflsim.models.learner.strategies import Strategy, StrategyOutputError

    class Bad(Strategy):
        def server_step(self, w, g, lr):
            return step(w, g, lr)

    wflsim.register_strategy("bad_step", Bad)
    table = {**LEARN, "strategy": {"name": "bad_step"}}
    with pytest.raises(StrategyOutputError) as err:
        wflsim.run(table, out=tmp_path / "run")
    text = str(err.value)
    assert "strategy 'bad_step': server_step returned" in text and got in text, text
    assert "expected a torch.float32 tensor of shape (9610,)" in text, text


def test_a_model_too_large_for_memory_is_refused_before_it_is_built(monkeypatch):
    """A registered model of 2.25e8 parameters with 1 GiB available: validate refuses it with
    the estimate 4 bytes x D x (3 + N devices), and the factory only ever built it on the meta
    device (nothing allocated)."""
    import wflsim.app.prepare as prepare

    devices: list[torch.device] = []

    def big(shape, classes):
        net = nn.Sequential(nn.Flatten(), nn.Linear(64, 3_000_000), nn.Linear(3_000_000, classes))
        devices.append(next(net.parameters()).device)
        return net

    monkeypatch.setattr(prepare, "available_memory_bytes", lambda device: (2**30, "the host"))
    wflsim.register_model("big", big)
    d = 64 * 3_000_000 + 3_000_000 + 3_000_000 * 10 + 10
    with pytest.raises(ScenarioError) as err:
        wflsim.prepare({**LEARN, "learning": {**LEARN["learning"], "model": "big"}})
    assert err.value.field == "learning.model"
    assert f"{d:,} parameters" in err.value.problem
    assert f"{4 * d * (3 + 4) / 2**30:.3g} GiB" in err.value.problem, err.value.problem
    assert devices and all(dev.type == "meta" for dev in devices), devices


def test_the_available_memory_is_read_on_this_machine():
    """available_memory_bytes reads a positive number of bytes for the host."""
    from wflsim.app.prepare import available_memory_bytes

    have, where = available_memory_bytes("cpu")
    assert have is not None and have > 0 and where == "the host"
