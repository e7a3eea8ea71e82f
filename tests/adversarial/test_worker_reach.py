"""What a worker can reach of the judge's host (red team round 7, 2026-11-24): the judge's environment
(a service's tokens, a trainer's API keys) and files a worker left behind in a folder it made unremovable.
Each case runs a submission that tries, and checks that nothing came back or stayed."""

from __future__ import annotations

import contextlib
import ctypes
import functools
import json
import os
import resource
import secrets
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kerneldojo.judge import Judge

# Everything the worker's environment holds, raised back as the error message of the step.
SHOW_ENVIRONMENT = """
import os


def solution(x, y):
    block = open("/proc/self/environ", "rb").read().replace(b"\\0", b" ").decode(errors="replace")
    raise RuntimeError("ENV " + repr(dict(os.environ)) + " BLOCK " + block)
"""


@pytest.fixture
def secret_in_judge_environment(monkeypatch):
    value = secrets.token_hex(8)
    for name in ("KERNELDOJO_TOKENS", "WANDB_API_KEY", "KERNELDOJO_SERVICE_SECRET"):
        monkeypatch.setenv(name, f"{name.lower()}-{value}")
    return value


def test_the_judges_secrets_do_not_reach_a_worker(secret_in_judge_environment):
    from kerneldojo.sandbox import process

    process._stop_spares()  # spares started before the secret was set would not show it
    judge = Judge("cpu", seeds=1, limits={"load": 60, "run": 30})
    result = judge.evaluate("vector_add", SHOW_ENVIRONMENT, "triton")
    text = "\n".join(result.messages)
    assert result.status == "runtime_error" and "ENV " in text and "PATH" in text, result.messages
    assert secret_in_judge_environment not in text, "the judge's environment reached the worker"
    assert "KERNELDOJO_TOKENS" not in text and "WANDB_API_KEY" not in text
    assert "KERNELDOJO_TOKENS" in os.environ  # the judge's own environment is left as it was


# A unix socket at a path the judge serves (a docker.sock, a database's socket): refused before the path matters.
CONNECT_UNIX = """
import socket


def solution(x, y):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect("/run/some.sock")
"""


def test_a_cpu_worker_opens_no_unix_socket():
    result = Judge("cpu", seeds=1, limits={"load": 60, "run": 30}).evaluate("vector_add", CONNECT_UNIX, "triton")
    assert result.status == "runtime_error" and "Operation not permitted" in result.messages[0], result.messages


# A judge with no privilege and no user namespace for its workers: a process of its uid reads its /proc/<pid>.
PEEK_AT_PARENT = """
import os, sys
if sys.argv[1] == "closed":
    from kerneldojo.sandbox.isolation import undumpable_judge
    assert undumpable_judge()
judge = os.getpid()
if os.fork() == 0:
    try:
        open(f"/proc/{judge}/environ", "rb").read()
        print("open")
    except PermissionError:
        print("closed")
    os._exit(0)
os.wait()
"""


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root and setpriv to act as a user")
@pytest.mark.parametrize("expected", ["open", "closed"])
def test_the_judges_proc_is_closed_to_a_worker_of_its_uid(expected):
    """GPU mode's workers share the judge's pid namespace; without a user namespace they also share its uid and
    capabilities (none, for a judge that is not root): /proc/<judge>/environ and mem must then be closed.
    `open` is the control: the same peek at a judge that did not close itself."""
    command = ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups", sys.executable, "-c",
               PEEK_AT_PARENT, expected]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, cwd="/")
    assert done.stdout.strip() == expected, done.stdout + done.stderr


# io_uring makes sockets (and opens files) without the socket() call the filter watches (red team round 8).
IO_URING = """
import ctypes


def solution(x, y):
    libc = ctypes.CDLL(None, use_errno=True)
    params = ctypes.create_string_buffer(120)
    fd = libc.syscall(425, 8, params)  # io_uring_setup(entries, params) on x86-64
    raise RuntimeError(f"io_uring_setup returned {fd}, errno {ctypes.get_errno()}")
"""


def test_a_cpu_worker_has_no_io_uring():
    import platform

    if platform.machine() != "x86_64":
        pytest.skip("the system call number is x86-64's")
    result = Judge("cpu", seeds=1, limits={"load": 60, "run": 30}).evaluate("vector_add", IO_URING, "triton")
    assert "io_uring_setup returned -1, errno 1" in result.messages[0], result.messages


# The judge's environment in the worker's memory (red team round 9): scrub() cleared os.environ, but the copies
# CPython made at start-up stayed, freed, in the heap. The worker scans its own heap and anonymous writable memory.
SCAN_OWN_MEMORY = """
import re


def solution(x, y):
    wanted = re.compile(rb"KD_HEAP_PROBE_[0-9a-f]{16}|KERNELDOJO_HEAP[_]SECRET")  # not matching its own text
    found, budget = set(), 1 << 30
    with open("/proc/self/maps") as maps, open("/proc/self/mem", "rb", buffering=0) as mem:
        for line in maps:
            parts = line.split()
            anonymous = len(parts) < 6 or parts[5] == "[heap]"
            low, high = (int(v, 16) for v in parts[0].split("-"))
            if not anonymous or not parts[1].startswith("rw") or high - low > 256 << 20 or budget <= 0:
                continue
            budget -= high - low
            try:
                mem.seek(low)
                found |= {m.decode() for m in wanted.findall(mem.read(high - low))}
            except OSError:
                pass
    raise RuntimeError(f"SCANNED {sorted(found)}")
"""


def test_the_judges_environment_never_enters_a_workers_memory(monkeypatch):
    from kerneldojo.sandbox import process

    value = f"KD_HEAP_PROBE_{secrets.token_hex(8)}"
    monkeypatch.setenv("KERNELDOJO_HEAP_SECRET", value)
    process._stop_spares()  # spares started before the secret was set would not hold it
    result = Judge("cpu", seeds=1, limits={"load": 60, "run": 30}).evaluate("vector_add", SCAN_OWN_MEMORY, "python")
    text = "\n".join(result.messages)
    assert "SCANNED [" in text, result.messages
    assert value not in text and "KERNELDOJO_HEAP_SECRET" not in text, text


