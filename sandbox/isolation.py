"""Namespaces, cgroups and limits around a process-backend worker (Linux), and what the judge needs
to kill one and to say what was contained.

The judge side (`Cgroup`, `plan`, `WorkerHandle`) runs in the judge. `enter(plan)` runs in the
freshly spawned worker before any submission code and sets up, as far as the kernel allows:

- a **user namespace** mapping only the judge's own uid to 0, so that the rest works without root
  and the worker's capabilities reach nothing outside its namespaces; device nodes (/dev/nvidia*)
  still open by their file permissions;
- a **pid namespace** (the worker is pid 1 of it: it cannot see or signal the judge or other
  workers, `os.getppid()` is 0, and killing it kills everything it started), with its own /proc;
- **mount, ipc and network namespaces**: a read-only view of the file system in which /tmp, home
  directories, the build cache, other workers' scratch folders and the judge's caches are empty
  tmpfs, and only the worker's own scratch folder is writable; no network at all;
- then all capabilities dropped (bounding set too) and `no_new_privs`.

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
import multiprocessing.util
import os
import resource
import signal
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWUSER = 0x00020000, 0x08000000, 0x10000000
CLONE_NEWPID, CLONE_NEWNET = 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MS_NOATIME, MS_NODIRATIME, MS_RELATIME = 1024, 2048, 1 << 21
ST_TO_MS = {os.ST_NOSUID: MS_NOSUID, os.ST_NODEV: MS_NODEV, os.ST_NOEXEC: MS_NOEXEC, os.ST_NOATIME: MS_NOATIME,
            os.ST_NODIRATIME: MS_NODIRATIME, os.ST_RELATIME: MS_RELATIME}  # fmt: skip
SYS_MOUNT_SETATTR, AT_FDCWD, MOUNT_ATTR_RDONLY = 442, -100, 1
PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS, PR_CAPBSET_DROP, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 1, 38, 24, 47, 4
LINUX_CAPABILITY_VERSION_3 = 0x20080522

# Defaults, overridable per judge: Judge(limits={"memory": bytes, "processes": n}).
MEMORY_CAP_BYTES = 16 << 30
PROCESSES_CAP = 1024  # processes and threads: torch's and Triton's own threads count too
HIDDEN_TMPFS = "size=1m,nr_inodes=4096,mode=755"

_libc = ctypes.CDLL(None, use_errno=True)
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


def _make_readonly(path: str) -> None:
    """Read-only for one mount, keeping its other flags (a user namespace may not clear locked ones)."""
    attr = _MountAttr(MOUNT_ATTR_RDONLY, 0, 0, 0)
    if _libc.syscall(SYS_MOUNT_SETATTR, AT_FDCWD, path.encode(), 0, ctypes.byref(attr), ctypes.sizeof(attr)) == 0:
        return
    if ctypes.get_errno() != errno.ENOSYS:  # kernels before 5.12: remount with the flags it has
        _check(-1, f"read-only {path}")
    flags = os.statvfs(path).f_flag
    kept = sum(ms for st, ms in ST_TO_MS.items() if flags & st)
    _mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | kept)


# ---------------------------------------------------------------------------------------------
# The judge's side.


class Cgroup:
    """One cgroup per worker, for its memory and process limits, where the judge may create one.

    Works with cgroup v1 controllers (memory, pids mounted separately) and v2 (one directory; the
    judge's cgroup must have the controllers enabled for its children, or `KERNELDOJO_CGROUP` names
    a delegated directory to create workers' cgroups in).
    """

    def __init__(self, memory_bytes: int, max_processes: int):
        self.memory_bytes, self.max_processes = memory_bytes, max_processes
        self.dirs: dict[str, Path] = {}  # controller -> its directory for this worker
        self.version: dict[str, str] = {}
        self.errors: dict[str, str] = {}
        name = f"kerneldojo-worker-{os.getpid()}-{next(_names)}"
        for controller, base, version in _cgroup_bases():
            if controller in self.dirs:
                continue
            try:
                folder = base / name
                folder.mkdir(exist_ok=True)
                if controller == "memory":
                    self._limit_memory(folder, version)
                else:
                    (folder / "pids.max").write_text(str(max_processes))
                self.dirs[controller], self.version[controller] = folder, version
                self.errors.pop(controller, None)
            except OSError as e:
                self.errors[controller] = f"{base}: {e.strerror or e}"
                with contextlib.suppress(OSError):
                    (base / name).rmdir()
        for controller in ("memory", "pids"):
            if controller not in self.dirs:
                self.errors.setdefault(controller, "no writable cgroup with this controller")

    def _limit_memory(self, folder: Path, version: str) -> None:
        if version == "v2":
            (folder / "memory.max").write_text(str(self.memory_bytes))
            with contextlib.suppress(OSError):  # no swap either, where swap accounting exists
                (folder / "memory.swap.max").write_text("0")
        else:
            (folder / "memory.limit_in_bytes").write_text(str(self.memory_bytes))
            with contextlib.suppress(OSError):
                (folder / "memory.memsw.limit_in_bytes").write_text(str(self.memory_bytes))

    def procs_files(self) -> list[str]:
        return sorted({str(folder / "cgroup.procs") for folder in self.dirs.values()})

    def describe(self, controller: str) -> str | None:
        if controller not in self.dirs:
            return None
        value = _gib(self.memory_bytes) if controller == "memory" else str(self.max_processes)
        return f"{value} (cgroup {self.version[controller]})"

    def kill(self) -> None:
        """Everything in the cgroup, including processes that left the worker's process group."""
        self._notes = self.notes()  # the cgroup is removed soon after; keep what its limits stopped
        for folder in set(self.dirs.values()):
            if (folder / "cgroup.kill").exists():
                with contextlib.suppress(OSError):
                    (folder / "cgroup.kill").write_text("1")
                continue
            for _ in range(3):  # v1: read and kill; the pids limit bounds what can appear meanwhile
                with contextlib.suppress(OSError):
                    pids = [int(p) for p in (folder / "cgroup.procs").read_text().split()]
                    for pid in pids:
                        with contextlib.suppress(OSError):
                            os.kill(pid, signal.SIGKILL)
                    if not pids:
                        break

    def remove(self, attempts: int = 50) -> None:
        import time

        for folder in set(self.dirs.values()):
            for _ in range(attempts):
                try:
                    folder.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:  # dying processes still in it
                    time.sleep(0.05)

    def notes(self) -> list[str]:
        """What the limits stopped, for the judge's message after a death or a timeout."""
        if getattr(self, "_notes", None) is not None:
            return self._notes
        notes = []
        memory = self.dirs.get("memory")
        if memory is not None:
            events_file = "memory.events" if self.version["memory"] == "v2" else "memory.oom_control"
            events = _read_counts(memory / events_file)
            if events.get("oom_kill", 0) > 0:
                notes.append(f"the worker ran out of host memory: its limit is {_gib(self.memory_bytes)} "
                             "and the kernel's OOM killer ended it")  # fmt: skip
        pids = self.dirs.get("pids")
        if pids is not None and _read_counts(pids / "pids.events").get("max", 0) > 0:
            notes.append(f"the worker reached its limit of {self.max_processes} processes and threads; "
                         "further forks failed")  # fmt: skip
        return notes


def _read_counts(path: Path) -> dict[str, int]:
    counts = {}
    with contextlib.suppress(OSError):
        for line in path.read_text().splitlines():
            key, _, value = line.partition(" ")
            with contextlib.suppress(ValueError):
                counts[key] = int(value)
    return counts


def _gib(n: int) -> str:
    return f"{n / (1 << 30):g} GiB"


def _cgroup_bases() -> list[tuple[str, Path, str]]:
    """(controller, the directory to create worker cgroups in, version), best first."""
    override = os.environ.get("KERNELDOJO_CGROUP")
    if override:
        controllers = set(_read(Path(override) / "cgroup.controllers").split())
        return [(c, Path(override), "v2") for c in ("memory", "pids") if c in controllers]
    mounts_v1, mount_v2 = {}, None
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            left, _, right = line.partition(" - ")
            fstype, _, options = [*right.split(), "", "", ""][:3]
            point = _unescape(left.split()[4])
            if fstype == "cgroup2":
                mount_v2 = Path(point)
            elif fstype == "cgroup":
                for controller in ("memory", "pids"):
                    if controller in options.split(","):
                        mounts_v1[controller] = Path(point)
    paths_v1, path_v2 = {}, None
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            if controllers == "":
                path_v2 = path
            for controller in controllers.split(","):
                paths_v1[controller] = path
    bases = []
    for controller in ("memory", "pids"):
        if controller in mounts_v1 and controller in paths_v1:
            bases.append((controller, mounts_v1[controller] / paths_v1[controller].lstrip("/"), "v1"))
    if mount_v2 is not None and path_v2 is not None:
        base = mount_v2 / path_v2.lstrip("/")
        wanted = [c for c in ("memory", "pids") if c not in mounts_v1]
        enabled = set(_read(base / "cgroup.subtree_control").split())
        if any(c not in enabled for c in wanted):  # fails while the judge's cgroup holds processes
            with contextlib.suppress(OSError):
                (base / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in wanted))
        bases += [(c, base, "v2") for c in wanted]
    return bases


