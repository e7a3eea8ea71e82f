"""The wire between the judge and a worker: what may be asked, what may come back, and how long it may take.

Both sides import this module and nothing else defines a message. A request is `(sequence, op, args)`;
a reply is `(sequence, kind, payload)`. Requests come from the judge and are trusted. Replies come from
a process that ran untrusted code, and a reply of any other kind or to any other request is a forgery
(`Flagged`, check `timing_channel`).

One encoding for both backends, over one socket per worker: frames of a length and a pickle in which a
reply names no class at all. Tensors, result models and the reply dataclasses travel as plain records
that the judge rebuilds and validates itself (`loads`): CPU tensors by value; CUDA tensors by value
(docker) or by CUDA IPC handle (a process worker on the judge's host), a view never holding more
elements than its storage. `recv_frame` refuses a frame longer than the caller allows before allocating
it, and the judge allows what the reply may hold (`reply_cap`). Nothing the judge listens on unpickles
with classes, and no worker holds a secret of the judge's (multiprocessing's authkey included).
"""

from __future__ import annotations

import dataclasses
import functools
import io
import math
import os
import pickle
import re
import reprlib
import socket
import stat
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import torch
from pydantic import BaseModel, TypeAdapter

from kerneldojo import result as result_models
from kerneldojo.graders.checks import Flagged, message
from kerneldojo.graders.correctness import WrongOutput
from kerneldojo.graders.timing import MAX_RUNS, WARMUP_CALLS
from kerneldojo.result import ProfileStats, TimeStats, printable

# -- the messages ----------------------------------------------------------------------------------

# Request ops, each with its wall-clock limit in seconds (`Judge(limits=...)` overrides any). `load`
# includes Triton's first imports; a shape's first `run` gets `compile` on top (Triton specialises on
# sizes); `prepare_reference` includes torch.compile of the reference, and so does `time_reference`'s
# allowance (both requests of one reference timing share it).
LIMITS_S = {"load": 120.0, "compile": 120.0, "run": 60.0, "time": 300.0, "flags": 10.0, "join": 120.0,
            "time_reference": 600.0, "ncu": 180.0, "evidence": 300.0}
OPS = ("load", "run", "time", "profile", "flags", "join", "prepare_reference", "time_reference", "ncu", "arm_evidence",
       "evidence", "exit")
# Not a reply: a worker's word, during a `run`, that the submission's first call at a shape has returned on the
# host (its launches, hence Triton's JIT and autotuning, are done) and the device is about to be synchronized.
# The judge then ends the JIT allowance: the request's deadline becomes min(deadline, now + LIMITS_S["run"]).
# It can only shorten a deadline; past PROGRESS_CAP per request (none but a `run` has any) it is a forgery.
PROGRESS = "progress"
PROGRESS_CAP = 1
# A worker's first frame, sent once its warm-up is done and before it reads any request: a worker that dies without
# it died before any submission code ran (a CUDA context the GPU's memory could not hold: 2026-11-27, H200), the
# machine's failure, not the submission's (`WorkerNotReady`). Any other first frame is refused.
READY = "ready"
READY_FRAME_BYTES = 256
REFERENCE_KINDS = ("eager", "compiled")
# A worker's host memory and its processes and threads (torch's and Triton's own count too), through a
# cgroup where one can be made: Judge(limits={"memory": bytes, "processes": n}) overrides them.
MEMORY_CAP_BYTES = 16 << 30
PROCESSES_CAP = 1024
OUTPUT_TAIL_CHARS = 2000  # of what the submission printed, quoted in a failure's message
MESSAGE_CAP_CHARS = 8000  # of an error's text or a check's message kept from a worker
FLAGS_CAP = 50  # checks kept from one worker's reply
REPLY_OVERHEAD_BYTES = 4 << 20  # a reply's bytes beyond the tensors it may carry (records, messages)


class Unavailable(Exception):
    """The task cannot run here (e.g. too few GPUs, a worker that could not start); the result is `skipped`, with
    this reason, and nothing is stored."""


