"""On a GPU: every shipped solution and starter passes and is timed; failures keep their shape."""

import threading
import time

import pytest
import submissions as subs
import torch

import kerneldojo
from kerneldojo.baselines import shipped_solutions
from kerneldojo.tasks import get_task, list_tasks

pytestmark = pytest.mark.gpu

SOLUTIONS = [(t, lang, "baseline") for t in list_tasks() for lang in shipped_solutions(t)]
SOLUTIONS += [(t, lang, "starter") for t in list_tasks() for lang in get_task(t).spec.languages]


def skip_without_enough_gpus(task) -> None:
    """A distributed task's baseline passes only where the judge can start a worker per rank."""
    if task.spec.distributed and torch.cuda.device_count() < task.spec.shapes.test[0]["ranks"]:
        pytest.skip(f"{task.id} needs {task.spec.shapes.test[0]['ranks']} GPUs; tests/test_collective.py checks "
                    "that a judge here says `skipped`")


@pytest.mark.parametrize(("task_id", "language", "kind"), SOLUTIONS)
def test_solution_passes_on_the_gpu(gpu_checker, task_id, language, kind):
    task = get_task(task_id)
    skip_without_enough_gpus(task)
    source = shipped_solutions(task_id)[language].read_text() if kind == "baseline" else task.starter(language)
    result = gpu_checker.evaluate(task, source, language)
    assert result.status == "ok", result.messages
    assert result.mode == "gpu" and result.device.startswith("NVIDIA") and result.versions.cuda_driver
    assert result.cases_checked == len(task.cases("test")) * (gpu_checker.seeds + 1)  # + a perturbed call


@pytest.mark.parametrize(("task_id", "language"),
                         [("vector_add", "cuda"), ("softmax", "triton"), ("matmul", "triton"), ("matmul", "cuda")])
def test_timing_is_reported(gpu_judge, task_id, language):
    task = get_task(task_id)
    result = gpu_judge.evaluate(task, shipped_solutions(task_id)[language].read_text(), language)
    assert result.status == "ok" and result.timed and len(result.timings) == len(task.cases("bench"))
    for timing in result.timings:
        assert timing.submission.runs >= 10 and timing.submission.median_ms > 0
        assert timing.eager is not None and timing.speedup > 0 and timing.floor_ms > 0
    assert result.speedup is not None and result.roofline_fraction is not None
    assert result.reward >= gpu_judge.reward.correct + gpu_judge.reward.speed_weight * gpu_judge.reward.log2_speedup_min


@pytest.mark.parametrize("source", [subs.VECTOR_ADD_OFF_BY_ONE, subs.VECTOR_ADD_CUDA_OFF_BY_ONE],
                         ids=["triton", "cuda"])  # pytest 9 names string parameters otherwise: ids the device knows
def test_off_by_one_is_wrong_on_the_gpu(gpu_judge, source):
    result = gpu_judge.evaluate("vector_add", source)
    assert result.status == "wrong" and not result.timed and result.reward == 0
    assert result.mismatch.index == [result.mismatch.total - 1]


def test_cuda_compile_error_on_the_gpu(gpu_judge):
    result = gpu_judge.evaluate("vector_add", subs.VECTOR_ADD_CUDA_ERROR)
    assert result.status == "compile_error" and "error" in result.messages[0]


def test_triton_compile_error_cites_the_submission_line(gpu_judge):
    result = gpu_judge.evaluate("vector_add", subs.VECTOR_ADD_TRITON_COMPILE_ERROR, "triton")
    line = 1 + subs.VECTOR_ADD_TRITON_COMPILE_ERROR.splitlines().index("    bad = tl.no_such_function(offs)")
    assert result.status == "compile_error", result.messages
    assert f"submission.py, line {line}" in result.messages[0] and "no_such_function" in result.messages[0]


def test_env_step_on_the_gpu(gpu_judge):
    env = kerneldojo.make("vector_add", language="cuda", judge=gpu_judge)
    env.reset()
    obs, reward, _, _, info = env.step(subs.VECTOR_ADD_CUDA)
    assert info["result"].timed and "Timed on NVIDIA" in obs["feedback"] and reward == info["result"].reward


@pytest.mark.parametrize(("source", "status"), [(subs.VECTOR_ADD_CUDA_ILLEGAL_ADDRESS, "runtime_error"),
                                                (subs.VECTOR_ADD_CUDA_HANG, "timeout")])
def test_device_faults_are_contained(source, status):
    from kerneldojo.judge import Judge

    judge = Judge("cuda", limits={"run": 15, "compile": 30}, timed=False)
    result = judge.evaluate("vector_add", source, "cuda")
    assert result.status == status, result.messages
    assert judge.evaluate("vector_add", subs.VECTOR_ADD_CUDA, "cuda").status == "ok"  # a fresh worker, a fresh context


GPU_HOARD = """
import torch


def solution(x, y):
    hoard = []
    while True:  # 1 GiB at a time until the GPU has no more
        hoard.append(torch.empty(1 << 30, dtype=torch.uint8, device=x.device))
"""


def test_gpu_out_of_memory_is_contained():
    from kerneldojo.judge import Judge

    judge = Judge("cuda", limits={"run": 60}, timed=False)
    result = judge.evaluate("vector_add", GPU_HOARD, "python")
    assert result.status == "runtime_error" and "out of memory" in result.messages[0].lower(), result.messages
    # The worker held the whole GPU; it is gone, and the next one has the memory back.
    assert judge.evaluate("vector_add", subs.VECTOR_ADD_TRITON, "triton").status == "ok"


