"""Fault containment of the process backend, in CPU mode: each fault ends with its own status and
a message that says what happened, and the next evaluation on the same judge succeeds."""

import contextlib
import json
import os
import queue
import secrets
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
import submissions as subs

from kerneldojo.judge import Judge

# The workers of this judge get small host-memory and process limits, so that exhausting them is quick.
MEMORY_LIMIT = 2 << 30
PROCESS_LIMIT = max(64, 2 * (os.cpu_count() or 1) + 32)  # room for torch's threads, few enough to reach
SCRATCH_LIMIT = 96 << 20  # the scratch folder's and /tmp's tmpfs


@pytest.fixture(scope="module")
def judge():
    return Judge("cpu", limits={"load": 45, "compile": 0, "run": 8, "memory": MEMORY_LIMIT, "processes": PROCESS_LIMIT,
                                "scratch": SCRATCH_LIMIT})


@pytest.fixture(scope="module")
def protections(judge):
    """What the workers of this judge could set up here (namespaces, limits), by name."""
    from kerneldojo.graders.compile import compile_submission
    from kerneldojo.sandbox.process import WorkerSolution
    from kerneldojo.tasks import get_task

    task = get_task("vector_add")
    build = compile_submission(task, subs.VECTOR_ADD_TORCH, "python", judge.device.arch)
    solution = WorkerSolution(task, build, judge.device, judge.limits)
    try:
        return solution.protections
    finally:
        solution.close()


def _require(protections, *names):
    """Skip, naming the reason, where this kernel refuses what the test depends on."""
    for name in names:
        value = protections.get(name)
        if value is not True and not str(value).startswith(("on", "read-only")):
            pytest.skip(f"{name} is unavailable here: {value}")


def _then_honest_passes(judge):
    result = judge.evaluate("vector_add", subs.VECTOR_ADD_TRITON, "triton")
    assert result.status == "ok", result.messages


FAULTS = {
    "host infinite loop": ("def solution(x, y):\n    while True:\n        pass\n", "timeout", "ran past its 8 s limit"),
    "loop at import": ("while True:\n    pass\n", "timeout", "load ran past"),
    "os._exit": ("import os\n\ndef solution(x, y):\n    os._exit(3)\n", "runtime_error", "exit code 3"),
    # the worker was ready: its death at the submission's import is the submission's, not the machine's
    "os._exit at import": ("import os\n\nos._exit(5)\n", "runtime_error", "exit code 5"),
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
    # A hang at import waits out the load limit: a judge of a short one (its spares are the same workers).
    at_load = Judge("cpu", limits={**judge.limits, "load": 8}) if fault == "loop at import" else judge
    result = at_load.evaluate("vector_add", source, "python")
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
    # CPU mode's seccomp filter refuses the socket itself; elsewhere the network namespace has no route.
    assert any(why in result.messages[0] for why in ("Network is unreachable", "refused", "Operation not permitted"))
    _then_honest_passes(judge)


def test_processes_left_behind_are_killed(judge):
    # One child stays in the worker's process group, one leaves it with setsid: both must go.
    marker = f"600.{secrets.randbelow(10**9)}"
    source = (f"import subprocess\n\ndef solution(x, y):\n"
              f"    subprocess.Popen(['sleep', '{marker}'])\n"
              f"    subprocess.Popen(['sleep', '{marker}'], start_new_session=True)\n"
              f"    raise RuntimeError('left two children')\n")
    assert judge.evaluate("vector_add", source, "python").status == "runtime_error"
    for _ in range(50):
        if not _processes_with(marker):
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"processes {_processes_with(marker)} outlived their worker")
    _then_honest_passes(judge)


def _descendants(root: int) -> set[int]:
    """This process's live descendants (a killed worker's processes are zombies until the judge's reaper thread gets
    to them, seconds on a loaded machine), but for a docker engine's (tests/test_docker.py may have started one,
    whose containers come and go on their own)."""
    parents, engines, zombies = {}, set(), set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError, IndexError):
            name, _, rest = Path(f"/proc/{pid}/stat").read_text().rpartition(")")
            parents[int(pid)] = int(rest.split()[1])
            if name.partition("(")[2] in ("dockerd", "containerd"):
                engines.add(int(pid))
            if rest.split()[0] == "Z":
                zombies.add(int(pid))
    found, frontier = set(), {root}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier} - found - engines
        found |= frontier
    return found - zombies