def _read(path: Path) -> str:
    with contextlib.suppress(OSError):
        return path.read_text()
    return ""


def _unescape(path: str) -> str:
    return path.encode().decode("unicode_escape") if "\\" in path else path


@dataclass
class Plan:
    """What a worker sets up around itself; made by the judge, pickled into the worker."""

    scratch: str
    gpu: bool
    control: object  # the worker's end of a multiprocessing Pipe to the judge
    pid_namespace: bool = True
    private_shm: bool = True
    hide: list[str] = field(default_factory=list)
    hide_inside_kept: list[str] = field(default_factory=list)
    keep_ro: list[str] = field(default_factory=list)
    keep_rw: list[str] = field(default_factory=list)
    memory_bytes: int = MEMORY_CAP_BYTES
    max_processes: int = PROCESSES_CAP
    cgroup_procs: list[str] = field(default_factory=list)
    cgroup: dict[str, str | None] = field(default_factory=dict)  # controller -> description or None
    cgroup_errors: dict[str, str] = field(default_factory=dict)


def plan(scratch: Path, gpu: bool, control, cgroup: Cgroup) -> Plan:
    """The judge's private paths to hide and the paths the worker needs to keep (Python, the package)."""
    from kerneldojo.graders.compile import cache_dir

    home = Path.home()
    judge_private = [cache_dir(), Path(tempfile.gettempdir()), home / ".triton", home / ".cache"]
    for variable in ("KERNELDOJO_CACHE", "TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR", "XDG_CACHE_HOME",
                     "HF_HOME", "CUDA_CACHE_PATH"):  # fmt: skip
        if os.environ.get(variable):
            judge_private.append(Path(os.environ[variable]))
    judge_private += [Path(p) for p in os.environ.get("KERNELDOJO_SANDBOX_HIDE", "").split(":") if p]
    top = ["/tmp", "/var/tmp", "/root", "/home", "/run/user", "/dev/shm" if not gpu else None, str(home)]
    keep_ro = [sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(os.path.realpath(sys.executable))]
    keep_ro += [p for p in sys.path if p]
    for name, module in list(sys.modules.items()):
        if name == "kerneldojo" or name.startswith("kerneldojo."):
            keep_ro += list(getattr(module, "__path__", []) or [])
    keep_ro += [p for p in os.environ.get("LD_LIBRARY_PATH", "").split(":") if p]
    keep_ro += [os.environ[v] for v in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(v)]
    # The judge's multiprocessing folder holds the sockets through which it hands CPU tensors over.
    keep_rw = [str(scratch), multiprocessing.util.get_temp_dir()]
    real = (lambda p: os.path.realpath(p))  # noqa: E731
    hide = sorted({real(p) for p in top if p and os.path.isdir(p)}, key=len)
    keep_ro = sorted({real(p) for p in keep_ro if os.path.exists(p)} - {"/"}, key=len)
    keep_rw = sorted({real(p) for p in keep_rw}, key=len)
    kept = keep_ro + keep_rw
    private = {real(p) for p in judge_private if os.path.isdir(p)}
    hide += sorted(p for p in private if not _under_any(p, hide) and p not in hide)
    inside = sorted(p for p in private if any(_under(p, k) and p != k for k in kept) and not _under_any(p, keep_rw))
    mode = os.environ.get("KERNELDOJO_PID_NAMESPACE", "auto")
    return Plan(
        scratch=str(scratch), gpu=gpu, control=control,
        # Legacy CUDA IPC handles are reported not to open across pid namespaces (docs/sandbox.md).
        pid_namespace=mode == "1" or (mode == "auto" and not gpu),
        private_shm=not gpu, hide=hide, hide_inside_kept=inside, keep_ro=keep_ro, keep_rw=keep_rw,
        memory_bytes=cgroup.memory_bytes, max_processes=cgroup.max_processes, cgroup_procs=cgroup.procs_files(),
        cgroup={c: cgroup.describe(c) for c in ("memory", "pids")}, cgroup_errors=dict(cgroup.errors),
    )  # fmt: skip


