"""The wire between the judge and a worker: what may be asked, what may come back, and how long it may take.

Both sides import this module and nothing else defines a message. A request is `(sequence, op, args)`;
a reply is `(sequence, kind, payload)`. Requests come from the judge and are trusted. Replies come from
a process that ran untrusted code: they are decoded with an allowlist of types (`REPLY_TYPES`), so that
decoding one never runs a callable the worker named, and a reply of any other kind or to any other
request is a forgery (`Flagged`, check `timing_channel`).

Two encodings carry the same messages:

- the process backend pickles over a pipe, tensors by reference (shared memory on the CPU, CUDA IPC
  on the GPU); `load_reply` decodes with `REPLY_GLOBALS`;
- the docker backend shares no memory with the judge: `dumps`/`loads` send tensors, result models and
  the reply dataclasses by value as plain records, so a reply names no class at all (`recv_frame` caps
  a frame's length before allocating it).
"""

from __future__ import annotations

import dataclasses
import io
import pickle
import queue
import socket
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import torch
from pydantic import BaseModel

from kerneldojo import result as result_models
from kerneldojo.graders.checks import Flagged, message
from kerneldojo.graders.correctness import WrongOutput
from kerneldojo.result import ProfileStats, TimeStats

# -- the messages ----------------------------------------------------------------------------------

# Request ops, each with its wall-clock limit in seconds (`Judge(limits=...)` overrides any). `load`
# includes Triton's first imports; a shape's first `run` gets `compile` on top (Triton specialises on
# sizes); `time_reference` includes the worker's start and torch.compile of the reference.
LIMITS_S = {"load": 120.0, "compile": 120.0, "run": 60.0, "time": 300.0, "flags": 10.0, "join": 120.0,
            "time_reference": 600.0}
OPS = ("load", "run", "time", "flags", "join", "time_reference", "exit")
REFERENCE_KINDS = ("eager", "compiled")
# A worker's host memory and its processes and threads (torch's and Triton's own count too), through a
# cgroup where one can be made: Judge(limits={"memory": bytes, "processes": n}) overrides them.
MEMORY_CAP_BYTES = 16 << 30
PROCESSES_CAP = 1024
OUTPUT_TAIL_CHARS = 2000  # of what the submission printed, quoted in a failure's message


class SubmissionError(Exception):
    """The submission raised; the message is its traceback, cut to the submission's own frames."""


class SubmissionTimeout(SubmissionError):
    """The submission ran past a wall-clock limit and its worker was killed."""


class CompileError(Exception):
    """The submission did not compile; the message cites the submission's own line numbers."""


# A reply's kind, and what the judge raises for it ("ok" returns the payload).
REPLY_ERRORS: dict[str, type[Exception]] = {"compile_error": CompileError, "runtime_error": SubmissionError,
                                            "wrong": WrongOutput}


def reply_kind(error: BaseException) -> str:
    """The kind a worker replies with for `error` (anything unforeseen is the submission's runtime error)."""
    return next((kind for kind, cls in REPLY_ERRORS.items() if isinstance(error, cls)), "runtime_error")


def unwrap_reply(kind: str, payload):
    """The payload of an "ok" reply; the judge-side exception for any other kind."""
    if kind == "ok":
        return payload
    if kind in REPLY_ERRORS:
        raise REPLY_ERRORS[kind](payload)
    raise Flagged({"timing_channel": message("timing_channel", f"a reply of unknown kind {kind!r}")})


@dataclass(frozen=True)
class Build:
    """A submission as the worker loads it: the source file, and for cuda/cute a library per dtype."""

    language: str
    source_path: Path  # the submission as written to disk
    libraries: dict[str, Path] = field(default_factory=dict)  # dtype -> .so, for cuda/cute
    cached: bool = False


@dataclass
class TimedRuns:
    """The reply to `time`: the judge rechecks `outputs[k]` against the reference on
    `make_inputs(shape, seeds[k])`, the content input set k last held."""

    stats: TimeStats
    profile: ProfileStats | None
    seeds: list[int]
    outputs: list[tuple]