def _processes_with(text: str) -> list[int]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):
            if text in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace"):
                found.append(int(pid))
    return found


def test_a_submission_cannot_touch_the_judges_memory(judge):
    # The judge's own module state is in another process: replacing it there changes nothing here.
    source = ("import kerneldojo.graders.correctness as c\n"
              "c.check_outputs = lambda *a, **k: 0.0\n\n"
              "def solution(x, y):\n    return x.clone()\n")
    result = judge.evaluate("vector_add", source, "python")
    # The judge still compared (wrong), and the worker's own guard saw the replacement (flagged).
    assert result.status == "flagged" and result.checks_fired == ["tampering"], result.messages
    assert "check_outputs" in result.messages[0]


def test_protections_are_reported(protections):
    expected = ("user_namespace", "pid_namespace", "mount_namespace", "ipc_namespace", "network_namespace",
                "filesystem", "process_limit", "memory_limit", "capabilities", "no_new_privs", "signals")
    assert set(expected) <= set(protections), protections
    for name in expected:  # each is on, or says why not
        value = protections[name]
        assert value is True or str(value).startswith(("on", "read-only", "dropped", "unavailable", "off", "scoped")), \
            value


def test_fork_bomb_is_contained(judge, protections):
    # In CPU mode the worker's seccomp filter refuses the first fork (sandbox/worker/syscall_filter.py); the pids
    # limit (`process_limit`) is the line behind it, and the only one in GPU mode, which keeps fork.
    _require(protections, "process_limit", "pid_namespace")
    source = ("import os\n\ndef solution(x, y):\n    while True:\n        try:\n            os.fork()\n"
              "        except OSError as e:\n            if e.errno == 1:\n                raise\n")
    before = len(_descendants(os.getpid()))
    started = time.monotonic()
    result = judge.evaluate("vector_add", source, "python")
    assert result.status == "runtime_error" and "Operation not permitted" in result.messages[0], result.messages
    assert time.monotonic() - started < 45
    for _ in range(300):
        left = _descendants(os.getpid())
        if len(left) <= before + 3:  # at most one new spare worker (three processes)
            break
        time.sleep(0.1)
    assert len(left) <= before + 3, f"{len(left)} processes left, {before} before"
    _then_honest_passes(judge)


def test_host_out_of_memory_is_contained(judge, protections):
    _require(protections, "memory_limit")
    # 64 GiB in touched 256 MiB pieces: far past the 2 GiB limit of this judge's workers.
    source = ("def solution(x, y):\n    hoard = []\n    for _ in range(256):\n"
              "        hoard.append(b'\\x01' * (256 << 20))\n    return x + y\n")
    # Room to reach the limit on a loaded 2-core machine: a worker forked from the template starts with almost nothing
    # charged to its cgroup, so it writes the whole 2 GiB first (CI at fdff18f: past the 8 s run limit, `timeout`).
    roomy = Judge("cpu", limits={**judge.limits, "run": 60})
    result = roomy.evaluate("vector_add", source, "python")
    assert result.status == "runtime_error", result.messages
    assert "ran out of host memory" in result.messages[0] or "MemoryError" in result.messages[0], result.messages
    _then_honest_passes(judge)


def _probe_source(reads: list[str], writes: list[str]) -> str:
    """A submission that tries each read and write and reports, as its error, which succeeded."""
    return f"""
import json


def solution(x, y):
    got = {{}}
    for path in {reads!r}:
        try:
            with open(path, "rb") as f:
                got[path] = "read " + repr(f.read(64))
        except OSError as e:
            got[path] = "refused: " + e.strerror
    for path in {writes!r}:
        try:
            with open(path, "w") as f:
                f.write("written by a submission")
            got[path] = "written"
        except OSError as e:
            got[path] = "refused: " + e.strerror
    raise RuntimeError("PROBE" + json.dumps(got))
"""


def _probe_results(result) -> dict:
    assert result.status == "runtime_error", result.messages
    return json.loads(result.messages[0].rsplit("PROBE", 1)[1].splitlines()[0])


