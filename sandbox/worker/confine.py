"""Namespaces, a read-only file system, limits and dropped privileges, set up by a process-backend worker
around itself (Linux) before any submission code runs. Runs inside the worker; the judge's side (the
plan, the cgroup, the handle it kills through) is `sandbox.isolation`.


`enter(plan)` runs in the freshly spawned worker before any submission code and sets up, as far as
the kernel allows:

- a **user namespace** mapping only the judge's own uid to 0, so that the rest works without root
  and the worker's capabilities reach nothing outside its namespaces; device nodes (/dev/nvidia*)
  still open by their file permissions;
- a **pid namespace** (the worker is pid 1 of it: it cannot see or signal the judge or other
  workers, `os.getppid()` is 0, and killing it kills everything it started), with its own /proc;
- **mount, ipc and network namespaces**: a root of its own built from an allowlist (`Plan.root`: Python,
  its packages, system libraries, CUDA, a few files of /etc), read-only, in which only the scratch folder,
  /tmp, /var/tmp and a private /dev/shm, each a capped tmpfs, are writable; no network at all;
- then all capabilities dropped (bounding set too) and `no_new_privs`, a Landlock domain of its own that no
  signal leaves (what keeps a GPU worker, which has no pid namespace, from signalling the judge or another
  worker), and every fd but the socket closed.

The spawned process (the one `multiprocessing` knows) is multithreaded once torch and numpy are
imported (OpenBLAS starts its pool at import), and a multithreaded process may not enter a user or
mount namespace. So it forks: the child, single-threaded, unshares; with a pid namespace it forks
once more, and that grandchild, pid 1 of the new namespace, is the worker. The processes in
between only wait and pass on the worker's exit status, so the judge sees a segfault or an exit
code as before. The worker's parent sends the judge a pidfd of the worker over a private channel,
so that the judge kills exactly that process (and with it its whole pid namespace), never a
recycled pid.

Limits: host memory and process count through a cgroup (v2 `memory.max`/`pids.max`, or v1) where
the judge can create one; otherwise `RLIMIT_NPROC` (binds when the worker's real uid is not root)
and, in CPU mode only, `RLIMIT_DATA` (CUDA reserves address space, so `RLIMIT_AS` does not fit).

Each protection is recorded with the reason when it is missing; `WorkerHandle.protections` returns
that record to the judge.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import itertools
import json
import os
import platform
import resource
import signal
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWUSER = 0x00020000, 0x08000000, 0x10000000
CLONE_NEWPID, CLONE_NEWNET = 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_MOVE, MS_REC, MS_PRIVATE = 32, 4096, 8192, 16384, 1 << 18
MS_NOATIME, MS_NODIRATIME, MS_RELATIME = 1024, 2048, 1 << 21
ST_TO_MS = {os.ST_NOSUID: MS_NOSUID, os.ST_NODEV: MS_NODEV, os.ST_NOEXEC: MS_NOEXEC, os.ST_NOATIME: MS_NOATIME,
            os.ST_NODIRATIME: MS_NODIRATIME, os.ST_RELATIME: MS_RELATIME}  # fmt: skip
SYS_MOUNT_SETATTR, AT_FDCWD, AT_RECURSIVE, MOUNT_ATTR_RDONLY, MNT_DETACH = 442, -100, 0x8000, 1, 2
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}.get(platform.machine(), -1)
SYS_KEYCTL, KEYCTL_JOIN_SESSION_KEYRING = {"x86_64": 250, "aarch64": 219}.get(platform.machine(), -1), 1
SYS_LANDLOCK_CREATE_RULESET, SYS_LANDLOCK_RESTRICT_SELF, LANDLOCK_CREATE_RULESET_VERSION = 444, 446, 1
LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET, LANDLOCK_SCOPE_SIGNAL, LANDLOCK_SCOPES_ABI = 1, 2, 6
PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS, PR_CAPBSET_DROP, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 1, 38, 24, 47, 4
LINUX_CAPABILITY_VERSION_3 = 0x20080522

HIDDEN_TMPFS = "size=1m,nr_inodes=4096,mode=755"

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long  # a descriptor or -1, a Landlock ABI
_names = itertools.count()


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = (lambda s: s.encode() if s is not None else None)  # noqa: E731
    _check(_libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)), f"mount {target}")


class _MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]  # fmt: skip


_STAGES: dict[str, float] | None = {} if os.environ.get("KERNELDOJO_WORKER_STAGES") else None


def stage(name: str) -> None:
    """When each step of a worker's start ended, reported with its protections (bench_worker_start.py only, with
    KERNELDOJO_WORKER_STAGES)."""
    if _STAGES is not None:
        _STAGES[name] = time.time()


def stages_after(first: str) -> dict[str, float] | None:
    """The stamps from `first` on, as seconds after it (None unless KERNELDOJO_WORKER_STAGES)."""
    if _STAGES is None or first not in _STAGES:
        return None
    return {k: round(v - _STAGES[first], 4) for k, v in _STAGES.items() if v >= _STAGES[first]}


def _make_readonly(path: str, recursive: bool = False) -> None:
    """Read-only for one mount (or the mounts below it too), keeping its other flags (a user namespace may not
    clear locked ones)."""
    attr = _MountAttr(MOUNT_ATTR_RDONLY, 0, 0, 0)
    at = AT_RECURSIVE if recursive else 0
    if _libc.syscall(SYS_MOUNT_SETATTR, AT_FDCWD, path.encode(), at, ctypes.byref(attr), ctypes.sizeof(attr)) == 0:
        return
    if ctypes.get_errno() != errno.ENOSYS:  # kernels before 5.12: remount each mount with the flags it has
        _check(-1, f"read-only {path}")
    for point in [p for p in _mount_points() if under(p, path)] if recursive else [path]:
        flags = os.statvfs(point).f_flag
        kept = sum(ms for st, ms in ST_TO_MS.items() if flags & st)
        _mount(None, point, None, MS_REMOUNT | MS_BIND | MS_RDONLY | kept)


# The host-wide parts of the host's /proc, read-only in a worker that sees it (no pid namespace): Docker's list.
HOST_WIDE_PROC = ("sys", "irq", "bus", "fs", "asound")


@dataclass
class Plan:
    """What a worker sets up around itself; made by the judge, pickled into the worker."""

    scratch: str
    gpu: bool
    control: object  # the worker's end of a multiprocessing Pipe to the judge; None for a build
    memory_bytes: int
    max_processes: int
    # The new root's contents: (path, None) bound read-only from the host, or (path, target) a symlink.
    root: list[tuple[str, str | None]] = field(default_factory=list)
    scratch_bytes: int = 1 << 30  # the scratch folder, /tmp, /var/tmp and a private /dev/shm: tmpfs of this size
    scratch_inodes: int = 65536  # and at most this many files each
    scratch_tmpfs: bool = True  # False for a build: the scratch folder is the host's (the judge reads the output)
    pid_namespace: bool = True
    private_shm: bool = True
    hide_inside_kept: list[str] = field(default_factory=list)
    cgroup_procs: list[str] = field(default_factory=list)
    cgroup: dict[str, str | None] = field(default_factory=dict)  # controller -> description or None
    cgroup_errors: dict[str, str] = field(default_factory=dict)
    judge_pid: int | None = None  # its /proc/<pid> read-only where the worker sees the host's /proc
    template_pid: int | None = None  # the same for the worker template that forked this worker


def unescape(path: str) -> str:
    return path.encode().decode("unicode_escape") if "\\" in path else path


def gib(n: int) -> str:
    return f"{n / (1 << 30):g} GiB"


def under(path: str, parent: str) -> bool:
    return path == parent or path.startswith(parent.rstrip("/") + "/")


def under_any(path: str, parents: list[str]) -> bool:
    return any(under(path, p) for p in parents)


def enter(plan: Plan, redirect_output, keep_fds: tuple[int, ...] = ()) -> dict:
    """Set up the worker's namespaces and limits; returns, in the worker only, what is active.

    The processes in between never return: they wait for their child and end as it ended.
    `redirect_output()` points stdout/stderr to the scratch folder once it is mounted. Every file descriptor
    but 0, 1, 2 and `keep_fds` (the socket to the judge) is closed in the worker at the end.
    """
    stage("enter")
    protections: dict[str, object] = {"session_keyring": _fresh_session_keyring(), "oom_first": _oom_first()}
    _die_with_parent(plan.template_pid or plan.judge_pid)  # the judge's end: this one, then each below, gets SIGKILL
    for path in plan.cgroup_procs:  # before any fork: children are born inside
        try:
            Path(path).write_text(str(os.getpid()))
        except OSError as e:
            protections["cgroup"] = f"unavailable: joining {path}: {e.strerror}"
    parent = os.getpid()
    child = os.fork()  # this process has threads (OpenBLAS); the child has one and may unshare
    if child:
        _close_quietly(plan.control)
        _wait_and_mirror(child)
    _die_with_parent(parent)
    protections.update(_unshare(plan))
    stage("unshare")
    if protections["pid_namespace"] is True:
        report_r, report_w = os.pipe()
        worker = os.fork()  # pid 1 of the new namespace
        if worker:
            os.close(report_w)
            _send_handle(plan.control, worker)
            with contextlib.suppress(OSError), os.fdopen(report_r, "rb") as f:
                data = f.read()
                plan.control.send(json.loads(data) if data else {"worker": "no report"})
            _close_quietly(plan.control)
            _wait_and_mirror(worker)
        _die_with_parent(0)  # its parent is outside its pid namespace: 0, whether or not it still lives
        os.close(report_r)
        report = lambda p: _write_report(report_w, p)  # noqa: E731
        _close_quietly(plan.control)
    else:
        _send_handle(plan.control, os.getpid())

        def report(p):
            with contextlib.suppress(OSError):
                plan.control.send(p)
            _close_quietly(plan.control)

    protections.update(_inside(plan, protections, redirect_output))
    keep = sorted({0, 1, 2, *keep_fds})
    protections["fds"] = f"on: only {keep} stay open"
    if _STAGES is not None:
        protections["stages"] = dict(_STAGES)
    report(protections)
    _close_fds_except(keep)
    return protections


def _fresh_session_keyring() -> str | bool:
    """An anonymous session keyring of this process's own, first: keyrings are not namespaced, and the judge's
    (with whatever keys its session holds) would otherwise ride through fork, the user namespace and pivot_root
    into the sandbox, readable and writable, and shared with every other worker (red team round 9)."""
    if _libc.syscall(SYS_KEYCTL, KEYCTL_JOIN_SESSION_KEYRING, None) >= 0:
        return True
    return f"unavailable: keyctl(KEYCTL_JOIN_SESSION_KEYRING): {os.strerror(ctypes.get_errno())}"


CAP_SYS_RESOURCE = 24


def _oom_first() -> str | bool:
    """The OOM killer's first choice, before any fork: a worker's memory can sit in its tmpfs folders, in no
    process's RSS, so a killer choosing by RSS took the judge instead (red team round 97: a worker holding 2.5 GiB of
    tmpfs at 318 MB RSS, the judge, a trainer's process, killed). 1000 also sets the floor the value may be lowered
    to where this process has CAP_SYS_RESOURCE (the judge's own capability, before the worker drops it): locked for
    every process below. Without it (a container's default set) a worker whose /proc is the host's (GPU mode) can
    write it back down (docs/threat-model.md, Open)."""
    try:
        Path("/proc/self/oom_score_adj").write_text("1000")
        with open("/proc/self/status") as f:
            caps = next(int(line.split()[1], 16) for line in f if line.startswith("CapEff:"))
    except (OSError, StopIteration, ValueError) as e:
        return f"unavailable: oom_score_adj: {e}"
    if caps >> CAP_SYS_RESOURCE & 1:
        return True
    return "raised, not locked: the judge lacks CAP_SYS_RESOURCE, so the worker may lower it"


def _close_fds_except(keep: list[int]) -> None:
    """Whatever the worker inherited (multiprocessing's spawn sentinel, a caller's descriptors) is closed, so
    that the fds it holds are an allowlist (`os.closerange` is close_range(2) where the kernel has it)."""
    low = 0
    for fd in [*keep, max(os.sysconf("SC_OPEN_MAX"), 1024)]:
        if fd > low:
            os.closerange(low, fd)
        low = fd + 1


def _die_with_parent(parent: int | None = None) -> None:
    """SIGKILL when the parent ends (a backstop: the judge kills workers itself, by pidfd). `parent`: its pid as known
    before this process was forked; read here, a parent already gone reads as its reaper's (red team round 109)."""
    parent = os.getppid() if parent is None else parent
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # it ended before the line above
        os._exit(70)


def _send_handle(control, pid: int) -> None:
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        pidfd = None
    with contextlib.suppress(OSError):
        control.send({"pid": pid, "pidfd": pidfd is not None})
        if pidfd is not None:
            from multiprocessing.reduction import send_handle

            send_handle(control, pidfd, 0)
            os.close(pidfd)


def _write_report(fd: int, protections: dict) -> None:
    with contextlib.suppress(OSError), os.fdopen(fd, "wb") as f:
        f.write(json.dumps(protections, default=str).encode())


def _close_quietly(conn) -> None:
    with contextlib.suppress(OSError):
        conn.close()


def _wait_and_mirror(child: int) -> None:
    """Wait for the child, then end the same way: its exit code, or the signal that killed it."""
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        while True:
            try:
                _, status = os.waitpid(child, 0)
                break
            except ChildProcessError:
                os._exit(70)
        if os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            with contextlib.suppress(OSError, ValueError):  # SIGKILL and SIGSTOP have no handler to reset
                signal.signal(sig, signal.SIG_DFL)
            os.kill(os.getpid(), sig)  # pid 1 of a namespace ignores it from within: then 128 + sig, below
            os._exit(128 + sig)
        os._exit(os.WEXITSTATUS(status))
    finally:
        os._exit(70)


def _unshare(plan: Plan) -> dict:
    """Enter new namespaces: all at once in a user namespace, else as root, else what is allowed."""
    uid, gid = os.geteuid(), os.getegid()
    others = CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWNET | (CLONE_NEWPID if plan.pid_namespace else 0)
    result = {}
    if _libc.unshare(CLONE_NEWUSER | others) == 0:
        try:
            Path("/proc/self/setgroups").write_text("deny")
            Path("/proc/self/uid_map").write_text(f"0 {uid} 1")
            Path("/proc/self/gid_map").write_text(f"0 {gid} 1")
            result["user_namespace"] = True
        except OSError as e:
            result["user_namespace"] = f"unavailable: writing the id maps failed: {e.strerror}"
        flags = others
    else:
        reason = os.strerror(ctypes.get_errno())
        result["user_namespace"] = f"unavailable: {reason} (kernel.unprivileged_userns_clone or a policy)"
        flags = 0
        if _libc.unshare(others) == 0:
            flags = others
        else:
            for one in (CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWNET, CLONE_NEWPID if plan.pid_namespace else 0):
                if one and _libc.unshare(one) == 0:
                    flags |= one
    reason = "needs root or user namespaces"
    result["mount_namespace"] = True if flags & CLONE_NEWNS else f"unavailable: {reason}"
    result["ipc_namespace"] = True if flags & CLONE_NEWIPC else f"unavailable: {reason}"
    result["network_namespace"] = True if flags & CLONE_NEWNET else f"unavailable: {reason}"
    if not plan.pid_namespace:
        result["pid_namespace"] = "off: GPU mode (legacy CUDA IPC handles do not open across pid namespaces)"
    else:
        result["pid_namespace"] = True if flags & CLONE_NEWPID else f"unavailable: {reason}"
    if result["network_namespace"] is not True:
        os.environ["KERNELDOJO_NETWORK_ISOLATION"] = "unavailable"
    return result


def _inside(plan: Plan, active: dict, redirect_output) -> dict:
    """In the worker: file system view, /proc, limits, then drop every privilege."""
    result = {}
    own_proc = active["pid_namespace"] is True and active["mount_namespace"] is True
    redirected = []
    redirect_once = lambda: redirected or redirected.append(redirect_output())  # noqa: E731
    if active["mount_namespace"] is True:
        try:
            result["filesystem"] = _setup_mounts(plan, redirect_once, own_proc)
        except OSError as e:
            result["filesystem"] = f"unavailable: {e}"
            redirect_once()
    else:
        result["filesystem"] = "unavailable: no mount namespace (the worker sees what the judge's user sees)"
        redirect_once()
    if own_proc:
        try:
            if not str(result["filesystem"]).startswith("read-only"):  # else mounted in the new root already
                _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
            result["proc"] = True
            with contextlib.suppress(OSError):  # no nested user namespaces (less kernel to attack)
                Path("/proc/sys/user/max_user_namespaces").write_text("0")
            try:  # the host's sysctls and the sysrq trigger: out of reach even of a uid that is root outside
                _mount("/proc/sys", "/proc/sys", None, MS_BIND | MS_REC)
                _make_readonly("/proc/sys")
                if os.path.exists("/proc/sysrq-trigger"):  # not every kernel has one
                    _mount("/dev/null", "/proc/sysrq-trigger", None, MS_BIND)
                # The rest of /proc too: files such as /proc/irq/*/smp_affinity check no capability, only a
                # uid that is root outside, which the judge's may be.
                _make_readonly("/proc")
                result["proc_sys"] = "read-only (all of /proc)"
            except OSError as e:
                result["proc_sys"] = f"unavailable: {e}"
        except OSError as e:
            result["proc"] = f"unavailable: {e.strerror}; /proc still lists the judge's processes"
    os.chdir(plan.scratch)
    for name, value in (("HOME", plan.scratch), ("TMPDIR", "/tmp"), ("TRITON_CACHE_DIR", f"{plan.scratch}/.triton"),
                        ("XDG_CACHE_HOME", f"{plan.scratch}/.cache"),
                        ("TORCHINDUCTOR_CACHE_DIR", f"{plan.scratch}/.inductor")):  # fmt: skip
        os.environ[name] = value
    tempfile.tempdir = None
    stage("own_proc")
    result.update(_limits(plan))
    stage("limits")
    result.update(_drop_privileges())
    stage("privileges")
    return result


# The device nodes a worker keeps in a /dev of its own (the few any program needs); GPU mode adds NVIDIA's
# nodes and the host's /dev/shm (CUDA IPC). Nothing else of the host's /dev is there: no kmsg, console,
# loop-control or block device, which a read-only mount would not stop a write to.
DEV_NODES = ("null", "zero", "full", "random", "urandom")  # no tty: the judge's terminal is nobody's input


def _private_dev(gpu: bool, root: str) -> None:
    names = list(DEV_NODES)
    if gpu:
        names += [n for n in os.listdir("/dev") if n.startswith("nvidia")] + ["shm"]
    handles = {n: os.open(f"/dev/{n}", os.O_PATH) for n in names if os.path.exists(f"/dev/{n}")}
    os.makedirs(f"{root}/dev", exist_ok=True)
    _mount("tmpfs", f"{root}/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "size=1m,nr_inodes=4096,mode=755")
    for name, fd in handles.items():
        _bind_handle(fd, f"{root}/dev/{name}")
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                         ("stderr", "/proc/self/fd/2")):
        os.symlink(target, f"{root}/dev/{name}")
    os.makedirs(f"{root}/dev/shm", exist_ok=True)  # CPU mode: a private tmpfs goes here


def _bind_handle(fd: int, target: str) -> None:
    """Bind what the O_PATH handle `fd` (opened before a tmpfs covered it) names onto `target`, then close it."""
    if os.path.isdir(f"/proc/self/fd/{fd}"):
        os.makedirs(target, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        Path(target).touch()
    _mount(f"/proc/self/fd/{fd}", target, None, MS_BIND | MS_REC)
    os.close(fd)


def _setup_mounts(plan: Plan, redirect_output, own_proc: bool) -> str:
    """A root of the worker's own, built from an allowlist: an empty tmpfs into which only what a worker needs
    is bound read-only (`plan.root`: Python, its packages, system libraries and compilers, CUDA, a few files
    of /etc), then `pivot_root` and the host's root unmounted. Nothing else of the host exists for it."""
    inside = [p for p, link in plan.root if link is None and under(plan.scratch, p)]
    if inside:  # the new root is mounted on the scratch folder: a tree holding it would hold the new root too
        raise OSError(errno.EINVAL, f"the scratch folder {plan.scratch} lies inside {inside[0]}, which is allowlisted")
    _mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing below propagates back to the host
    # Output goes to the host's scratch folder, opened now: the worker never sees that folder again (a
    # tmpfs of its own takes its place), so it cannot fill the host's disk past RLIMIT_FSIZE.
    redirect_output()
    # Any folder of ours will do as the new root's mount point: a worker's scratch folder, which it then hides;
    # for a build, a folder inside it (the build folder is bound below, without that folder's mounts).
    new = plan.scratch if plan.scratch_tmpfs else f"{plan.scratch}/.root"
    os.makedirs(new, exist_ok=True)
    _mount("tmpfs", new, "tmpfs", MS_NOSUID | MS_NODEV, HIDDEN_TMPFS)
    scratch = f"size={plan.scratch_bytes},nr_inodes={plan.scratch_inodes},mode=1777"
    private = ["/tmp", "/var/tmp"] + (["/dev/shm"] if plan.private_shm else [])
    for path in private[:2]:  # first: an allowlisted path may lie below (a compiler in a test's temp folder)
        os.makedirs(new + path, exist_ok=True)
        _mount("tmpfs", new + path, "tmpfs", MS_NOSUID | MS_NODEV, scratch)
    for path, link in plan.root:
        target = new + path
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if link is not None:
            os.symlink(link, target)
            continue
        if os.path.isdir(path):
            os.makedirs(target, exist_ok=True)
        else:
            Path(target).touch()
        _mount(path, target, None, MS_BIND | MS_REC)
        _make_readonly(target, recursive=True)
    stage("root_binds")
    _private_dev(plan.gpu, new)
    stage("dev")
    if plan.private_shm:
        _mount("tmpfs", f"{new}/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, scratch)
    os.makedirs(new + plan.scratch, exist_ok=True)
    if plan.scratch_tmpfs:  # the scratch folder: a tmpfs with the same caps
        _mount("tmpfs", new + plan.scratch, "tmpfs", MS_NOSUID | MS_NODEV, scratch.replace("1777", "700"))
    else:  # a build: the host's folder, which the judge reads the library from
        _mount(plan.scratch, new + plan.scratch, None, MS_BIND)
    os.makedirs(f"{new}/proc", exist_ok=True)
    if own_proc:  # before the pivot: a user namespace may mount a proc only while one is fully visible
        _mount("proc", f"{new}/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    else:  # no pid namespace, so no /proc of its own: the host's, with the host-wide parts read-only and the sysrq
        # trigger masked, as Docker's defaults have them (red team round 41: the host's sysctls such as core_pattern
        # and /proc/irq were a uid's to write, and a root judge's worker is root outside). Not all of /proc: the CUDA
        # driver's initialisation fails (error 304) in a worker whose /proc is read-only (H200, 2026-11-27).
        _mount("/proc", f"{new}/proc", None, MS_BIND | MS_REC)
        # No nested user namespaces, as with a /proc of its own: the limit is this user namespace's (red team round
        # 47: one gave a helper back every capability, to mount the cgroup hierarchy and hide in a cgroup below).
        with contextlib.suppress(OSError):
            Path(f"{new}/proc/sys/user/max_user_namespaces").write_text("0")
        for part in HOST_WIDE_PROC:
            if os.path.isdir(f"{new}/proc/{part}"):
                _mount(f"{new}/proc/{part}", f"{new}/proc/{part}", None, MS_BIND | MS_REC)
                _make_readonly(f"{new}/proc/{part}", recursive=True)
        if os.path.exists(f"{new}/proc/sysrq-trigger"):
            _mount("/dev/null", f"{new}/proc/sysrq-trigger", None, MS_BIND)
        # The judge's own files too: a root judge's are root's (it is undumpable), which a worker of a root judge is
        # outside, and oom_score_adj needs nothing more to be raised (round 41: the judge, the OOM killer's first).
        # And the worker template's (`worker.template`), every worker's parent's parent.
        for pid in (plan.judge_pid, plan.template_pid):
            if pid and os.path.isdir(f"{new}/proc/{pid}"):
                _mount(f"{new}/proc/{pid}", f"{new}/proc/{pid}", None, MS_BIND)
                _make_readonly(f"{new}/proc/{pid}")
    stage("proc")
    if plan.gpu:  # the CUDA driver and NVML read the GPU's PCI topology and NUMA nodes from /sys
        os.makedirs(f"{new}/sys", exist_ok=True)
        _mount("/sys", f"{new}/sys", None, MS_BIND | MS_REC)
        with contextlib.suppress(OSError):
            _make_readonly(f"{new}/sys", recursive=True)
    stage("sys")
    for path in plan.hide_inside_kept:  # judge-private folders inside a kept tree (a cache inside the venv)
        if os.path.isdir(new + path):
            _mount("tmpfs", new + path, "tmpfs", MS_NOSUID | MS_NODEV, HIDDEN_TMPFS)
    os.chdir(new)
    if _libc.syscall(SYS_PIVOT_ROOT, b".", b".") == 0:  # the old root now lies on top of the new: detach it
        _check(_libc.umount2(b".", MNT_DETACH), "unmounting the host's root")
        how = "pivot_root"
    else:  # e.g. a root that is no mount point (an initramfs): move the new root over / and chroot
        _mount(".", "/", None, MS_MOVE)
        os.chroot(".")
        how = "chroot (pivot_root refused)"
    os.chdir("/")
    _make_readonly("/")
    stage("pivot")
    mib = plan.scratch_bytes >> 20
    return (f"read-only: a root of its own ({how}) holding only the allowlist; own /dev; writable: scratch, "
            f"{', '.join(private)} (tmpfs, {mib} MiB and {plan.scratch_inodes} files each)")


def _mount_points() -> list[str]:
    points = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = unescape(line.split()[4])
        if point not in points:
            points.append(point)
    return points


def _limits(plan: Plan) -> dict:
    result = {}
    # RLIMIT_NPROC counts the real uid's processes and threads in this user namespace; it does not
    # bind a real root (the kernel exempts INIT_USER), so there only a pids cgroup limits forks.
    with contextlib.suppress(OSError, ValueError):
        resource.setrlimit(resource.RLIMIT_NPROC, (plan.max_processes, plan.max_processes))
    if plan.cgroup.get("pids"):
        result["process_limit"] = f"on: {plan.cgroup['pids']}"
    elif not _real_uid_is_root():
        result["process_limit"] = f"on: {plan.max_processes} (RLIMIT_NPROC)"
    else:
        result["process_limit"] = (f"unavailable: no pids cgroup ({plan.cgroup_errors.get('pids', '')}) and "
                                   "RLIMIT_NPROC does not bind root; a fork bomb runs until the wall-clock limit")
    if plan.cgroup.get("memory"):
        result["memory_limit"] = f"on: {plan.cgroup['memory']}"
    elif not plan.gpu:
        with contextlib.suppress(OSError, ValueError):
            resource.setrlimit(resource.RLIMIT_DATA, (plan.memory_bytes, plan.memory_bytes))
            result["memory_limit"] = f"on: {gib(plan.memory_bytes)} per process (RLIMIT_DATA)"
    result.setdefault("memory_limit", f"unavailable: no memory cgroup ({plan.cgroup_errors.get('memory', '')})")
    return result


def _real_uid_is_root() -> bool:
    """Whether this process's uid is root outside every user namespace (the kernel's INIT_USER)."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        first = Path("/proc/self/uid_map").read_text().split()
        inside, outside = int(first[0]), int(first[1])
        return os.getuid() - inside + outside == 0
    return os.getuid() == 0


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def _drop_privileges() -> dict:
    result = {}
    try:
        last = int(Path("/proc/sys/kernel/cap_last_cap").read_text())
    except (OSError, ValueError):
        last = 40
    for cap in range(last + 1):
        _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)  # fails without CAP_SETPCAP; capset below still clears
    _libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    header, data = _CapHeader(LINUX_CAPABILITY_VERSION_3, 0), (_CapData * 2)()
    ok = _libc.capset(ctypes.byref(header), data) == 0
    result["capabilities"] = "dropped" if ok else f"unavailable: capset: {os.strerror(ctypes.get_errno())}"
    ok = _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0
    result["no_new_privs"] = True if ok else f"unavailable: {os.strerror(ctypes.get_errno())}"
    result["signals"] = _scope_signals()
    return result


class _LandlockRulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]  # fmt: skip


def nest_domain() -> str:
    """A Landlock domain nested in the worker's, for the evidence replay before the submission loads: a process may
    not trace one outside its domain (so no /proc/<pid>/fd or mem of ncu, or of the worker that gathers the record),
    nor, with scoped signals, signal it (red team round 35: a replay wrote a forged error line into ncu's output
    through /proc/<ncu>/fd/1 and killed ncu). Scoped only, no file system right handled: a domain that handles one
    refuses every rename across folders (EXDEV), which broke Triton's cache on the H200 (2026-11-27). Landlock
    restricts the calling thread and the threads it starts: the submission's code runs on this one. Linux 6.12+."""
    syscall = _libc.syscall
    abi = syscall(SYS_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0), LANDLOCK_CREATE_RULESET_VERSION)
    if abi < LANDLOCK_SCOPES_ABI:
        why = os.strerror(ctypes.get_errno()) if abi < 0 else f"Landlock ABI {abi}"
        return f"unavailable: {why}; a scoped domain needs Landlock ABI {LANDLOCK_SCOPES_ABI} (Linux 6.12)"
    attr = _LandlockRulesetAttr(0, 0, LANDLOCK_SCOPE_SIGNAL)
    ruleset = syscall(SYS_LANDLOCK_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr)), 0)
    if ruleset < 0:
        return f"unavailable: landlock_create_ruleset: {os.strerror(ctypes.get_errno())}"
    try:
        _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)  # a domain needs it (the worker set it: inherited)
        if syscall(SYS_LANDLOCK_RESTRICT_SELF, ctypes.c_int(ruleset), 0) != 0:
            return f"unavailable: landlock_restrict_self: {os.strerror(ctypes.get_errno())}"
    finally:
        os.close(ruleset)
    return f"nested: Landlock ABI {abi}, signals scoped"


def _scope_signals() -> str:
    """A Landlock domain of the worker's own, scoped (Linux 6.12+): no signal to, and no abstract unix socket of,
    a process outside it. Without a pid namespace (GPU mode) a worker sees the judge's, the spares' and the next
    step's workers' pids, and shares their uid, which is all `kill` checks; this is what stops it. Its children
    (a compiler, ncu) inherit the domain and stay signalable by it; ptrace outward is refused by any domain.
    Called single-threaded (in `enter`), so every thread the worker starts later is inside."""
    syscall = _libc.syscall
    abi = syscall(SYS_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0), LANDLOCK_CREATE_RULESET_VERSION)
    if abi < LANDLOCK_SCOPES_ABI:
        why = os.strerror(ctypes.get_errno()) if abi < 0 else f"Landlock ABI {abi}"
        return f"unavailable: {why}; scoped signals need Landlock ABI {LANDLOCK_SCOPES_ABI} (Linux 6.12)"
    attr = _LandlockRulesetAttr(0, 0, LANDLOCK_SCOPE_SIGNAL | LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET)
    ruleset = syscall(SYS_LANDLOCK_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr)), 0)
    if ruleset < 0:
        return f"unavailable: landlock_create_ruleset: {os.strerror(ctypes.get_errno())}"
    try:
        if syscall(SYS_LANDLOCK_RESTRICT_SELF, ctypes.c_int(ruleset), 0) != 0:
            return f"unavailable: landlock_restrict_self: {os.strerror(ctypes.get_errno())}"
    finally:
        os.close(ruleset)
    return f"scoped: Landlock ABI {abi}, signals and abstract unix sockets stay inside the worker's domain"
