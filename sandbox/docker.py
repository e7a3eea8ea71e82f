"""The docker backend, the judge's side: every submission runs in its own single-use container.

Same interface as `sandbox.process.WorkerSolution` and the same request loop inside
(`sandbox.worker.loop`, entered through `sandbox.worker.container`); what changes is the box around
the worker:

- a container from a prepared image (`sandbox/Dockerfile` on GPU machines, `sandbox.docker_image`
  for CPU mode), with no network (`network_mode="none"`), a read-only root file system, a
  size-limited tmpfs at /tmp as the only writable place, a memory limit (swap included) and a
  process limit from the cgroup, all capabilities dropped, `no-new-privileges`, a non-root user,
  `docker-init` as PID 1, and optionally another OCI runtime such as gVisor's `runsc`;
- on a GPU, exactly one device: its device nodes and the driver's libraries (`sandbox.docker_gpu`), or,
  with `gpu='toolkit'`, by UUID through the NVIDIA container toolkit;
- the judge and the worker talk over a unix socket in a private folder bind-mounted at /kd: frames
  of a length and a pickle. Tensors cross by value (CUDA tensors through host memory), since no
  memory is shared with the judge. Requests are trusted; replies are not: they are unpickled with
  no classes allowed at all, tensors and result models travel as plain data the judge rebuilds and
  validates itself;
- the build crosses in the `load` request (the source and any `.so`), so the container sees no
  build cache and no other submission;
- what the submission prints goes to /kd/output.txt (capped by `RLIMIT_FSIZE`), the only file the
  container can write outside its tmpfs; the folder itself is not writable for it.

A container is started ahead of need (in a background thread) and used for one submission, then
killed and removed. `DockerConfig` holds the image, the runtime and the limits; by default it reads
`KERNELDOJO_DOCKER_IMAGE`, `KERNELDOJO_DOCKER_RUNTIME`, `KERNELDOJO_DOCKER_MEMORY`, `KERNELDOJO_DOCKER_PIDS`.
docs/sandbox.md says what this guarantees and what it does not.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import functools
import os
import shutil
import socket
import tempfile
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import torch

from kerneldojo.tasks import Task

from . import docker_gpu, isolation
from .channel import Channel
from .device import Device
from .process import WorkerSolution, _Worker
from .protocol import LIMITS_S, OUTPUT_TAIL_CHARS, Build
from .worker.container import IO_MOUNT, SOCKET_NAME

LABEL = "kerneldojo.sandbox"
_ENTRY = "from kerneldojo.sandbox.worker.container import main; main()"


def _env(name: str, default: str) -> str:
    return os.environ.get(name) or default


@dataclasses.dataclass(frozen=True)
class DockerConfig:
    """How submission containers are made. Hashable: one spare container per (device, config)."""

    image: str = dataclasses.field(default_factory=lambda: _env("KERNELDOJO_DOCKER_IMAGE", "kerneldojo-sandbox:cuda"))
    runtime: str | None = dataclasses.field(default_factory=lambda: os.environ.get("KERNELDOJO_DOCKER_RUNTIME"))
    mem_limit: str = dataclasses.field(default_factory=lambda: _env("KERNELDOJO_DOCKER_MEMORY", "16g"))
    pids_limit: int = dataclasses.field(default_factory=lambda: int(_env("KERNELDOJO_DOCKER_PIDS", "1024")))
    tmpfs_size: str = "2g"  # /tmp, the only writable place; counts against mem_limit
    cpus: float | None = None
    user: str = "65534:65534"
    python: str = "python3"  # the interpreter in the image that has kerneldojo installed
    # Read-only bind mounts (host path, container path). Empty for a self-contained image; the local
    # CPU image (`sandbox.docker_image`) mounts the host's Python and this checkout.
    mounts: tuple[tuple[str, str], ...] = ()
    start_timeout_s: float = 120.0  # until the worker in a new container connects
    spare: bool = True  # start the next container while this one works
    # How a GPU reaches the container: "devices" (its device nodes, and the driver's libraries where
    # they lie outside the mounts: `sandbox.docker_gpu`, no toolkit needed) or "toolkit" (the NVIDIA
    # container toolkit's device request).
    gpu: str = dataclasses.field(default_factory=lambda: _env("KERNELDOJO_DOCKER_GPU", "devices"))
    environment: tuple[tuple[str, str], ...] = ()  # more variables inside, e.g. PYTHONPATH of carried wheels


class DockerSolution(WorkerSolution):
    """A `protocol.SubmissionHandle` served by a worker in a single-use container.

    Everything but the worker's start is `WorkerSolution`'s: the requests, their limits, the replies.
    """

    def __init__(self, task: Task, build: Build, device: Device, limits: dict[str, float] | None = None,
                 config: DockerConfig | None = None):
        self.limits = {**LIMITS_S, **(limits or {})}
        self._gpu = device.mode == "gpu"
        self._worker = _take_container(device, config or DockerConfig())
        self._start(task, build, {})  # connected, so its worker is set up (the container is its protection)


# ---------------------------------------------------------------------------------------------
# The judge's side: one container, in the shape of the process backend's worker.


class _Container(_Worker):
    def __init__(self, device: Device, config: DockerConfig):
        import docker
        from docker.types import DeviceRequest, LogConfig

        self.config, self.device, self.sequence = config, device.torch_device, 0
        self.container, self.channel = None, None
        self.requests = self.replies = None  # the channel, once the worker has connected
        self.process = _ContainerState(self)
        self.started = time.monotonic()
        self.base = Path(tempfile.mkdtemp(prefix="kerneldojo-docker-"))  # 0700: no other host user gets in
        self.scratch = self.base / "io"  # mounted at /kd: the socket and output.txt (read by output_tail)
        self.scratch.mkdir(mode=0o755)  # the container's user may enter it, not create files in it
        out = self.scratch / "output.txt"
        out.touch()
        out.chmod(0o666)
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(str(self.scratch / SOCKET_NAME))
        os.chmod(self.scratch / SOCKET_NAME, 0o777)
        self.listener.listen(1)
        _live[id(self)] = self

        gpu = device.mode == "gpu"
        volumes = {str(self.scratch): {"bind": IO_MOUNT, "mode": "rw"}}
        volumes.update({host: {"bind": inside, "mode": "ro"} for host, inside in config.mounts})
        environment = {"HOME": "/tmp", "TMPDIR": "/tmp", "USER": "sandbox", "PYTHONDONTWRITEBYTECODE": "1",
                       "TRITON_CACHE_DIR": "/tmp/triton", **dict(config.environment)}
        extra = {}
        if gpu and config.gpu == "toolkit":
            extra["device_requests"] = [DeviceRequest(device_ids=[_gpu_id(device)], capabilities=[["gpu"]])]
            environment["NVIDIA_DRIVER_CAPABILITIES"] = "compute,utility"
        elif gpu:  # exactly the judge's GPU: its node keeps the host's name (renamed, CUDA finds no GPU)
            exposure = _gpu_exposure(device.torch_device.index or 0, tuple(host for host, _ in config.mounts))
            extra["devices"] = list(exposure.devices)
            if exposure.group_add:
                extra["group_add"] = list(exposure.group_add)
            volumes.update({host: {"bind": inside, "mode": "ro"} for host, inside in exposure.mounts})
            environment.update(exposure.environment)
        if config.runtime:
            extra["runtime"] = config.runtime
        if config.cpus:
            extra["nano_cpus"] = int(config.cpus * 1e9)
        try:
            self.container = _client().containers.run(
                config.image, [config.python, "-c", _ENTRY, f"{IO_MOUNT}/{SOCKET_NAME}", "cuda:0" if gpu else "cpu"],
                detach=True, init=True, user=config.user, working_dir="/tmp", network_mode="none", read_only=True,
                tmpfs={"/tmp": f"rw,exec,nosuid,nodev,size={config.tmpfs_size}"},
                mem_limit=config.mem_limit, memswap_limit=config.mem_limit, pids_limit=config.pids_limit,
                cap_drop=["ALL"], security_opt=["no-new-privileges"], volumes=volumes, labels={LABEL: "worker"},
                environment=environment,
                log_config=LogConfig(type="json-file", config={"max-size": "1m", "max-file": "1"}),
                **extra,
            )  # fmt: skip
        except docker.errors.ImageNotFound:
            self._cleanup()
            raise RuntimeError(f"docker image {config.image!r} not found: build sandbox/Dockerfile, or run "
                               "`python -m kerneldojo.sandbox.docker_image` for CPU mode") from None
        except Exception:
            self._cleanup()
            raise

    def connect(self) -> None:
        """Wait until the worker connects (first thing it does, before the heavy imports)."""
        deadline = self.started + self.config.start_timeout_s
        self.listener.settimeout(0.25)
        while self.channel is None:
            try:
                sock, _ = self.listener.accept()
            except TimeoutError:
                if time.monotonic() > deadline or not self.running():
                    logs = ""
                    with contextlib.suppress(Exception):
                        logs = self.container.logs(tail=20).decode(errors="replace").strip()
                    self.stop()
                    raise RuntimeError(f"the sandbox container exited or did not connect within "
                                       f"{self.config.start_timeout_s:g} s; its output:\n{logs}") from None
                continue
            sock.settimeout(None)
            self.channel = Channel(sock, self.device)
        self.requests = self.replies = self.channel
        self.listener.close()

    @functools.cached_property
    def cgroup(self) -> _ContainerCgroup:
        return _ContainerCgroup(self)

    def running(self) -> bool:
        with contextlib.suppress(Exception):
            self.container.reload()
            return self.container.status in ("created", "running")
        return False

    def _tail_note(self) -> str:
        notes = []
        if self.process.oom_killed():
            notes.append(f"the container ran out of memory (its limit is {self.config.mem_limit})")
        tail = super()._tail_note()
        if not tail and not self.process.is_alive():  # it died before its output went to output.txt
            with contextlib.suppress(Exception):
                logs = self.container.logs(tail=30).decode(errors="replace").strip()
                tail = f"\nlast output of the container:\n{logs[-OUTPUT_TAIL_CHARS:]}" if logs else ""
        return "".join(f"\n{note}" for note in notes) + tail

    def _let_it_end(self) -> None:
        """A dead worker takes its container down on its own, in seconds on a loaded machine: killed sooner, the
        container's end was the kill's (SIGKILL), not the worker's (a segfault; a clean-clone run, 2026-11-27)."""
        with contextlib.suppress(Exception):
            self.container.wait(timeout=10)

    def _kill(self) -> None:
        with contextlib.suppress(Exception):
            self.container.kill()

    def stop(self) -> None:
        """Single use: close the channel, then kill and remove the container off the caller's path."""
        if self.channel is not None:
            self.channel.close()
        threading.Thread(target=self._cleanup, daemon=True).start()

    def _cleanup(self) -> None:
        if _live.pop(id(self), None) is None:
            return  # done already
        with contextlib.suppress(Exception):
            self.listener.close()
        if self.container is not None:
            with contextlib.suppress(Exception):
                self.container.remove(force=True)
        shutil.rmtree(self.base, ignore_errors=True)