class WorkerNotReady(Unavailable):
    """A worker died, or was not ready within the request's limit, before it read any request: no submission code
    had run in it."""


class WorkerLost(Unavailable):
    """The OOM killer ended a worker that was under its own memory limit (a parent's limit or the host's ran out,
    which another worker's memory can fill): the machine's failure, no verdict on the submission."""


class SubmissionError(Exception):
    """The submission raised; the message is its traceback, cut to the submission's own frames."""


class SubmissionTimeout(SubmissionError):
    """The submission ran past a wall-clock limit and its worker was killed."""


class Retime(Exception):
    """A process appeared in the worker during the first timing at a shape: a compile, most likely, of a
    specialisation the checked calls did not reach (Triton specialises on integer values, which a kernel may take
    from its inputs). The judge times the shape again on fresh seeds, when nothing may appear
    (`WorkerSolution.time`), and pays the slower of the two: `timed`, the first timing's figures (None where they
    cannot be had: a collective's ranks)."""

    def __init__(self, found: object, timed: TimedRuns | None = None):
        super().__init__(found)
        self.timed = timed


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
        raise REPLY_ERRORS[kind](capped(payload))
    raise Flagged({"timing_channel": message("timing_channel", f"a reply of unknown kind {kind!r}")})


# Plain data: the types whose objects run no code of a submission's (exactly these, never a subclass).
PLAIN_DATA = (type(None), bool, int, float, str, bytes, tuple, list, dict)


class _DataRepr(reprlib.Repr):
    """Plain data as reprlib shows it; anything else by its type alone (a tensor by its shape and dtype): torch's
    printer walks every element of a dimension of size 6 or less, so a stretched view of 2**40 elements never ends,
    and a model's repr holds its fields' (red team round 14)."""

    def repr1(self, x, level):
        if isinstance(x, torch.Tensor):
            return f"tensor(shape={list(x.shape)}, dtype={x.dtype})"
        if type(x) is int and x.bit_length() > 256:  # repr() of a long int is quadratic, and refused past 4300 digits
            return f"<int of {x.bit_length()} bits>"
        if type(x) not in PLAIN_DATA:
            return f"<{type(x).__name__}>"
        return super().repr1(x, level)


# What a worker sent that is not text is shown, never rendered in full: its repr could be of any length.
_BOUNDED_REPR = _DataRepr()
_BOUNDED_REPR.maxlevel = 3
_BOUNDED_REPR.maxlist = _BOUNDED_REPR.maxtuple = _BOUNDED_REPR.maxdict = _BOUNDED_REPR.maxset = 20
_BOUNDED_REPR.maxstring = _BOUNDED_REPR.maxother = 200


def capped(text) -> str:
    """A worker's text as the judge keeps it: at most MESSAGE_CAP_CHARS, saying so when cut, and printable."""
    text = text if isinstance(text, str) else _BOUNDED_REPR.repr(text)[:MESSAGE_CAP_CHARS]
    if len(text) <= MESSAGE_CAP_CHARS:
        return printable(text)
    return f"{printable(text[:MESSAGE_CAP_CHARS])}\n[... {len(text) - MESSAGE_CAP_CHARS} more characters cut]"


def read_regular_file(path: Path, max_bytes: int, exact: int | None = None) -> bytes:
    """A file a confined process wrote, read as untrusted: no link followed, no FIFO waited on, a regular file of
    at most `max_bytes` (exactly `exact` bytes, where given, also after the read). ValueError says what is wrong."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as e:
        raise ValueError(f"{path.name}: cannot be opened ({e.strerror})") from None
    expected = f"{exact}" if exact is not None else f"at most {max_bytes}"
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ValueError(f"{path.name}: not a regular file")
        if info.st_size > max_bytes or (exact is not None and info.st_size != exact):
            raise ValueError(f"{path.name}: {info.st_size} bytes, expected {expected}")
        data = f.read(max_bytes + 1)
    if (exact is not None and len(data) != exact) or len(data) > max_bytes:  # grew or shrank after the fstat
        raise ValueError(f"{path.name}: {len(data)} bytes read, expected {expected}")
    return data


def read_regular_tail(path: Path, max_bytes: int) -> str:
    """The last `max_bytes` of a file a confined process wrote, as text: "" unless it is a regular file (no link
    followed, no FIFO waited on): what a worker or a replay printed, which it could have replaced."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return ""
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return ""
        f.seek(max(0, info.st_size - max_bytes))
        return f.read(max_bytes).decode(errors="replace")


