"""Distributed tasks (all_reduce): one worker per rank, peer memory from the judge, ranks failing together.

CPU mode runs every rank's Triton through the interpreter in its own worker, over shared memory; on
a host with two GPUs the same paths run over CUDA IPC and peer access, and are timed against NCCL.
"""

import pytest
import torch

from kerneldojo.baselines import shipped_solutions
from kerneldojo.judge import Judge

BASELINE = shipped_solutions("all_reduce")["triton"].read_text()
TWO_GPUS = pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs of one host")

LOCAL_ONLY = """
def solution(x, group):
    return x.clone()  # this rank's own contribution only
"""

EVERY_RANK_THE_SAME = """
import torch

def solution(x, group):  # right only if every rank held the same x (in Python: no operator to flag)
    values = [v * group.world_size for v in x.flatten().tolist()]
    return torch.tensor(values, dtype=x.dtype, device=x.device).view(x.shape)
"""

# Rank 1 fails before it reaches the barrier; rank 0 would wait there for it until its time limit.
ONE_RANK_RAISES = BASELINE.replace("    calls += 1\n", "    calls += 1\n    if group.rank == 1:\n"
                                   "        raise RuntimeError('rank 1 gives up')\n", 1)
ONE_RANK_HANGS = BASELINE.replace("    calls += 1\n", "    calls += 1\n    while group.rank == 1:\n        pass\n", 1)


def test_the_group_is_what_the_prompt_promises(cpu_judge):
    probe = """
import torch

def solution(x, group):
    assert 0 <= group.rank < group.world_size == 2
    assert group.buffer_bytes >= 2 * x.nbytes and group.signal_words >= 64
    assert group.buffer_ptrs.tolist()[group.rank] == group.buffer.data_ptr()
    assert group.signal_ptrs.tolist()[group.rank] == group.signal.data_ptr() and not any(group.signal.tolist())
    assert group.signal_ptrs.dtype == torch.int64 and group.buffer_ptrs.device == x.device
    return x.clone()
"""
    result = cpu_judge.evaluate("all_reduce", probe, "triton")
    assert result.status == "wrong", result.messages  # it gets that far: the asserts held on both ranks


@pytest.mark.parametrize("source", [LOCAL_ONLY, EVERY_RANK_THE_SAME])
def test_a_sum_that_is_not_over_all_ranks_is_wrong(cpu_judge, source):
    result = cpu_judge.evaluate("all_reduce", source, "triton")
    assert result.status == "wrong" and result.reward == cpu_judge.reward.failure
    assert result.mismatch is not None and result.mismatch.mismatched > 0


def test_one_rank_failing_ends_every_rank():
    result = Judge("cpu", limits={"run": 600.0, "compile": 0.0}).evaluate("all_reduce", ONE_RANK_RAISES, "triton")
    assert result.status == "runtime_error"
    assert any("rank 1 gives up" in m for m in result.messages), result.messages
    # Rank 0, left waiting in the barrier, was killed with its peer instead of running into its 600 s limit.
    assert not any("limit" in m for m in result.messages), result.messages


def test_one_rank_hanging_is_a_timeout():
    result = Judge("cpu", limits={"run": 10.0, "compile": 0.0}).evaluate("all_reduce", ONE_RANK_HANGS, "triton")
    assert result.status == "timeout", result.messages


@pytest.mark.parametrize("then", ["raise RuntimeError('give up')", "time.sleep(10**6)"])
def test_a_ranks_check_outranks_the_failure_that_closed_every_rank(then):
    """Red team round 94: one rank's failure closed every rank, and the checks their run replies had carried went
    with them: a flagged call, then a raise or a hang, paid a failure's 0 over a flag's -1."""
    flagged_then = f"    calls += 1\n    if calls == 1:\n        _ = x + x\n    if calls >= 2:\n        {then}\n"
    source = "import time\n" + shipped_solutions("all_reduce")["triton"].read_text().replace(
        "    calls += 1\n", flagged_then, 1)
    judge = Judge("cpu", seeds=1, limits={"run": 10.0, "compile": 20.0}, result_cache=None)
    result = judge.evaluate("all_reduce", source, "triton")
    assert result.status == "flagged" and "forbidden_op" in result.checks_fired, result.messages