def _under(path: str, parent: str) -> bool:
    return path == parent or path.startswith(parent.rstrip("/") + "/")


def _under_any(path: str, parents: list[str]) -> bool:
    return any(_under(path, p) for p in parents)


class WorkerHandle:
    """The judge's end of the control channel: the worker's pidfd, then its protections."""

    def __init__(self, control):
        self.control = control
        self.pid: int | None = None
        self.pidfd: int | None = None
        self.report: dict | None = None
        self._closed = False

    def _receive(self, timeout: float) -> bool:
        if self._closed:
            return False
        try:
            if not self.control.poll(timeout):
                return False
            message = self.control.recv()
            if "pid" in message:
                self.pid = message["pid"]
                if message.get("pidfd"):
                    from multiprocessing.reduction import recv_handle

                    self.pidfd = recv_handle(self.control)
            else:
                self.report = message
            return True
        except (EOFError, OSError):
            self._closed = True
            return False

    def protections(self, timeout: float = 5.0) -> dict:
        while self.report is None and self._receive(timeout):
            pass
        return self.report or {"worker": "no report (the worker ended before it sent one)"}

    def kill(self, parent_alive: bool) -> None:
        """SIGKILL the worker: as pid 1 of its pid namespace, that ends everything inside too."""
        while self.pid is None and self._receive(1.0 if parent_alive else 0):
            pass
        if self.pidfd is not None:
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
        elif self.pid is not None and parent_alive:  # no pidfd (kernel < 5.3): not yet reaped while its parent lives
            with contextlib.suppress(OSError):
                os.kill(self.pid, signal.SIGKILL)

    def close(self) -> None:
        if self.pidfd is not None:
            with contextlib.suppress(OSError):
                os.close(self.pidfd)
            self.pidfd = None
        with contextlib.suppress(OSError):
            self.control.close()
        self._closed = True


