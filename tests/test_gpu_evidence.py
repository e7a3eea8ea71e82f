"""The evidence pass on a GPU (`pytest -m gpu`): honest submissions pass it untouched, and a forged timer or
host compute is caught by it alone, from Nsight Compute's record of a replay in a fresh worker.

Each test prints ncu's figures (and on a failure the kernel names it saw), so a failure says what ncu measured.
Needs ncu with access to the GPU's performance counters (NVreg_RestrictProfilingToAdminUsers=0, or root)."""

from pathlib import Path

import pytest
import submissions as subs

from kerneldojo.graders.compile import compile_submission
from kerneldojo.result import Evidence
from kerneldojo.sandbox.protocol import REFILLS
from kerneldojo.tasks import get_task

pytestmark = pytest.mark.gpu
EXPLOITS = Path(__file__).parent / "adversarial" / "exploits"
HONEST = Path(__file__).parent / "adversarial" / "honest"
EVIDENCE_FLAGS = {"evidence_wrong", "time_disagrees", "no_kernel", "vendor_kernel", "decoy_kernel"}


@pytest.fixture(scope="module")
def judge():
    from kerneldojo.judge import Judge

    return Judge("cuda", timing_budget_s=0.5, time_compiled_reference=False, result_cache=None, evidence="always")


def shipped(task: str, language: str) -> str:
    from kerneldojo.baselines import shipped_solutions

    return shipped_solutions(task)[language].read_text()


@pytest.mark.parametrize("task,language,source", [
    ("vector_add", "triton", lambda: subs.VECTOR_ADD_TRITON),
    ("vector_add", "cuda", lambda: subs.VECTOR_ADD_CUDA),
    ("softmax", "triton", lambda: shipped("softmax", "triton")),
    ("vector_add", "triton", lambda: (HONEST / "autotune_configs.py").read_text()),
], ids=["vector_add-triton", "vector_add-cuda", "softmax-triton", "autotune"])
def test_honest_submissions_pass_the_evidence_pass(judge, task, language, source):
    result = judge.evaluate(task, source(), language)
    evidence = result.evidence
    print(result.status, result.messages, evidence, result.phases, sep="\n")
    assert evidence is not None and evidence.note is None, f"the pass decided nothing: {evidence}"
    assert result.status == "ok", result.messages
    assert not EVIDENCE_FLAGS & set(result.checks_fired)
    assert evidence.launches > 0 and evidence.own_share and evidence.own_share > 0.9, evidence
    # What the tolerance (graders.evidence.TIME_SLACK) has to absorb on this GPU, for the record.
    print(f"ncu lower bound / worker's claim: {evidence.kernel_ms / evidence.claimed_ms:.2f}")
    assert result.phases["evidence"] > 0


def test_an_armed_replay_made_its_inputs_ahead_and_the_honest_kernel_passes_it(judge):
    """A replay armed ahead (`sandbox.process.arm_evidence_replays`) with the judge's seeds for every bench case: the
    step takes it, and the honest kernel passes as with a replay started on the spot."""
    import functools
    import time

    from kerneldojo.judge import _task_key
    from kerneldojo.sandbox import process

    task = get_task("vector_add")
    key = (process._spare_key(judge.device, judge.limits)[0], _task_key(task))
    process.arm_evidence_replays(judge.device, judge.limits, functools.partial(judge._draw_evidence_seeds, task),
                                 _task_key(task))
    deadline = time.monotonic() + 120
    while not process._armed.get(key) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert process._armed.get(key), "no replay was armed within 120 s"
    result = judge.evaluate(task, subs.VECTOR_ADD_TRITON + f"\n# {time.time()}\n", "triton")
    print(result.status, result.evidence, result.messages[-1:], sep="\n")
    assert result.status == "ok", result.messages
    assert result.evidence.armed is True and result.evidence.note is None, result.evidence


def gather(judge, task_id: str, source: str, language: str, claimed_ms: float) -> tuple[dict, Evidence]:
    """The evidence pass alone, on the largest bench case, against `claimed_ms`."""
    task = get_task(task_id)
    build = compile_submission(task, source, language, judge.device.arch)
    case = task.cases("bench")[-1]
    evidence = Evidence(case=str(case), claimed_ms=claimed_ms)
    # under the locks the judge's own pass holds: two Nsight Compute replays at once on one GPU fail in the driver
    # ("a driver resource was unavailable", seen on the H200 on 2026-11-27 with three test processes)
    with judge._gpu.profiler(), judge._gpu.shared():
        fired = judge._gather_evidence(task, build, judge._own_kernels(build, source, language), case, [1, 2], None,
                                       claimed_ms, evidence)
    print(fired, evidence, sep="\n")
    assert evidence.note is None, evidence.note
    return fired, evidence


def test_a_forged_event_timer_disagrees_with_nsight_compute(judge):
    """patch_event_elapsed_time divides every event interval by 1000. Its `tampering` flag and the worker's
    busy time catch it in the worker already; here the evidence pass, given the forged event median as the
    claim, catches it on its own."""
    from kerneldojo.sandbox.process import WorkerSolution

    task, source = get_task("vector_add"), (EXPLOITS / "patch_event_elapsed_time.py").read_text()
    build = compile_submission(task, source, "triton", judge.device.arch)
    case = task.cases("bench")[-1]
    inputs = task.reference.make_inputs(case.shape, 0, judge.device.torch_device)
    specs = [(tuple(t.shape), t.dtype) for t in task.expected(*inputs, shape=case.shape)]
    solution = WorkerSolution(task, build, judge.device)
    try:
        refills = list(range(100, 100 + REFILLS))
        forged_ms = solution.time(case.shape, [1, 2, 3], refills, [4, 5, 6], specs, judge.device.l2_bytes,
                                  0.5).stats.median_ms
    finally:
        solution.close()
    fired, evidence = gather(judge, "vector_add", source, "triton", forged_ms)
    assert "time_disagrees" in fired, (forged_ms, evidence)
    assert evidence.kernel_ms > 100 * forged_ms


def test_host_compute_is_caught_by_the_evidence_pass(judge):
    source = (EXPLOITS / "numpy_matmul.py").read_text()
    fired, evidence = gather(judge, "matmul", source, "triton", claimed_ms=1e3)  # the claim is not what is tested
    assert {"no_kernel", "decoy_kernel"} & set(fired), evidence
