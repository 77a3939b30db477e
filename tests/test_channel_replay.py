"""Recording the channel of a run and running scenarios on a recorded (or external) table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import base_scenario, events, failing_at_frame
from wflsim.analysis.io import events_files
from wflsim.app.cli import main
from wflsim.app.run import build_engine, execute, make_learner, prepare_scenario
from wflsim.sim.config.loading import validate_scenario
from wflsim.sim.errors import ScenarioError
from wflsim.sim.learner import NullLearner
from wflsim.sim.world.channel.record import COLUMNS

FRAMES, T, N = 3, 4, 5

#: A channel with every recorded column: UMi with a LOS state, shadowing, correlated fading,
#: imperfect CSI; devices move.
CHANNEL = {
    "pathloss": {"model": "umi", "carrier_ghz": 3.5},
    "shadowing": {"sigma_db": "3gpp"},
    "fading": {"model": "rician", "k_db": 3.0, "correlation": "gauss_markov"},
    "csi": {"error_variance": 0.2, "delay_slots": 1},
}


def scenario(scheme: str = "two_timescale", **channel: Any) -> dict[str, Any]:
    return base_scenario(
        run={"frames": FRAMES, "slots_per_frame": T, "deadline_s": 0.8},
        network={"num_devices": N, "cell_radius_m": 400.0},
        mobility={"model": "random_waypoint", "speed_mps": [5.0, 10.0]},
        channel=channel,
        scheme={"name": scheme, "V": 10.0},
    )


def run_to(data: dict[str, Any], out: Path, base_dir: Path | None = None) -> pd.DataFrame:
    """Run a scenario table into ``out``; its events as a DataFrame."""
    prep = prepare_scenario(validate_scenario(data), base_dir=base_dir)
    execute(prep, make_learner(prep), out)
    return pa.concat_tables([pq.read_table(f) for f in events_files(out)]).to_pandas()


def recorded(tmp_path: Path, scheme: str = "two_timescale") -> tuple[Path, pd.DataFrame]:
    """A run of ``CHANNEL`` with record = true: (its channel table's folder, its events)."""
    out = tmp_path / f"rec-{scheme}"
    ev = run_to(scenario(scheme, **CHANNEL, record=True), out)
    return out / "channel", ev


def as_one_file(parts: Path, dest: Path) -> None:
    """Write a recorded ``channel/`` folder's parts as one Parquet file ``dest``."""
    pq.write_table(
        pa.concat_tables([pq.read_table(p) for p in sorted(parts.glob("*.parquet"))]), dest
    )


def test_the_recording_has_the_documented_columns_and_one_row_per_slot_and_device(tmp_path):
    """channel/ parts: every column of the layout, K T N rows in slot order, seed in metadata."""
    path, ev = recorded(tmp_path)
    parts = sorted(path.glob("part-*.parquet"))
    assert [p.name for p in parts] == [f"part-{k:06d}.parquet" for k in range(FRAMES)]
    assert all(pq.read_metadata(p).num_rows == T * N for p in parts)
    table = pa.concat_tables([pq.read_table(p) for p in parts])
    assert table.column_names == list(COLUMNS)
    assert table.num_rows == FRAMES * T * N
    df = table.to_pandas()
    assert list(df["slot"]) == sorted(df["slot"])
    dec = events(pa.Table.from_pandas(ev), "decision")
    np.testing.assert_array_equal(df["gain"], dec["channel_gain"])
    np.testing.assert_array_equal(df["seen_gain"], dec["seen_channel_gain"])
    meta = table.schema.metadata
    assert meta[b"wflsim.seed"] == b"1" and b"wflsim.channel" in meta


def test_replay_of_a_runs_own_recording_reproduces_its_events_exactly(tmp_path):
    """Replaying a run's own channel table (the same scenario plus replay) gives the identical
    events table, every column; the manifest says which models the table replaced."""
    path, ev = recorded(tmp_path)
    again = run_to(scenario(**CHANNEL, replay=str(path)), tmp_path / "replay")
    manifest = json.loads((tmp_path / "replay" / "manifest.json").read_text())
    replaced = manifest["channel"]["replaced_by_the_table"]
    assert set(replaced) == {"pathloss", "fading", "shadowing", "csi"}
    assert replaced["csi"]["error_variance"] == 0.2
    assert manifest["channel"]["recorded_channel"]["fading"]["model"] == "rician"
    pd.testing.assert_frame_equal(again.drop(columns="time_s"), ev.drop(columns="time_s"))
    np.testing.assert_array_equal(again["time_s"], ev["time_s"])


def test_two_schemes_replayed_on_one_recording_see_bit_identical_channels(tmp_path):
    """two_timescale and ideal replayed on one table: the same H, h and seen h on every row."""
    path, _ = recorded(tmp_path)
    a = events(
        pa.Table.from_pandas(run_to(scenario("two_timescale", replay=str(path)), tmp_path / "a")),
        "decision",
    )
    b = events(
        pa.Table.from_pandas(run_to(scenario("ideal", replay=str(path)), tmp_path / "b")),
        "decision",
    )
    for col in ("large_scale_gain", "channel_gain", "seen_channel_gain"):
        np.testing.assert_array_equal(a[col].to_numpy(), b[col].to_numpy())
    assert not np.array_equal(a["tx_power_w"].to_numpy(), b["tx_power_w"].to_numpy())


def test_replay_path_is_relative_to_the_scenario_file(tmp_path):
    """replay = "channel.parquet" in a scenario file finds the table next to the file."""
    path, ev = recorded(tmp_path)
    folder = tmp_path / "study"
    folder.mkdir()
    as_one_file(path, folder / "channel.parquet")
    again = run_to(scenario(replay="channel.parquet"), tmp_path / "rel", base_dir=folder)
    np.testing.assert_array_equal(again["channel_gain"].dropna(), ev["channel_gain"].dropna())


def test_an_external_table_with_only_the_required_columns(tmp_path):
    """slot, device, gain only: the scheme sees the gain, H comes from the path loss at the
    positions, and the outcomes follow the table's gains."""
    rng = np.random.default_rng(0)
    n_rows = FRAMES * T * N
    df = pd.DataFrame(
        {
            "slot": np.repeat(np.arange(FRAMES * T), N),
            "device": np.tile(np.arange(N), FRAMES * T),
            "gain": rng.exponential(1e-11, n_rows),
        }
    ).sample(frac=1.0, random_state=1)  # any row order
    path = tmp_path / "ext.parquet"
    df.to_parquet(path)
    ev = run_to(scenario(replay=str(path)), tmp_path / "ext")
    dec = events(pa.Table.from_pandas(ev), "decision").sort_values(["slot", "device"])
    ref = df.sort_values(["slot", "device"])
    np.testing.assert_array_equal(dec["channel_gain"], ref["gain"])
    np.testing.assert_array_equal(dec["seen_channel_gain"], ref["gain"])
    pos = events(pa.Table.from_pandas(ev), "position")
    ref_h = 10 ** (-(128.1 + 37.6 * np.log10(np.maximum(pos["distance_m"], 10.0) / 1000)) / 10)
    np.testing.assert_allclose(pos["large_scale_gain"], ref_h, rtol=1e-12)


def test_seen_gain_column_drives_the_decisions(tmp_path):
    """A table whose seen_gain is twice its gain: two_timescale decides on the seen gain and every
    upload it sends misses the deadline."""
    n_rows = FRAMES * T * N
    gain = np.full(n_rows, 5e-11)
    df = pd.DataFrame(
        {
            "slot": np.repeat(np.arange(FRAMES * T), N),
            "device": np.tile(np.arange(N), FRAMES * T),
            "gain": gain,
            "seen_gain": 2 * gain,
        }
    )
    path = tmp_path / "seen.parquet"
    df.to_parquet(path)
    ev = pa.Table.from_pandas(run_to(scenario(replay=str(path)), tmp_path / "seen"))
    en = events(ev, "energy")
    part = en["participating"].astype(bool)
    assert part.any() and not en["success"].astype(bool)[part].any()


def _good_table(tmp_path: Path) -> pd.DataFrame:
    path, _ = recorded(tmp_path)
    return pd.read_parquet(path)


def _drop_row(df: pd.DataFrame) -> pd.DataFrame:
    return df.drop(index=7)


def _dup_row(df: pd.DataFrame) -> pd.DataFrame:
    return pd.concat([df, df.iloc[[3]]])


def _set(col: str, row: int, value: Any):
    def f(df: pd.DataFrame) -> pd.DataFrame:
        df = df.copy()
        if isinstance(value, float) and df[col].dtype.kind in "iu":
            df[col] = df[col].astype("float64")
        df.loc[row, col] = value
        return df

    return f


BAD = [
    ("lacks column(s) gain", lambda df: df.drop(columns="gain")),
    ("outside the channel-table layout", lambda df: df.rename(columns={"seen_gain": "seen_gains"})),
    ("lacks 1 of the", _drop_row),
    ("more than one row", _dup_row),
    ("devices outside 0..4", _set("device", 2, 9)),
    ("must be finite and > 0", _set("gain", 5, -123456.789)),
    ("must be finite and > 0", _set("seen_gain", 5, float("inf"))),
    ("changes within frame", _set("large_scale_gain", N + 1, 123456.789)),
    ("must hold integers", _set("slot", 4, 1.5)),
    ("must hold integers", _set("device", 4, 1e300)),
    ("slots must be >= 0", _set("slot", 4, -1)),
    ("missing value", _set("gain", 6, None)),
    ("must be numeric", lambda df: df.assign(gain="x")),
]


@pytest.mark.parametrize(("message", "mutate"), BAD, ids=[b[0] for b in BAD])
def test_a_table_that_does_not_fit_is_a_one_line_error_naming_channel_replay(
    message, mutate, tmp_path
):
    """Each misfit is a ScenarioError on channel.replay, one line, never quoting the file's values."""
    df = mutate(_good_table(tmp_path))
    path = tmp_path / "bad.parquet"
    df.to_parquet(path, index=False)
    with pytest.raises(ScenarioError) as info:
        prepare_scenario(validate_scenario(scenario(replay=str(path))))
    line = info.value.one_line()
    assert info.value.field == "channel.replay"
    assert message in line and "\n" not in line
    assert "123456" not in line


def test_a_missing_or_unreadable_table_is_a_clear_error(tmp_path):
    """A path that does not exist, or a file that is not Parquet: ScenarioError on channel.replay."""
    with pytest.raises(ScenarioError, match="does not exist"):
        prepare_scenario(validate_scenario(scenario(replay=str(tmp_path / "nope.parquet"))))
    junk = tmp_path / "junk.parquet"
    junk.write_text("slot,device,gain\nSECRET-CONTENT\n")
    with pytest.raises(ScenarioError, match="cannot read") as info:
        prepare_scenario(validate_scenario(scenario(replay=str(junk))))
    assert "SECRET" not in info.value.one_line()


def test_a_table_for_a_shorter_run_or_fewer_devices_is_refused(tmp_path):
    """A table recorded for 3 frames replayed by a 4-frame run names the missing pairs."""
    path, _ = recorded(tmp_path)
    longer = scenario(replay=str(path))
    longer["run"]["frames"] = FRAMES + 1
    with pytest.raises(ScenarioError, match=r"lacks .* pairs"):
        prepare_scenario(validate_scenario(longer))


def test_a_bad_table_exits_2_and_writes_nothing(tmp_path, capsys):
    """wflsim run with a table lacking a column: exit 2, one stderr line, no output folder."""
    df = _good_table(tmp_path).drop(columns="device")
    bad = tmp_path / "bad.parquet"
    df.to_parquet(bad, index=False)
    toml = tmp_path / "s.toml"
    toml.write_text(
        "[run]\nframes = 3\nslots_per_frame = 4\n[network]\nnum_devices = 5\n"
        "[learning]\nenabled = false\nnum_params = 100000\n"
        '[channel]\nreplay = "bad.parquet"\n'
    )
    out = tmp_path / "out"
    code = main(["run", str(toml), "--out", str(out), "--quiet"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and not out.exists()
    assert len(err.splitlines()) == 1 and "channel.replay" in err and "device" in err


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    col=st.sampled_from(
        ["slot", "device", "gain", "seen_gain", "large_scale_gain", "shadowing_db"]
    ),
    row=st.integers(0, FRAMES * T * N - 1),
    value=st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-10, 10**6)),
)
def test_any_single_corruption_is_accepted_or_refused_cleanly(tmp_path, col, row, value):
    """Changing one value anywhere in a valid table gives a runnable table or a ScenarioError,
    never another exception."""
    path = tmp_path / "hyp.parquet"
    if not path.exists():
        src, _ = recorded(tmp_path)
        as_one_file(src, path)
    df = pd.read_parquet(path)
    df[col] = df[col].astype("float64")
    df.loc[row, col] = value
    bad = tmp_path / "mut.parquet"
    df.to_parquet(bad, index=False)
    try:
        prep = prepare_scenario(validate_scenario(scenario(replay=str(bad))))
    except ScenarioError as err:
        assert err.field == "channel.replay"
        return
    build_engine(prep, NullLearner(100_000)).run()