# Keyrings are not namespaced (red team round 9): a worker read a key of the judge's session keyring and left one
# there for the next step's worker. Each worker joins a keyring of its own, and the CPU worker's filter refuses keyctl.
KEYRING = """
import ctypes, os

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
SYS_ADD_KEY, SYS_KEYCTL, KEYCTL_SEARCH, KEYCTL_READ, SESSION = 248, 250, 10, 11, -3


def read_key(description):
    key = libc.syscall(SYS_KEYCTL, KEYCTL_SEARCH, SESSION, b"user", description, 0)
    if key < 0:
        return None
    buffer = ctypes.create_string_buffer(4096)
    n = libc.syscall(SYS_KEYCTL, KEYCTL_READ, key, buffer, 4096)
    return buffer.raw[:max(n, 0)].decode(errors="replace")


def solution(x, y):
    judges, earlier = read_key(b"JUDGE_DESCRIPTION"), read_key(b"kd-left-behind")
    payload = b"left by an earlier worker"
    added = libc.syscall(SYS_ADD_KEY, b"user", b"kd-left-behind", payload, len(payload), SESSION)
    raise RuntimeError(f"KEYRING judge={judges!r} earlier={earlier!r} added={added}")
"""


def test_a_worker_reads_no_key_of_the_judges_and_leaves_none_for_the_next():
    import ctypes
    import platform

    from kerneldojo.sandbox import process

    if platform.machine() != "x86_64":
        pytest.skip("the system call numbers are x86-64's")
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    description, secret = f"kd-judge-{secrets.token_hex(4)}".encode(), secrets.token_hex(8).encode()

    def judge_session_holds_a_key() -> int:  # in the thread that spawns workers: its keyring is theirs to inherit
        libc.syscall(250, 1, None)  # KEYCTL_JOIN_SESSION_KEYRING: a fresh one, not the machine's
        return libc.syscall(248, b"user", description, secret, len(secret), -3)  # add_key to @s

    if process._spawner.submit(judge_session_holds_a_key).result() < 0:
        pytest.skip(f"no keyrings here: {os.strerror(ctypes.get_errno())}")
    process._stop_spares()  # spares started before hold the keyring they had
    judge = Judge("cpu", seeds=1, limits={"load": 60, "run": 30}, result_cache=None)
    source = KEYRING.replace("JUDGE_DESCRIPTION", description.decode())
    for step in (1, 2):
        result = judge.evaluate("vector_add", f"{source}\n# step {step}\n", "python")
        text = "\n".join(result.messages)
        assert "KEYRING judge=None earlier=None" in text, text
        assert secret.decode() not in text


# The filter refused AF_UNIX and let other families through (red team round 9): AF_VSOCK reaches a VM's
# hypervisor whatever the network namespace. No family is allowed now, nor socketpair.
EVERY_SOCKET = """
import socket


def solution(x, y):
    opened = []
    for family in ("AF_INET", "AF_INET6", "AF_VSOCK", "AF_NETLINK", "AF_PACKET", "AF_UNIX"):
        try:
            socket.socket(getattr(socket, family), socket.SOCK_DGRAM if family != "AF_PACKET" else socket.SOCK_RAW)
            opened.append(family)
        except OSError as e:
            if e.errno != 1:  # EPERM is the filter's answer; another error would be the kernel's own
                opened.append(f"{family}: {e}")
    try:
        socket.socketpair()
        opened.append("socketpair")
    except OSError:
        pass
    raise RuntimeError(f"OPENED {opened}")
"""


def test_a_cpu_worker_opens_no_socket_of_any_family():
    result = Judge("cpu", seeds=1, limits={"load": 60, "run": 30}).evaluate("vector_add", EVERY_SOCKET, "python")
    assert "OPENED []" in "\n".join(result.messages), result.messages


# multiprocessing's spawn re-ran the judge's main module in the worker (a service's start-up script and its
# constants: red team round 9's probe found its own script's values so) and gave it the judge's command line.
JUDGES_MAIN = """
import sys
from pathlib import Path


def solution(x, y):
    main = sys.modules["__main__"]
    raise RuntimeError(f"MAIN {getattr(main, '__file__', None)} {getattr(main.__spec__, 'name', None)} ARGV {sys.argv}")
"""


def test_a_worker_runs_no_main_module_of_the_judges_and_sees_no_argv():
    from kerneldojo.sandbox import process

    process._stop_spares()
    result = Judge("cpu", seeds=1, limits={"load": 60, "run": 30}).evaluate("vector_add", JUDGES_MAIN, "python")
    text = "\n".join(result.messages)
    assert "MAIN None None" in text, result.messages  # the worker's own `python -c`
    assert not any(arg in text for arg in sys.argv[1:] if len(arg) > 3), text


READ_STDIN = """
import os


def solution(x, y):
    raise RuntimeError("STDIN " + os.readlink("/proc/self/fd/0") + " " + repr(os.read(0, 100)))
"""


def test_a_worker_reads_nothing_of_the_judges_stdin():
    """Red team round 10: every worker kept the judge's fd 0 (a pipe's bytes, or the operator's terminal)."""
    read_end, write_end = os.pipe()
    os.write(write_end, b"judge-input-for-nobody\n")
    saved = os.dup(0)
    os.dup2(read_end, 0)
    try:
        from kerneldojo.sandbox import process

        process._stop_spares()  # a spare started before the dup2 would have the old fd 0
        result = Judge("cpu", seeds=1, limits={"load": 60, "run": 30}).evaluate("vector_add", READ_STDIN, "triton")
        assert "STDIN /dev/null b''" in result.messages[0], result.messages
        assert os.read(0, 100) == b"judge-input-for-nobody\n"
    finally:
        os.dup2(saved, 0)
        for fd in (saved, read_end, write_end):
            os.close(fd)