def sample_positions(numel: int, count: int, seed: int) -> torch.Tensor:
    """The flat positions of an output that the evidence pass compares: `count` drawn from `seed` (which the judge
    keeps from the replay), or all of them when there are no more. The same on both sides of the channel."""
    if numel <= count:
        return torch.arange(numel)
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(numel, (count,), generator=generator).sort().values


def reply_cap(tensors_bytes: int = 0) -> int:
    """The longest reply the judge reads when the reply may carry `tensors_bytes` of tensors."""
    return tensors_bytes + REPLY_OVERHEAD_BYTES


@dataclass(frozen=True)
class Build:
    """A submission as the worker loads it: the source file, and for cuda/cute a library per dtype."""

    language: str
    source_path: Path  # the submission as written to disk
    libraries: dict[str, Path] = field(default_factory=dict)  # dtype -> .so, for cuda/cute
    cached: bool = False
    extensions: dict[str, Path] = field(default_factory=dict)  # load_inline module name -> prebuilt .so

    def paths(self) -> dict:
        """Where a replay in a child process loads this build from (JSON), its load_inline extensions included (a
        replay without them built its own, in the worker's confinement, and failed at the file-size limit)."""
        return {"language": self.language, "source_path": str(self.source_path),
                "libraries": {d: str(p) for d, p in self.libraries.items()},
                "extensions": {n: str(p) for n, p in self.extensions.items()}}

    @classmethod
    def from_paths(cls, spec: dict) -> Build:
        return cls(spec["language"], Path(spec["source_path"]), {d: Path(p) for d, p in spec["libraries"].items()},
                   extensions={n: Path(p) for n, p in spec["extensions"].items()})


# Calls profiled after the timed ones, each on a freshly refilled input set (`harness.Solution.time`).
PROFILED_CALLS = 10


def timed_reply_sets(sets: int) -> int:
    """Input sets a `time` reply accounts for: each of the `sets` the timed calls went round, as it last was, then
    each profiled one."""
    return sets + min(PROFILED_CALLS, sets)


# A `time` request's refills take their seeds from a list the judge drew (`REFILLS` of them, more than any request
# uses): each time the calls come round to set k again (a warm-up or a timed call, `graders.timing.time_calls`), it
# is filled from the next unused seed. The judge works out which seed each set held last from the number of calls
# (`last_seeds`); no seed is read back from the worker (red team round 20: seeds drawn in the worker could be
# rewritten there, so that outputs were checked against inputs of the submission's choosing). The profiled sets'
# seeds go in a request of their own (`profile`), sent once the timing reply is in: sent with `time`, they let the
# timed calls compute the profiled calls' answers, hidden from the events, and the profiled calls, which a submission
# can recognise, return them with no work to see (red team round 44).
REFILLS = WARMUP_CALLS + MAX_RUNS


def last_seeds(seeds: list[int], refills: list[int], runs: int, profile_seeds: list[int]) -> list[int | None]:
    """The seed of each input set as the replies hold it (`TimedRuns.outputs`): each of the `seeds` sets after
    WARMUP_CALLS + `runs` calls went round them (None: a set no call reached), then each profiled set."""
    calls = WARMUP_CALLS + runs
    held: list[int | None] = [seed if k < calls else None for k, seed in enumerate(seeds)]
    used = max(0, calls - len(seeds))
    for j in range(used):  # call len(seeds) + j refills set j % len(seeds)
        held[j % len(seeds)] = refills[j]
    return held + profile_seeds[:min(PROFILED_CALLS, len(seeds))]