class _ContainerCgroup:
    """The container's processes as the judge's host lists them (its cgroup, and those below), for the judge's own
    looks after and during requests (`WorkerSolution`), as a process-backend worker's cgroup serves them; its kill is
    the container's. Under gVisor the host sees the sandbox's own processes only, not those inside."""

    def __init__(self, box: _Container):
        self.box, pid = box, None
        with contextlib.suppress(Exception):  # gone already: no look, as with no cgroup
            box.container.reload()  # its attributes were read when it was created, before it ran
            pid = box.container.attrs["State"]["Pid"]
        folder = isolation.cgroup_of(pid) if pid else None
        # Docker names the folder by the container's id; another name is another process's (a judge in a pid
        # namespace of its own reads a host pid as one of its own): then no look, rather than the wrong one
        self.folder = folder if folder is not None and box.container.id in folder.name else None

    def processes(self) -> frozenset[int] | None:
        return isolation.processes_below(self.folder) if self.folder is not None and self.folder.is_dir() else None

    def kill(self) -> None:
        self.box._kill()

    def notes(self) -> list[str]:
        return []  # the container's own: `_Container._tail_note`


class _ContainerState:
    """What the process backend asks of its worker's process: alive? how did it end?"""

    def __init__(self, box: _Container):
        self.box = box
        self._state: dict | None = None

    def is_alive(self) -> bool:
        return self.box.channel is not None and not self.box.channel.closed.is_set()

    def _ended(self) -> dict:
        if self._state is None:
            try:
                try:  # a container whose worker died stops on its own, in seconds on a loaded machine: within 3 s
                    # a segfault was read as the SIGKILL sent after the wait (make test on a busy 2-core machine)
                    self.box.container.wait(timeout=10)
                except Exception:  # still running: its worker broke the channel, or left children
                    self.box._kill()
                    self.box.container.wait(timeout=10)
                self.box.container.reload()
                self._state = self.box.container.attrs["State"]
            except Exception:
                self._state = {}
        return self._state

    @property
    def exitcode(self) -> int | None:
        code = self._ended().get("ExitCode")
        # docker-init exits with 128 + the signal that ended the worker; report it as a signal.
        if isinstance(code, int) and 128 < code < 128 + 65:
            return -(code - 128)
        return code

    def oom_killed(self) -> bool:
        return not self.is_alive() and bool(self._ended().get("OOMKilled"))