def unavailable(protections: dict) -> list[str]:
    """The protections that are off, with their reasons, for one line in a result's messages."""
    return [f"{name}: {value}" for name, value in protections.items()
            if name == "worker" or str(value).startswith(("unavailable", "off"))]  # fmt: skip


# ---------------------------------------------------------------------------------------------
# Inside the worker.


def enter(plan: Plan, redirect_output) -> dict:
    """Set up the worker's namespaces and limits; returns, in the worker only, what is active.

    The processes in between never return: they wait for their child and end as it ended.
    `redirect_output()` points stdout/stderr to the scratch folder once it is mounted.
    """
    protections: dict[str, object] = {}
    _die_with_parent()  # the judge's end: this process, then each one below, gets SIGKILL
    for path in plan.cgroup_procs:  # before any fork: children are born inside
        try:
            Path(path).write_text(str(os.getpid()))
        except OSError as e:
            protections["cgroup"] = f"unavailable: joining {path}: {e.strerror}"
    child = os.fork()  # this process has threads (OpenBLAS); the child has one and may unshare
    if child:
        _close_quietly(plan.control)
        _wait_and_mirror(child)
    _die_with_parent()
    protections.update(_unshare(plan))
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
        _die_with_parent()
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
    report(protections)
    return protections


def _die_with_parent() -> None:
    """SIGKILL when the parent ends (a backstop: the judge kills workers itself, by pidfd)."""
    parent = os.getppid()
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
            signal.signal(sig, signal.SIG_DFL)
            os.kill(os.getpid(), sig)
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
    if active["mount_namespace"] is True:
        try:
            result["filesystem"] = _setup_mounts(plan, redirect_output)
        except OSError as e:
            result["filesystem"] = f"unavailable: {e}"
            redirect_output()
    else:
        result["filesystem"] = "unavailable: no mount namespace (the worker sees what the judge's user sees)"
        redirect_output()
    if active["pid_namespace"] is True and active["mount_namespace"] is True:
        try:
            _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
            result["proc"] = True
            with contextlib.suppress(OSError):  # no nested user namespaces (less kernel to attack)
                Path("/proc/sys/user/max_user_namespaces").write_text("0")
        except OSError as e:
            result["proc"] = f"unavailable: {e.strerror}; /proc still lists the judge's processes"
    os.chdir(plan.scratch)
    for name, value in (("HOME", plan.scratch), ("TMPDIR", "/tmp"), ("TRITON_CACHE_DIR", f"{plan.scratch}/.triton"),
                        ("XDG_CACHE_HOME", f"{plan.scratch}/.cache"),
                        ("TORCHINDUCTOR_CACHE_DIR", f"{plan.scratch}/.inductor")):  # fmt: skip
        os.environ[name] = value
    tempfile.tempdir = None
    # CPU tensors the worker returns are handed over through a socket in this folder; the judge must reach it.
    mp_dir = Path(plan.scratch) / ".mp"
    mp_dir.mkdir(exist_ok=True)
    multiprocessing.process.current_process()._config["tempdir"] = str(mp_dir)
    result.update(_limits(plan))
    result.update(_drop_privileges())
    return result


