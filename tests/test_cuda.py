"""The learner and whole runs on a CUDA device (skipped where torch sees no GPU).

The CPU is the reference: the same learner built on the GPU must upload the gradients of a
per-device loop over model copies, freeze the same parameters and leave the network side of a
run bit-identical (the network never sees the learner's floats under the ``ideal`` scheme). GPU
floats differ from CPU floats in the last bits (other kernels, other summation orders), so the
learning side is compared with stated tolerances, never hashed.
"""

from __future__ import annotations

import copy
import tomllib

import numpy as np
import pytest
import torch
from test_learner import freeze, reference_grads, rule, run_frame, tiny_learner, with_freezing

from conftest import REPO, run_in_memory
from golden_runs import column_hashes
from wflsim.sim.rng import Streams

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

QUICK = REPO / "scenarios" / "quickstart.toml"

#: Trace columns computed from the learner's floats; every other column is network-side.
LEARNING_COLUMNS = {
    "loss",
    "accuracy",
    "stable_fraction",
    "probe_loss",
    "prox_term",
    "control_update_norm",
    "server_step_norm",
}


def quick(frames: int = 3, **learning: object) -> dict:
    """The quick-start scenario, ``frames`` frames, with ``[learning]`` fields replaced."""
    data = tomllib.loads(QUICK.read_text())
    data["run"]["frames"] = frames
    data["learning"].update(learning)
    return data


def network_hashes(table) -> dict[str, str]:
    """Column hashes of a trace's network-side columns."""
    return {k: v for k, v in column_hashes(table).items() if k not in LEARNING_COLUMNS}


@pytest.mark.parametrize("chunk", [None, 8])
def test_cuda_uploads_match_a_loop_over_model_copies(chunk: int | None) -> None:
    """On the GPU, the vmap path (chunk None) and the per-device path upload what a per-device
    autograd loop over model copies computes (float32, rtol 1e-5)."""
    learner = tiny_learner([8, 8, 8, 8], vmap_chunk_samples=chunk, device="cuda")
    learner.compute(0, np.array([3, 0, 2]))
    assert learner.gradients.device.type == "cuda"
    torch.testing.assert_close(learner.gradients, reference_grads(learner), rtol=1e-5, atol=1e-6)


def test_cuda_uploads_equal_the_cpu_learners() -> None:
    """The same learner on the GPU and on the CPU: same batches, uploads equal within rtol 1e-4."""
    gpu = tiny_learner([2, 9, 5, 1, 30], vmap_chunk_samples=None, device="cuda")
    cpu = tiny_learner([2, 9, 5, 1, 30], vmap_chunk_samples=None)
    for learner in (gpu, cpu):
        learner.compute(0, np.arange(5))
    assert [b.tolist() for b in gpu.last_batches] == [b.tolist() for b in cpu.last_batches]
    torch.testing.assert_close(gpu.gradients.cpu(), cpu.gradients, rtol=1e-4, atol=1e-6)


def test_cuda_freezing_matches_the_cpu() -> None:
    """Per-device freezing on the GPU: the same masks as on the CPU, frozen entries unmoved, and
    the uploads of the loop over model copies."""
    gamma = np.array([0.0, 0.3, 0.6, 0.9])
    gpu = with_freezing(tiny_learner([3, 7, 4, 6], device="cuda"), gamma)
    cpu = with_freezing(tiny_learner([3, 7, 4, 6]), gamma)
    assert torch.equal(rule(gpu).masks().cpu(), rule(cpu).masks())
    gpu.compute(9, np.array([1, 2, 0, 3]))
    torch.testing.assert_close(gpu.gradients, reference_grads(gpu), rtol=1e-5, atol=1e-6)
    masks = rule(gpu).masks()[torch.tensor([1, 2, 0, 3])].to(gpu.gradients.device)
    assert not gpu.gradients.masked_select(masks).any()


def test_cuda_auto_chunk_is_the_gpu_value() -> None:
    """vmap_chunk_samples='auto' on a GPU takes AUTO_CHUNK_SAMPLES['cuda']."""
    from wflsim.models.learner import AUTO_CHUNK_SAMPLES

    assert tiny_learner([4, 4], device="cuda").vmap_chunk_samples == AUTO_CHUNK_SAMPLES["cuda"]


def test_cuda_run_keeps_the_network_trace_of_the_cpu_run() -> None:
    """The quick start with ``learning.device = "cuda"``: network columns bit-identical to the CPU
    run's, final accuracy within 0.05 of it."""
    gpu, _ = run_in_memory(quick(device="cuda"))
    cpu, _ = run_in_memory(quick(device="cpu"))
    assert network_hashes(gpu) == network_hashes(cpu)
    acc_gpu = gpu.column("accuracy").drop_null().to_numpy()
    acc_cpu = cpu.column("accuracy").drop_null().to_numpy()
    assert acc_gpu.size == acc_cpu.size > 0
    assert abs(acc_gpu[-1] - acc_cpu[-1]) < 0.05


def test_cuda_two_timescale_run_trains_the_mnist_cnn(data_dir) -> None:
    """The paper's scheme with freezing and the paper's MNIST CNN on the GPU: every evaluated
    loss finite, the last below the first."""
    data = quick(
        frames=4, dataset="mnist", model="cnn_mnist", lr=0.05, eval_every_slots=20, device="cuda"
    )
    data["devices"]["batch_size"] = 64
    data["run"]["deadline_s"] = 0.8
    data["scheme"] = {"name": "two_timescale", "V": 100.0}
    table, _ = run_in_memory(data)
    loss = table.column("loss").drop_null().to_numpy()
    assert loss.size >= 2 and np.isfinite(loss).all()
    assert loss[-1] < loss[0]
    gamma = table.column("gamma").drop_null().to_numpy()
    assert (gamma > 0).any()  # some parameters were frozen on the GPU


def test_cuda_state_dict_restores_on_the_cpu() -> None:
    """A GPU learner's frame-end checkpoint state loads into a CPU learner, which then freezes
    and uploads what the GPU learner does in the next frame (rtol 1e-4): a run checkpointed on a
    GPU resumes anywhere."""
    gpu = tiny_learner([3, 7, 4, 6], device="cuda", sampling_streams=Streams(4))
    cpu = tiny_learner([3, 7, 4, 6], sampling_streams=Streams(4))
    run_frame(gpu, 0, np.zeros(4), 3)
    cpu.load_state_dict(copy.deepcopy(gpu.state_dict()))
    gamma = np.array([0.1, 0.2, 0.3, 0.4])
    for learner in (gpu, cpu):
        learner.begin_frame(1, freeze(learner, gamma))
        learner.compute(3, np.arange(4))
    assert torch.equal(rule(gpu).masks().cpu(), rule(cpu).masks())
    torch.testing.assert_close(gpu.gradients.cpu(), cpu.gradients, rtol=1e-4, atol=1e-6)
