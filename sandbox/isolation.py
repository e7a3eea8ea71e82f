"""The judge's side of a process-backend worker's confinement (Linux): the plan of what the worker hides
and keeps (`plan`), the cgroup that caps its memory and processes (`Cgroup`), and the handle the judge
kills it through (`WorkerHandle`). The worker sets the plan up around itself in `sandbox.worker.confine`,
which says what each protection stops.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import itertools
import os
import secrets
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

from .worker.confine import Plan, gib, under, under_any, unescape

_names = itertools.count()
_JUDGE_TOKEN = secrets.token_hex(6)


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
        self._oom: str | None = None  # what `kill` found ("own", "outside" or ""), kept for after the cgroup is removed
        self._notes: list[str] | None = None
        # The judge's pid names it for `_remove_dead_judges_cgroups`; a token of this process's own keeps two judges
        # of one pid in different pid namespaces (containers, each its pid 1) out of each other's (red team round 108).
        name = f"kerneldojo-worker-{os.getpid()}-{_JUDGE_TOKEN}-{next(_names)}"
        for controller, base, version in _cgroup_bases():
            if controller in self.dirs:
                continue
            _remove_dead_judges_cgroups(base)
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

    def processes(self) -> frozenset[int] | None:
        """`processes_below` the worker's cgroup (None: no cgroup could be made)."""
        folder = next(iter(self.dirs.values()), None)  # every controller's cgroup holds the same processes
        return None if folder is None else processes_below(folder)

    def describe(self, controller: str) -> str | None:
        if controller not in self.dirs:
            return None
        value = gib(self.memory_bytes) if controller == "memory" else str(self.max_processes)
        return f"{value} (cgroup {self.version[controller]})"

    def kill(self) -> None:
        """Everything in the cgroup, including processes that left the worker's process group."""
        self._oom = self._oom_kill()  # the cgroup is removed soon after; keep what its limits stopped
        self._notes = self.notes()
        for folder in set(self.dirs.values()):
            if (folder / "cgroup.kill").exists():
                with contextlib.suppress(OSError):
                    (folder / "cgroup.kill").write_text("1")
                continue
            for _ in range(3):  # v1: read and kill, the cgroups below too; the pids limit bounds what can appear
                pids = [pid for below in _subtree(folder) for pid in _procs(below)]
                for pid in pids:
                    with contextlib.suppress(OSError):
                        os.kill(pid, signal.SIGKILL)
                if not pids:
                    break

    def remove(self, attempts: int = 50) -> None:
        for top in set(self.dirs.values()):
            for folder in reversed(_subtree(top)):  # the deepest first: a cgroup with cgroups below is not removed
                for _ in range(attempts):
                    try:
                        folder.rmdir()
                        break
                    except FileNotFoundError:
                        break
                    except OSError:  # dying processes still in it
                        time.sleep(0.05)

    def oom_killed(self) -> bool:
        """Did the kernel's OOM killer end a process of the worker's for the worker's own memory limit?"""
        return self._oom_kill() == "own"

    def oom_killed_from_outside(self) -> bool:
        """Did the OOM killer end a process of the worker's while the worker was under its own limit: for a
        parent's limit (a container's, the judge's) or the host's memory, which another worker's memory can have
        filled (red team round 110: one worker's tmpfs got another step's honest worker killed)?"""
        return self._oom_kill() == "outside"

    def _oom_kill(self) -> str:
        """"own", "outside" or "": v2 counts `oom` in the cgroup whose limit was hit and `oom_kill` in the victim's;
        v1 has `oom_kill` only (and a `failcnt` this kernel leaves at 0), so its own limit is told by the peak usage
        having reached it."""
        if self._oom is not None:
            return self._oom
        memory = self.dirs.get("memory")
        if memory is None:
            return ""
        if self.version["memory"] == "v2":
            events = _read_counts(memory / "memory.events")
            own, peak = events.get("oom", 0) > 0, _read_int(memory / "memory.peak")
        else:
            events = _read_counts(memory / "memory.oom_control")
            peak = _read_int(memory / "memory.max_usage_in_bytes")
            own = peak >= self.memory_bytes - (1 << 20)
        if events.get("oom_kill", 0) == 0:
            return ""
        # A worker that held half of what it shared with others was the one that ran the pool dry, under its own
        # limit or not (red team round 118: 3 GiB touched under a 1.5 GiB parent ended `skipped`, not its failure).
        return "own" if own or peak >= _shared_memory(memory, self.version["memory"]) // 2 else "outside"

    def notes(self) -> list[str]:
        """What the limits stopped, for the judge's message after a death or a timeout."""
        if self._notes is not None:
            return self._notes
        notes = []
        if self.oom_killed():
            notes.append(f"the worker ran out of host memory: its limit is {gib(self.memory_bytes)} "
                         "and the kernel's OOM killer ended it")  # fmt: skip
        elif self.oom_killed_from_outside():
            notes.append(f"the kernel's OOM killer ended the worker under its own limit of {gib(self.memory_bytes)}: "
                         "the machine's memory (or a container's) ran short, not this submission's")  # fmt: skip
        pids = self.dirs.get("pids")
        if pids is not None and _read_counts(pids / "pids.events").get("max", 0) > 0:
            notes.append(f"the worker reached its limit of {self.max_processes} processes and threads; "
                         "further forks failed")  # fmt: skip
        return notes