def _setup_mounts(plan: Plan, redirect_output) -> str:
    _mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing below propagates back to the host
    kept = [(p, False) for p in plan.keep_ro] + [(p, True) for p in plan.keep_rw]
    handles = {p: os.open(p, os.O_PATH) for p, _ in kept if _under_any(p, plan.hide)}
    hidden = []
    for path in plan.hide:
        if os.path.isdir(path) and not _under_any(path, hidden):
            writable = path in ("/tmp", "/var/tmp", "/dev/shm")
            size = f"size={plan.memory_bytes},mode=1777" if writable else HIDDEN_TMPFS
            _mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, size)
            hidden.append(path)
    for path, _ in sorted(kept, key=lambda k: len(k[0])):
        fd = handles.pop(path, None)
        if fd is None:
            continue
        if os.path.isdir(f"/proc/self/fd/{fd}"):
            os.makedirs(path, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            Path(path).touch()
        _mount(f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC)
        os.close(fd)
    for path in plan.hide_inside_kept:
        if os.path.isdir(path):
            _mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, HIDDEN_TMPFS)
    # Output goes through the scratch mount before the rest turns read-only: a file open for
    # writing on a mount would keep that mount writable (EBUSY).
    redirect_output()
    writable = {*plan.keep_rw, "/tmp", "/var/tmp", "/dev/shm"}
    failed = []
    for point in _mount_points():
        if point in writable or _under(point, "/proc") or not os.path.exists(point):
            continue
        try:
            _make_readonly(point)
        except OSError as e:
            if not _under(point, "/sys"):  # sysfs' own submounts may refuse; sysfs is read-only anyway
                failed.append(f"{point} ({e.strerror})")
    if "/" in [f.split(" ")[0] for f in failed]:
        raise OSError(errno.EBUSY, f"the root stayed writable: {', '.join(failed)}")
    note = f"; still writable: {', '.join(failed)}" if failed else ""
    return f"read-only; writable: scratch, /tmp (tmpfs); hidden: {', '.join(hidden)}{note}"


def _mount_points() -> list[str]:
    points = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = _unescape(line.split()[4])
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
            result["memory_limit"] = f"on: {_gib(plan.memory_bytes)} per process (RLIMIT_DATA)"
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
    return result