class SubmissionHandle(Protocol):
    """A loaded submission, wherever it runs: in this process (`worker.harness.Solution`), a worker
    process (`process.WorkerSolution`), a container (`docker.DockerSolution`) or one worker per rank
    (`peers.CollectiveSolution`). The judge calls only these."""

    @property
    def flags(self) -> dict[str, str]:
        """Checks that fired in the worker, name -> message."""

    def run(self, inputs: tuple, shape: dict, outputs: tuple, watch: bool = True) -> tuple:
        """The submission's outputs for `inputs` (native entry points write into the judge's `outputs`)."""

    def time(self, shape: dict, seeds: list[int], output_specs: list, l2_bytes: int, budget_s: float) -> TimedRuns:
        """Timed and profiled calls on input sets made from `seeds` (and fresh ones as sets come round)."""

    def close(self) -> None:
        """Release the submission (end its worker); the handle is not used again."""


# -- the process backend's encoding: pickles, tensors by reference ----------------------------------

# What a reply may contain: tensors (by shared memory or CUDA IPC), the result records, plain data.
# Plain `pickle.loads` would run any callable the worker names, inside the judge.
REPLY_MODELS = (result_models.TimeStats, result_models.ProfileStats, result_models.KernelRecord)
REPLY_DATACLASSES = (TimedRuns,)
REPLY_GLOBALS: dict[str, set[str]] = {
    "torch.multiprocessing.reductions": {"rebuild_storage_fd", "rebuild_storage_filename", "rebuild_tensor",
                                         "rebuild_typed_storage", "rebuild_cuda_tensor", "rebuild_storage_empty",
                                         "rebuild_typed_storage_child"},
    "torch": {"Size", "Tensor", "device"},
    "torch.storage": {"UntypedStorage", "TypedStorage"},
    "multiprocessing.resource_sharer": {"DupFd"},
    "builtins": {"set", "frozenset", "slice", "complex"},
    "collections": {"OrderedDict"},
}
for _cls in (*REPLY_MODELS, *REPLY_DATACLASSES):
    REPLY_GLOBALS.setdefault(_cls.__module__, set()).add(_cls.__name__)


class _ReplyUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        if name in REPLY_GLOBALS.get(module, ()) or (module == "torch" and isinstance(getattr(torch, name, None),
                                                                                      torch.dtype)):
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"a reply may not contain {module}.{name}")


def load_reply(data: bytes):
    """Unpickle a worker's reply, allowing only the globals a genuine reply uses."""
    try:
        return _ReplyUnpickler(io.BytesIO(data)).load()
    except pickle.UnpicklingError as e:
        raise Flagged({"timing_channel": message("timing_channel", str(e))}) from None


class PipeReplies:
    """The queue interface (`put`, `get(timeout)`) over the two ends of a one-way pipe: the worker puts,
    the judge gets. A pipe, not a `multiprocessing.Queue`: a queue's put starts a feeder thread in the
    worker, which the threads-left-running check would have to tell apart from the submission's."""

    def __init__(self, receiving, sending):
        self.receiving, self.sending = receiving, sending

    def put(self, item) -> None:
        self.sending.send(item)

    def get(self, timeout: float):
        if not self.receiving.poll(timeout):
            raise queue.Empty
        return load_reply(self.receiving.recv_bytes())


# -- the docker backend's encoding: length-prefixed pickles, everything by value --------------------

FRAME = struct.Struct("!Q")


class _Pickler(pickle.Pickler):
    def persistent_id(self, obj):
        if isinstance(obj, torch.Tensor):
            return _tensor_record(obj)
        if isinstance(obj, Build):  # its files go along: the container sees no build cache
            fields = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj) if f.init}
            libraries = {dtype: path.read_bytes() for dtype, path in obj.libraries.items()}
            return ("build", fields, obj.source_path.read_bytes(), libraries)
        if isinstance(obj, BaseModel):
            return ("model", type(obj).__name__, obj.model_dump(mode="python"))
        if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
            fields = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj) if f.init}
            return ("dataclass", f"{type(obj).__module__}.{type(obj).__qualname__}", fields)
        return None