# A worker without a pid namespace (GPU mode's default) sees the judge's pid and shares its uid, which is all
# kill(2) asks: it signals the judge and every process of that uid, unless its own Landlock domain scopes signals.
SIGNAL_OUTSIDE = """
import ctypes, os, resource, signal


def solution(x, y):
    verdicts = []
    for pid, sig in ((JUDGE, 0), (BYSTANDER, signal.SIGKILL)):
        try:
            os.kill(pid, sig)
            verdicts.append(f"{pid}:delivered")
        except OSError as e:
            verdicts.append(f"{pid}:{e.strerror}")
    try:
        signal.pidfd_send_signal(os.pidfd_open(BYSTANDER), signal.SIGKILL)
        verdicts.append("pidfd:delivered")
    except OSError as e:
        verdicts.append(f"pidfd:{e.strerror}")
    # Red team round 14: RLIMIT_CPU of one second on the judge, and the kernel kills it.
    # Round 41: the same uid's permissions, asked in forms that change nothing should one get through (the values
    # each target has already; the worker's own process group), and the host's /proc, written with what it holds.
    libc = ctypes.CDLL(None, use_errno=True)
    IOPRIO_SET, IOPRIO_WHO_PGRP = 251, 2  # x86_64

    def ioprio_set_own_group():
        if libc.syscall(IOPRIO_SET, IOPRIO_WHO_PGRP, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))

    def write_back(path):
        with open(path, "r+") as f:
            f.write(f.read())

    for what, act in (("prlimit", lambda: resource.prlimit(BYSTANDER, resource.RLIMIT_CPU, (1, 1))),
                      ("setpriority", lambda: os.setpriority(os.PRIO_PROCESS, BYSTANDER, 19)),
                      ("setpriority-group", lambda: os.setpriority(os.PRIO_PGRP, 0, os.getpriority(os.PRIO_PGRP, 0))),
                      ("ioprio-group", ioprio_set_own_group),
                      ("affinity", lambda: os.sched_setaffinity(BYSTANDER, os.sched_getaffinity(BYSTANDER))),
                      ("core_pattern", lambda: write_back("/proc/sys/kernel/core_pattern")),
                      ("oom_score_adj", lambda: write_back(f"/proc/{JUDGE}/oom_score_adj"))):
        try:
            act()
            verdicts.append(f"{what}:delivered")
        except OSError as e:
            verdicts.append(f"{what}:{e.strerror}")
    # A thread's /proc/<tid> (not listed in /proc, but there) writes the same oom_score_adj: the judge puts it back.
    try:
        thread = next(t for t in os.listdir(f"/proc/{JUDGE}/task") if t != str(JUDGE))
        with open(f"/proc/{thread}/oom_score_adj", "w") as f:
            f.write("1000")
        verdicts.append("thread-oom:written")
    except (OSError, StopIteration) as e:
        verdicts.append(f"thread-oom:{e!r}")
    raise RuntimeError("SIGNALS " + " ".join(verdicts))
"""


def _no_capabilities() -> None:
    libc = ctypes.CDLL(None)
    for capability in range(64):  # PR_CAPBSET_DROP: the exec that follows keeps none (a no-op unless root)
        libc.prctl(24, capability, 0, 0, 0)


@pytest.mark.parametrize("mode", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_a_worker_without_a_pid_namespace_reaches_no_process_outside(monkeypatch, mode):
    """Issue 13 item 7: the threat model's open signal channel of GPU workers, checked on a CPU worker with its pid
    namespace off (the process backend's GPU configuration on this machine's kernel) and on a GPU worker; and round
    41's: the host's /proc writable (sysctls, the judge's oom_score_adj), CPU affinity of other processes."""
    from kerneldojo.sandbox import process

    # Without capabilities, as another worker is: the kernel lets a process of the same uid change the CPU affinity or
    # the priority of one whose capabilities are a subset of its own, so only the filter stands in the way.
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], preexec_fn=_no_capabilities)
    cpu_limit = resource.prlimit(bystander.pid, resource.RLIMIT_CPU)
    oom_score_adj = Path(f"/proc/{os.getpid()}/oom_score_adj").read_text()
    monkeypatch.setenv("KERNELDOJO_PID_NAMESPACE", "0")
    process._stop_spares()  # spares were started with a pid namespace
    try:
        source = SIGNAL_OUTSIDE.replace("JUDGE", str(os.getpid())).replace("BYSTANDER", str(bystander.pid))
        judge = Judge(mode, seeds=1, limits={"load": 60, "run": 30})
        result = judge.evaluate("vector_add", source, "triton")
        protections = " ".join(result.messages)
        if "signals: unavailable" in protections:
            pytest.skip(f"no Landlock signal scoping on this kernel: {protections}")
        assert "SIGNALS " in protections, result.messages
        assert "delivered" not in protections, result.messages
        for what in ("setpriority-group", "ioprio-group", "affinity"):  # refused by the filter, not by the kernel
            assert f"{what}:Operation not permitted" in protections, result.messages
        for what in ("core_pattern", "oom_score_adj"):  # the host's /proc is read-only in the worker (round 41)
            assert f"{what}:Read-only file system" in protections, result.messages
        assert bystander.poll() is None, "a worker killed a process of the judge's uid"
        assert resource.prlimit(bystander.pid, resource.RLIMIT_CPU) == cpu_limit
        process._stop_spares()  # the step's worker is reaped by now too: the judge's oom_score_adj is back
        judge_oom = Path(f"/proc/{os.getpid()}/oom_score_adj")
        for _ in range(100):
            if judge_oom.read_text() == oom_score_adj:
                break
            time.sleep(0.1)
        assert judge_oom.read_text() == oom_score_adj, protections
    finally:
        bystander.kill()
        bystander.wait()
        process._stop_spares()
        with contextlib.suppress(OSError):  # should this test's own check fail
            Path(f"/proc/{os.getpid()}/oom_score_adj").write_text(oom_score_adj)