def test_no_recording_without_record_and_overwrite_replaces_a_recording(tmp_path):
    """record = false writes no channel table; --overwrite replaces a folder holding one."""
    out = tmp_path / "r"
    run_to(scenario(), out)
    assert not (out / "channel").exists()
    prep = prepare_scenario(validate_scenario(scenario(record=True)))
    execute(prep, make_learner(prep), out, overwrite=True)
    assert len(list((out / "channel").glob("part-*.parquet"))) == FRAMES
    prep = prepare_scenario(validate_scenario(scenario()))
    execute(prep, make_learner(prep), out, overwrite=True)
    assert not (out / "channel").exists()


def test_a_failed_recording_run_resumes_to_the_uninterrupted_channel_table(tmp_path):
    """A recording run that fails in frame 2 and is resumed writes the same channel parts (and
    events) as the uninterrupted run."""
    from wflsim.app.run import resume

    data = scenario(**CHANNEL, record=True)
    whole = tmp_path / "whole"
    run_to(data, whole)
    cut = tmp_path / "cut"
    prep = prepare_scenario(validate_scenario(data))
    with pytest.raises(RuntimeError):
        execute(prep, make_learner(prep), cut, hooks=failing_at_frame(2))
    assert len(list((cut / "channel").glob("part-*.parquet"))) == 2
    prep = prepare_scenario(validate_scenario(data))
    resume(prep, make_learner(prep), cut)
    for sub in ("channel", "events"):
        a = [pq.read_table(p) for p in sorted((whole / sub).glob("part-*.parquet"))]
        b = [pq.read_table(p) for p in sorted((cut / sub).glob("part-*.parquet"))]
        assert len(a) == len(b) == FRAMES
        assert all(x.equals(y) for x, y in zip(a, b, strict=True))
    manifest = json.loads((cut / "manifest.json").read_text())
    assert [e["frame"] for e in manifest["channel_parts"]] == list(range(FRAMES))