@dataclass
class TimedRuns:
    """What `SubmissionHandle.time` returns (a worker's `time` and `profile` replies, joined): the judge rechecks
    `outputs[k]` against the reference on the content that set held (`last_seeds`), for each set as the timed calls
    left it, then each profiled one (`timed_reply_sets`); None: a set the timed calls never reached (a budget
    shorter than the pool). The paid calls are rechecked, not only the profiled ones (red team round 18: a kernel
    right only outside the timed calls). A worker's `time` reply has no profile and the timed sets' outputs; its
    `profile` reply, the profile and the profiled sets' outputs."""

    stats: TimeStats
    profile: ProfileStats | None
    outputs: list[tuple | None]
    profile_s: float = 0.0  # of the request's time, the profile's (the rest timed the calls)

    def joined(self, profiled: TimedRuns) -> TimedRuns:
        """This `time` reply with its `profile` reply: the timed figures, the profile, both sets of outputs."""
        return TimedRuns(self.stats, profiled.profile, self.outputs + profiled.outputs, profiled.profile_s)


class SubmissionHandle(Protocol):
    """A loaded submission, wherever it runs: in this process (`worker.harness.Solution`), a worker
    process (`process.WorkerSolution`), a container (`docker.DockerSolution`) or one worker per rank
    (`peers.CollectiveSolution`). The judge calls only these."""

    @property
    def flags(self) -> dict[str, str]:
        """Checks that fired in the worker, name -> message."""

    def run(self, inputs: tuple, shape: dict, outputs: tuple, watch: bool = True) -> tuple:
        """The submission's outputs for `inputs` (native entry points write into the judge's `outputs`)."""

    def time(self, shape: dict, seeds: list[int], refills: list[int], profile_seeds: list[int], output_specs: list,
             l2_bytes: int, budget_s: float) -> TimedRuns:
        """Timed calls on input sets made from `seeds`, refilled from `refills` as sets come round; then profiled
        calls on sets refilled from `profile_seeds`, which reach the submission only once the timing is done. May
        raise `Retime`, once per shape."""

    def close(self) -> None:
        """Release the submission (end its worker); the handle is not used again."""


# -- the encoding: length-prefixed pickles that name no class --------------------------------------

FRAME = struct.Struct("!Q")
REPLY_MODELS = (result_models.TimeStats, result_models.ProfileStats, result_models.KernelRecord)
REPLY_DATACLASSES = (TimedRuns,)
# The types a worker's reply may hold besides those records: exactly these (a subclass is the submission's code).
_REPLY_TYPES = frozenset({*PLAIN_DATA, torch.Tensor})
_IPC_HANDLE = re.compile(rb"/torch_[0-9_]+")  # torch's names for a CUDA IPC ref counter in /dev/shm
# Counters in one such file (torch's CUDA_IPC_REF_COUNTER_FILE_SIZE): torch decrements the counter at the offset a
# record names, unchecked, when the judge frees the tensor (red team round 15: an offset of 2**40, a SIGSEGV).
IPC_REF_COUNTERS_PER_FILE = 10_000


class _Pickler(pickle.Pickler):
    def __init__(self, file, cuda_ipc: bool, share_fds: bool):
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.cuda_ipc, self.share_fds = cuda_ipc, share_fds
        self.fds: list[int] = []  # shared CPU memory, passed along with the frame (requests only)

    def persistent_id(self, obj):
        kind = type(obj)  # never isinstance: a `__class__` property is the submission's code
        if not self.share_fds and kind not in _REPLY_TYPES and not issubclass(kind, (BaseModel, *REPLY_DATACLASSES)):
            # A worker's reply is plain data: any other object would run its own pickling code here, after every
            # check (red team round 19: a tensor subclass computed its outputs in `detach()` as the reply was made).
            raise pickle.PicklingError(f"a reply may not hold a {kind.__module__}.{kind.__qualname__}")
        if issubclass(kind, torch.Tensor):
            if obj.is_cuda and self.cuda_ipc:
                return _ipc_record(obj)
            if self.share_fds and not obj.is_cuda and obj.is_shared():  # CPU peer memory: every rank sees it
                fd, size = obj.untyped_storage()._share_fd_cpu_()
                self.fds.append(os.dup(fd))  # the storage keeps its own
                return ("shared_fd", len(self.fds) - 1, size, _dtype_name(obj.dtype), obj.storage_offset(),
                        tuple(obj.shape), obj.stride())
            return _tensor_record(obj)
        if isinstance(obj, Build):  # its files go along: the worker sees no build cache
            fields = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj) if f.init}
            libraries = {dtype: path.read_bytes() for dtype, path in obj.libraries.items()}
            extensions = {name: path.read_bytes() for name, path in obj.extensions.items()}
            return ("build", fields, obj.source_path.read_bytes(), libraries, extensions)
        if isinstance(obj, BaseModel):
            return ("model", type(obj).__name__, obj.model_dump(mode="python"))
        if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
            fields = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj) if f.init}
            return ("dataclass", f"{type(obj).__module__}.{type(obj).__qualname__}", fields)
        return None


