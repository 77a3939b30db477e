"""``[uplink] mode = "ns3_lte"``: ns-3's LTE module plays the uploads (sim/radio/ns3/).

The program against LTE's own numbers (peak rate of its resource blocks, goodput against SNR
and against sharing), the same channel in both simulators, determinism, resume, and the faults
(ns-3 missing, a failing build, a process that dies or hangs). Skipped where ns-3 is not
installed, unless ``WFLSIM_NO_SKIP=1`` (CI installs it).
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import wflsim
from conftest import (
    assert_resume_equals_whole,
    base_scenario,
    run_in_memory,
    saved_and_continued,
)
from wflsim.sim.errors import Ns3Failed, ScenarioError
from wflsim.sim.radio.ns3.process import Ns3Process, UploadReport
from wflsim.sim.radio.ns3.uplink import loss_db, noise_figure_db, resource_blocks

#: LTE's uplink peak for 50 resource blocks: MCS 28 is TBS index 26 (3GPP TS 36.213, Table
#: 8.6.1-1), whose transport block on 50 PRBs is 36,696 bits (Table 7.1.7.2.1-1), one per 1 ms.
PEAK_50_RB_BPS = 36_696e3
#: ns-3's thermal noise over the 50 resource blocks (9 MHz) with a noise figure of 0 dB, dBm.
NOISE_9MHZ_DBM = -174.0 + 10.0 * math.log10(9e6)


def _process(
    program: Path, ues: int, losses_db: list[float], dbm: float, transport: str
) -> Ns3Process:
    """One eNB, ``ues`` devices at ``losses_db``, each at ``dbm``, ready (warm-up done)."""
    proc = Ns3Process(program, 120.0)
    proc.request(
        [
            f"config ues={ues} enbs=1 rbs=50 seed=3 run=0 transport={transport} noise_figure_db=0",
            *[f"attach {u} 0" for u in range(ues)],
            "ready",
            f"gains 0 {' '.join(repr(x) for x in losses_db)}",
            *[f"power 0 {u} {dbm}" for u in range(ues)],
        ]
    )
    return proc


def _finish(proc: Ns3Process, horizon_ns: int) -> dict[int, UploadReport]:
    """Run until every upload has ended (or ``horizon_ns``): each device's report."""
    out: dict[int, UploadReport] = {}
    now = 0
    while now < horizon_ns:
        lines = proc.request([f"run {horizon_ns}"])[0]
        now = int(lines[-1].split()[1])
        for line in lines[:-1]:
            report = UploadReport.parse(line.split()[1:])
            out[report.device] = report
        if not any(line.startswith("end ") for line in lines[:-1]):
            break
    return out


def _goodputs(
    program: Path, losses_db: list[float], size: int, transport: str = "tcp"
) -> list[float]:
    """Each device's goodput, bit/s, uploading ``size`` bytes at once from t = 0 (0: not done
    within 20 s)."""
    proc = _process(program, len(losses_db), losses_db, 20.0, transport)
    try:
        proc.request([f"start 0 {u} {size}" for u in range(len(losses_db))])
        done = _finish(proc, 20_000_000_000)
    finally:
        proc.close()
    return [
        8.0 * size / (done[u].time_ns * 1e-9) if u in done else 0.0 for u in range(len(losses_db))
    ]


def test_resource_blocks_are_lte_channel_bandwidths():
    """1.4, 3, 5, 10, 15 and 20 MHz are 6 .. 100 resource blocks; anything else is none."""
    assert [resource_blocks(w) for w in (1.4e6, 3e6, 5e6, 10e6, 15e6, 20e6)] == [
        6,
        15,
        25,
        50,
        75,
        100,
    ]
    assert resource_blocks(2e6) is None and resource_blocks(10.5e6) is None


def test_the_noise_figure_makes_ns3s_noise_density_n0_over_w():
    """kT F = N0 / W: NF = N0[dBm] - 10 log10(W) + 174 (-104 dBm over 10 MHz is 0 dB)."""
    assert noise_figure_db(10 ** (-13.4), 10e6) == pytest.approx(0.0, abs=1e-12)
    n0_w = 10 ** ((-95.0 - 30.0) / 10.0)
    assert noise_figure_db(n0_w, 5e6) == pytest.approx(
        -95.0 - 10 * math.log10(5e6) + 174.0, abs=1e-9
    )