class RequestWatch:
    """The judge's look at a worker's cgroup while requests run, every `every_s` (red team round 48: a helper that
    lived only while the timing requests ran, a sibling made with CLONE_PARENT with a CUDA context of its own, was
    gone by the look after them). Any process not among `baseline` (the worker's own, before the submission loaded)
    is `found` and, with `kill`, the cgroup killed: the judge has made each bench shape's first call before the timing,
    so no child of the worker's belongs there, but for a compile of a value the checked call did not reach, which a
    first timing at a shape is let finish (`protocol.Retime`). Whatever the kernel lists counts, a process whose main
    thread has exited included, and a look that fails finds (round 49: an allowlist of the toolchain's programs ran
    the submission's library under LD_PRELOAD, a zombie-looking process was passed over, and a process name that is
    no UTF-8 stopped the thread)."""

    def __init__(self, cgroup: Cgroup, baseline: frozenset[int], every_s: float = 0.01, kill: bool = True):
        self.cgroup, self.baseline, self.every_s, self.kill = cgroup, baseline, every_s, kill
        self.found: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._look, name="kerneldojo-request-watch", daemon=True)

    def __enter__(self) -> RequestWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def _look(self) -> None:
        try:
            while not self._stop.wait(self.every_s):
                if new := (self.cgroup.processes() or frozenset()) - self.baseline:
                    self.found = f"{len(new)} process(es) ({', '.join(map(str, sorted(new)[:5]))}) in the " \
                                 "worker's cgroup that were not there before the submission loaded"
                    break
        except BaseException as e:  # fails closed
            self.found = f"the judge's look at the worker's cgroup failed ({type(e).__name__}), which counts as found"
        if self.found and self.kill:
            self.cgroup.kill()


STALE_CGROUP_S = 600


@functools.cache
def _remove_dead_judges_cgroups(base: Path) -> None:
    """Once per judge: the empty worker cgroups that judges killed before they could remove them left (a SIGKILL
    runs no exit handler; a test machine had gathered hundreds). A name's pid that is alive may be that judge's; one
    that is not may be a judge's in another pid namespace sharing `KERNELDOJO_CGROUP` (red team round 53), whose
    new cgroup is empty until its worker joins: only those unchanged for STALE_CGROUP_S go."""
    with contextlib.suppress(OSError):
        for folder in base.glob("kerneldojo-worker-*-*"):
            pid = folder.name.split("-")[2]
            if pid.isdigit() and not Path(f"/proc/{pid}").exists():
                with contextlib.suppress(OSError):
                    if time.time() - folder.stat().st_mtime < STALE_CGROUP_S:
                        continue
                for below in reversed(_subtree(folder)):
                    with contextlib.suppress(OSError):  # not empty: a process of its is still alive
                        below.rmdir()