def _tensor_record(t: torch.Tensor) -> tuple:
    # The whole storage with offset and strides, so strided views arrive as the same views.
    t = t.detach()
    storage = t.untyped_storage()
    if storage.device.type != "cpu":
        storage = storage.cpu()
    data = torch.empty(0, dtype=torch.uint8).set_(storage).numpy().tobytes()
    return ("tensor", data, str(t.dtype).removeprefix("torch."), t.storage_offset(), tuple(t.shape), t.stride(),
            t.device.type == "cuda")


class _Unpickler(pickle.Unpickler):
    """Rebuilds tensors on `device`. Untrusted data (a reply) may name no class at all; a trusted request
    may carry a `Build`, which `materialize` writes out where the worker can load it."""

    def __init__(self, data: bytes, device: torch.device, materialize: Callable[..., Build] | None):
        super().__init__(io.BytesIO(data))
        self.device, self.materialize = device, materialize

    @property
    def trusted(self) -> bool:
        return self.materialize is not None

    def find_class(self, module: str, name: str):
        if self.trusted:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"a reply may not name {module}.{name}")

    def persistent_load(self, pid):
        kind = pid[0] if isinstance(pid, tuple) and pid else None
        if kind == "tensor" and len(pid) == 7:
            return self._tensor(*pid[1:])
        if kind == "model" and len(pid) == 3:
            model = next((m for m in REPLY_MODELS if m.__name__ == pid[1]), None)
            if model is not None:
                return model.model_validate(pid[2])
        if kind == "dataclass" and len(pid) == 3 and isinstance(pid[2], dict):
            cls = next((c for c in REPLY_DATACLASSES if f"{c.__module__}.{c.__qualname__}" == pid[1]), None)
            if cls is not None:
                return cls(**pid[2])
        if kind == "build" and len(pid) == 4 and self.trusted:
            return self.materialize(*pid[1:])
        raise pickle.UnpicklingError(f"bad record {kind!r}")

    def _tensor(self, data, dtype_name, offset, shape, stride, cuda) -> torch.Tensor:
        dtype = getattr(torch, dtype_name, None) if isinstance(dtype_name, str) else None
        if not (isinstance(data, bytes) and isinstance(dtype, torch.dtype) and isinstance(offset, int)
                and isinstance(shape, tuple) and isinstance(stride, tuple)
                and all(isinstance(v, int) for v in (*shape, *stride))):
            raise pickle.UnpicklingError("bad tensor record")
        raw = torch.frombuffer(bytearray(data), dtype=torch.uint8) if data else torch.empty(0, dtype=torch.uint8)
        device = self.device if cuda else torch.device("cpu")
        if device.type != "cpu":
            raw = raw.to(device)
        # set_ checks that the view lies inside the storage.
        return torch.empty(0, dtype=dtype, device=device).set_(raw.untyped_storage(), offset, shape, stride)


def dumps(obj) -> bytes:
    buffer = io.BytesIO()
    _Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(obj)
    return buffer.getvalue()


def loads(data: bytes, device: torch.device, materialize: Callable[..., Build] | None = None):
    """Decode a frame: a reply (no `materialize`: no class may be named) or a request (trusted)."""
    return _Unpickler(data, device, materialize).load()


def send_frame(sock: socket.socket, data: bytes) -> None:
    sock.sendall(FRAME.pack(len(data)) + data)


def recv_frame(sock: socket.socket, max_bytes: int | None = None) -> bytes:
    (length,) = FRAME.unpack(_recv_exactly(sock, FRAME.size))
    if max_bytes is not None and length > max_bytes:
        raise pickle.UnpicklingError(f"a message of {length} bytes, over the limit of {max_bytes}")
    return _recv_exactly(sock, length)


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    buffer, got = bytearray(n), 0
    view = memoryview(buffer)
    while got < n:
        count = sock.recv_into(view[got:], min(n - got, 1 << 24))
        if not count:
            raise EOFError
        got += count
    return bytes(buffer)