def test_files_outside_the_scratch_folder_are_out_of_reach(judge, protections):
    _require(protections, "mount_namespace", "filesystem")
    from kerneldojo.graders.compile import cache_dir

    # Another worker's scratch folder is made just as this one: a folder beside it, of the same name pattern.
    other_scratch = Path(tempfile.mkdtemp(prefix="kerneldojo-worker-"))
    canaries = [cache_dir() / "canary.txt", Path(tempfile.gettempdir()) / f"kerneldojo-canary-{os.getpid()}",
                Path.home() / f".kerneldojo-canary-{os.getpid()}", other_scratch / "output.txt"]
    judge_pid = os.getpid()
    reads = [str(p) for p in canaries]
    reads += [f"/proc/{judge_pid}/environ", f"/proc/{judge_pid}/mem", f"/proc/{judge_pid}/cmdline"]
    repo = Path(__file__).resolve().parent
    writes = [str(repo / "written-by-a-submission.txt"), "/etc/kerneldojo-written-by-a-submission",
              str(cache_dir() / "written-by-a-submission.txt")]
    try:
        for canary in canaries:
            canary.write_text("judge secret")
        got = _probe_results(judge.evaluate("vector_add", _probe_source(reads, writes), "python"))
    finally:
        for canary in canaries:
            canary.unlink(missing_ok=True)
        other_scratch.rmdir()
    leaked = {path: outcome for path, outcome in got.items() if not outcome.startswith("refused")}
    assert not leaked, leaked
    assert not (repo / "written-by-a-submission.txt").exists()
    _then_honest_passes(judge)


HOST_FILES = """
import json, os

def solution(x, y):
    got = {}
    for path in PATHS:
        try:
            got[path] = sorted(os.listdir(path)) if os.path.isdir(path) else open(path).read(40)
        except OSError as e:
            got[path] = "refused: " + e.strerror
    got["/etc"] = sorted(os.listdir("/etc"))
    raise RuntimeError("PROBE" + json.dumps(got))
"""


def test_the_worker_sees_only_an_allowlisted_root(judge, protections):
    """Red team rounds 1 and 4 (the former tests/adversarial/open/read_host_files.py): the worker saw the host's
    root minus a hide list, so it read /etc/shadow with a root judge, a served judge's token file and job log, the
    judge's sys.path folders and /var/lib. Its root is now an allowlist: a token planted in a judge-side folder
    (the repository, on the judge's sys.path under pytest) does not exist there, nor does anything else left out."""
    _require(protections, "mount_namespace", "filesystem")
    repo = Path(__file__).resolve().parent.parent
    planted = [repo / f".kerneldojo-token-{os.getpid()}", Path(__file__).resolve().parent / f"token-{os.getpid()}.txt"]
    paths = [str(p) for p in planted] + ["/etc/shadow", "/etc/ssh", "/root", "/home", "/var/lib", "/var/log",
                                         "/srv", "/opt", str(repo / ".git"), str(repo / "tests")]
    try:
        for token in planted:
            token.write_text("judge secret token")
        got = _probe_results(judge.evaluate("vector_add", HOST_FILES.replace("PATHS", repr(paths)), "python"))
    finally:
        for token in planted:
            token.unlink(missing_ok=True)
    etc = got.pop("/etc")
    # A folder on the way to an allowlisted one exists, holding only that way (/root/.pyenv where Python is there).
    from kerneldojo.sandbox.isolation import root_allowlist

    ways = {str(parent) for path, _ in root_allowlist(False) for parent in Path(path).parents} | {
        path for path, _ in root_allowlist(False)}
    leaked = {path: outcome for path, outcome in got.items() if not str(outcome).startswith("refused") and not (
        isinstance(outcome, list) and all(f"{path}/{name}" in ways for name in outcome))}
    assert not leaked, leaked
    assert "shadow" not in etc and "passwd" in etc and "ld.so.cache" in etc, etc
    _then_honest_passes(judge)


SCRATCH_FILL = """
import errno, os, tempfile

def solution(x, y):
    written = {}
    for folder in (os.getcwd(), tempfile.gettempdir()):
        total, error = 0, None
        for i in range(1000):  # files of 8 MiB, under RLIMIT_FSIZE: only the tmpfs's size can stop this
            try:
                with open(os.path.join(folder, f"fill-{i}"), "wb") as f:
                    f.write(b"x" * (8 << 20))
                total += 8 << 20
            except OSError as e:
                error = errno.errorcode[e.errno]
                break
        written[folder] = (total, error)
    raise RuntimeError("PROBE" + __import__("json").dumps(written))
"""


