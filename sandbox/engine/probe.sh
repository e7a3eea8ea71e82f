#!/usr/bin/env bash
# One-minute probe: does a container of the docker backend get one GPU without the NVIDIA container
# toolkit? Run on the GPU machine from the repository root, as root, carrying the engine and wheels:
#
#     device run, carry [".engine", ".whl"]:   bash sandbox/engine/probe.sh
#
# Steps: the machine's facts; the carried wheels (the docker SDK) into /tmp/site; this checkout's
# kerneldojo made importable (/tmp/kd-pkg, after pyproject's package-dir); the engine
# (start-engine.sh); the skeleton image (`python3 -m kerneldojo.sandbox.docker_image`); then
# containers with the backend's confinement (read-only root, tmpfs /tmp, network none, cap-drop
# ALL, no-new-privileges, user 65534, docker-init, memory and pids limits) and the GPU given by
# sandbox/docker_gpu.py:
#   gpu          the torch one-liner: is CUDA there, which GPU, a computation
#   gpu-extras   what the worker needs besides: NVML, kerneldojo's imports, a Triton kernel
#   gpu-renamed  the GPU's node under another name inside (/dev/nvidia<N+1>): does CUDA still find it?
#   triton-nopath  the Triton kernel without TRITON_LIBCUDA_PATH: is the variable needed?
#   no-gpu       no device nodes: CUDA must not be there (the control); kerneldojo imports
#   runsc-cpu    gVisor's runsc, no GPU (only where .engine/runsc.tar.xz was carried)
# Each prints the docker CLI equivalent of its call and OK/FAIL with the error. Logs in $OUT
# (probe.log, summary.txt, dockerd.log, facts.txt). PYTHON picks the interpreter (default python3).
set -u
OUT=${OUT:-/tmp/kd-probe}
mkdir -p "$OUT"
PYTHON=${PYTHON:-python3}
export OUT PYTHON PYTHONUNBUFFERED=1
exec > >(tee "$OUT/probe.log") 2>&1
started=$SECONDS
say() { printf '\n=== [%3ss] %s\n' "$((SECONDS - started))" "$*"; }

say "facts (also in facts.txt)"
{
    uname -a
    grep -E '^(PRETTY_NAME|VERSION_ID)=' /etc/os-release
    echo "id: $(id)  nproc: $(nproc)  python: $(command -v "$PYTHON") $($PYTHON -V 2>&1)"
    grep -E '^(CapEff|NoNewPrivs|Seccomp):' /proc/self/status
    echo "filesystems: $(grep -Ew 'overlay|cgroup|cgroup2|tmpfs' /proc/filesystems | awk '{print $NF}' | tr '\n' ' ')"
    echo "mounts (/, /tmp, cgroup, nvidia):"
    awk '$5 == "/" || $5 == "/tmp" || $5 ~ /cgroup/ || $5 ~ /nvidia/ {print "  " $5, $(NF-2), $(NF-1), $6}' /proc/self/mountinfo
    echo "cgroup of this shell: $(cat /proc/self/cgroup | tr '\n' ' ')"
    [[ -f /sys/fs/cgroup/cgroup.controllers ]] && echo "cgroup2 controllers: $(cat /sys/fs/cgroup/cgroup.controllers)"
    [[ -f /sys/fs/cgroup/cgroup.subtree_control ]] && echo "cgroup2 subtree_control: $(cat /sys/fs/cgroup/cgroup.subtree_control)"
    [[ -d /sys/kernel/security/apparmor ]] && echo "apparmor: present"
    if [[ -r /proc/config.gz ]]; then
        zcat /proc/config.gz | grep -E '^CONFIG_(OVERLAY_FS|CGROUP_BPF|BPF_SYSCALL|SECCOMP_FILTER|USER_NS|PID_NS|NET_NS|MEMCG|CGROUP_PIDS|CGROUP_DEVICE)=' | tr '\n' ' '
        echo
    fi
    echo "nvidia-smi: $(nvidia-smi --query-gpu=index,name,uuid,pci.bus_id,driver_version --format=csv,noheader 2>&1 | tr '\n' ';')"
    echo "device nodes:"
    ls -l /dev/nvidia* 2>&1 | sed 's/^/  /'
    echo "driver libraries in the loader cache:"
    ldconfig -p 2>/dev/null | grep -E 'libcuda|libnvidia-(ml|ptxjit|nvvm|gpucomp)' | sed 's/^/  /'
    echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
    echo "disk: $(df -h /tmp | tail -1)"
} 2>&1 | tee "$OUT/facts.txt"

