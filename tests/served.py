"""A kerneldojo service on 127.0.0.1 for the tests: in a thread (uvicorn.Server) or as a `kerneldojo serve` process."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

pytest.importorskip("fastapi", reason="the service needs the serve extra: pip install -e '.[serve]'")
uvicorn = pytest.importorskip("uvicorn", reason="the service needs the serve extra: pip install -e '.[serve]'")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(url: str, deadline_s: float = 120, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"the service exited with {proc.returncode}")
        with contextlib.suppress(httpx.TransportError):
            if httpx.get(f"{url}/health", timeout=2).json().get("status") == "ok":
                return
        time.sleep(0.2)
    raise TimeoutError(f"no healthy service at {url}")


@contextlib.contextmanager
def served_in_thread(config, executor=None):
    """The app under uvicorn in a thread of this process (over `executor`, else the one `config` names); yields its
    URL."""
    from kerneldojo.service import create_app

    port = free_port()
    # an open event stream holds no test's end up for long
    config = uvicorn.Config(create_app(config, executor), host="127.0.0.1", port=port, log_level="warning",
                            timeout_graceful_shutdown=5)  # fmt: skip
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url)
        yield url
    finally:
        server.should_exit = True
        thread.join(60)


def serve_process(state_dir: Path, *args: str) -> tuple[subprocess.Popen, str]:
    """`kerneldojo serve` in its own process group (so a SIGKILL takes its workers too)."""
    port = free_port()
    cmd = [sys.executable, "-m", "kerneldojo", "serve", "--port", str(port), "--state-dir", str(state_dir), *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=open(state_dir.parent / "serve.log", "ab"),  # noqa: SIM115
                            start_new_session=True)  # fmt: skip
    return proc, f"http://127.0.0.1:{port}"


def kill_process(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(30)


class ScriptedExecutor:
    """A `service.jobs.Executor` that answers the n-th evaluation at once with `answer(n, task, language)` (an
    EvalResult), counting them in `calls`."""

    def __init__(self, answer, slots=("cpu",)):
        self.answer, self.calls, self.slots = answer, 0, list(slots)

    def submit(self, task, source, language=None, retime=False):
        from concurrent.futures import Future

        self.calls += 1
        future = Future()
        future.set_result(self.answer(self.calls - 1, task, language))
        return future

    def describe(self):
        return "scripted"

    def close(self, wait=True):
        pass

    def __len__(self):
        return len(self.slots)