def test_scratch_and_tmp_are_capped(judge, protections):
    """The scratch folder and /tmp are tmpfs of the worker's own with size= and nr_inodes=: a submission that fills
    them gets ENOSPC at the cap, not the host's disk (the scratch folder was on the host's disk, uncapped in total)."""
    _require(protections, "mount_namespace", "filesystem")
    got = _probe_results(judge.evaluate("vector_add", SCRATCH_FILL, "python"))
    assert len(got) == 2, got
    for folder, (total, error) in got.items():
        assert error == "ENOSPC" and total <= SCRATCH_LIMIT, (folder, total, error)
    _then_honest_passes(judge)


OPEN_FDS = """
import json, os, stat

def solution(x, y):
    fds = {}
    for name in os.listdir("/proc/self/fd"):
        try:
            mode = os.fstat(int(name)).st_mode
        except OSError:  # the listing's own descriptor, closed by now
            continue
        fds[name] = "socket" if stat.S_ISSOCK(mode) else os.readlink(f"/proc/self/fd/{name}")
    raise RuntimeError("PROBE" + json.dumps(fds))
"""


def test_the_worker_holds_only_allowlisted_fds(judge, protections):
    """Every inherited fd but stdin, stdout, stderr and the socket to the judge is closed before any submission
    code runs (multiprocessing's spawn sentinel was inherited)."""
    _require(protections, "fds")
    fds = _probe_results(judge.evaluate("vector_add", OPEN_FDS, "python"))
    others = {fd: what for fd, what in fds.items() if fd not in ("0", "1", "2")}
    assert list(others.values()) == ["socket"], fds
    _then_honest_passes(judge)


DEVICES = """
import json, os

def solution(x, y):
    seen = {name: os.path.exists("/dev/" + name) for name in ("null", "urandom", "kmsg", "loop-control", "console")}
    with open("/dev/null", "w") as f:
        f.write("x")
    try:  # a host kernel setting that checks no capability, only a uid that is root outside (round 6)
        open("/proc/irq/default_smp_affinity", "r+").close()
        seen["proc_irq_writable"] = True
    except OSError:
        seen["proc_irq_writable"] = False
    raise RuntimeError("PROBE" + json.dumps(seen))
"""


def test_the_worker_has_a_dev_of_its_own(judge, protections):
    """Red team round 4 wrote to the host's kernel log (/dev/kmsg) and left a loop device behind
    (/dev/loop-control): a read-only mount does not stop writes to a device node. Round 6 changed an IRQ's
    affinity through /proc/irq, which is read-only now."""
    _require(protections, "mount_namespace", "filesystem")
    seen = _probe_results(judge.evaluate("vector_add", DEVICES, "python"))
    assert seen == {"null": True, "urandom": True, "kmsg": False, "loop-control": False, "console": False,
                    "proc_irq_writable": False}, seen
    _then_honest_passes(judge)


def test_the_judge_cannot_be_signalled_or_traced(judge, protections):
    _require(protections, "pid_namespace")
    received = []
    previous = signal.signal(signal.SIGUSR1, lambda *_: received.append(True))
    source = f"""
import ctypes
import os
import queue
import signal


def solution(x, y):
    got = {{"ppid": os.getppid()}}
    for pid in (os.getppid(), {os.getpid()}):
        if pid <= 1:
            continue
        try:
            os.kill(pid, signal.SIGUSR1)
            got[f"kill {{pid}}"] = "sent"
        except OSError as e:
            got[f"kill {{pid}}"] = "refused: " + e.strerror
        libc = ctypes.CDLL(None, use_errno=True)
        ok = libc.ptrace(16, pid, None, None) == 0  # PTRACE_ATTACH
        got[f"ptrace {{pid}}"] = "attached" if ok else "refused: " + os.strerror(ctypes.get_errno())
    raise RuntimeError("PROBE" + __import__("json").dumps(got))
"""
    try:
        got = _probe_results(judge.evaluate("vector_add", source, "python"))
        time.sleep(0.2)
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert got.pop("ppid") == 0  # the worker is pid 1 of its namespace: no parent it can name
    assert all(outcome.startswith("refused") for outcome in got.values()), got
    assert not received
    _then_honest_passes(judge)


def test_a_submission_finds_no_reference_outputs(judge):
    # Everything the worker holds: its own objects (gc) and whatever /proc shows of other processes.
    source = """
import gc
import os
import queue

import torch


def solution(x, y):
    candidates = [o for o in gc.get_objects()
                  if isinstance(o, torch.Tensor) and o.shape == x.shape and o is not x and o is not y]
    for pid in filter(str.isdigit, os.listdir("/proc")):
        if int(pid) != os.getpid():
            try:
                open(f"/proc/{pid}/mem", "rb").close()
                raise RuntimeError(f"could open the memory of process {pid}")
            except OSError:
                pass
    return candidates[0].clone() if candidates else torch.zeros_like(x)
"""
    result = judge.evaluate("vector_add", source, "python")
    assert result.status == "wrong", result.messages
    _then_honest_passes(judge)