FILTERED = """
import ctypes, json, os
from kerneldojo.sandbox.worker.syscall_filter import refuse_reaching_other_processes

libc = ctypes.CDLL(None, use_errno=True)
IOPRIO_GET, IOPRIO_SET, IOPRIO_WHO_PGRP = 252, 251, 2  # x86_64
SYS_CLONE, SYS_CLONE3, CLONE_PARENT, SIGCHLD = 56, 435, 0x8000, 17


def clone_parent():  # round 48: the child would be our parent's, out of our list of children
    pid = libc.syscall(SYS_CLONE, CLONE_PARENT | SIGCHLD, 0, 0, 0, 0)
    if pid == 0:
        os._exit(0)
    return pid


def outcomes():  # each asks for what the target has already: nothing changes whichever way it goes
    out = {}
    for name, call in (
            ("setpriority-group", lambda: os.setpriority(os.PRIO_PGRP, 0, os.getpriority(os.PRIO_PGRP, 0))),
            ("ioprio-group", lambda: libc.syscall(IOPRIO_SET, IOPRIO_WHO_PGRP, 0,
                                                  libc.syscall(IOPRIO_GET, IOPRIO_WHO_PGRP, 0))),
            ("affinity-by-pid", lambda: os.sched_setaffinity(os.getpid(), os.sched_getaffinity(0))),
            ("affinity-own", lambda: os.sched_setaffinity(0, os.sched_getaffinity(0))),
            ("clone-parent", clone_parent),
            ("clone3", lambda: libc.syscall(SYS_CLONE3, None, 0))):  # the kernel's answer: EINVAL (no arguments)
        try:
            code = call()
            out[name] = "refused" if code == -1 and ctypes.get_errno() in (1, 38) else "allowed"  # EPERM, ENOSYS
        except PermissionError:
            out[name] = "refused"
    return out


before = outcomes()
loaded = refuse_reaching_other_processes()
print(json.dumps({"before": before, "loaded": loaded, "after": outcomes()}))
"""


def test_the_filter_leaves_every_uid_wide_and_other_process_form_refused():
    """Red team round 41: with PRIO_USER / IOPRIO_WHO_USER (or a process group) and who 0, setpriority and
    ioprio_set act on every process of the caller's uid, and sched_setaffinity of another pid needs only that uid
    (and a target with no more capabilities, as every other worker is). Asked in a session of its own, where the
    kernel allows each, before the filter and after it. Round 48: a child made with CLONE_PARENT is its parent's
    sibling, out of the worker's list of its children."""
    # under a shell that reaps what a CLONE_PARENT child leaves (the shell's own, not this process's)
    run = subprocess.run(["sh", "-c", '"$0" -c "$1"; true', sys.executable, FILTERED], capture_output=True,
                         text=True, timeout=60, start_new_session=True, check=True)
    seen = json.loads(run.stdout)
    if seen["loaded"] is not True:
        pytest.skip(f"no seccomp filter here: {seen['loaded']}")
    assert set(seen["before"].values()) == {"allowed"}, seen  # the kernel itself allows each: the filter decides
    assert seen["after"] == {"setpriority-group": "refused", "ioprio-group": "refused", "affinity-by-pid": "refused",
                             "affinity-own": "allowed", "clone-parent": "refused", "clone3": "refused"}, seen


DETACHED_HELPER = """
import os, time


def _detach():
    if os.fork() == 0:  # the middle child: a session of its own, then gone, so its child is an orphan
        os.setsid()
        if os.fork() == 0:
            time.sleep(60)  # the helper that would do the work (red team round 45: a fresh Python, CUDA of its own)
            os._exit(0)
        os._exit(0)
    os.wait()


_detach()


def solution(x, y):
    return x + y
"""

HARNESS_RUN = """
import json, os, signal, sys
from pathlib import Path
import torch
from kerneldojo.sandbox.device import resolve_device
from kerneldojo.sandbox.protocol import Build
from kerneldojo.sandbox.worker.harness import Solution
from kerneldojo.sandbox.worker.watches import child_processes
from kerneldojo.tasks import get_task

task = get_task("vector_add")
solution = Solution(task, Build("python", Path(sys.argv[1])), resolve_device("cpu"))
case = task.cases("small")[0]
inputs = task.reference.make_inputs(case.shape, 0, "cpu")
solution.run(inputs, case.shape, (torch.empty_like(inputs[0]),))
print(json.dumps(solution.flags))
for pid in child_processes():
    os.kill(pid, signal.SIGKILL)
"""


def test_a_detached_grandchild_stays_a_child_and_is_seen(tmp_path):
    """Red team round 45: a GPU worker may fork and exec (Triton runs ptxas), and a double-forked, `setsid` helper was
    an orphan of init, seen by no check of the worker (a fresh Python with its own CUDA context did the work no
    profile of the worker, nor ncu, recorded). The worker adopts its descendants' orphans, so the helper is its child
    and `threads_left_running` names it. Run with the harness in a process of its own, without CPU mode's filter
    (which refuses fork), as a GPU worker is."""
    source = tmp_path / "submission.py"
    source.write_text(DETACHED_HELPER)
    run = subprocess.run([sys.executable, "-c", HARNESS_RUN, str(source)], capture_output=True, text=True,
                         timeout=120, check=True)
    flags = json.loads(run.stdout.strip().splitlines()[-1])
    assert "threads_left_running" in flags and "child process" in flags["threads_left_running"], flags


@pytest.mark.parametrize("helper_from", ["load", "run"])
def test_the_judge_counts_its_workers_processes_after_each_request(monkeypatch, helper_from):
    """Red team rounds 45 and 46: the worker's own account of its children can be forged (and its orphan adoption
    turned off). The judge looks at the worker's cgroup itself, before the submission loads and after every request;
    a process that was not there before the load (a helper started at import or in a call) is
    `threads_left_running`. The cgroup's list is stood in for here: in CPU mode the filter refuses fork."""
    from kerneldojo.sandbox import isolation

    worker, helper = frozenset({101, 102}), frozenset({101, 102, 999})
    seen = iter([worker] + [helper if helper_from == "load" else worker] + [helper] * 100)
    monkeypatch.setattr(isolation.Cgroup, "processes", lambda self: next(seen))
    result = Judge("cpu", seeds=1, limits={"load": 60, "run": 30}).evaluate(
        "vector_add", "import torch\n\n\ndef solution(x, y):\n    return torch.empty_like(x).copy_(x)\n", "python")
    assert result.status == "flagged" and "threads_left_running" in result.checks_fired, result.messages
    assert f"1 process(es) in the worker's cgroup after its {helper_from}" in " ".join(result.messages)