def _tensor_record(t: torch.Tensor) -> tuple:
    # The whole storage with offset and strides, so strided views arrive as the same views; a contiguous view of a
    # larger allocation (outputs carved from one buffer) as its own elements, which a reply's cap is sized for (red
    # team round 61: an honest kernel's two outputs in one buffer were refused as over the cap).
    t = t.detach()
    if t.is_contiguous() and t.untyped_storage().nbytes() > t.nbytes:
        t = t.clone()
    storage = t.untyped_storage()
    if storage.device.type != "cpu":
        storage = storage.cpu()
    data = torch.empty(0, dtype=torch.uint8).set_(storage).numpy().tobytes()
    return ("tensor", data, _dtype_name(t.dtype), t.storage_offset(), tuple(t.shape), t.stride(), t.is_cuda)


def _ipc_record(t: torch.Tensor) -> tuple:
    """A CUDA tensor by reference: torch's IPC handle of its allocation, and nothing that names a class."""
    from torch.multiprocessing.reductions import reduce_tensor

    _, (_, size, stride, offset, _, dtype, *storage) = reduce_tensor(t.detach())
    return ("cuda_ipc", _dtype_name(dtype), tuple(size), tuple(stride), offset, *storage)


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


class _Unpickler(pickle.Unpickler):
    """Rebuilds tensors on `device`. Untrusted data (a reply) may name no class at all; a trusted request
    may carry a `Build`, which `materialize` writes out where the worker can load it."""

    def __init__(self, data: bytes, device: torch.device, materialize: Callable[..., Build] | None,
                 fds: list[int] = ()):
        super().__init__(io.BytesIO(data))
        self.device, self.materialize, self.fds = device, materialize, fds

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
        if kind == "cuda_ipc" and len(pid) == 14:
            return self._ipc_tensor(*pid[1:])
        if kind == "model" and len(pid) == 3:
            model = next((m for m in REPLY_MODELS if m.__name__ == pid[1]), None)
            if model is not None:
                return model.model_validate(pid[2])
        if kind == "dataclass" and len(pid) == 3 and isinstance(pid[2], dict):
            cls = next((c for c in REPLY_DATACLASSES if f"{c.__module__}.{c.__qualname__}" == pid[1]), None)
            if cls is None and self.trusted:  # a request's own records (a rank's peer memory)
                cls = self.find_class(*pid[1].rsplit(".", 1))
            if cls is not None and self.trusted:
                return cls(**pid[2])
            if cls is not None:  # fields of the annotated types: a dict where a model belongs becomes the model
                return _reply_dataclass_adapter(cls).validate_python(pid[2])
        if kind == "build" and len(pid) == 5 and self.trusted:
            return self.materialize(*pid[1:])
        if kind == "shared_fd" and len(pid) == 7 and self.trusted:
            _, index, size, dtype_name, offset, shape, stride = pid
            storage = torch.UntypedStorage._new_shared_fd_cpu(self.fds[index], size)
            return torch.empty(0, dtype=getattr(torch, dtype_name)).set_(storage, offset, shape, stride)
        raise pickle.UnpicklingError(f"bad record {kind!r}")

    def _tensor(self, data, dtype_name, offset, shape, stride, cuda) -> torch.Tensor:
        dtype = _view_dtype(dtype_name, offset, shape, stride)
        if not isinstance(data, bytes):
            raise pickle.UnpicklingError("bad tensor record")
        if not self.trusted:  # the judge's own inputs may be broadcast views
            _check_span(dtype, shape, len(data))  # and each byte becomes one tensor's: no memo (check_reply_shape)
        raw = torch.frombuffer(bytearray(data), dtype=torch.uint8) if data else torch.empty(0, dtype=torch.uint8)
        device = self.device if cuda else torch.device("cpu")
        if device.type != "cpu":
            raw = raw.to(device)
        # set_ checks that the view lies inside the storage.
        return torch.empty(0, dtype=dtype, device=device).set_(raw.untyped_storage(), offset, shape, stride)

    def _ipc_tensor(self, dtype_name, shape, stride, offset, device_index, handle, size_bytes, offset_bytes,
                    requires_grad, counter_handle, counter_offset, event_handle, event_sync) -> torch.Tensor:
        from torch.multiprocessing.reductions import rebuild_cuda_tensor

        dtype = _view_dtype(dtype_name, offset, shape, stride)
        if not (self.device.type == "cuda" and device_index == (self.device.index or 0)
                and isinstance(handle, bytes) and isinstance(event_handle, (bytes, type(None)))
                and isinstance(counter_handle, bytes) and _IPC_HANDLE.fullmatch(counter_handle)
                and all(type(v) is int and v >= 0 for v in (size_bytes, offset_bytes, counter_offset))
                and counter_offset < IPC_REF_COUNTERS_PER_FILE
                and type(requires_grad) is bool and type(event_sync) is bool):
            raise pickle.UnpicklingError("bad CUDA tensor record")
        _check_span(dtype, shape, size_bytes)
        # The judge's own classes, not the worker's; the view is checked against the storage as above.
        return rebuild_cuda_tensor(torch.Tensor, torch.Size(shape), stride, offset, torch.storage.TypedStorage, dtype,
                                   device_index, handle, size_bytes, offset_bytes, False, counter_handle,
                                   counter_offset, event_handle, event_sync)  # fmt: skip