def test_a_forged_reply_is_scored_as_a_failure(judge):
    # The submission finds the worker's reply channel through gc and the pending request's number
    # through the stack, and answers for the worker with made-up outputs before the honest reply.
    source = """
import gc
import sys

import torch


def solution(x, y):
    channel = next(o for o in gc.get_objects() if type(o).__name__ == "WorkerEnd")
    frame, sequence = sys._getframe(1), None
    while frame is not None and sequence is None:
        sequence = frame.f_locals.get("sequence")
        frame = frame.f_back
    channel.put((sequence, "ok", (torch.zeros_like(x),)))
    return x + y
"""
    result = judge.evaluate("vector_add", source, "python")
    assert result.status != "ok" and result.reward <= 0, (result.status, result.messages)
    _then_honest_passes(judge)


def test_the_reference_compiles_under_the_shared_hold_and_only_its_timing_holds_the_gpu_alone(monkeypatch):
    """torch.compile of a reference took 75-115 s on a fresh H100 machine (2026-11-25), all of it under the
    exclusive hold, which stalled every other judge of the GPU: only the timing request holds it alone now."""

    from kerneldojo.result import TimeStats
    from kerneldojo.sandbox import process
    from kerneldojo.sandbox.device import resolve_device

    events, stats = [], TimeStats(median_ms=1.0, mean_ms=1.0, min_ms=1.0, max_ms=1.0, iqr_ms=0.0, runs=10)

    class Lock:
        @contextlib.contextmanager
        def shared(self, long=False):
            events.append("shared, long" if long else "shared")
            yield
            events.append("/shared")

        @contextlib.contextmanager
        def exclusive(self):
            events.append("exclusive")
            yield
            events.append("/exclusive")

    class Worker:
        def call(self, op, args, timeout):
            events.append(op)
            return stats if op == "time_reference" else None

        def stop(self):
            events.append("stop")

    monkeypatch.setattr(process, "_take_worker", lambda *args, **kwargs: Worker())
    monkeypatch.setattr(process, "_start_spare", lambda *args, **kwargs: None)
    got = process.time_reference_in_worker(resolve_device("cpu"), "vector_add", {"n": 8}, "compiled", 3, 0, 0.5,
                                           None, Lock())
    assert got == stats
    assert events == ["shared, long", "prepare_reference", "/shared", "exclusive", "time_reference", "/exclusive",
                      "stop"]


def test_reference_timing_op_runs_only_in_a_clean_worker(judge):
    """The reference-timing request, through real (CPU) workers: an unknown task comes back as a clear
    error; a known one is looked up and its inputs made in the worker, which then stops where CUDA events
    are needed; a worker that has loaded a submission refuses the request; its reply type is allowed."""
    import torch

    from kerneldojo.graders.compile import compile_submission
    from kerneldojo.result import TimeStats
    from kerneldojo.sandbox.process import _take_worker, time_reference_in_worker
    from kerneldojo.sandbox.protocol import SubmissionError, dumps, loads
    from kerneldojo.tasks import get_task

    task = get_task("vector_add")
    shape = task.cases("small")[-1].shape
    with pytest.raises(SubmissionError, match="unknown task 'no_such_task'"):
        time_reference_in_worker(judge.device, "no_such_task", shape, "eager", 3, 0, 0.5, judge.limits)
    with pytest.raises(ValueError, match="kind must be one of eager, compiled"):
        time_reference_in_worker(judge.device, task, shape, "jit", 3, 0, 0.5, judge.limits)
    worker = _take_worker(judge.device, judge.limits, replace=False)
    try:
        with pytest.raises(SubmissionError, match="needs a GPU"):
            worker.call("prepare_reference", (task.id, shape, "eager", 3), 60)
        with pytest.raises(SubmissionError, match="needs prepare_reference first"):
            worker.call("time_reference", (0, 0.5), 60)
        build = compile_submission(task, subs.VECTOR_ADD_TRITON, "triton", judge.device.arch)
        worker.call("load", (task.id, build), 60)
        with pytest.raises(SubmissionError, match="loaded no submission"):
            worker.call("prepare_reference", (task.id, shape, "eager", 3), 60)
    finally:
        worker.stop()
    stats = TimeStats(median_ms=1.0, mean_ms=1.1, min_ms=0.9, max_ms=2.0, iqr_ms=0.1, runs=10)
    assert loads(dumps((1, "ok", stats)), torch.device("cpu")) == (1, "ok", stats)