def test_a_submission_that_turns_off_the_workers_orphan_adoption_is_tampering(tmp_path):
    """Red team round 46: one `prctl` at import turned the worker's adoption of orphans off, so a detached helper
    was init's child, seen by no check of the worker's."""
    source = tmp_path / "submission.py"
    source.write_text("import ctypes\n\nctypes.CDLL(None).prctl(36, 0, 0, 0, 0)\n\n\n"
                      "def solution(x, y):\n    return x + y\n")
    run = subprocess.run([sys.executable, "-c", HARNESS_RUN, str(source)], capture_output=True, text=True,
                         timeout=120, check=True)
    flags = json.loads(run.stdout.strip().splitlines()[-1])
    assert "PR_SET_CHILD_SUBREAPER turned off" in flags.get("tampering", ""), flags


NESTED_USER_NAMESPACES = """
def solution(x, y):
    raise RuntimeError("NESTED " + open("/proc/sys/user/max_user_namespaces").read().strip())
"""


def test_a_worker_without_a_pid_namespace_may_make_no_nested_user_namespace(monkeypatch):
    """Red team round 47: in a GPU worker (no pid namespace, so no /proc of its own, where the limit used to be set) a
    child made a user namespace of its own, which gave it every capability back, mounted the cgroup hierarchy and
    moved itself into a cgroup below the worker's, out of the judge's look. The limit of the worker's user namespace
    (what the file shows to a process in it) is 0 there too. Run on a CPU worker with its pid namespace off."""
    from kerneldojo.sandbox import process

    monkeypatch.setenv("KERNELDOJO_PID_NAMESPACE", "0")
    process._stop_spares()
    try:
        result = Judge("cpu", seeds=1, limits={"load": 60, "run": 30}).evaluate("vector_add", NESTED_USER_NAMESPACES,
                                                                                "python")
    finally:
        process._stop_spares()
    text = " ".join(result.messages)
    if "user_namespace: unavailable" in text:
        pytest.skip(f"no user namespace for the worker here: {text[:300]}")
    assert "NESTED 0" in text, text[:2000]


def test_the_judges_look_at_a_worker_cgroup_takes_in_the_cgroups_below():
    """Red team round 47: `cgroup.procs` lists a folder's own processes only, so a helper that moved itself into a
    cgroup below the worker's was missing from the judge's look, and on cgroup v1 survived the worker's kill."""
    from kerneldojo.sandbox import isolation

    cgroup = isolation.Cgroup(1 << 30, 64)
    if cgroup.processes() is None:
        pytest.skip(f"no writable cgroup here: {cgroup.errors}")
    helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        for folder in cgroup.dirs.values():
            (folder / "hide").mkdir(exist_ok=True)
            (folder / "hide" / "cgroup.procs").write_text(str(helper.pid))
        assert helper.pid in cgroup.processes()
        cgroup.kill()
        assert helper.wait(timeout=10) == -9  # the kill reaches below too
    finally:
        helper.kill()
        cgroup.remove()
    assert not any(folder.exists() for folder in cgroup.dirs.values())  # removed from the deepest up


@pytest.fixture
def worker_cgroup():
    from kerneldojo.sandbox import isolation

    cgroup = isolation.Cgroup(1 << 30, 64)
    if cgroup.processes() is None:
        pytest.skip(f"no writable cgroup here: {cgroup.errors}")
    started: list[subprocess.Popen] = []

    def run_inside(*argv: str) -> subprocess.Popen:
        started.append(process := subprocess.Popen(argv))
        for folder in cgroup.dirs.values():
            (folder / "cgroup.procs").write_text(str(process.pid))
        return process

    yield cgroup, run_inside
    for process in started:
        process.kill()
        process.wait()
    cgroup.remove()


# Red team round 49: a process whose main thread has ended (the raw exit system call) runs on in another thread;
# its /proc/<pid>/stat says "Z" and the kernel still lists it in the cgroup.
MAIN_THREAD_GONE = """
import _thread, ctypes, time
_thread.start_new_thread(time.sleep, (60,))
ctypes.CDLL(None).syscall(60, 0)
"""


@pytest.mark.parametrize("helper", ["python", "main thread gone", "look fails"])
def test_the_judge_sees_a_helper_that_lives_only_while_a_request_runs(worker_cgroup, monkeypatch, helper):
    """Red team round 48: a helper started during the timing requests (a sibling made with CLONE_PARENT, a fresh
    Python with a CUDA context of its own) did their work and was gone before the judge's look after them. The
    judge looks while they run: any new process is found and the cgroup killed. Round 49: an allowlist of the
    toolchain's programs let ptxas run the submission's library (LD_PRELOAD), a process whose main thread had ended
    was passed over as a zombie, and a look that raised (a process name that is no UTF-8) found nothing."""
    from kerneldojo.sandbox import isolation

    cgroup, run_inside = worker_cgroup
    with isolation.RequestWatch(cgroup, cgroup.processes()) as watch:
        time.sleep(0.3)
        assert watch.found is None  # nothing new: nothing found
        if helper == "look fails":
            monkeypatch.setattr(isolation.Cgroup, "processes", lambda self: b"\xff".decode())  # raises, as a name did
            time.sleep(0.3)
        else:
            program = "import time; time.sleep(60)" if helper == "python" else MAIN_THREAD_GONE
            process = run_inside(sys.executable, "-c", program)
            assert process.wait(timeout=30) == -9  # killed by the watch, with everything else in the cgroup
    assert watch.found, watch.found
    if helper == "look fails":
        assert "failed (UnicodeDecodeError), which counts as found" in watch.found
    else:
        assert f"1 process(es) ({process.pid}) in the worker's cgroup" in watch.found, watch.found