def test_the_loss_of_a_gain_is_its_inverse_in_db_and_a_dead_link_has_a_finite_one():
    """-10 log10(h) for h > 0; a gain of 0 gets the dead loss (1000 dB), never inf."""
    got = loss_db(np.array([1e-12, 1.0, 0.0]))
    np.testing.assert_allclose(got[:2], [120.0, 0.0], atol=1e-12)
    assert got[2] == 1000.0


def test_one_device_alone_at_a_high_snr_delivers_at_lte_peak_rate(ns3):
    """2 MB over UDP at 40 dB of SNR take 1.00-1.10 times 2 MB over LTE's peak rate for 50 RBs
    (36.7 Mbit/s: protocol headers, the scheduler's first grants)."""
    size = 2_000_000
    loss = 20.0 - NOISE_9MHZ_DBM - 40.0  # 20 dBm received 40 dB above the noise
    (goodput,) = _goodputs(ns3, [loss], size, "udp")
    ratio = PEAK_50_RB_BPS / goodput
    assert 1.0 <= ratio <= 1.10, ratio


@pytest.mark.slow
def test_goodput_rises_with_snr(ns3):
    """One device's TCP goodput grows with the SNR, from nothing below LTE's lowest MCS to its
    peak (0 at -10 dB; strictly more at each of 0, 5, 10, 20 dB; 20 and 40 dB alike)."""
    snrs = [-10.0, 0.0, 5.0, 10.0, 20.0, 40.0]
    goodput = [_goodputs(ns3, [20.0 - NOISE_9MHZ_DBM - s], 200_000)[0] for s in snrs]
    assert goodput[0] == 0.0
    assert all(a < b for a, b in zip(goodput[1:5], goodput[2:5], strict=False)), goodput
    assert goodput[5] >= goodput[4] * 0.95, goodput


@pytest.mark.slow
def test_goodput_per_device_falls_with_the_devices_sharing_the_cell(ns3):
    """1, 2 and 4 devices uploading 1 MB each at once over UDP at a high SNR: each gets less as
    more share the cell, about 1/k of one device's goodput (the cell's total within 15 % of the
    single device's)."""
    loss = 20.0 - NOISE_9MHZ_DBM - 30.0
    single = _goodputs(ns3, [loss], 1_000_000, "udp")[0]
    previous = single
    for k in (2, 4):
        each = _goodputs(ns3, [loss] * k, 1_000_000, "udp")
        assert max(each) < previous
        assert sum(each) == pytest.approx(single, rel=0.15), (k, each, single)
        previous = min(each)


def test_a_device_that_goes_offline_stops_at_that_instant(ns3):
    """Device 0 stopped mid-upload delivers nothing more; device 1, alone now, goes faster."""
    loss = 20.0 - NOISE_9MHZ_DBM - 30.0
    proc = _process(ns3, 2, [loss, loss], 20.0, "tcp")
    try:
        proc.request(["start 0 0 3000000", "start 0 1 3000000"])
        assert not any(ln.startswith("end") for ln in proc.request(["run 300000000"])[0][:-1])
        before = {
            int(w[1]): int(w[2])
            for w in (ln.split() for ln in proc.request(["inflight 300000000"])[0][:-1])
        }
        (stopped,) = [
            ln for ln in proc.request(["stop 300000000 0"])[0] if ln.startswith("stopped")
        ]
        assert UploadReport.parse(stopped.split()[1:]).bytes == before[0]
        lines = proc.request(["run 600000000"])[0]
        after = {
            int(w[1]): int(w[2])
            for w in (
                ln.split() for ln in proc.request([f"inflight {lines[-1].split()[1]}"])[0][:-1]
            )
        }
    finally:
        proc.close()
    assert 0 not in after  # nothing more of device 0's upload is counted
    rate_shared = before[1] / 0.3
    rate_alone = (after[1] - before[1]) / 0.3
    assert rate_alone > 1.5 * rate_shared