def test_a_reply_is_capped_by_the_request_sent_while_the_reader_waited():
    """The judge's reader blocks on the next frame before the next request sets its cap: the cap must be the one
    of the request the reply answers (an evidence reply of 200 MB was refused against the default 4 MiB)."""
    import torch

    from kerneldojo.sandbox.channel import Channel
    from kerneldojo.sandbox.protocol import READY, dumps, reply_cap, send_frame

    judge_end, worker_end = socket.socketpair()
    worker_end.settimeout(10)  # a refused reply is left unread: the send would wait for ever
    channel = Channel(judge_end, torch.device("cpu"), cuda_ipc=False)
    send_frame(worker_end, dumps((0, READY, None)))
    try:
        time.sleep(0.2)  # the reader is now waiting, with the default cap
        big = b"x" * (reply_cap() + (1 << 20))
        channel.put((1, "run", ()), max_reply_bytes=reply_cap(len(big)))
        send_frame(worker_end, dumps((1, "ok", big)))
        assert channel.get(timeout=10) == (1, "ok", big), channel.error
    finally:
        channel.close()
        worker_end.close()


def test_a_frame_sent_after_a_reply_and_before_the_next_request_closes_the_channel():
    """Red team round 71: a request's allowance (its reply and PROGRESS_CAP progress frames) let a worker queue one
    more frame after its reply, carrying the next request's sequence number: the `flags` reply, written before the
    judge asked, then the worker gone. A reply now ends its request's allowance; only progress frames precede it."""
    import torch

    from kerneldojo.sandbox.channel import Channel
    from kerneldojo.sandbox.protocol import PROGRESS, READY, dumps, send_frame

    judge_end, worker_end = socket.socketpair()
    channel = Channel(judge_end, torch.device("cpu"), cuda_ipc=False)
    send_frame(worker_end, dumps((0, READY, None)))
    try:
        channel.put((1, "run", ()))
        send_frame(worker_end, dumps((1, PROGRESS, None)))  # allowed: the first call returned
        send_frame(worker_end, dumps((1, "ok", "outputs")))
        assert channel.get(timeout=10) == (1, PROGRESS, None) and channel.get(timeout=10) == (1, "ok", "outputs")
        channel.put((2, "run", ()))  # a later call: no progress frame, so its allowance still held one frame
        send_frame(worker_end, dumps((2, "ok", "outputs")))
        send_frame(worker_end, dumps((3, "ok", {})))  # the next request's answer, before it was asked
        assert channel.get(timeout=10) == (2, "ok", "outputs")
        assert channel.closed.wait(10) and "no pending request asked for" in channel.error
        channel.put((3, "flags", ()))
        with pytest.raises(queue.Empty):
            channel.get(timeout=0.5)
    finally:
        channel.close()
        worker_end.close()


def test_spares_stop_where_the_gpu_would_keep_too_little_memory(monkeypatch):
    """H200, 2026-11-27: eight judges' spares filled the GPU's memory (a context is ~0.65 GiB) and workers died at
    their start. A spare starts only while the GPU keeps SPARE_MIN_FREE_BYTES free beyond a context for each spare
    still starting; CPU workers are not bounded so."""
    import threading

    from kerneldojo.sandbox import process
    from kerneldojo.sandbox.device import resolve_device

    class Starting:  # a spare whose READY has not come yet
        def __init__(self, device, limits):
            self.replies = type("Replies", (), {"ready": threading.Event()})()

    gib = 1 << 30
    monkeypatch.setattr(process, "_Worker", Starting)
    monkeypatch.setattr(process, "SPARE_WORKERS", 8)
    monkeypatch.setattr(process, "SPARE_MIN_FREE_BYTES", 16 * gib)
    monkeypatch.setattr(process.torch.cuda, "mem_get_info", lambda device=None: (20 * gib, 140 * gib))
    gpu = type("GPU", (), {"mode": "gpu", "torch_device": "cuda:0"})()
    spares: list = []
    process._top_up(spares, gpu, {})
    assert len(spares) == 5  # 20 GiB free: 16 kept, and a context for each of the 4 still starting before the 5th
    for spare in spares:
        spare.replies.ready.set()  # their contexts are made: `mem_get_info` counts them from now on
    monkeypatch.setattr(process.torch.cuda, "mem_get_info", lambda device=None: (15 * gib, 140 * gib))
    process._top_up(spares, gpu, {})
    assert len(spares) == 5
    cpu_spares: list = []
    process._top_up(cpu_spares, resolve_device("cpu"), {})
    assert len(cpu_spares) == 8