def _subtree(folder: Path) -> list[Path]:
    """A cgroup and every cgroup below it, parents before children."""
    found = [folder]
    with contextlib.suppress(OSError):
        for root, dirs, _ in os.walk(folder):
            found += [Path(root) / d for d in sorted(dirs)]
    return found


def _procs(folder: Path) -> list[int]:
    try:
        return [int(pid) for pid in (folder / "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        return []


def _shared_memory(folder: Path, version: str) -> int:
    """The memory a worker's cgroup shares with others: the least limit above it, or the host's."""
    host = next((int(line.split()[1]) << 10 for line in _read(Path("/proc/meminfo")).splitlines()
                 if line.startswith("MemTotal:")), 1 << 62)
    if version != "v2":
        return min(host, _read_counts(folder / "memory.stat").get("hierarchical_memory_limit", host))
    limits = [_read_int(parent / "memory.max") or host for parent in folder.parents
              if (parent / "memory.max").exists()]
    return min([host, *limits])


def _read_int(path: Path) -> int:
    try:
        return int(path.read_text())
    except (OSError, ValueError):
        return 0


def _read_counts(path: Path) -> dict[str, int]:
    counts = {}
    with contextlib.suppress(OSError):
        for line in path.read_text().splitlines():
            key, _, value = line.partition(" ")
            with contextlib.suppress(ValueError):
                counts[key] = int(value)
    return counts


def _cgroup_bases() -> list[tuple[str, Path, str]]:
    """(controller, the directory to create worker cgroups in, version), best first."""
    override = os.environ.get("KERNELDOJO_CGROUP")
    if override:
        controllers = set(_read(Path(override) / "cgroup.controllers").split())
        return [(c, Path(override), "v2") for c in ("memory", "pids") if c in controllers]
    mounts_v1, mount_v2 = _cgroup_mounts()
    paths_v1, path_v2 = _cgroup_paths("self")
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


def cgroup_of(pid: int) -> Path | None:
    """The folder of the cgroup that holds process `pid` (its pids controller's, on v1), as this process sees the
    hierarchy; None where it cannot be read."""
    mounts_v1, mount_v2 = _cgroup_mounts()
    paths_v1, path_v2 = _cgroup_paths(str(pid))
    if "pids" in mounts_v1 and "pids" in paths_v1:
        return mounts_v1["pids"] / paths_v1["pids"].lstrip("/")
    return mount_v2 / path_v2.lstrip("/") if mount_v2 is not None and path_v2 is not None else None


def processes_below(folder: Path) -> frozenset[int]:
    """The processes a cgroup and every cgroup below it hold now, as the kernel lists them. `cgroup.procs` lists a
    folder's own processes only: a helper that moved itself into a cgroup it made below (a nested user namespace
    mounts the hierarchy) was missing from it (red team round 47)."""
    return frozenset(pid for below in _subtree(folder) for pid in _procs(below))


def _cgroup_mounts() -> tuple[dict[str, Path], Path | None]:
    """Where the memory and pids controllers' v1 hierarchies and the v2 hierarchy are mounted."""
    mounts_v1, mount_v2 = {}, None
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            left, _, right = line.partition(" - ")
            fstype, _, options = [*right.split(), "", "", ""][:3]
            point = unescape(left.split()[4])
            if fstype == "cgroup2":
                mount_v2 = Path(point)
            elif fstype == "cgroup":
                for controller in ("memory", "pids"):
                    if controller in options.split(","):
                        mounts_v1[controller] = Path(point)
    return mounts_v1, mount_v2


def _cgroup_paths(pid: str) -> tuple[dict[str, str], str | None]:
    """A process's cgroup per v1 controller, and its v2 cgroup."""
    paths_v1, path_v2 = {}, None
    with contextlib.suppress(OSError, ValueError):
        for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            if controllers == "":
                path_v2 = path
            for controller in controllers.split(","):
                paths_v1[controller] = path
    return paths_v1, path_v2


def _read(path: Path) -> str:
    with contextlib.suppress(OSError):
        return path.read_text()
    return ""


# What a worker's root holds besides Python and its packages (`root_allowlist`): system libraries and
# compilers, and of /etc only what the dynamic loader, name lookups and TLS read: not shadow, not ssh.
SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt/nvidia")
ETC_FILES = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "nsswitch.conf", "passwd", "group", "hosts", "localtime",
             "alternatives", "ssl", "ca-certificates", "pki")  # fmt: skip
# The scratch folder, /tmp and a private /dev/shm: each a tmpfs of this size (charged to the memory cgroup)
# and file count; `Judge(limits={"scratch": bytes})` sets the size.
SCRATCH_CAP_BYTES = 4 << 30
SCRATCH_INODES = 65536


def root_allowlist(gpu: bool, extra: tuple[str, ...] = ()) -> list[tuple[str, str | None]]:
    """What a confined process's root holds, as `Plan.root`: (path, None) bound read-only, or (path, target)
    a symlink made again (/lib -> usr/lib). Python's installation, the folders its imported packages came
    from (site-packages, the kerneldojo package's own folders: an editable install maps them elsewhere),
    `SYSTEM_PATHS`, CUDA (CUDA_HOME, LD_LIBRARY_PATH, the folder holding libcuda) and `ETC_FILES`."""
    paths = [*SYSTEM_PATHS, sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, *extra]
    paths += _package_folders()
    paths += [os.environ[v] for v in ("CUDA_HOME", "CUDA_PATH", "CUTLASS_INCLUDE") if os.environ.get(v)]
    paths += [p for p in os.environ.get("LD_LIBRARY_PATH", "").split(":") if p]
    paths += [str(p) for p in Path("/usr/local").glob("cuda*")]
    paths += _libcuda_folders() if gpu else []
    paths += [f"/etc/{name}" for name in ETC_FILES]
    paths = {os.path.abspath(p) for p in paths if os.path.lexists(p)}
    bound: list[str] = []
    for real in sorted({os.path.realpath(p) for p in paths} - {"/"}, key=len):
        if os.path.exists(real) and not under_any(real, bound):
            bound.append(real)
    # A path reached through a symlinked folder (a PYTHONPATH entry that is a link, round 82) needs that link too.
    through = {str(q) for p in paths for q in Path(p).parents if os.path.islink(q)}
    links = sorted((p, os.readlink(p)) for p in paths | through if os.path.islink(p) and not under_any(p, bound))
    return [(p, None) for p in bound] + links


@functools.cache
def _package_folders() -> tuple[str, ...]:
    """The site folders holding imported modules (torch, triton and their dependencies load more lazily: the
    whole folder), what PYTHONPATH's folders hold for Python (`_importable`), and the kerneldojo package's folders
    (an editable install maps subpackages elsewhere)."""
    import importlib.util

    site = {os.path.realpath(p) for p in sys.path if p and p.rstrip("/").endswith(("site-packages", "dist-packages"))}
    # Folders the user put on PYTHONPATH are install locations too (`pip install --target`): a new Python process
    # in the sandbox (the evidence replay, a compiler's helper) imports from them, not from this one's memory. Only
    # what Python can import from one is bound, not the folder: a source checkout on PYTHONPATH also holds the
    # service's state, a batch's store, .git (red team round 81: another token's sources read from a worker).
    folders = {c for p in os.environ.get("PYTHONPATH", "").split(":") if os.path.isabs(p) for c in _importable(p)}
    for name, module in list(sys.modules.items()):
        files = [getattr(module, "__file__", None)]
        with contextlib.suppress(TypeError):  # some modules' __path__ is no list of folders
            files += list(getattr(module, "__path__", None) or [])
        for file in [f for f in files if isinstance(f, str) and os.path.isabs(f)]:
            real = os.path.realpath(file)
            held = [s for s in site if under(real, s)]
            if held:
                folders.update(held)
            elif name.split(".")[0] in ("kerneldojo", "torch", "triton", "numpy"):
                folders.add(real if os.path.isdir(real) else os.path.dirname(real))
    for sub in ("tasks", "sandbox", "graders"):  # what a worker imports, imported by the judge or not
        spec = importlib.util.find_spec(f"kerneldojo.{sub}")
        folders.update(os.path.realpath(p) for p in (spec.submodule_search_locations or []) if spec)
    return tuple(sorted(folders))


INSTALLED_SUFFIXES = (".py", ".pyc", ".so", ".pth", ".dist-info", ".egg-info", ".libs", ".data")


def _importable(folder: str) -> list[str]:
    """What an install location holds for Python, by the paths Python names (`root_allowlist` binds a link's target
    and makes the link again): its packages (a folder named as a module, with Python files or extensions at its top
    or in a subpackage: a submission may import one the judge never did, liger_kernel, or a namespace package such
    as cuda-python's `cuda`), modules, extensions, metadata, and an installer's `bin`; not other folders (data,
    state) or dot-folders."""
    kept = []
    with contextlib.suppress(OSError):
        entries = [e for e in os.scandir(folder) if not e.name.startswith(".")]
        installed = any(e.name.endswith(".dist-info") for e in entries)  # `pip install --target`, not a checkout
        for entry in entries:
            if entry.name.endswith(INSTALLED_SUFFIXES) or (entry.name == "bin" and installed) or (
                    entry.is_dir() and entry.name.isidentifier() and _holds_python(entry.path)):
                kept.append(os.path.abspath(entry.path))
    return kept


def _holds_python(folder: str, depth: int = 3) -> bool:
    """Python files or extensions at the folder's top, or in an identifier-named folder below (a namespace
    package's portions), `depth` levels down at most."""
    with contextlib.suppress(OSError):
        entries = list(os.scandir(folder))
        return any(e.name.endswith((".py", ".so")) for e in entries) or (depth > 0 and any(
            e.is_dir() and e.name.isidentifier() and _holds_python(e.path, depth - 1) for e in entries))
    return False


@functools.cache
def _libcuda_folders() -> tuple[str, ...]:
    """Where the dynamic loader finds the CUDA driver (libcuda.so.1, NVML), which may lie outside /usr."""
    import subprocess

    try:
        listed = subprocess.run(["/sbin/ldconfig", "-p"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return ()
    return tuple(sorted({os.path.dirname(line.rsplit("=> ", 1)[1]) for line in listed.splitlines()
                         if ("libcuda.so" in line or "libnvidia-ml.so" in line) and "=> " in line}))  # fmt: skip


def hide_from_workers(*folders: str | Path) -> None:
    """Cover these folders of the judge's (a service's state, a result store's) in every worker's root, wherever
    they lie; through KERNELDOJO_SANDBOX_HIDE, so judges in this process's children cover them too."""
    hidden = [p for p in os.environ.get("KERNELDOJO_SANDBOX_HIDE", "").split(":") if p]
    hidden += [str(Path(f).resolve()) for f in folders if str(Path(f).resolve()) not in hidden]
    os.environ["KERNELDOJO_SANDBOX_HIDE"] = ":".join(hidden)


def plan(scratch: Path, gpu: bool, control, cgroup: Cgroup, scratch_bytes: int = SCRATCH_CAP_BYTES) -> Plan:
    """The worker's root (`root_allowlist`), the judge's private folders inside it to cover, and its limits."""
    home = Path.home()  # the build cache is in one of these (graders.compile.cache_dir)
    judge_private = [Path(tempfile.gettempdir()), home / ".triton", home / ".cache"]
    for variable in ("KERNELDOJO_CACHE", "TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR", "XDG_CACHE_HOME",
                     "HF_HOME", "CUDA_CACHE_PATH"):  # fmt: skip
        if os.environ.get(variable):
            judge_private.append(Path(os.environ[variable]))
    judge_private += [Path(p) for p in os.environ.get("KERNELDOJO_SANDBOX_HIDE", "").split(":") if p]
    root = root_allowlist(gpu)
    bound = [p for p, link in root if link is None]
    private = {os.path.realpath(p) for p in judge_private if os.path.isdir(p)}
    inside = sorted(p for p in private if any(under(p, k) and p != k for k in bound))
    # Legacy CUDA IPC handles are reported not to open across pid namespaces (docs/sandbox.md): in GPU mode the
    # pid namespace is on only where KERNELDOJO_GPU_PIDNS=1 (to measure it: baselines/bench/probe_cuda_ipc_pidns.py).
    mode = os.environ.get("KERNELDOJO_PID_NAMESPACE", "auto")
    gpu_pidns = os.environ.get("KERNELDOJO_GPU_PIDNS") == "1"
    return Plan(
        scratch=str(scratch), gpu=gpu, control=control, memory_bytes=cgroup.memory_bytes,
        max_processes=cgroup.max_processes, root=root, scratch_bytes=scratch_bytes, scratch_inodes=SCRATCH_INODES,
        pid_namespace=mode == "1" or (mode == "auto" and (not gpu or gpu_pidns)),
        private_shm=not gpu, hide_inside_kept=inside, cgroup_procs=cgroup.procs_files(),
        cgroup={c: cgroup.describe(c) for c in ("memory", "pids")}, cgroup_errors=dict(cgroup.errors),
        judge_pid=os.getpid(),
    )  # fmt: skip


def build_plan(folder: Path, extra_ro: tuple[str, ...] = (), cgroup: Cgroup | None = None) -> dict:
    """The confinement of a compiler process (`sandbox/worker/compiler.py`), as JSON-ready fields of a `Plan`:
    the worker's root (plus `extra_ro`, e.g. the CuTe headers), `folder` its only writable path, bound from the
    host (the judge reads the library from it), its own pid namespace; `cgroup`'s limits, else rlimits only."""
    from dataclasses import asdict

    from .protocol import MEMORY_CAP_BYTES, PROCESSES_CAP

    limits = {"cgroup_procs": cgroup.procs_files(), "cgroup": {c: cgroup.describe(c) for c in ("memory", "pids")},
              "cgroup_errors": dict(cgroup.errors)} if cgroup is not None else {}
    fields = asdict(Plan(scratch=str(folder), gpu=False, control=None, memory_bytes=MEMORY_CAP_BYTES,
                         max_processes=PROCESSES_CAP, root=root_allowlist(False, extra_ro),
                         scratch_bytes=SCRATCH_CAP_BYTES, scratch_inodes=SCRATCH_INODES, scratch_tmpfs=False, **limits))
    del fields["control"]
    return fields


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


PR_SET_DUMPABLE = 4


@functools.cache
def undumpable_judge() -> bool:
    """Close the judge's /proc/<pid> (environ, mem, maps, fd) and ptrace to its uid. A worker that shares the
    judge's pid namespace (GPU mode) runs as the judge's uid: without this it could read the judge's memory
    (inputs, reference outputs) or attach to it. The judge loses core dumps; children that exec are unaffected."""
    return ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0


_JUDGE_OOM_SCORE = Path("/proc/self/oom_score_adj")
_judge_oom_score: str | None = None


def keep_judge_oom_score() -> None:
    """The judge's oom_score_adj as it was when its first worker started, put back after each worker. A worker of a
    root judge is root outside, which owns the undumpable judge's /proc files, and raising oom_score_adj needs no
    capability (red team round 41: the judge, the OOM killer's first victim for good). The worker sees the judge's
    /proc/<pid> read-only (`confine`), but not the /proc/<tid> of each of its threads, which write the same value."""
    global _judge_oom_score
    with contextlib.suppress(OSError):
        now = _JUDGE_OOM_SCORE.read_text()
        if _judge_oom_score is None:
            _judge_oom_score = now
        elif now != _judge_oom_score:
            _JUDGE_OOM_SCORE.write_text(_judge_oom_score)  # lowering needs CAP_SYS_RESOURCE: a root judge's


def unavailable(protections: dict) -> list[str]:
    """The protections that are off, with their reasons, for one line in a result's messages."""
    return [f"{name}: {value}" for name, value in protections.items()
            if name == "worker" or str(value).startswith(("unavailable", "off"))]  # fmt: skip