def test_a_bad_command_fails_in_one_line_naming_it(ns3):
    """An error answer becomes Ns3Failed naming the command and the program's words."""
    proc = Ns3Process(ns3, 10.0)
    with pytest.raises(Ns3Failed, match="'attach' failed: .*config ues="):
        proc.request(["attach 0 0"])


def _scenario(**sections: Any) -> dict[str, Any]:
    """8 devices, 2 frames of 4 slots of 0.5 s, digits' payload, a 10 MHz LTE cell (conftest's
    base scenario with these sections; keyword arguments update them)."""
    ours: dict[str, Any] = {
        "seed": 5,
        "run": {"frames": 2, "slots_per_frame": 4, "deadline_s": 0.5},
        "network": {"num_devices": 8, "cell_radius_m": 600.0, "bandwidth_hz": 10e6},
        "devices": {"batch_size": 16},
        "learning": {"enabled": False, "dataset": "digits", "model": "mlp"},
        "uplink": {"mode": "ns3_lte", "planned_concurrent_uploads": 4},
    }
    for key, value in sections.items():
        both = isinstance(value, dict) and isinstance(ours.get(key), dict)
        ours[key] = {**ours[key], **value} if both else value
    data = base_scenario(**ours)
    data["learning"] = ours["learning"]  # digits' payload, not the base's num_params
    return data


def test_the_loss_ns3_applied_equals_the_traces_gain(ns3):
    """Every upload's ns3_loss_db is -10 log10 of its slot's channel_gain and its ns3_tx_dbm
    the scheme's power in dBm, to 1e-9 dB (read back from ns-3's propagation model)."""
    table, _ = run_in_memory(_scenario(scheme={"name": "two_timescale"}))
    df = table.to_pandas()
    dec = df[df.event == "decision"][["slot", "device", "channel_gain", "tx_power_w"]]
    ends = df[df.event == "upload_end"][["slot", "device", "ns3_loss_db", "ns3_tx_dbm"]]
    both = ends.merge(dec, on=["slot", "device"])
    assert len(both) == len(ends) > 20
    np.testing.assert_allclose(
        both.ns3_loss_db, -10 * np.log10(both.channel_gain), rtol=0, atol=1e-9
    )
    np.testing.assert_allclose(
        both.ns3_tx_dbm, 10 * np.log10(both.tx_power_w) + 30, rtol=0, atol=1e-9
    )


def test_every_upload_row_carries_what_ns3_saw(ns3):
    """upload_end rows: the bytes ns-3 delivered (the payload iff arrived), transport blocks,
    MCS in 0..28, resource blocks in 1..50, goodput = 8 bytes / time transmitted."""
    table, _ = run_in_memory(_scenario())
    df = table.to_pandas()
    cols = [
        "slot",
        "device",
        "success",
        "upload_s",
        *(c for c in df.columns if c.startswith("ns3_")),
    ]
    ends = df[df.event == "upload_end"][cols]
    dec = df[df.event == "decision"][["slot", "device", "payload_bits"]]
    rows = ends.merge(dec, on=["slot", "device"])
    arrived = rows[rows.success.astype(bool)]
    assert len(arrived) > 10
    np.testing.assert_array_equal(arrived.ns3_bytes, np.ceil(arrived.payload_bits / 8))
    assert (rows.ns3_bytes <= np.ceil(rows.payload_bits / 8)).all()
    assert ((arrived.ns3_mcs_mean >= 0) & (arrived.ns3_mcs_mean <= 28)).all()
    assert ((arrived.ns3_rb_mean >= 1) & (arrived.ns3_rb_mean <= 50)).all()
    np.testing.assert_allclose(
        arrived.ns3_goodput_bps, 8 * arrived.ns3_bytes / arrived.upload_s, rtol=1e-6
    )


@pytest.mark.slow
def test_the_device_slots_level_carries_the_same_ns3_columns(ns3):
    """At trace level device_slots every device_slot row holds the ns3_* values of the events
    level's upload_end row of that device and slot."""
    events, _ = run_in_memory(_scenario())
    folded, _ = run_in_memory(_scenario(trace={"level": "device_slots"}))
    e = events.to_pandas()
    ends = e[e.event == "upload_end"].set_index(["slot", "device"]).sort_index()
    f = folded.to_pandas()
    rows = (
        f[(f.event == "device_slot") & f.participating.astype(bool)]
        .set_index(["slot", "device"])
        .sort_index()
    )
    cols = ["ns3_bytes", "ns3_tbs", "ns3_mcs_mean", "ns3_loss_db", "ns3_goodput_bps"]
    pd.testing.assert_frame_equal(rows[cols], ends[cols], check_dtype=False)