@functools.cache
def _reply_dataclass_adapter(cls: type) -> TypeAdapter:
    """A reply's dataclass is rebuilt by validating its fields against their annotations: a worker cannot put a
    plain dict, a string or a NaN-carrying record where the judge's code expects a validated model (red team
    round 13: plain dicts skipped every check of the figures)."""
    return TypeAdapter(cls)


TENSOR_DIMS_CAP = 64  # more than any output has; a product over more dimensions is the judge's time to spend


def _view_dtype(dtype_name, offset, shape, stride) -> torch.dtype:
    dtype = getattr(torch, dtype_name, None) if isinstance(dtype_name, str) else None
    if not (isinstance(dtype, torch.dtype) and type(offset) is int and offset >= 0 and isinstance(shape, tuple)
            and isinstance(stride, tuple) and len(shape) == len(stride) <= TENSOR_DIMS_CAP
            and all(type(v) is int and v >= 0 for v in (*shape, *stride))):
        raise pickle.UnpicklingError("bad tensor record")
    return dtype


def _check_span(dtype: torch.dtype, shape: tuple, storage_bytes: int) -> None:
    """A view may not hold more elements than its storage: a stretched one (stride 0, overlapping rows)
    costs the judge memory of the worker's choosing the moment it is copied."""
    if math.prod(shape) * dtype.itemsize > storage_bytes:
        raise pickle.UnpicklingError(f"a tensor of shape {list(shape)} over a storage of {storage_bytes} bytes "
                                     "(a view that repeats elements)")


@dataclass
class Frame:
    data: bytes
    fds: list[int] = field(default_factory=list)  # descriptors of shared CPU memory the data refers to


