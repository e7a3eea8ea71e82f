"""Fault containment of the process backend, in CPU mode: each fault ends with its own status and
a message that says what happened, and the next evaluation on the same judge succeeds."""

import os
import socket
import time

import pytest
import submissions as subs

from kerneldojo.judge import Judge


@pytest.fixture(scope="module")
def judge():
    return Judge("cpu", limits={"load": 20, "run": 8})


def _then_honest_passes(judge):
    assert judge.evaluate("vector_add", subs.VECTOR_ADD_TRITON, "triton").status == "ok"


FAULTS = {
    "host infinite loop": ("def solution(x, y):\n    while True:\n        pass\n", "timeout", "ran past its 8 s limit"),
    "loop at import": ("while True:\n    pass\n", "timeout", "load ran past"),
    "os._exit": ("import os\n\ndef solution(x, y):\n    os._exit(3)\n", "runtime_error", "exit code 3"),
    "segfault": ("import ctypes\n\ndef solution(x, y):\n    return ctypes.string_at(0)\n",
                 "runtime_error", "killed by SIGSEGV"),
    "exception": ("def solution(x, y):\n    raise ValueError('boom')\n", "runtime_error", "ValueError: boom"),
    "open files": ("def solution(x, y):\n    files = [open('/dev/null') for _ in range(100000)]\n",
                   "runtime_error", "Too many open files"),
    "output flood": ("def solution(x, y):\n    while True:\n        print('x' * 100000)\n",
                     "runtime_error", "File too large"),
}


@pytest.mark.parametrize("fault", FAULTS)
def test_fault_is_contained(judge, fault):
    source, status, message = FAULTS[fault]
    result = judge.evaluate("vector_add", source, "python")
    assert result.status == status, result.messages
    assert message in "\n".join(result.messages)
    _then_honest_passes(judge)


def test_printed_output_comes_back_with_a_crash_or_a_hang(judge):
    source = "import os\n\ndef solution(x, y):\n    print('about to exit', flush=True)\n    os._exit(1)\n"
    result = judge.evaluate("vector_add", source, "python")
    assert result.status == "runtime_error" and "about to exit" in result.messages[0]
    source = "def solution(x, y):\n    print('about to spin', flush=True)\n    while True:\n        pass\n"
    result = judge.evaluate("vector_add", source, "python")
    assert result.status == "timeout" and "about to spin" in result.messages[0]


def _can_unshare_network() -> bool:
    import subprocess

    try:
        return subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode == 0
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not _can_unshare_network(), reason="no network namespaces here (needs root or user namespaces)")
def test_no_network_from_the_worker(judge):
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        source = (f"import socket\n\ndef solution(x, y):\n"
                  f"    socket.create_connection(('127.0.0.1', {port}), timeout=2)\n    return x\n")
        result = judge.evaluate("vector_add", source, "python")
    assert result.status == "runtime_error", result.messages
    assert "Network is unreachable" in result.messages[0] or "refused" in result.messages[0]
    _then_honest_passes(judge)


def test_processes_left_behind_are_killed(judge, tmp_path):
    pid_file = tmp_path / "pid"
    source = (f"import subprocess\n\ndef solution(x, y):\n"
              f"    p = subprocess.Popen(['sleep', '600'])\n"
              f"    open({str(pid_file)!r}, 'w').write(str(p.pid))\n"
              f"    raise RuntimeError('left a child')\n")
    assert judge.evaluate("vector_add", source, "python").status == "runtime_error"
    pid = int(pid_file.read_text())
    for _ in range(50):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"process {pid} outlived its worker")


def test_a_submission_cannot_touch_the_judges_memory(judge):
    # The judge's own module state is in another process: replacing it there changes nothing here.
    source = ("import kerneldojo.graders.correctness as c\n"
              "c.check_outputs = lambda *a, **k: 0.0\n\n"
              "def solution(x, y):\n    return x.clone()\n")
    result = judge.evaluate("vector_add", source, "python")
    assert result.status == "wrong" and "differs at index" in result.messages[0]