def test_the_same_seed_twice_gives_the_identical_trace(ns3):
    """Two runs of one scenario and seed (each with its own ns-3 processes) are equal row for row."""
    first, _ = run_in_memory(_scenario(scheme={"name": "two_timescale"}))
    second, _ = run_in_memory(_scenario(scheme={"name": "two_timescale"}))
    assert first.equals(second)


@pytest.mark.slow
def test_another_seed_gives_another_network(ns3):
    """The run's seed reaches ns-3: another seed gives other completion times."""
    a, _ = run_in_memory(_scenario(seed=5))
    b, _ = run_in_memory(_scenario(seed=6))
    assert not a.equals(b)


@pytest.mark.slow
@pytest.mark.parametrize("server", ["sync", "semi_sync", "async"])
def test_saved_at_a_boundary_and_continued_equals_the_uninterrupted_run(server, ns3, tmp_path):
    """A run saved after frame 1 (uploads in flight carried under stale updates) and continued
    in fresh objects with fresh ns-3 processes equals the uninterrupted run."""
    data = _scenario(server={"mode": server}, run={"frames": 3})
    whole, _ = run_in_memory(data)
    assert saved_and_continued(data, 1, tmp_path / "ck.npz").equals(whole)


@pytest.mark.slow
def test_a_run_folder_killed_at_a_frame_and_resumed_equals_the_whole_run(ns3, tmp_path):
    """A learning run over ns-3 failed as frame 2 starts and resumed from its folder equals the
    uninterrupted run, events and final model."""
    data = _scenario(
        run={"frames": 3, "slots_per_frame": 3},
        learning={"dataset": "digits", "model": "mlp", "lr": 0.3, "eval_every_slots": 3},
        scheme={"name": "two_timescale"},
    )
    assert_resume_equals_whole(data, tmp_path / "run")


def test_cells_one_enb_each_and_the_gain_to_the_serving_site(ns3):
    """Two cells on one band: every upload's loss is the gain to its serving site, and the
    co-band cell's uploads interfere (a run with interference takes longer than without)."""
    cells = {"sites_m": [[-300.0, 0.0], [300.0, 0.0]], "hysteresis_db": 0.0}
    table, _ = run_in_memory(_scenario(cells=cells, run={"frames": 1}))
    df = table.to_pandas()
    dec = df[df.event == "decision"][["slot", "device", "channel_gain"]]
    ends = df[df.event == "upload_end"][["slot", "device", "ns3_loss_db"]].merge(
        dec, on=["slot", "device"]
    )
    np.testing.assert_allclose(ends.ns3_loss_db, -10 * np.log10(ends.channel_gain), atol=1e-9)
    apart, _ = run_in_memory(_scenario(cells={**cells, "bands": [0, 1]}, run={"frames": 1}))
    d2 = apart.to_pandas()
    t_co = df[df.event == "upload_end"].upload_s.mean()
    t_apart = d2[d2.event == "upload_end"].upload_s.mean()
    assert t_co > t_apart


@pytest.mark.parametrize(
    ("sections", "field"),
    [
        ({"network": {"bandwidth_hz": 2e6}}, "network.bandwidth_hz"),
        ({"cells": {"rings": 1, "uplink": ["ofdma"] * 7}}, "cells.uplink"),
        ({"scheme": {"name": "ideal"}}, "scheme.name"),
    ],
)
def test_impossible_settings_are_refused_naming_the_field(sections, field, ns3):
    """A non-LTE bandwidth, a cell with a Shannon uplink, a synchronous no-outage scheme: one
    ScenarioError naming the field."""
    with pytest.raises(ScenarioError) as err:
        wflsim.prepare(_scenario(**sections))
    assert err.value.field == field