@pytest.mark.parametrize("timing", ["first, gone by the end", "first, still there", "second"])
def test_a_process_during_the_timing_requests(monkeypatch, worker_cgroup, timing):
    """The watch's finding, wired into `WorkerSolution.time`. A shape's first timing may compile a specialisation
    the checked call did not reach (red team round 53: a paged-attention kernel given max(seq_lens) as an integer,
    which Triton specialises on), so a process there is let finish and the timing is done again on fresh seeds
    (`Retime`); one still there after the requests is `threads_left_running`. In the second timing at the shape any
    process is killed at once and flagged, whatever the requests answered after the kill (rounds 48 and 49)."""
    from kerneldojo.graders.checks import Flagged
    from kerneldojo.sandbox import process
    from kerneldojo.sandbox.process import WorkerSolution
    from kerneldojo.sandbox.protocol import Retime

    cgroup, run_inside = worker_cgroup
    solution = object.__new__(WorkerSolution)
    stopped = []
    solution._worker = type("Worker", (), {"cgroup": cgroup, "stop": lambda self: stopped.append(True)})()
    solution._processes, solution._shapes_timed, solution._gpu = cgroup.processes(), set(), False
    shape, helpers = {"n": 1}, []

    def request(self, op, *args):
        if op == "time" and (timing != "second" or len(helpers) == 0):
            lives = "0.5" if timing == "first, gone by the end" else "60"
            helpers.append(run_inside(sys.executable, "-c", f"import time; time.sleep({lives})"))
            if timing == "first, gone by the end":
                helpers[-1].wait(timeout=30)
            elif timing == "second":
                helpers[-1].wait(timeout=30)  # until the watch kills it
        return reply

    reply = type("Reply", (), {"joined": lambda self, other: self})()
    monkeypatch.setattr(WorkerSolution, "_timing_reply", request)
    monkeypatch.setattr(process, "_implausible", lambda timed, sets, gpu: None)
    if timing == "second":
        solution._shapes_timed.add(tuple(sorted(shape.items())))
    expected = Retime if timing == "first, gone by the end" else Flagged
    with pytest.raises(expected) as raised:
        solution.time(shape, [1], [2], [3], [], 1 << 20, 0.1)
    if expected is Retime:  # with the first timing's figures: the judge pays the slower of the two
        assert "1 process(es)" in str(raised.value) and not stopped and helpers[0].returncode == 0
        assert raised.value.timed is reply
        return
    check = raised.value.checks["threads_left_running"]
    assert stopped, check
    if timing == "second":
        assert "during its timing: 1 process(es)" in check and helpers[0].returncode == -9
    else:
        assert "after its timing" in check


def test_the_judge_times_a_shape_again_on_fresh_seeds_after_a_retime(monkeypatch):
    """`Retime` (a process in a shape's first timing): the judge draws fresh seeds and times the shape once more."""
    from kerneldojo import judge as judge_mod
    from kerneldojo.result import EvalResult, Versions
    from kerneldojo.sandbox.protocol import Retime
    from kerneldojo.tasks import Case, Task, get_task

    class Done(Exception):
        pass

    calls = []

    class Solution:
        def time(self, shape, seeds, refills, profile_seeds, *rest):
            calls.append((list(seeds), list(refills), list(profile_seeds)))
            raise Retime("1 process(es)") if len(calls) == 1 else Done()

    monkeypatch.setattr(judge_mod, "measured_peaks", lambda device: None)
    monkeypatch.setattr(judge_mod, "datasheet_peaks", lambda name: None)
    monkeypatch.setattr(Task, "cases", lambda self, kind: [Case((("n", 1000),), "float32")])
    result = EvalResult(task="vector_add", language="triton", device="cpu", mode="cpu", status="ok",
                        versions=Versions(kerneldojo="0", python="3", torch="2"))  # fmt: skip
    with pytest.raises(Done):
        judge_mod.Judge("cpu")._time(get_task("vector_add"), Solution(), result, {})
    assert len(calls) == 2 and all(set(a).isdisjoint(b) for a, b in zip(*calls)), calls  # fresh seeds


@pytest.mark.parametrize("slower", ["first", "second"])
def test_after_a_retime_the_slower_timing_is_paid_and_both_are_rechecked(monkeypatch, slower):
    """Red team round 54: a submission that starts a short process in a shape's first timing where its draw was
    slow got a second draw of the noise. Both timings' outputs are rechecked and the slower median is paid."""
    from kerneldojo import judge as judge_mod
    from kerneldojo.result import EvalResult, TimeStats, Versions
    from kerneldojo.sandbox.protocol import Retime, TimedRuns
    from kerneldojo.tasks import Case, Task, get_task

    def draw(median_ms):
        stats = TimeStats(median_ms=median_ms, mean_ms=median_ms, min_ms=median_ms, max_ms=median_ms, iqr_ms=0.0,
                          runs=3)
        return TimedRuns(stats, None, [None] * 3)

    first, second = (draw(2.0), draw(1.0)) if slower == "first" else (draw(1.0), draw(2.0))

    class Solution:
        calls = 0

        def time(self, *args):
            self.calls += 1
            if self.calls == 1:
                raise Retime("1 process(es)", first)
            return second

    rechecked = []
    monkeypatch.setattr(judge_mod, "measured_peaks", lambda device: None)
    monkeypatch.setattr(judge_mod, "datasheet_peaks", lambda name: None)
    monkeypatch.setattr(judge_mod, "_check_timing", lambda *args, **kwargs: None)
    monkeypatch.setattr(judge_mod.Judge, "_recheck_timed_outputs", lambda self, task, case, timed, seeds:
                        rechecked.append(timed))
    monkeypatch.setattr(Task, "cases", lambda self, kind: [Case((("n", 1000),), "float32")])
    result = EvalResult(task="vector_add", language="triton", device="cpu", mode="cpu", status="ok",
                        versions=Versions(kerneldojo="0", python="3", torch="2"))  # fmt: skip
    case = "n=1000 float32"
    judge_mod.Judge("cpu")._time(get_task("vector_add"), Solution(), result, {case: (None, None)})
    assert rechecked == [first, second]
    assert result.timings[0].submission.median_ms == 2.0