def dumps(obj, cuda_ipc: bool = False, share_fds: bool = False) -> Frame:
    """Encode a message; with `cuda_ipc` (a worker on the judge's host) CUDA tensors go by IPC handle, with
    `share_fds` (the judge's requests) CPU tensors in shared memory go as descriptors, so ranks share them.
    A worker's reply is written without a memo (`fast`), as the judge's reading of it requires."""
    buffer = io.BytesIO()
    pickler = _Pickler(buffer, cuda_ipc, share_fds)
    pickler.fast = not share_fds
    pickler.dump(obj)
    return Frame(buffer.getvalue(), pickler.fds)


def loads(frame: Frame, device: torch.device, materialize: Callable[..., Build] | None = None):
    """Decode a frame: a reply (no `materialize`: no class may be named) or a request (trusted)."""
    try:
        if materialize is None:
            check_reply_shape(frame.data)
        return _Unpickler(frame.data, device, materialize, frame.fds).load()
    finally:
        for fd in frame.fds:
            os.close(fd)


# Nesting in a reply: the judge's replies are a few levels deep; hashing or printing a deeper one recurses in C.
REPLY_DEPTH_CAP = 32
# Opcodes in a reply, whatever its bytes: each one-byte opcode can make an object of ~80 bytes in the judge, and
# costs ~3 µs to scan (red team round 16: 4 MiB of empty lists, 11.5 s of the judge's CPU and 420 MiB; a `time`
# reply's byte cap, sized for its tensors, would have allowed 121 GiB). A tensor travels as one bytes opcode, so
# the judge's largest replies (a profile's kernels, per-call outputs) hold a few thousand.
REPLY_OPCODES_CAP = 100_000
_MEMO_FETCH = frozenset({"GET", "BINGET", "LONG_BINGET"})
_MEMO_STORE = frozenset({"PUT", "BINPUT", "LONG_BINPUT", "MEMOIZE"})
_CONTAINER_UPDATES = frozenset({"APPEND", "APPENDS", "SETITEM", "SETITEMS"})
_STRINGS = frozenset({"SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE"})
# The opcodes a reply may use: plain data and the judge's records (PERSID), nothing that calls or re-states an
# object (BUILD gave a validated tensor or model a new state after every check: red team round 14), no set.
_REPLY_OPCODES = frozenset({
    "PROTO", "FRAME", "STOP", "MARK", "POP", "POP_MARK", "NONE", "NEWTRUE", "NEWFALSE",
    "INT", "BININT", "BININT1", "BININT2", "LONG", "LONG1", "LONG4", "FLOAT", "BINFLOAT",
    *_STRINGS, "STRING", "BINSTRING", "SHORT_BINSTRING", "BINBYTES", "SHORT_BINBYTES", "BINBYTES8",
    "EMPTY_LIST", "LIST", "EMPTY_TUPLE", "TUPLE", "TUPLE1", "TUPLE2", "TUPLE3", "EMPTY_DICT", "DICT",
    *_CONTAINER_UPDATES, "PERSID", "BINPERSID",
})  # fmt: skip  # no memo either: a reply is written without one, and a PUT's index sizes the judge's memo
# (red team round 15: `PUT 134217728` in 25 bytes made the judge allocate and touch 2 GiB)