def test_ns3_settings_under_another_mode_are_refused():
    """[uplink.ns3] with mode = "ofdma" is refused, naming the way out."""
    with pytest.raises(ScenarioError, match="ns3 applies to mode = .ns3_lte."):
        wflsim.prepare(_scenario(uplink={"mode": "ofdma", "ns3": {"transport": "udp"}}))


def _cli(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "wflsim", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, **env},
        timeout=300,
    )


def _scenario_file(tmp_path: Path) -> Path:
    path = tmp_path / "ns3.toml"
    path.write_text(
        "seed = 1\n[run]\nframes = 1\nslots_per_frame = 2\ndeadline_s = 0.5\n"
        "[network]\nnum_devices = 3\n[devices]\nbatch_size = 16\n"
        "[learning]\nenabled = false\nnum_params = 10000\n"
        '[uplink]\nmode = "ns3_lte"\n[scheme]\nname = "fixed_power"\n'
    )
    return path


def test_missing_ns3_is_one_line_naming_the_os_packages_and_nothing_is_written(tmp_path):
    """Without ns-3 (pkg-config finds no ns3-lte) the run exits 2 with one line naming
    libns3-dev, and writes nothing."""
    out = tmp_path / "run"
    done = _cli(
        ["run", str(_scenario_file(tmp_path)), "--out", str(out), "--quiet"],
        {"PKG_CONFIG_LIBDIR": str(tmp_path / "none"), "PKG_CONFIG_PATH": ""},
        tmp_path,
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "uplink.mode" in lines[0] and "libns3-dev" in lines[0], lines
    assert not out.exists()


def test_a_failing_build_names_its_compiler_log(ns3, tmp_path):
    """A compiler that fails: exit 2, one line naming the compiler log, which holds its output."""
    fake = tmp_path / "fake-g++"
    fake.write_text(
        '#!/bin/sh\nif [ "$1" = "--version" ]; then echo fake 1.0; exit 0; fi\necho "boom: no such header" >&2\nexit 1\n'
    )
    fake.chmod(0o755)
    out = tmp_path / "run"
    done = _cli(
        ["run", str(_scenario_file(tmp_path)), "--out", str(out), "--quiet"],
        {"CXX": str(fake), "WFLSIM_NS3_CACHE": str(tmp_path / "cache")},
        tmp_path,
    )
    assert done.returncode == 2, done.stderr
    line = done.stderr.strip()
    assert "\n" not in line and "compiler log: " in line, line
    log = Path(line.split("compiler log: ")[1].split(")")[0])
    assert "boom: no such header" in log.read_text()
    assert not out.exists()


def _wrapper(tmp_path: Path, real: Path, on_second: str) -> Path:
    """A program that is the real one, except on its second start (the second frame's
    process), where it runs ``on_second`` instead."""
    count = tmp_path / "starts"
    count.write_text("0")
    script = tmp_path / "wrapper.sh"
    script.write_text(
        f"#!/bin/sh\nn=$(cat {count})\necho $((n + 1)) > {count}\n"
        f'if [ "$n" -eq 1 ]; then {on_second}; fi\nexec {real}\n'
    )
    script.chmod(0o755)
    return script


@pytest.mark.slow
@pytest.mark.parametrize(
    ("on_second", "timeout_s", "message"),
    [
        ("head -n 3 > /dev/null; exit 3", 60.0, "died"),
        ("exec sleep 600", 2.0, "no answer to 'config' within 2 s"),
    ],
    ids=["dies", "hangs"],
)
def test_a_process_that_dies_or_hangs_fails_the_run_keeping_its_frames_and_resume_goes_on(
    on_second, timeout_s, message, ns3, tmp_path, monkeypatch
):
    """The second frame's process dies (or hangs past exchange_timeout_s): the run fails with
    one Ns3Failed line, frame 0 stays in the folder, and --resume with a working ns-3 ends
    with the uninterrupted run's events."""
    import wflsim.sim.radio.ns3 as mode

    data = _scenario(run={"frames": 3}, uplink={"ns3": {"exchange_timeout_s": timeout_s}})
    whole = wflsim.run(data, progress=False)
    monkeypatch.setattr(mode, "ensure_program", lambda: _wrapper(tmp_path, ns3, on_second))
    out = tmp_path / "run"
    with pytest.raises(Ns3Failed, match=message):
        wflsim.run(data, out=out, progress=False)
    failed = wflsim.load_run(out)
    assert failed.status == "failed" and set(failed.events.frame) == {0}
    monkeypatch.undo()
    resumed = wflsim.resume(out, progress=False)
    assert resumed.status == "completed"
    pd.testing.assert_frame_equal(resumed.events, whole.events)


def test_the_cli_prints_the_failure_in_one_line_with_exit_1(ns3, tmp_path):
    """A run whose ns-3 process fails mid-run exits 1 with one line naming Ns3Failed and the
    kept frames (the progress bar aside)."""
    fake = tmp_path / "prog.sh"
    fake.write_text("#!/bin/sh\nexit 7\n")
    fake.chmod(0o755)
    cache = tmp_path / "cache"
    # a cache whose program is the failing one: the run starts, then its first process dies
    from wflsim.sim.radio.ns3.build import program_path, toolchain

    key_dir = program_path(toolchain()).parent.name
    (cache / key_dir).mkdir(parents=True)
    os.symlink(fake, cache / key_dir / "wflsim-lte")
    done = _cli(
        ["run", str(_scenario_file(tmp_path)), "--out", str(tmp_path / "run"), "--quiet"],
        {"WFLSIM_NS3_CACHE": str(cache)},
        tmp_path,
    )
    assert done.returncode == 1, done.stderr
    lines = [ln for ln in done.stderr.strip().splitlines() if ln.startswith("wflsim: error")]
    assert len(lines) == 1 and "Ns3Failed" in lines[0] and "died" in lines[0], done.stderr


def test_a_gain_table_of_the_right_length_only(ns3):
    """gains with the wrong number of losses is an error naming the count expected."""
    proc = Ns3Process(ns3, 30.0)
    proc.request(
        [
            "config ues=2 enbs=1 rbs=6 seed=1 run=0 transport=tcp noise_figure_db=0",
            "attach 0 0",
            "attach 1 0",
            "ready",
        ]
    )
    with pytest.raises(Ns3Failed, match="gains needs a time and 2 losses"):
        proc.request(["gains 0 100.0"])


def test_the_trace_is_arrow_typed(ns3):
    """The ns3 columns have the schema's types (int64 counts, float64 values)."""
    table, _ = run_in_memory(_scenario(run={"frames": 1}))
    assert table.schema.field("ns3_bytes").type == pa.int64()
    assert table.schema.field("ns3_goodput_bps").type == pa.float64()


@pytest.mark.slow
def test_the_shipped_truncated_shannon_defaults_are_the_fit_to_ns3(ns3, tmp_path):
    """scenarios/ns3/fit_rate_model.py measures ns-3's LTE efficiency against SNR and fits the
    truncated bound: the defaults of [channel.truncated_shannon] are that fit (--check)."""
    script = Path(__file__).resolve().parent.parent / "scenarios" / "ns3" / "fit_rate_model.py"
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path), "--check"],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "efficiency.png").is_file()


def test_the_rate_model_plans_but_ns3_plays_every_upload(ns3):
    """Under ns3_lte the rate model is the scheme's planning only: fixed_power (which plans
    nothing) plays the same uploads over ns-3 whether the model is Shannon's or the truncated
    bound, even those the truncated bound says can never finish."""
    weak = {"batch_size": 16, "peak_power_w": 1e-4}  # some devices below the bound's SNR_min
    a, _ = run_in_memory(_scenario(run={"frames": 1}, devices=weak))
    b, _ = run_in_memory(
        _scenario(run={"frames": 1}, devices=weak, channel={"rate_model": "truncated_shannon"})
    )
    da, db = a.to_pandas(), b.to_pandas()
    cols = ["time_s", "device", "success", "ns3_bytes", "ns3_tbs"]
    ea = da[da.event == "upload_end"][cols].reset_index(drop=True)
    eb = db[db.event == "upload_end"][cols].reset_index(drop=True)
    pd.testing.assert_frame_equal(ea, eb)
    assert np.isinf(db[db.event == "decision"].upload_s).any()  # hopeless on the formula
