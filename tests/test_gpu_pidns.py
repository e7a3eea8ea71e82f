"""GPU mode's pid namespace (issue 13, item 7): measured by baselines/bench/probe_cuda_ipc_pidns.py, and tried through
the judge with KERNELDOJO_GPU_PIDNS=1. Today GPU workers share the judge's pid namespace and /dev/shm."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import submissions as subs

pytestmark = pytest.mark.gpu
PROBE = Path(__file__).resolve().parent.parent / "baselines" / "bench" / "probe_cuda_ipc_pidns.py"


def test_the_cuda_ipc_probe_measures_every_row():
    done = subprocess.run([sys.executable, str(PROBE), "--json"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = {row["row"]: row for row in json.loads(done.stdout.strip().splitlines()[-1])}
    print(json.dumps(rows, indent=1))  # the measurement, for the log: which confinement CUDA IPC survives
    assert len(rows) == 5 and all("works" in row for row in rows.values())
    assert rows["baseline: the judge's namespaces"]["works"], rows  # the probe itself works
    assert not rows["own pid namespace + empty private /dev/shm"]["works"], rows  # the ref counter is needed


@pytest.mark.xfail(reason="legacy CUDA IPC handles are reported not to open across pid namespaces; an XPASS means "
                          "they do here, and KERNELDOJO_GPU_PIDNS=1 can become GPU mode's default", strict=False)
def test_a_gpu_worker_in_its_own_pid_namespace(monkeypatch):
    from kerneldojo.judge import Judge
    from kerneldojo.sandbox.process import WorkerSolution

    monkeypatch.setenv("KERNELDOJO_GPU_PIDNS", "1")
    judge = Judge("cuda", limits={"processes": 1022}, timed=False)  # spare workers of its own, made with the flag
    for source, language in ((subs.VECTOR_ADD_CUDA, "cuda"), (subs.VECTOR_ADD_TRITON, "triton")):
        result = judge.evaluate("vector_add", source, language)
        assert result.status == "ok", result.messages
    from kerneldojo.graders.compile import compile_submission
    from kerneldojo.tasks import get_task

    task = get_task("vector_add")
    solution = WorkerSolution(task, compile_submission(task, subs.VECTOR_ADD_TRITON, "triton", judge.device.arch),
                              judge.device, judge.limits)
    try:
        assert solution.protections["pid_namespace"] is True, solution.protections
    finally:
        solution.close()