def test_no_rank_loads_the_submission_while_another_ranks_worker_starts(monkeypatch):
    """Red team round 80: rank 0 loaded the submission while rank 1's worker was still starting, so rank 0's code
    (which, on the process backend, sees every GPU) could fill rank 1's memory and make that start fail: the
    machine's `skipped`, not the submission's failure. Every rank's worker is READY before any rank loads."""
    from kerneldojo.sandbox import process

    started: list = []
    loads: list = []
    real_take, real_load = process._take_worker, process.WorkerSolution._load

    def take(device, limits=None, replace=True):
        started.append(device)
        if len(started) == 1:
            return real_take(device, limits, replace)
        worker = process._Worker(device, limits)  # every worker after the first rank's dies before its READY
        worker.protections(timeout=60)
        worker._kill()
        return worker

    monkeypatch.setattr(process, "_take_worker", take)
    monkeypatch.setattr(process.WorkerSolution, "_load", lambda self, task, build: (loads.append(self), real_load(
        self, task, build))[1])
    result = Judge("cpu", limits={"load": 60.0, "compile": 0.0}, result_cache=None).evaluate(
        "all_reduce", BASELINE, "triton")
    assert result.status == "skipped", result.messages
    assert not loads, "a rank loaded the submission though another rank's worker never became ready"
    assert len(started) == 3  # rank 1's worker and its retry, and rank 0's


def test_without_a_worker_per_rank_the_result_says_skipped_and_why():
    result = Judge("cpu", isolation="none").evaluate("all_reduce", BASELINE, "triton")
    assert result.status == "skipped" and result.reward == 0
    assert "isolation='process'" in result.messages[0]


@pytest.mark.gpu
@pytest.mark.skipif(torch.cuda.device_count() >= 2, reason="this host has the two GPUs the task needs")
def test_one_gpu_says_skipped_and_why(gpu_checker):
    result = gpu_checker.evaluate("all_reduce", BASELINE, "triton")
    assert result.status == "skipped" and "needs 2 GPUs" in result.messages[0], result.messages


@pytest.mark.gpu
@TWO_GPUS
def test_two_gpus_baseline_is_correct_and_timed_against_nccl(gpu_judge):
    result = gpu_judge.evaluate("all_reduce", BASELINE, "triton")
    assert result.status == "ok", result.messages
    assert result.timed and len(result.timings) == 4  # 2 sizes x 2 dtypes
    for timing in result.timings:
        assert timing.eager is not None and timing.eager.median_ms > 0  # NCCL, in its own rank processes
        assert timing.submission.runs == 40 and timing.profile is not None and timing.profile.own_share > 0.5


@pytest.mark.gpu
@TWO_GPUS
@pytest.mark.parametrize("source", [LOCAL_ONLY, EVERY_RANK_THE_SAME, ONE_RANK_RAISES],
                         ids=["local_only", "every_rank_the_same", "one_rank_raises"])
def test_two_gpus_failures(gpu_checker, source):
    result = gpu_checker.evaluate("all_reduce", source, "triton")
    assert result.status in ("wrong", "runtime_error"), result.messages


def test_the_judge_checks_every_ranks_profile():
    """Red team round 42 (reasoned): the slowest rank's profile alone was checked, so another rank could do the work
    in library kernels that no check saw. The profile the checks get is every rank's, each figure at its worst."""
    from kerneldojo.result import KernelRecord, ProfileStats
    from kerneldojo.sandbox.peers import every_rank

    own = ProfileStats(calls=5, kernel_ms=2.0, busy_ms=2.0, launches_per_call=1, streams=1, own_share=1.0,
                       kernels=[KernelRecord(name="spin", own=True, vendor=False, launches=5, ms_per_call=2.0)])
    library = ProfileStats(calls=5, kernel_ms=0.5, busy_ms=0.6, launches_per_call=3, streams=2, own_share=0.0,
                           kernels=[KernelRecord(name="ncclKernel_AllReduce", own=False, vendor=True, launches=5,
                                                 ms_per_call=0.5)])
    merged = every_rank([own, library])
    assert merged.own_share == 0.0 and merged.busy_ms == 2.0 and merged.streams == 2
    assert {k.name for k in merged.kernels} == {"spin", "ncclKernel_AllReduce"}
    assert every_rank([own, None]).own_share is None  # a rank that sent no profile shows no kernel of its own
    assert every_rank([None, None]) is None
