"""Component state: a run saved at a frame boundary and continued equals the uninterrupted run."""

from __future__ import annotations

import zipfile

import numpy as np
import pyarrow as pa
import pytest
import torch

from conftest import base_scenario
from golden_runs import digits
from wflsim.app.run import build_engine, make_learner, prepare_scenario
from wflsim.sim import state
from wflsim.sim.config.loading import validate_scenario
from wflsim.sim.registry import SCHEMES


def _engine(data: dict):
    prep = prepare_scenario(validate_scenario(data))
    return build_engine(prep, make_learner(prep))


def _split_run(data: dict, k: int, tmp_path) -> tuple[pa.Table, object]:
    """Run k frames, checkpoint to a file, continue in freshly built objects: (trace, engine)."""
    first = _engine(data)
    first.run(stop_frame=k)
    path = tmp_path / "checkpoint.npz"
    state.save(path, state.run_state(first))
    second = _engine(data)
    state.load_run_state(second, state.load(path))
    second.run()
    return pa.concat_tables([first.table(), second.table()]), second


@pytest.mark.parametrize("scheme", sorted(SCHEMES))
def test_save_and_continue_with_training_equals_the_uninterrupted_run(scheme, tmp_path):
    """Digits with training, moving devices, freezing: events and final model are identical."""
    data = digits(scheme, seed=3)
    whole = _engine(data)
    whole.run()
    split, resumed = _split_run(data, 2, tmp_path)
    assert split.equals(whole.table())
    assert torch.equal(resumed.learner.global_params(), whole.learner.global_params())
    assert resumed.stats.as_dict() | {"wall_time_s": 0} == whole.stats.as_dict() | {
        "wall_time_s": 0
    }


@pytest.mark.parametrize("k", [1, 3])
def test_save_and_continue_network_only_with_fast_mobility(k, tmp_path):
    """Network only, fast random waypoint (many legs), saved after frame k: identical events."""
    data = base_scenario(
        run={"frames": 4, "slots_per_frame": 5, "deadline_s": 0.8},
        network={"num_devices": 9, "cell_radius_m": 300.0},
        mobility={"model": "random_waypoint", "speed_mps": [40.0, 80.0], "pause_s": 0.5},
        scheme={"name": "two_timescale", "V": 10.0},
    )
    whole = _engine(data)
    whole.run()
    split, _ = _split_run(data, k, tmp_path)
    assert split.equals(whole.table())


#: Channels with memory across frames and slots: the LOS-state and shadowing processes along the
#: path, Gauss-Markov fading, outdated CSI whose history crosses frame boundaries.
CORRELATED_CHANNELS = {
    "uma-3gpp-shadowing-rician-gm-csi": {
        "pathloss": {"model": "uma", "carrier_ghz": 3.5},
        "shadowing": {"sigma_db": "3gpp", "decorrelation_m": "3gpp"},
        "fading": {"model": "rician", "k_db": 6.0, "correlation": "gauss_markov"},
        "csi": {"error_variance": 0.1, "delay_slots": 3},
    },
    "nakagami-gm-shadowing-delay": {
        "shadowing": {"sigma_db": 6.0, "decorrelation_m": 20.0},
        "fading": {
            "model": "nakagami",
            "m": 2.0,
            "correlation": {"model": "gauss_markov", "carrier_ghz": 2.0},
        },
        "csi": {"delay_slots": 7},
    },
}


@pytest.mark.parametrize("name", sorted(CORRELATED_CHANNELS))
@pytest.mark.parametrize("k", [1, 2])
def test_save_and_continue_with_correlated_channel_models(name, k, tmp_path):
    """Correlated fading, shadowing and LOS state along moving paths, outdated CSI: a run saved
    after frame k and continued in fresh objects has identical events."""
    data = base_scenario(
        run={"frames": 3, "slots_per_frame": 5, "deadline_s": 0.8},
        network={"num_devices": 7, "cell_radius_m": 300.0},
        mobility={"model": "random_waypoint", "speed_mps": [10.0, 30.0], "pause_s": 0.5},
        channel=CORRELATED_CHANNELS[name],
        scheme={"name": "two_timescale", "V": 10.0},
    )
    whole = _engine(data)
    whole.run()
    split, _ = _split_run(data, k, tmp_path)
    assert split.equals(whole.table())


def test_checkpoint_file_round_trip():
    """Arrays (dtype and shape), numbers, NaN, None, strings and nesting survive save and load."""
    tree = {
        "a": np.arange(6, dtype=np.int32).reshape(2, 3),
        "b": {"c": np.array([1.5, np.nan], dtype=np.float32), "d": None, "e": "text"},
        "f": [1, 2.5, float("nan"), float("-inf"), True],
        "g": np.array([2**64 - 1], dtype=np.uint64),
    }
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "s.npz"
        state.save(path, tree)
        back = state.load(path)
        assert not (Path(d) / "s.npz.tmp").exists()
    np.testing.assert_array_equal(back["a"], tree["a"])
    assert back["a"].dtype == np.int32
    np.testing.assert_array_equal(back["b"]["c"], tree["b"]["c"])
    assert back["b"]["d"] is None and back["b"]["e"] == "text"
    assert back["f"][:2] == [1, 2.5] and np.isnan(back["f"][2]) and back["f"][3] == -np.inf
    assert back["g"][0] == 2**64 - 1


def test_checkpoint_refuses_what_it_cannot_store():
    """Objects that are not arrays, numbers, strings or containers are a TypeError."""
    with pytest.raises(TypeError, match="cannot save"):
        state.save("/nonexistent/never-written.npz", {"x": object()})


@pytest.mark.parametrize(
    "content",
    [b"not a zip at all", b""],
)
def test_loading_garbage_is_a_clear_value_error(content, tmp_path):
    """A file that is not a checkpoint gives ValueError naming it, never a pickle load."""
    path = tmp_path / "bad.npz"
    path.write_bytes(content)
    with pytest.raises(ValueError, match="checkpoint"):
        state.load(path)


def test_loading_a_zip_without_the_tree_is_refused(tmp_path):
    """An .npz of arrays that wflsim did not write is refused (no __tree__ member)."""
    path = tmp_path / "other.npz"
    np.savez(path, x=np.zeros(3))
    with pytest.raises(ValueError, match="not a wflsim checkpoint"):
        state.load(path)
    with zipfile.ZipFile(path) as z:
        assert "x.npy" in z.namelist()


def test_state_of_another_run_shape_is_refused(tmp_path):
    """Loading a 6-device run's state into a 9-device engine names the mismatch."""
    small = _engine(base_scenario())
    small.run(stop_frame=1)
    big = _engine(base_scenario(network={"num_devices": 9}))
    with pytest.raises(ValueError, match="devices"):
        state.load_run_state(big, state.run_state(small))


def test_engine_state_only_at_frame_boundaries():
    """Asking for the engine's state in the middle of a frame is a RuntimeError."""
    eng = _engine(base_scenario())
    seen = []

    def grab(slot, stats):
        if slot == 2 and not seen:
            with pytest.raises(RuntimeError, match="frame boundary"):
                eng.state_dict()
            seen.append(slot)

    eng.progress = grab
    eng.run()
    assert seen == [2]