def check_reply_shape(data: bytes) -> None:
    """Refuses, in one linear pass over its opcodes and before any object is built, a reply whose objects
    could cost the judge more than their bytes: a memo fetch (one object reused, so a few bytes unfold into
    exponentially many hash or repr steps), nesting deeper than REPLY_DEPTH_CAP (C recursion: a crash), any
    opcode but plain data's and records' (`_REPLY_OPCODES`: no set, nothing called), a key that is not a str, and
    an integer beyond 64 bits: arithmetic on big integers is one C call holding the GIL, superlinear in their size
    (red team round 111: a tensor record's shape of 8,000 255-byte integers, whose product the span check takes,
    froze the judge for 190 s, and a concurrent step's honest worker ran out its limit meanwhile).
    Ints and tuples hash the same in every process, so a worker can send thousands that collide, and each insert
    then compares with all before it, inside one C call that holds the judge's GIL (red team round 13: 60,000 keys
    froze the judge for 33 s); a str's hash is salted per process."""
    import pickletools

    stack: list[tuple[int, bool]] = []  # each object on the unpickler's stack: its nesting depth, is it a str
    marks: list[int] = []
    try:
        for count, (op, arg, _) in enumerate(pickletools.genops(data)):
            if count >= REPLY_OPCODES_CAP:
                raise pickle.UnpicklingError(f"a reply of more than {REPLY_OPCODES_CAP} pickle opcodes")
            if op.name in _MEMO_FETCH or op.name in _MEMO_STORE:
                raise pickle.UnpicklingError("a reply may not reuse an object (pickle memo)")
            if op.name not in _REPLY_OPCODES:
                raise pickle.UnpicklingError(f"a reply may hold only plain data and records, not pickle's {op.name}")
            if isinstance(arg, int) and not -(1 << 63) <= arg < 1 << 63:
                raise pickle.UnpicklingError("a reply's integers must fit in 64 bits")
            if op.name == "MARK":
                marks.append(len(stack))
                continue
            popped: list[tuple[int, bool]] = []
            if pickletools.markobject in op.stack_before:
                start = marks.pop() if marks else 0
                popped, stack[start:] = stack[start:], []
            fixed = [x for x in op.stack_before if x not in (pickletools.markobject, pickletools.stackslice)]
            update = op.name in _CONTAINER_UPDATES  # the container stays, below what is added to it
            for _ in fixed[update:]:
                popped.append(stack.pop() if stack else (0, False))
            # SETITEMS and DICT take [key, value, ...] above a mark; SETITEM pops the value, then the key
            keys = {"SETITEMS": popped[0::2], "DICT": popped[0::2], "SETITEM": popped[-1:]}.get(op.name, [])
            if not all(is_str for _, is_str in keys):
                raise pickle.UnpicklingError("a reply's dict may have only str keys")
            depth = 1 + max((d for d, _ in popped), default=0)
            if depth > REPLY_DEPTH_CAP:
                raise pickle.UnpicklingError(f"a reply nested deeper than {REPLY_DEPTH_CAP} levels")
            if update:
                if stack:
                    stack[-1] = (max(stack[-1][0], depth), False)
            else:
                stack.extend([(depth, op.name in _STRINGS)] * len(op.stack_after))
    except (ValueError, IndexError) as e:  # genops on a malformed stream
        raise pickle.UnpicklingError(f"a malformed reply: {e}") from None


def send_frame(sock: socket.socket, frame: Frame) -> None:
    header = FRAME.pack(len(frame.data))
    if frame.fds:
        socket.send_fds(sock, [header], frame.fds)
        sock.sendall(frame.data)
    else:
        sock.sendall(header + frame.data)
    for fd in frame.fds:
        os.close(fd)


def recv_frame(sock: socket.socket, max_bytes: int | Callable[[], int] | None = None, fds: bool = False) -> Frame:
    """The next frame; refused unread past `max_bytes` (a callable is asked once the header is in: a reader that
    waits for the next reply learns the cap of the request sent meanwhile). Descriptors are accepted only with
    `fds` (the worker's end: requests are trusted); a plain recv on the judge's end discards any a worker sends."""
    received: list[int] = []
    if fds:
        head, received, _, _ = socket.recv_fds(sock, FRAME.size, 64)
        if not head:
            raise EOFError
        head += _recv_exactly(sock, FRAME.size - len(head))
    else:
        head = _recv_exactly(sock, FRAME.size)
    (length,) = FRAME.unpack(head)
    max_bytes = max_bytes() if callable(max_bytes) else max_bytes
    if max_bytes is not None and length > max_bytes:
        raise pickle.UnpicklingError(f"a message of {length} bytes, over the limit of {max_bytes}")
    return Frame(_recv_exactly(sock, length), received)


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    if n == 0:
        return b""
    buffer, got = bytearray(n), 0
    view = memoryview(buffer)
    while got < n:
        count = sock.recv_into(view[got:], min(n - got, 1 << 24))
        if not count:
            raise EOFError
        got += count
    return bytes(buffer)