def test_gpu_worker_reports_its_protections():
    from kerneldojo.graders.compile import compile_submission
    from kerneldojo.judge import Judge
    from kerneldojo.sandbox.process import WorkerSolution
    from kerneldojo.tasks import get_task

    judge, task = Judge("cuda", timed=False), get_task("vector_add")
    solution = WorkerSolution(task, compile_submission(task, subs.VECTOR_ADD_TORCH, "python", judge.device.arch),
                              judge.device, judge.limits)
    try:
        protections = solution.protections
    finally:
        solution.close()
    print(protections)  # for the log: what this machine allows
    assert str(protections["pid_namespace"]).startswith(("off", "unavailable")) or protections["pid_namespace"] is True


@pytest.mark.xfail(reason="legacy CUDA IPC handles are reported not to open across pid namespaces; "
                          "an XPASS here means they do on this driver, and GPU workers can get one too", strict=False)
def test_cuda_ipc_across_a_pid_namespace(monkeypatch):
    from kerneldojo.judge import Judge

    monkeypatch.setenv("KERNELDOJO_PID_NAMESPACE", "1")
    judge = Judge("cuda", limits={"processes": 1023}, timed=False)  # its own spare workers, made with the variable
    for source, language in ((subs.VECTOR_ADD_CUDA, "cuda"), (subs.VECTOR_ADD_TRITON, "triton")):
        result = judge.evaluate("vector_add", source, language)
        assert result.status == "ok", result.messages


def test_reference_is_timed_in_a_clean_worker():
    from kerneldojo.judge import Judge
    from kerneldojo.sandbox.device import resolve_device
    from kerneldojo.sandbox.process import time_reference_in_worker

    device, task = resolve_device("cuda"), get_task("vector_add")
    case = task.cases("bench")[0]
    stats = time_reference_in_worker(device, task, case.shape, "eager", 3, device.l2_bytes, 0.5)
    assert stats.runs >= 10 and 0 < stats.min_ms <= stats.median_ms
    # The judge's route: eager and torch.compile, each in its own worker (no cache: measured here).
    judge = Judge("cuda", timing_budget_s=0.5, reference_cache=None)
    result = judge.evaluate(task, shipped_solutions("vector_add")["triton"].read_text(), "triton")
    assert result.status == "ok" and len(result.timings) == len(task.cases("bench")), result.messages
    for timing in result.timings:
        assert timing.eager is not None and timing.eager.median_ms > 0
        assert timing.compiled is not None and timing.compiled.median_ms > 0 and timing.speedup_vs_compile > 0


def test_host_gate_holds_the_gpu_until_opened_and_never_deadlocks():
    from kerneldojo.graders.timing import HostGate, time_calls

    device = torch.device("cuda")
    x = torch.zeros(1, device=device)
    gate = HostGate(device)
    torch.cuda.synchronize()
    gate.close()
    x.add_(1)
    queued = torch.cuda.Event()
    queued.record()
    time.sleep(1e-3)  # long enough for an idle GPU to run the add, short of the gate's 20 ms timeout
    assert not queued.query()  # held: the work queued behind the gate has not run
    gate.open()
    queued.synchronize()
    assert x.item() == 1

    def waits_for_the_gpu():  # a call that synchronizes inside the window: the gate times out, no deadlock
        x.add_(1)
        torch.cuda.synchronize()

    assert time_calls([waits_for_the_gpu], device, 1 << 20, min_runs=3, max_runs=3).runs == 3


def test_what_a_worker_is_sent_shares_no_allocator_segment_with_the_judges_memory():
    """A CUDA IPC handle maps its tensor's whole allocator segment (red team round 27: a worker read the judge's
    expected outputs beside its inputs). Tensors made in `ExportedMemory.allocating` sit in segments of their own,
    and the pool is reused, not grown, call after call."""
    from kerneldojo.sandbox.device import ExportedMemory, resolve_device

    exported = ExportedMemory(resolve_device("cuda"))
    reserved = []
    for _ in range(5):
        judges_before = torch.full((1000,), 7.0, device="cuda")
        with exported.allocating():
            sent = [torch.zeros(1000, device="cuda"), torch.zeros(3 << 20, device="cuda")]
        judges_after = torch.full((1000,), 7.0, device="cuda")
        for tensor in sent:
            segment = next(s for s in torch.cuda.memory_snapshot()
                           if s["address"] <= tensor.data_ptr() < s["address"] + s["total_size"])
            span = range(segment["address"], segment["address"] + segment["total_size"])
            assert judges_before.data_ptr() not in span and judges_after.data_ptr() not in span
            live = [b for b in segment["blocks"] if b["state"] == "active_allocated"]
            assert {b["address"] for b in live} <= {t.data_ptr() for t in sent}, live
        del sent, judges_before, judges_after
        reserved.append(torch.cuda.memory_reserved())
    assert reserved[-1] == reserved[1], reserved
    # Another thread's steps (one judge, several RL rollouts at once) get segments of their own.
    with exported.allocating():
        here = torch.zeros(1000, device="cuda")
    there = []
    thread = threading.Thread(target=lambda: there.append(_allocated_in(exported)))
    thread.start()
    thread.join()
    segment = next(s for s in torch.cuda.memory_snapshot()
                   if s["address"] <= here.data_ptr() < s["address"] + s["total_size"])
    assert not segment["address"] <= there[0].data_ptr() < segment["address"] + segment["total_size"]


def _allocated_in(exported):
    with exported.allocating():
        return torch.zeros(1000, device="cuda")