@functools.cache
def _gpu_exposure(index: int, visible: tuple[str, ...]) -> docker_gpu.GpuExposure:
    return docker_gpu.expose(index, visible=visible)


def _gpu_id(device: Device) -> str:
    """The GPU by UUID, so that CUDA_VISIBLE_DEVICES in the judge cannot point the container elsewhere."""
    props = torch.cuda.get_device_properties(device.torch_device)
    uuid = str(getattr(props, "uuid", "") or "")
    if not uuid:
        return str(device.torch_device.index or 0)
    return uuid if uuid.startswith(("GPU-", "MIG-")) else f"GPU-{uuid}"


_clients = threading.local()  # one API client per thread: spares are started from another thread


def _client():
    if getattr(_clients, "client", None) is None:
        import docker

        _clients.client = docker.from_env(timeout=120)
    return _clients.client


# Containers not yet removed (so that they go when the judge exits), and one spare per (device, config).
_live: dict[int, _Container] = {}
_spares: dict[tuple, Future] = {}
_spares_lock = threading.Lock()
_starter = ThreadPoolExecutor(max_workers=4, thread_name_prefix="kerneldojo-docker-spare")


def _take_container(device: Device, config: DockerConfig) -> _Container:
    key = (str(device.torch_device), config)
    with _spares_lock:
        spare = _spares.pop(key, None)
        if config.spare:
            _spares[key] = _starter.submit(_Container, device, config)
    if spare is not None:
        with contextlib.suppress(Exception):  # it failed to start, or died waiting: start one here
            box = spare.result()
            box.connect()
            return box
    box = _Container(device, config)
    box.connect()
    return box


@atexit.register
def remove_containers() -> None:
    """Remove every container this process started, spares included (also done at exit)."""
    with _spares_lock:
        spares = list(_spares.values())
        _spares.clear()
    for future in spares:
        with contextlib.suppress(Exception):
            future.result(timeout=120)  # a spare being started is in _live once it is
    for box in list(_live.values()):
        box._cleanup()
