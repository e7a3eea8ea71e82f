"""One NVIDIA GPU in a container, without the NVIDIA container toolkit.

`--gpus` / `DeviceRequest` needs the toolkit's runtime hook on the host. What that hook does for a
compute container can be done with plain docker options, and this module works them out:

- **device nodes** (`devices=`): `/dev/nvidiaN` of the one GPU, `/dev/nvidiactl`, `/dev/nvidia-uvm` and
  `/dev/nvidia-uvm-tools`. docker creates them in the container's /dev and lets the container's device
  cgroup open only those; no other GPU's node exists in there, so CUDA inside sees exactly one GPU,
  as device 0. The node keeps its host name (`/dev/nvidia3` stays `/dev/nvidia3`), as the toolkit
  does: the driver lists the GPUs with their minor numbers and libcuda opens `/dev/nvidia<minor>` by
  that name, so a node renamed to `/dev/nvidia0` is not the GPU libcuda looks for (on the lent H100,
  /dev/nvidia0 given as /dev/nvidia1 left torch with "No CUDA GPUs are available": sandbox/engine/probe.sh).
- **the driver's user-space libraries** (libcuda, libnvidia-ml, libnvidia-ptxjitcompiler,
  libnvidia-nvvm, ...), read-only at their host paths. The skeleton image (`sandbox.docker_image`)
  mounts the host's /usr and carries the host's /etc/ld.so.cache, so a driver installed under /usr
  (/usr/lib/x86_64-linux-gnu, /usr/local/nvidia/lib64) is visible already; `driver_mounts` returns
  only what lies outside the folders given as visible.
- **environment**: `TRITON_LIBCUDA_PATH`, since Triton looks libcuda up with `/sbin/ldconfig -p` and the
  skeleton image has no /sbin/ldconfig (without it Triton fails with FileNotFoundError: '/sbin/ldconfig'
  at its first kernel); `LD_LIBRARY_PATH` where the host finds the driver only
  through its own LD_LIBRARY_PATH (the container's environment is set from scratch).

Which node belongs to the judge's GPU: `minor_number(torch_index)` goes from torch's index (which
honours CUDA_VISIBLE_DEVICES and CUDA's ordering) to the GPU's UUID and asks NVML for its minor
number (NVML ignores CUDA_VISIBLE_DEVICES); without NVML it matches the PCI address in
/proc/driver/nvidia/gpus. `expose(torch_index)` puts it all together:

    gpu = docker_gpu.expose(device.torch_device.index or 0, visible=[host for host, _ in config.mounts])
    client.containers.run(..., devices=list(gpu.devices), group_add=list(gpu.group_add),
                          volumes={**volumes, **{h: {"bind": c, "mode": "ro"} for h, c in gpu.mounts}},
                          environment={**environment, **gpu.environment})

MIG instances (nodes under /dev/nvidia-caps) are not handled.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

DEV = Path("/dev")
CONTROL_NODES = ("nvidiactl", "nvidia-uvm")  # needed by every CUDA program
OPTIONAL_NODES = ("nvidia-uvm-tools",)  # profilers and debuggers
DEFAULT_VISIBLE = ("/usr",)  # what the skeleton image mounts from the host already

# The driver's user-space libraries a compute container needs (the toolkit's "compute" and
# "utility" sets): libcuda (and the unversioned libcuda.so, which Triton links its launcher against),
# the CUDA debugger, NVML, the PTX JIT, NVVM, the GPU compiler and allocator of recent drivers.
_DRIVER_LIBRARY = re.compile(r"^lib(cuda|cudadebugger|nvidia-(ml|ptxjitcompiler|nvvm\d*|gpucomp|cfg|allocator|pkcs11"
                             r"(-openssl3)?))\.so(\.[0-9.]+)?$")
# Where drivers put them when ldconfig does not know them (CUDA images set LD_LIBRARY_PATH to these).
_USUAL_FOLDERS = ("/usr/local/nvidia/lib64", "/usr/local/nvidia/lib", "/usr/lib/x86_64-linux-gnu", "/usr/lib64",
                  "/usr/lib/wsl/lib")
_LDCONFIG_LINE = re.compile(r"^\s*(\S+) \(([^)]*)\) => (\S+)\s*$")


@dataclass
class GpuExposure:
    """The docker options that put one GPU into a container (see the module's docstring)."""

    minor: int  # the host's /dev/nvidia<minor>
    devices: tuple[str, ...]  # docker `devices` entries, "host:container:rwm"
    mounts: tuple[tuple[str, str], ...] = ()  # read-only bind mounts (host path, container path)
    environment: dict[str, str] = field(default_factory=dict)
    group_add: tuple[str, ...] = ()  # groups that may open the nodes, where others may not


def expose(torch_index: int = 0, visible: Iterable[str] = DEFAULT_VISIBLE) -> GpuExposure:
    """Everything to give a container the GPU that torch calls `cuda:<torch_index>` in this process.

    `visible`: host folders the container mounts at the same path already (the driver's libraries
    under them need no mount of their own).
    """
    minor = minor_number(torch_index)
    devices = device_nodes(minor)
    return GpuExposure(minor=minor, devices=tuple(devices), mounts=tuple(driver_mounts(visible)),
                       environment=driver_environment(), group_add=tuple(node_groups(devices)))


# ---------------------------------------------------------------------------------------------
# Device nodes


def device_nodes(index: int, inside: int | None = None, dev: Path = DEV) -> list[str]:
    """docker `devices` entries for /dev/nvidia<index> and the driver's control nodes.

    `index` is the host's minor number (`minor_number` finds it). `inside` names the node in the
    container (/dev/nvidia<inside>); the default keeps the host's name, which is what works (see the
    module's docstring); another value is for the probe that checks it. /dev/nvidia-uvm appears
    on the host once CUDA has started there (the judge has, before it starts any container).
    """
    gpu = dev / f"nvidia{index}"
    missing = [p for p in (gpu, *(dev / n for n in CONTROL_NODES)) if not _is_char_device(p)]
    if missing:
        raise FileNotFoundError(f"no device node {', '.join(map(str, missing))}: is the NVIDIA driver loaded, and has "
                                "CUDA started on this host (that creates /dev/nvidia-uvm)?")
    name_inside = f"/dev/nvidia{index if inside is None else inside}"
    entries = [f"{gpu}:{name_inside}:rwm"]
    entries += [f"{dev / n}:/dev/{n}:rwm" for n in CONTROL_NODES]
    entries += [f"{dev / n}:/dev/{n}:rwm" for n in OPTIONAL_NODES if _is_char_device(dev / n)]
    return entries


def node_groups(devices: Iterable[str]) -> list[str]:
    """The groups (numeric) that own nodes others may not read and write: docker `group_add`.

    docker creates each node in the container with the host node's owner, group and mode; the
    container's user (65534) opens it through a group where the mode leaves others out.
    """
    groups: list[str] = []
    for entry in devices:
        info = os.stat(entry.split(":", 1)[0])
        if (info.st_mode & 0o006) != 0o006 and (info.st_mode & 0o060) == 0o060 and str(info.st_gid) not in groups:
            groups.append(str(info.st_gid))
    return groups


def _is_char_device(path: Path) -> bool:
    try:
        return stat.S_ISCHR(path.stat().st_mode)
    except OSError:
        return False


def minor_number(torch_index: int = 0) -> int:
    """The host's /dev/nvidia<N> of torch's `cuda:<torch_index>` (CUDA_VISIBLE_DEVICES taken into account).

    Through the GPU's UUID and NVML (`nvmlDeviceGetMinorNumber`); without NVML, through its PCI
    address and /proc/driver/nvidia/gpus/*/information.
    """
    import torch

    props = torch.cuda.get_device_properties(torch_index)
    uuid = str(getattr(props, "uuid", "") or "")
    if uuid.startswith("MIG-"):
        raise NotImplementedError("MIG instances (/dev/nvidia-caps) are not handled")
    errors = []
    if uuid:
        try:
            return _minor_from_nvml(uuid if uuid.startswith("GPU-") else f"GPU-{uuid}")
        except Exception as e:  # no NVML library, or an old driver: try the PCI address
            errors.append(f"NVML: {type(e).__name__}: {e}")
    pci = tuple(getattr(props, f"pci_{part}_id", None) for part in ("domain", "bus", "device"))
    if all(isinstance(v, int) for v in pci):
        minor = _minor_from_proc(*pci)
        if minor is not None:
            return minor
        errors.append(f"/proc/driver/nvidia/gpus: no GPU at PCI {pci[0]:04x}:{pci[1]:02x}:{pci[2]:02x}")
    raise RuntimeError(f"cannot find the device node of cuda:{torch_index} ({'; '.join(errors) or 'no UUID'})")


def _minor_from_nvml(uuid: str) -> int:
    import pynvml  # nvidia-ml-py

    pynvml.nvmlInit()
    try:
        return int(pynvml.nvmlDeviceGetMinorNumber(pynvml.nvmlDeviceGetHandleByUUID(uuid)))
    finally:
        pynvml.nvmlShutdown()


def _minor_from_proc(domain: int, bus: int, device: int, root: Path = Path("/proc/driver/nvidia/gpus")) -> int | None:
    address = f"{domain:04x}:{bus:02x}:{device:02x}."
    for folder in sorted(root.glob("*")):
        if folder.name.lower().startswith(address):
            with open(folder / "information", errors="replace") as f:
                for line in f:
                    key, _, value = line.partition(":")
                    if key.strip() == "Device Minor":
                        return int(value)
    return None


# ---------------------------------------------------------------------------------------------
# The driver's libraries


def driver_libraries() -> list[str]:
    """The host paths of the driver's user-space libraries this process can load (names, not targets).

    From the loader cache (`ldconfig -p`), then from the folders of LD_LIBRARY_PATH and the usual
    driver folders, for what the cache does not list. Only libraries of this interpreter's ELF class
    and machine (no 32-bit copies).
    """
    found: dict[str, str] = {}  # file name -> path; the first wins, as for the loader
    for name, path in _ldconfig_entries():
        if _DRIVER_LIBRARY.match(name) and name not in found and _same_machine(path):
            found[name] = path
    for folder in [*_ld_library_path(), *_USUAL_FOLDERS]:
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            continue
        for name in names:
            path = os.path.join(folder, name)
            if _DRIVER_LIBRARY.match(name) and name not in found and _same_machine(path):
                found[name] = path
    return sorted(found.values())


def driver_mounts(visible: Iterable[str] = DEFAULT_VISIBLE) -> list[tuple[str, str]]:
    """Read-only bind mounts (host path, same path) for the driver's libraries the container lacks.

    `visible`: host folders the container mounts already at the same path (by default /usr, as the
    skeleton image does). Each library's name and, when it is a link, its target are mounted unless
    they lie in a visible folder; a mounted link arrives as a regular file with the target's content.
    """
    roots = [Path(os.path.realpath(v)) for v in visible]
    mounts: list[tuple[str, str]] = []
    for path in driver_libraries():
        for p in dict.fromkeys((path, os.path.realpath(path))):
            if not _inside(Path(p), roots) and (p, p) not in mounts:
                mounts.append((p, p))
    return mounts


def driver_environment() -> dict[str, str]:
    """Variables the container needs for the driver: TRITON_LIBCUDA_PATH, and LD_LIBRARY_PATH if the
    host finds a driver library only through its own LD_LIBRARY_PATH (not through the loader cache)."""
    libraries = driver_libraries()
    environment: dict[str, str] = {}
    libcuda = [p for p in libraries if os.path.basename(p) == "libcuda.so.1"]
    if libcuda:
        environment["TRITON_LIBCUDA_PATH"] = os.path.dirname(libcuda[0])
    cached = {os.path.dirname(path) for name, path in _ldconfig_entries() if _DRIVER_LIBRARY.match(name)}
    extra = list(dict.fromkeys(os.path.dirname(p) for p in libraries if os.path.dirname(p) not in cached))
    if extra:
        environment["LD_LIBRARY_PATH"] = os.pathsep.join(extra)
    return environment


def _inside(path: Path, roots: Iterable[Path]) -> bool:
    return any(path == root or root in path.parents for root in roots)


def _ld_library_path() -> list[str]:
    return [p for p in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep) if p]


@functools.cache
def _ldconfig_entries() -> tuple[tuple[str, str], ...]:
    """(name, path) pairs of the loader cache, in its order; empty where there is no ldconfig."""
    ldconfig = shutil.which("ldconfig") or next((p for p in ("/sbin/ldconfig", "/usr/sbin/ldconfig")
                                                 if os.access(p, os.X_OK)), None)
    if ldconfig is None:
        return ()
    try:
        listing = subprocess.run([ldconfig, "-p"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return ()
    return tuple((m[1], m[3]) for line in listing.splitlines() if (m := _LDCONFIG_LINE.match(line)))


@functools.cache
def _elf_kind(path: str) -> tuple[int, int] | None:
    """(ELF class, machine) of a file, None if it is no ELF file."""
    try:
        with open(path, "rb") as f:
            head = f.read(20)
    except OSError:
        return None
    if len(head) < 20 or head[:4] != b"\x7fELF":
        return None
    return head[4], int.from_bytes(head[18:20], "little" if head[5] == 1 else "big")


def _same_machine(path: str) -> bool:
    return _elf_kind(path) is not None and _elf_kind(path) == _elf_kind(os.path.realpath(sys.executable))