@pytest.mark.parametrize("second", ["joined", "unjoined", "after_a_retime"])
def test_a_timing_busy_beyond_its_stream_is_timed_again_and_flagged_only_if_it_stays_so(monkeypatch, second):
    """Another process's context time-slicing the GPU (a spare worker starting: it takes no lock) stretched an
    honest softmax's profile once, and a batch flagged it `unsynchronized_stream` (H200, 2026-11-28). The judge
    times such a case again on fresh seeds; an unjoined stream shows on both draws, and the slower draw is paid."""
    from kerneldojo import judge as judge_mod
    from kerneldojo.result import EvalResult, ProfileStats, TimeStats, Versions
    from kerneldojo.sandbox.protocol import Flagged, Retime, TimedRuns
    from kerneldojo.tasks import Case, Task, get_task

    def draw(median_ms, busy_ms):
        stats = TimeStats(median_ms=median_ms, mean_ms=median_ms, min_ms=median_ms, max_ms=median_ms, iqr_ms=0.0,
                          runs=3)
        profile = ProfileStats(calls=3, kernel_ms=busy_ms, busy_ms=busy_ms, launches_per_call=1, streams=1,
                               own_share=1.0)
        return TimedRuns(stats, profile, [None] * 3)

    draws = [draw(0.128, 0.255), draw(0.130, 0.131) if second == "joined" else draw(0.127, 0.254)]
    if second == "after_a_retime":  # a compile forced into the first timing: its draw does not count (round 100)
        draws = [draw(0.130, 0.131), draw(0.127, 0.254)]

    class Solution:
        def time(self, *args):
            if second == "after_a_retime" and len(draws) == 2:
                raise Retime("1 process(es)", draws.pop(0))
            return draws.pop(0)

    monkeypatch.setattr(judge_mod, "measured_peaks", lambda device: None)
    monkeypatch.setattr(judge_mod, "datasheet_peaks", lambda name: None)
    monkeypatch.setattr(judge_mod.Judge, "_recheck_timed_outputs", lambda *args: None)
    monkeypatch.setattr(Task, "cases", lambda self, kind: [Case((("n", 1000),), "float32")])
    result = EvalResult(task="vector_add", language="triton", device="cpu", mode="cpu", status="ok",
                        versions=Versions(kerneldojo="0", python="3", torch="2"))  # fmt: skip
    time = functools.partial(judge_mod.Judge("cpu")._time, get_task("vector_add"), Solution(), result,
                             {"n=1000 float32": (None, None)})
    if second != "joined":
        with pytest.raises(Flagged, match="unsynchronized_stream"):
            time()
    else:
        time()
        assert result.timings[0].submission.median_ms == 0.130  # the slower draw
    assert not draws  # timed twice


def test_a_judge_removes_the_empty_cgroups_that_killed_judges_left():
    """A SIGKILLed judge runs no exit handler, so its workers' cgroups stayed (a test machine had gathered hundreds).
    The next judge removes the empty ones whose judge is gone and that have not changed for a while; a live judge's
    stay, and so does a new one (a judge in another pid namespace may be alive: red team round 53)."""
    from kerneldojo.sandbox import isolation

    bases = [base for _, base, _ in isolation._cgroup_bases()]
    if not bases:
        pytest.skip("no writable cgroup here")
    dead = 4_000_000 + os.getpid()  # above pid_max's usual ceiling: no such process
    made = []
    try:
        for base in bases:  # a dead judge's, old; a dead judge's, new (another pid namespace's?); a live one's
            for name in (f"kerneldojo-worker-{dead}-0", f"kerneldojo-worker-{dead}-1",
                         f"kerneldojo-worker-{os.getpid()}-999999"):  # fmt: skip
                (base / name).mkdir()
                made.append(base / name)
            old = time.time() - isolation.STALE_CGROUP_S - 60
            os.utime(made[-3], (old, old))
    except OSError as e:
        pytest.skip(f"cannot make a cgroup here: {e}")
    try:
        isolation._remove_dead_judges_cgroups.cache_clear()
        isolation.Cgroup(1 << 30, 64).remove()
        assert [folder.exists() for folder in made] == [False, True, True] * len(bases)
    finally:
        for folder in made:
            with contextlib.suppress(OSError):
                folder.rmdir()