say "wheels (.whl -> /tmp/site)"
if compgen -G ".whl/*.whl" >/dev/null; then
    if $PYTHON -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl; then
        export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
        echo "installed $(ls .whl | wc -l) wheels into /tmp/site"
    else
        echo "FAIL: pip install of .whl/*.whl"
    fi
else
    echo "no .whl/*.whl here (carry .whl); going on with what is installed"
fi

say "kerneldojo importable (this checkout's code)"
# The import package after pyproject's package-dir, in /tmp/kd-pkg, first on PYTHONPATH: the checkout
# is what runs, also where .whl holds a kerneldojo wheel or one is installed.
$PYTHON - <<'PY'
import os, pathlib, shutil, tomllib
repo = pathlib.Path.cwd()
dirs = tomllib.loads((repo / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
shim = pathlib.Path("/tmp/kd-pkg/kerneldojo")
shutil.rmtree(shim.parent, ignore_errors=True)
# The root package is copied (a few small files; a container mounts this folder, not the checkout's
# kerneldojo/), the subpackages that live elsewhere are links to the checkout's folders, which
# docker_image.host_mounts mounts by their real paths.
shutil.copytree(repo / dirs["kerneldojo"], shim, ignore=shutil.ignore_patterns("__pycache__"))
for name, folder in sorted(dirs.items(), key=lambda item: item[0].count(".")):
    parts = name.split(".")[1:]
    link = shim.joinpath(*parts)
    if not parts or (link.exists() and link.resolve() == (repo / folder).resolve()):
        continue  # the root, or a subpackage inside its parent's folder already
    if len(parts) > 1:
        print("cannot link", name, "->", folder, "(not inside its parent's folder)")
        continue
    link.symlink_to(repo / folder)
print("package folder", shim, sorted(os.listdir(shim)))
PY
export PYTHONPATH=/tmp/kd-pkg${PYTHONPATH:+:$PYTHONPATH}
# From the checkout's root, `python -c`/`-m` would put the current folder first, and its kerneldojo/
# (the root package alone) would hide /tmp/kd-pkg's: Python 3.11+ leaves it out.
export PYTHONSAFEPATH=1
$PYTHON -c "import kerneldojo.sandbox.docker_gpu; print('kerneldojo imports from', kerneldojo.__file__)" \
    || echo "FAIL: kerneldojo does not import (see above)"
echo "PYTHONPATH=${PYTHONPATH:-}"

say "engine: bash sandbox/engine/start-engine.sh"
# shellcheck source=sandbox/engine/start-engine.sh
if source sandbox/engine/start-engine.sh; then
    engine=ok
else
    engine=failed
    echo "FAIL: the engine did not start (above: the command and dockerd's log)"
fi
dir=${KD_ENGINE_DIR:-/tmp/kd-engine}
cp "$dir/dockerd.log" "$OUT/dockerd.log" 2>/dev/null
if [[ -x $dir/bin/runsc ]]; then
    echo "runsc: $("$dir/bin/runsc" --version 2>&1 | head -1); nvproxy flag: $("$dir/bin/runsc" flags 2>&1 | grep -ci nvproxy)"
fi

if [[ $engine == ok ]]; then
    say "skeleton image: $PYTHON -m kerneldojo.sandbox.docker_image"
    $PYTHON -m kerneldojo.sandbox.docker_image || echo "FAIL: python3 -m kerneldojo.sandbox.docker_image (the probe builds it itself next)"

    say "containers"
    timeout 330 $PYTHON - <<'PY'
import os, shlex, sys, time, traceback
from pathlib import Path

OUT = Path(os.environ["OUT"])
results: list[tuple[str, str, str]] = []


def record(name, status, detail):
    print(f"[{status}] {name}: {detail}", flush=True)
    results.append((name, status, detail))


def write_summary():
    lines = [f"{status:5} {name}: {detail}" for name, status, detail in results]
    (OUT / "summary.txt").write_text("\n".join(lines) + "\n")


import docker
import torch

from kerneldojo.sandbox import docker_gpu, docker_image

client = docker.from_env(timeout=120)
info = client.info()
record("engine", "OK", f"docker {info.get('ServerVersion')}, storage {info.get('Driver')}, cgroup v{info.get('CgroupVersion')} "
       f"({info.get('CgroupDriver')}), runtimes {sorted(info.get('Runtimes', {}))}, security {info.get('SecurityOptions')}, "
       f"kernel {info.get('KernelVersion')}")
for warning in info.get("Warnings") or []:
    print("  engine warning:", warning)

tag = docker_image.LOCAL_TAG
try:
    client.images.get(tag)
except docker.errors.ImageNotFound:
    docker_image.build_local_image(tag, client=client)
record("skeleton image", "OK", tag)

# The backend's mounts, plus what this run put on PYTHONPATH (the carried wheels, the link farm).
mounts = list(docker_image.host_mounts())
visible = [Path(host) for host, _ in mounts]
pythonpath = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and Path(p).is_dir()]
for p in pythonpath:
    real = Path(p).resolve()
    if not any(real == v or v in real.parents for v in visible):
        mounts.append((str(real), str(real)))
print("mounts:", mounts)

gpu = torch.cuda.is_available()
exposure = None
if gpu:
    torch.ones(1, device="cuda")  # CUDA started on the host: /dev/nvidia-uvm exists from here on
    try:
        exposure = docker_gpu.expose(0, visible=[host for host, _ in mounts])
        record("docker_gpu.expose(0)", "OK", f"minor {exposure.minor}; devices {list(exposure.devices)}; "
               f"driver mounts {list(exposure.mounts)}; environment {exposure.environment}; group_add {list(exposure.group_add)}")
        print("driver libraries found:", docker_gpu.driver_libraries())
    except Exception as e:
        record("docker_gpu.expose(0)", "FAIL", f"{type(e).__name__}: {e}")
        traceback.print_exc()
else:
    record("host CUDA", "SKIP", "torch sees no GPU here: only the no-GPU containers run")

ENV = {"HOME": "/tmp", "TMPDIR": "/tmp", "USER": "sandbox", "PYTHONDONTWRITEBYTECODE": "1",
       "TRITON_CACHE_DIR": "/tmp/triton", "PYTHONPATH": os.pathsep.join(pythonpath)}
if not ENV["PYTHONPATH"]:
    del ENV["PYTHONPATH"]

TORCH_LINE = ("import torch; print(torch.cuda.is_available(), torch.cuda.get_device_name(0), "
              "(torch.ones(4, device='cuda')*2).sum().item())")

# Run as a file: Triton's @jit reads the kernel's source.
EXTRAS = r'''
import glob, os, sys, time
parts = sys.argv[1:]
print("uid", os.getuid(), "nodes", sorted(glob.glob("/dev/nvidia*")), "TRITON_LIBCUDA_PATH", os.environ.get("TRITON_LIBCUDA_PATH"))
def attempt(name, fn):
    t = time.monotonic()
    try:
        print(f"EXTRA-OK {name}: {fn()} ({time.monotonic() - t:.1f}s)", flush=True)
    except BaseException as e:
        import traceback; traceback.print_exc()
        print(f"EXTRA-FAIL {name}: {type(e).__name__}: {str(e)[:600]}", flush=True)
import torch
if "torch" in parts:
    attempt("torch", lambda: (torch.cuda.device_count(), torch.cuda.get_device_properties(0).name,
                              torch.cuda.get_device_properties(0).total_memory >> 30))
if "nvml" in parts:
    def nvml():
        import pynvml
        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(0)
        return pynvml.nvmlDeviceGetCount(), pynvml.nvmlDeviceGetName(h), pynvml.nvmlSystemGetDriverVersion()
    attempt("nvml", nvml)
if "kerneldojo" in parts:
    def kd():
        import kerneldojo.sandbox.docker, kerneldojo.sandbox.process, kerneldojo.judge
        return kerneldojo.__file__
    attempt("kerneldojo imports", kd)
if "triton" in parts:
    def tri():
        import triton, triton.language as tl
        @triton.jit
        def add_one(x_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            mask = offs < n
            tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=mask) + 1, mask=mask)
        x = torch.zeros(1000, device="cuda")
        add_one[(4,)](x, 1000, BLOCK=256)
        return triton.__version__, x.sum().item()
    attempt("triton kernel", tri)
'''
RUN_FILE = "import os, runpy, sys; open('/tmp/extras.py', 'w').write(os.environ['KD_PROBE_SRC']); runpy.run_path('/tmp/extras.py', run_name='__main__')"


def cli(kwargs) -> str:
    """The docker CLI command of a containers.run call (what to type to reproduce it)."""
    a = ["docker", "run", "--rm", "--init", "--user", kwargs["user"], "-w", kwargs["working_dir"],
         "--network", kwargs["network_mode"], "--read-only"]
    a += [x for path, opts in kwargs["tmpfs"].items() for x in ("--tmpfs", f"{path}:{opts}")]
    a += ["--memory", kwargs["mem_limit"], "--memory-swap", kwargs["memswap_limit"], "--pids-limit", str(kwargs["pids_limit"])]
    a += [x for cap in kwargs["cap_drop"] for x in ("--cap-drop", cap)]
    a += [x for opt in kwargs["security_opt"] for x in ("--security-opt", opt)]
    a += [x for host, m in kwargs["volumes"].items() for x in ("-v", f"{host}:{m['bind']}:{m['mode']}")]
    a += [x for d in kwargs.get("devices", []) for x in ("--device", d)]
    a += [x for g in kwargs.get("group_add", []) for x in ("--group-add", g)]
    a += [x for k, v in kwargs["environment"].items() if k != "KD_PROBE_SRC" for x in ("-e", f"{k}={v}")]
    if "KD_PROBE_SRC" in kwargs["environment"]:
        a += ["-e", "KD_PROBE_SRC=<the extras script>"]
    if kwargs.get("runtime"):
        a += ["--runtime", kwargs["runtime"]]
    return shlex.join([*a, kwargs["image"], *kwargs["command"]])


def run(name, command, *, with_gpu=True, renamed=False, env=None, drop_env=(), runtime=None, timeout=150):
    """One container, the backend's confinement; returns (exit code, output) or None."""
    volumes = {host: {"bind": inside, "mode": "ro"} for host, inside in mounts}
    environment = dict(ENV)
    kwargs = {}
    if with_gpu:
        devices = list(exposure.devices)
        if renamed:
            devices = docker_gpu.device_nodes(exposure.minor, inside=exposure.minor + 1)
        volumes.update({host: {"bind": inside, "mode": "ro"} for host, inside in exposure.mounts})
        environment.update(exposure.environment)
        kwargs.update(devices=devices, group_add=list(exposure.group_add))
    environment.update(env or {})
    for key in drop_env:
        environment.pop(key, None)
    kwargs.update(
        image=tag, command=[sys.executable, "-c", command], detach=True, init=True, user="65534:65534",
        working_dir="/tmp", network_mode="none", read_only=True, tmpfs={"/tmp": "rw,exec,nosuid,nodev,size=2g"},
        mem_limit="16g", memswap_limit="16g", pids_limit=1024, cap_drop=["ALL"], security_opt=["no-new-privileges"],
        volumes=volumes, labels={"kerneldojo.sandbox": "probe"}, environment=environment,
    )
    if runtime:
        kwargs["runtime"] = runtime
    print(f"\n--- {name}\n$ {cli(kwargs)}", flush=True)
    t = time.monotonic()
    try:
        box = client.containers.run(**kwargs)
    except Exception as e:
        remove_probe_containers()  # created, not started: it stays unless removed
        if "apparmor" not in str(e).lower():
            record(name, "FAIL", f"the container did not start: {type(e).__name__}: {e}")
            return None
        # AppArmor in the kernel, no apparmor_parser to load docker's profile: once more without it
        record(f"{name} (AppArmor)", "NOTE", f"{e}; retried with --security-opt apparmor=unconfined")
        kwargs["security_opt"] = [*kwargs["security_opt"], "apparmor=unconfined"]
        try:
            box = client.containers.run(**kwargs)
        except Exception as e2:
            remove_probe_containers()
            record(name, "FAIL", f"the container did not start: {type(e2).__name__}: {e2}")
            return None
    try:
        try:
            code = box.wait(timeout=timeout).get("StatusCode")
        except Exception:
            box.kill()
            code = f"timeout after {timeout}s"
        output = box.logs().decode(errors="replace")
    finally:
        try:
            box.remove(force=True)
        except Exception as e:
            print("  (could not remove it:", e, ")")
    print(f"  exit {code} after {time.monotonic() - t:.1f}s; output:\n" + "\n".join("  | " + l for l in output.splitlines()[-40:]),
          flush=True)
    return code, output


def remove_probe_containers():
    for box in client.containers.list(all=True, filters={"label": "kerneldojo.sandbox=probe"}):
        try:
            box.remove(force=True)
        except Exception as e:
            print("  (could not remove", box.short_id, e, ")")


def last_line(output: str) -> str:
    lines = [l for l in output.strip().splitlines() if l.strip()]
    return lines[-1][:400] if lines else "(no output)"


if gpu and exposure is not None:
    r = run("gpu", TORCH_LINE)
    if r:
        ok = r[0] == 0 and last_line(r[1]).startswith("True") and last_line(r[1]).endswith(" 8.0")
        record("gpu (torch one-liner)", "OK" if ok else "FAIL", f"exit {r[0]}: {last_line(r[1])}")
    r = run("gpu-extras", "import sys; sys.argv[1:] = ['torch', 'nvml', 'kerneldojo', 'triton']; " + RUN_FILE,
            env={"KD_PROBE_SRC": EXTRAS})
    if r:
        for line in r[1].splitlines():
            if line.startswith(("EXTRA-OK", "EXTRA-FAIL")):
                status, _, rest = line.partition(" ")
                record(f"gpu-extras {rest.split(':')[0]}", "OK" if status == "EXTRA-OK" else "FAIL", rest.split(":", 1)[1].strip())
        if not any(line.startswith(("EXTRA-OK", "EXTRA-FAIL")) for line in r[1].splitlines()):
            record("gpu-extras", "FAIL", f"exit {r[0]}: {last_line(r[1])}")
    r = run("gpu-renamed", f"import sys\ntry:\n    {TORCH_LINE}\nexcept Exception as e:\n    print('ERROR', type(e).__name__, e)",
            renamed=True)
    if r:
        works = r[0] == 0 and last_line(r[1]).startswith("True") and last_line(r[1]).endswith(" 8.0")
        record(f"gpu-renamed (/dev/nvidia{exposure.minor} as /dev/nvidia{exposure.minor + 1})", "WORKS" if works else "NO",
               f"exit {r[0]}: {last_line(r[1])}")
    r = run("triton-nopath", "import sys; sys.argv[1:] = ['triton']; " + RUN_FILE, env={"KD_PROBE_SRC": EXTRAS},
            drop_env=("TRITON_LIBCUDA_PATH",))
    if r:
        verdict = next((l for l in r[1].splitlines() if l.startswith(("EXTRA-OK", "EXTRA-FAIL"))), last_line(r[1]))
        record("triton without TRITON_LIBCUDA_PATH", "WORKS" if verdict.startswith("EXTRA-OK") else "NO", verdict)

r = run("no-gpu", "import torch, kerneldojo.sandbox.docker as d; print('kerneldojo from', d.__file__); "
        "print('cuda available:', torch.cuda.is_available())", with_gpu=False)
if r:
    ok = r[0] == 0 and "cuda available: False" in r[1]
    record("no-gpu (control)", "OK" if ok else "FAIL", f"exit {r[0]}: {last_line(r[1])}")

if "runsc" in info.get("Runtimes", {}):
    r = run("runsc-cpu", "import os, sys; print('gVisor:', os.uname().release, sys.version.split()[0], os.getuid())",
            with_gpu=False, runtime="runsc", timeout=90)
    if r:
        record("runsc-cpu", "OK" if r[0] == 0 else "FAIL", f"exit {r[0]}: {last_line(r[1])}")
else:
    record("runsc-cpu", "SKIP", "no runsc runtime registered")

remove_probe_containers()
write_summary()
print("\n=== summary")
print((OUT / "summary.txt").read_text())
PY
    echo "containers step exit: $?"
fi
cp "$dir/dockerd.log" "$OUT/dockerd.log" 2>/dev/null
cp "$dir"/dockerd.log.* "$OUT/" 2>/dev/null  # the logs of storage drivers that failed
say "done"
sleep 1  # tee's last lines into probe.log