def test_workers_come_from_the_template_and_start_again_once_it_died():
    """Workers are forked from the worker template (sandbox/worker/template.py). If it dies, its workers die with
    it and the judge says how (killed, not 'still running'), and the next worker comes from a new template."""
    from kerneldojo.sandbox import process
    from kerneldojo.sandbox.device import resolve_device
    from kerneldojo.sandbox.protocol import SubmissionError

    if not process.TEMPLATE:
        pytest.skip("KERNELDOJO_WORKER_TEMPLATE=0: workers are spawned")
    device = resolve_device("cpu")
    first = process._Worker(device)
    try:
        first.wait_ready(300)
        template = process._templates[-1]
        assert isinstance(first.process, process._ForkedProcess) and template.process.is_alive()
        os.kill(template.process.pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while first.process.is_alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not first.process.is_alive() and first.process.exitcode == -signal.SIGKILL
    finally:
        first.stop()
    second = process._Worker(device)
    try:
        second.wait_ready(300)
        assert process._templates[-1] is not template and isinstance(second.process, process._ForkedProcess)
        with pytest.raises(SubmissionError):  # it answers: no submission loaded
            second.call("flags", (), 60)
    finally:
        second.stop()


def test_a_template_that_does_not_fork_in_time_is_retired_and_the_worker_spawned(monkeypatch):
    """Red team round 108: a fork past its limit killed the template and with it every worker it had forked, each
    step in flight ended `runtime_error`. Now that template is retired (stopped once it has no worker left) and the
    worker is spawned; a late fork of the retired template is killed, and the spawned worker alone answers."""
    from kerneldojo.sandbox import process
    from kerneldojo.sandbox.device import resolve_device
    from kerneldojo.sandbox.protocol import SubmissionError

    if not process.TEMPLATE:
        pytest.skip("KERNELDOJO_WORKER_TEMPLATE=0: workers are spawned")
    monkeypatch.setattr(process, "_templates", [])
    monkeypatch.setattr(process, "TEMPLATE_READY_S", 0.01)  # its imports take longer than that
    worker = process._Worker(resolve_device("cpu"))
    try:
        retired = process._templates[-1]
        assert retired.retired and not isinstance(worker.process, process._ForkedProcess)
        worker.wait_ready(300)
        with pytest.raises(SubmissionError):  # it answers: no submission loaded
            worker.call("flags", (), 60)
        retired.process.join(30)
        assert not retired.process.is_alive()
    finally:
        worker.stop()


_FILL = "x = bytearray({mib} << 20)\nx[::4096] = b'x' * len(x[::4096])\nimport time; time.sleep(30)"


@pytest.fixture
def memory_parent(monkeypatch):
    """A v1 memory cgroup of 96 MiB that workers' cgroups are made in: a container's or a loaded host's memory."""
    from kerneldojo.sandbox import isolation

    mount = isolation._cgroup_mounts()[0].get("memory")
    if mount is None or not os.access(mount, os.W_OK):
        pytest.skip("no writable cgroup v1 memory controller")
    parent = Path(tempfile.mkdtemp(prefix="kerneldojo-test-parent-", dir=mount))
    (parent / "memory.limit_in_bytes").write_text(str(96 << 20))
    monkeypatch.setattr(isolation, "_cgroup_bases", lambda: [("memory", parent, "v1")])
    yield isolation
    for child in parent.iterdir():
        if child.is_dir():
            with contextlib.suppress(OSError):
                child.rmdir()
    parent.rmdir()


def _run_in(cgroup, command: list[str]) -> subprocess.Popen:
    return subprocess.Popen(command, preexec_fn=lambda: (cgroup.dirs["memory"] / "cgroup.procs").write_text(
        str(os.getpid())))


def _ended(cgroup, *processes: subprocess.Popen) -> list[int | None]:
    try:
        for process in processes:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(60)
    finally:
        for process in processes:
            process.kill()
        cgroup.kill()
        cgroup.remove()
    return [process.returncode for process in processes]


def test_an_oom_kill_for_a_parents_limit_is_told_from_one_for_the_workers_own(memory_parent, tmp_path):
    """Red team round 110: one worker's tmpfs filled a shared parent's limit and the OOM killer ended another step's
    honest worker, far under its own limit, which was then told "the worker ran out of host memory" (its submission's
    runtime_error). A kill of a worker under its own limit that held little of what it shared is now the machine's
    (`WorkerLost`: skipped, nothing stored); one at its own limit, or one that held half the shared memory (round 118:
    its own hog), stays the submission's."""
    isolation = memory_parent
    own = isolation.Cgroup(48 << 20, 64)  # its own 48 MiB, under the parent's 96
    assert _ended(own, _run_in(own, ["python3", "-c", _FILL.format(mib=80)])) == [-signal.SIGKILL]
    assert own.oom_killed() and not own.oom_killed_from_outside() and "ran out of host memory" in own.notes()[0]
    hog = isolation.Cgroup(1 << 30, 64)  # its own 1 GiB: the parent's 96 MiB run dry by its own memory
    assert _ended(hog, _run_in(hog, ["python3", "-c", _FILL.format(mib=160)])) == [-signal.SIGKILL]
    assert hog.oom_killed() and not hog.oom_killed_from_outside()
    # A victim of 20 MiB beside a filler of tmpfs pages (in no process's RSS, so the OOM killer takes the victim)
    victim, filler = isolation.Cgroup(1 << 30, 64), isolation.Cgroup(1 << 30, 64)
    held = _run_in(victim, ["python3", "-c", _FILL.format(mib=20)])
    time.sleep(2)
    tmpfs = Path("/dev/shm") / f"kerneldojo-test-{tmp_path.name}"
    try:
        _ended(filler, _run_in(filler, ["sh", "-c", f"head -c {160 << 20} /dev/zero > {tmpfs}"]))
    finally:
        tmpfs.unlink(missing_ok=True)
    assert _ended(victim, held) == [-signal.SIGKILL]
    assert victim.oom_killed_from_outside() and not victim.oom_killed()
    assert "not this submission's" in victim.notes()[0]


FALLOCATE = """
import ctypes, os, struct

libc = ctypes.CDLL(None, use_errno=True)


def solution(x, y):
    kept = libc.fallocate(1, 1, ctypes.c_long(0), ctypes.c_long(1 << 30))  # FALLOC_FL_KEEP_SIZE, on the output file
    why = ctypes.get_errno()
    # FS_IOC_RESVSP64, the request's upper bits set (the kernel reads the low 32 only)
    reserve = struct.pack("hhqqiI4i", 0, 0, 0, 1 << 30, 0, 0, 0, 0, 0, 0)
    ioctl = libc.ioctl(1, ctypes.c_ulong(0x4030582A | (1 << 32)), reserve), ctypes.get_errno()
    with open("/tmp/pre", "wb") as f:  # glibc's emulation writes instead, under every limit
        os.posix_fallocate(f.fileno(), 0, 1 << 16)
    inotify = libc.inotify_init1(0), ctypes.get_errno()
    try:
        os.setxattr(1, "user.k", b"x" * 3000)
        xattr = "set"
    except OSError as e:
        xattr = e.errno
    raise RuntimeError(f"fallocate {kept} errno {why} ioctl {ioctl} emulated {os.stat('/tmp/pre').st_size} "
                       f"inotify {inotify} xattr {xattr} blocks {os.fstat(1).st_blocks}")
"""


def test_no_disk_is_reserved_without_a_write(judge):
    """Red team round 116: fallocate(FALLOC_FL_KEEP_SIZE) on the worker's output file (the host's disk) reserved
    blocks past its end, a size RLIMIT_FSIZE never saw, until the judge's disk was full; the step ended `ok`. Round
    117: the same through the VFS's FS_IOC_RESVSP64 ioctl, and inotify instances counted against the judge's uid."""
    import errno

    result = judge.evaluate("vector_add", FALLOCATE, "python")
    refused = (f"fallocate -1 errno {errno.EOPNOTSUPP} ioctl (-1, {errno.EOPNOTSUPP}) emulated 65536 "
               f"inotify (-1, {errno.EPERM}) xattr {errno.ENOTSUP} blocks ")
    assert refused in result.messages[0], result.messages
    assert int(result.messages[0].split(refused)[1].split()[0]) < (1 << 20), result.messages  # 512-byte blocks