def test_every_triton_kernel_of_the_harness_is_compiled_at_a_gpu_workers_start(monkeypatch):
    """Red team round 52: the harness's gate and L2 flush kernels compiled at their first use, inside the timing
    requests, and Triton's ptxas was then a process in the worker where the judge flags any. Every `@triton.jit`
    function of the harness (graders/, sandbox/) is one of HARNESS_KERNELS, and a GPU worker's start compiles each
    (here its three builders, stood in for: no GPU)."""
    import ast

    from kerneldojo.graders.profile import HARNESS_KERNELS
    from kerneldojo.sandbox.worker import loop

    root = Path(__file__).resolve().parents[2]
    jitted = set()
    for path in [*root.glob("graders/*.py"), *root.glob("sandbox/**/*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and any("triton.jit" in ast.unparse(d) for d in node.decorator_list):
                jitted.add(node.name)
    assert jitted - {"fill"} == HARNESS_KERNELS  # `fill`: the worker's throwaway warm-up kernel
    built = []
    monkeypatch.setattr(loop, "HostGate", lambda device: built.append("kerneldojo_gate"))
    monkeypatch.setattr(loop, "L2Flush", lambda device, l2: lambda: built.append("kerneldojo_flush_l2"))
    monkeypatch.setattr(loop, "compile_barrier", lambda device: built.append("kerneldojo_align_ranks"))
    monkeypatch.setattr(loop.torch.cuda, "synchronize", lambda device=None: None)
    loop._compile_harness_kernels(type("Device", (), {"torch_device": "cuda:0", "l2_bytes": 50 << 20})())
    assert set(built) == HARNESS_KERNELS


def test_a_distributed_tasks_ranks_survive_a_retime(monkeypatch):
    """Red team round 54: a rank's `Retime` closed every rank (as any failure does), so the judge's second timing met a
    closed handle and an honest distributed kernel ended `runtime_error`. The ranks are kept and all time again."""
    import concurrent.futures as cf

    from kerneldojo import judge as judge_mod
    from kerneldojo.result import EvalResult, Versions
    from kerneldojo.sandbox.peers import CollectiveSolution
    from kerneldojo.sandbox.protocol import Retime, TimedRuns
    from kerneldojo.tasks import Case, Task, get_task

    class Done(Exception):
        pass

    calls = []

    class Rank:  # a rank's WorkerSolution as the collective sees it: rank 0's first timing saw a compile
        closed = False

        def __init__(self, r):
            self.r, self.seen_flags = r, {}

        def time(self, shape, *rest):
            calls.append(self.r)
            if calls.count(self.r) == 2:
                raise Done()  # the second timing reached this rank
            if self.r == 0:  # with its own figures, as `WorkerSolution.time` raises it: one rank's (round 63)
                raise Retime("1 process(es)", TimedRuns(None, None, [None]))
            return None  # rank 1's first timing went through

        def close(self):
            self.closed = True

    solution = object.__new__(CollectiveSolution)
    solution.devices, solution._pool, solution._closed_flags = ["cpu", "cpu"], cf.ThreadPoolExecutor(2), {}
    solution.ranks = ranks = [Rank(0), Rank(1)]
    monkeypatch.setattr(judge_mod, "measured_peaks", lambda device: None)
    monkeypatch.setattr(judge_mod, "datasheet_peaks", lambda name: None)
    monkeypatch.setattr(Task, "cases", lambda self, kind: [Case((("n", 1000),), "float32")])
    result = EvalResult(task="vector_add", language="triton", device="cpu", mode="cpu", status="ok",
                        versions=Versions(kerneldojo="0", python="3", torch="2"))  # fmt: skip
    with pytest.raises(Done):  # the second timing reached every rank; its answers are beside the point here
        judge_mod.Judge("cpu")._time(get_task("vector_add"), solution, result, {})
    assert sorted(calls) == [0, 0, 1, 1], calls
    solution._pool.shutdown()
    assert [rank.closed for rank in ranks] == [True, True]  # closed after the second timing's failure only


# A folder on PYTHONPATH was bound whole (red team round 81): a source checkout there also held the service's state
# folder, every token's sources in its jobs and results, and .git. Only what Python imports from it is bound now.
READ_BESIDE_A_PACKAGE = """
def solution(x, y):
    got = {}
    for path in PATHS:
        try:
            got[path] = open(path).read()
        except OSError as e:
            got[path] = "refused: " + e.strerror
    raise RuntimeError("READ " + repr(got))
"""


def test_a_worker_reads_only_the_packages_of_a_folder_on_pythonpath(tmp_path, monkeypatch):
    """Round 82: the first rule left out a namespace package (no Python at its top: cuda-python's `cuda`) and the
    packages of a folder reached through a symlink, each an honest import's `compile_error`. Three PYTHONPATH
    folders, one per layout: a plain folder, a folder that is a link, a folder of links."""
    from kerneldojo.sandbox import isolation, process

    wanted, private, entries = [], [], []
    for layout in ("folder", "folder_is_a_link", "packages_are_links"):
        real = tmp_path / f"real_{layout}"
        packages = {f"kd_{layout}_imported/__init__.py": f"VALUE = '{layout} importable'\n",
                    f"kd_{layout}_never_imported/__init__.py": f"VALUE = '{layout} also'\n",  # liger_kernel, H200
                    f"kd_{layout}_namespace/portion/__init__.py": f"VALUE = '{layout} portion'\n"}
        state = {"kerneldojo-service/results.jsonl", ".git/HEAD", "notes.txt", "data/more/rows.txt"}
        for name in (*packages, *state):
            (real / name).parent.mkdir(parents=True, exist_ok=True)
            (real / name).write_text(packages.get(name, "PRIVATE-SOURCE-OF-ANOTHER-TOKEN"))
        entry = real
        if layout == "folder_is_a_link":
            entry = tmp_path / f"link_{layout}"
            entry.symlink_to(real)
        elif layout == "packages_are_links":
            entry = tmp_path / f"farm_{layout}"
            entry.mkdir()
            for item in real.iterdir():
                (entry / item.name).symlink_to(item)
        entries.append(entry)
        wanted += [(str(entry / name), text.split("'")[1]) for name, text in packages.items()]
        private += [str(entry / name) for name in state]
        monkeypatch.syspath_prepend(str(entry))
        __import__(f"kd_{layout}_imported")
    monkeypatch.setenv("PYTHONPATH", ":".join([*map(str, entries), os.environ.get("PYTHONPATH", "")]))
    isolation._package_folders.cache_clear()
    process._stop_spares()  # spares made their plan before: a new worker takes the new PYTHONPATH's
    try:
        paths = private + [path for path, _ in wanted]
        judge = Judge("cpu", seeds=1, limits={"load": 60, "run": 30}, result_cache=None)
        result = judge.evaluate("vector_add", READ_BESIDE_A_PACKAGE.replace("PATHS", repr(paths)), "python")
        text = "\n".join(result.messages)
        assert "READ " in text, text
        assert "PRIVATE-SOURCE-OF-ANOTHER-TOKEN" not in text, text
        for _, value in wanted:  # packages are there, as imports need
            assert value in text, (value, text)
    finally:
        for name in [n for n in sys.modules if n.startswith("kd_") and n.endswith("_imported")]:
            sys.modules.pop(name)
        isolation._package_folders.cache_clear()
        process._stop_spares()


# Memory a worker holds in its tmpfs folders is in no process's RSS: a killer choosing by RSS took the judge
# (red team round 97). Each worker is the OOM killer's first choice, and under a root judge stays so.
OOM_SCORE = """
def solution(x, y):
    path = "/proc/self/oom_score_adj"
    before = open(path).read().strip()
    try:
        with open(path, "w") as f:
            f.write("0")
        lowered = "lowered"
    except OSError as e:
        lowered = "refused " + e.strerror
    raise RuntimeError(f"OOM {before} {open(path).read().strip()} {lowered} END")
"""


def test_a_worker_is_the_oom_killers_first_choice_and_a_root_judges_stays_so():
    judge = Judge("cpu", seeds=1, limits={"load": 60, "run": 30})
    text = "\n".join(judge.evaluate("vector_add", OOM_SCORE, "triton").messages)
    before, after, lowered = text.rsplit("OOM ", 1)[1].split(" END")[0].split(" ", 2)
    assert before == "1000", text
    status = Path("/proc/self/status").read_text().splitlines()
    caps = next(int(line.split()[1], 16) for line in status if line.startswith("CapEff:"))
    if caps >> 24 & 1:  # CAP_SYS_RESOURCE here: the worker's floor was set with it
        assert after == "1000" and lowered.startswith("refused"), text
