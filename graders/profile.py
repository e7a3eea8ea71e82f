"""Profiled timing: the CUPTI kernel records (through torch.profiler) of a window of calls.

Events see only the stream they are recorded on; the profile sees every kernel on every stream.
From it come the GPU time per call summed over all kernels, the time the GPU was busy (the union
of kernel intervals, so overlapping streams are not counted twice), launches per call, and the
share of GPU time spent in kernels the submission compiled itself, as opposed to torch's or a
vendor library's. The judge scores the larger of the event median and the busy time per call.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import importlib.util
import itertools
import re
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch

from kerneldojo.result import KernelRecord, ProfileStats
from kerneldojo.tasks.spec import COPY_OPS

# Kernels of closed-source libraries whose names say neither library nor namespace: cuFFT's (`regular_fft`,
# `vector_fft`), cuDNN's older convolutions (`implicit_convolve_sgemm`, `precomputed_convolve_sgemm`): red team
# round 86. A submission may not name its own so, nor have them counted as its own.
CLOSED_KERNELS = r"regular_fft|vector_fft|convolve_sgemm|convolve_hgemm|convolve_dgemm"
# Kernels of NVIDIA's math libraries (cuBLAS/cuBLASLt on Hopper names many GEMMs nvjet_*; CUTLASS
# inside cuBLAS, cuDNN, and the flash/memory-efficient attention kernels shipped in torch).
VENDOR_KERNEL = re.compile(r"nvjet|xmma|cublas|cudnn|gemv|gemmk|gemm_|_gemm|cutlass|flash_fwd|fmha|sm\d+_|"
                           + CLOSED_KERNELS, re.I)


# Own kernels named like a vendor library's (cuBLAS's nvjet_*, sm90_xmma_*, cutlass_*, cuDNN's): refused at
# compile time, so a library kernel can never be counted as the submission's by sharing its name.
# VENDOR_KERNEL's generic fragments (gemm_, _gemm) are left out: the tasks' own starters are gemm_kernel,
# fp8_gemm_kernel and so on, and no vendor kernel is known to be named that plainly.
VENDOR_NAME = re.compile(r"nvjet|xmma|cublas|cudnn|cutlass|flash_fwd|fmha|^sm\d+_|^(ampere|volta|turing|hopper)_|"
                         r"^gemv|^gemmk|^gemmSN|^splitKreduce|" + CLOSED_KERNELS, re.I)
# A C++ kernel in these namespaces is torch's or a library's, whatever its base name.
# (`at_cuda_detail::` is torch's wrapped CUB: red team round 29.)
FOREIGN_NAMESPACES = ("at::", "at_cuda_detail::", "c10::", "cub::", "thrust::", "cublas", "cudnn")
# A kernel whose name mentions a vendor library's types anywhere (its template arguments, its parameters) is that
# library's, whatever its base name: cuBLAS's `axpy_kernel_val<float, float>(cublasAxpyParamsVal<...>)` counted as a
# submission's that defined an unlaunched `axpy_kernel_val` (red team round 28). Torch's types (at::, c10::) are
# not here: an honest load_inline kernel takes `at::PackedTensorAccessor32` or is templated on `c10::Half`; nor is
# cuRAND's: an honest kernel may take a `curandState*`. cuBLAS's CUTLASS kernels are `cutlass::Kernel2<cutlass_80_
# simt_sgemm_...>`, base name `Kernel2`, which an honest CUTLASS submission's own entry may share: their generated
# configuration names make them a library's, in every spelling CUTLASS's generator has (`cutlass_80_...` round 90;
# `cutlass3x_sm90_...`, `cutlass_tensorop_...`, `cutlass_simt_...`, `cutlass_wmma_...` round 91). An honest CuTe
# kernel is named by its own types (`cutlass::gemm::kernel::GemmUniversal<...>`), never by a generated configuration.
VENDOR_TYPE = re.compile(
    r"\b(cublas|cudnn|cufft|cusparse|cusolver|nccl)|\bcutlass(3x)?_(\d+|sm\d+|tensorop|simt|wmma)_", re.I)
# Inductor's generated Triton kernels (pointwise, reduction, persistent, template, foreach, split scan): torch's
# work, which a submission could call past the operator watch through a graph it compiled (red team round 14).
# Its names can be prefixed (`aot_inductor.model_name_for_generated_files`) or all be `triton_`
# (`triton.unique_kernel_names = False`): red team round 15. A stopgap: own-ness by provenance is the fix (Open).
INDUCTOR_NAME = re.compile(r"(^|_)triton_(poi|red|per|tem|for|spl|unk)_|^triton_?$")


# The harness's own kernels (`GATE_KERNEL`, `FLUSH_KERNEL`, `ALIGN_KERNEL`): the profile leaves them out by name, so
# a submission's kernel so named would be left out in their place and the harness's time counted as its own (round 33).
HARNESS_PREFIX = "kerneldojo_"


def library_kernel(name: str) -> bool:
    """A kernel a library wrote: a vendor's, or one torch's compiler generated (red team round 85: a submission
    compiled a graph with Inductor at import, outside the watch, and had its kernels run in the timed calls, paid as
    its speedup; no name rule caught them and a decoy of its own met the share)."""
    return bool(VENDOR_KERNEL.search(name) or INDUCTOR_NAME.search(name))


# The kernels torch launches for the default allowlist's operators that write elements (`tasks.spec`; views,
# allocation and record_stream launch none, `.item()` is a copy), by the operators that launch them: fills, copies
# and casts, arange. Each is named by what launches it, as a whole word: FillFunctor, the copy and cast functions
# of Copy.cu (their lambdas carry the function's name) and its fp8 conversion functors, arange's function. Only
# in torch's namespaces, as CUPTI and ncu spell them (ncu drops `native::`; arange's kernel is in an anonymous
# namespace): a kernel of the submission's is its own whatever its name. Red team round 87: `.*fill_kernel` also
# matched `masked_fill_kernel` and `index_fill_kernel_impl`, `.*copy_kernel` matched `index_copy_kernel_impl`.
_TORCH = r"^(void )?(at::|\(anonymous namespace\)::|<unnamed>::)"
DEFAULT_OP_KERNELS: dict[frozenset[str], re.Pattern] = {
    frozenset({"aten.fill", "aten.zero", "aten.zeros", "aten.zeros_like", "aten.new_zeros", "aten.ones",
               "aten.ones_like", "aten.new_ones", "aten.full", "aten.full_like", "aten.new_full",
               "aten.scalar_tensor"}): re.compile(_TORCH + r".*\bFillFunctor\b"),
    COPY_OPS: re.compile(_TORCH + r".*(\b(direct|float16|bfloat16|float8\w*)_copy_kernel_cuda\b"
                         r"|\bConvert\w*Float8\w*Op\b)"),
    frozenset({"aten.arange"}): re.compile(_TORCH + r".*\barange_cuda_out\b"),
}


def unexplained_kernel(name: str, allowed_ops: frozenset[str]) -> bool:
    """A kernel that is not a copy, not a library's (`library_kernel`: `vendor_kernel` has it), and launched by none
    of the default operators the task allows: torch's or a closed library's work, done where the operator watch was
    off (the timed and replayed calls). Callers rule the submission's own kernels and the harness's out first.
    Red team round 86: a timed call ran torch's fused RMSNorm and an own spin of 12 % of its time, which met the
    decoy rule's 10 % share and was paid torch's speed."""
    if is_copy(name) or library_kernel(name):
        return False
    return not any(pattern.search(name.strip()) for ops, pattern in DEFAULT_OP_KERNELS.items() if ops & allowed_ops)


# torch's jiterator compiles some elementwise kernels at run time with NVRTC, as plain `extern "C"` identifiers
# (`<op>_vectorized<N>_kernel`), which a Triton function of that name claimed (red team round 92). Its unvectorized
# form `<op>_kernel` is as plain as an own kernel's name: the Open item on own-ness by name.
JITERATOR_NAME = re.compile(r"_vectorized\d+_kernel$")


def library_like(name: str) -> bool:
    """A base name that is a vendor library's, Inductor's, torch's jiterator's or the harness's: never a submission's
    own kernel."""
    return (bool(VENDOR_NAME.search(name) or INDUCTOR_NAME.search(name) or JITERATOR_NAME.search(name))
            or name.startswith(HARNESS_PREFIX))


@dataclass
class OwnKernels:
    """The kernels that count as the submission's, by name: Triton's exactly (CUPTI and ncu show a Triton kernel by its
    bare name: a Triton kernel named like torch's `softmax_warp_forward` claimed torch's kernel by base name in the
    worker's profile, red team round 29), native ones by base name and never a foreign one."""

    triton: set[str] = field(default_factory=set)  # matched exactly: ncu shows a Triton kernel by its bare name
    native: set[str] = field(default_factory=set)  # base names of the library's __global__ functions

    def __contains__(self, name: str) -> bool:
        if foreign(name):
            return False
        return name.strip() in self.triton or kernel_base_name(name) in self.native


@dataclass
class KernelInterval:
    name: str
    stream: int
    start_ns: int
    end_ns: int


# The harness's kernels in the window (the host gate, L2 flushes, a collective's ranks aligned): left out
# of every figure.
GATE_KERNEL, FLUSH_KERNEL, ALIGN_KERNEL = "kerneldojo_gate", "kerneldojo_flush_l2", "kerneldojo_align_ranks"
HARNESS_KERNELS = frozenset({GATE_KERNEL, FLUSH_KERNEL, ALIGN_KERNEL})  # each compiled at a GPU worker's start


def profile_calls(calls: Sequence[Callable[[], object]], device: torch.device, l2_bytes: int,
                  before: Callable[[], None] | None = None) -> list[KernelInterval]:
    """Run each call once under the profiler as in the timed loop: L2 flushed before each, and the GPU
    held by the host gate until the call is queued (so the host's launches leave no gaps, which a
    collective's peer would spend spinning in its barrier); the device synchronized after each call, as the
    timed loop does: work a call left running on a stream it did not join would otherwise overlap the next calls'
    and count once in the busy time for several calls (red team round 100: side work on a stream of its own each
    call, paid 1.5x under its time). `before` queues harness work ahead of each call (a collective's ranks aligned
    on the GPU)."""
    from torch.profiler import ProfilerActivity, profile

    from kerneldojo.graders.timing import HostGate, L2Flush

    flush, gate = L2Flush(device, l2_bytes), HostGate(device)
    torch.cuda.synchronize(device)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for call in calls:
            gate.close()
            flush()
            if before is not None:
                before()
            call()
            gate.open()
            torch.cuda.synchronize(device)
    kernels = []  # and copies and memsets: the work a call hides on the host shows as its copies (round 43)
    for e in prof.profiler.kineto_results.events():
        if e.device_type() != torch.autograd.DeviceType.CUDA:
            continue
        kernels.append(KernelInterval(e.name(), e.device_resource_id(), e.start_ns(), e.end_ns()))
    aligns = len(calls) if before is not None else 0
    return without_harness_launches(kernels, {GATE_KERNEL: len(calls), FLUSH_KERNEL: len(calls), ALIGN_KERNEL: aligns})


def without_harness_launches(kernels: list[KernelInterval], launches: dict[str, int]) -> list[KernelInterval]:
    """The window's kernels less the harness's: for each harness kernel name, its launches, if there are no more of
    them than the harness made. More means a submission's kernel took the name (Triton's `repr=` names a kernel
    apart from its function): then none is left out, so a harness launch that overlapped other work could not stand
    in for the submission's (red team round 103: one per call, each dropped in place of a longer gate that covered
    other counted work, hid half of the call's work)."""
    dropped: set[int] = set()
    for name, count in launches.items():
        same = [k for k in kernels if kernel_base_name(k.name) == name]
        if len(same) <= count:
            dropped |= {id(k) for k in same}
    return [k for k in kernels if id(k) not in dropped]


def is_copy(name: str) -> bool:
    """CUPTI's device-side records are kernels, copies and memsets; the last two are named so."""
    return name.startswith(("Memcpy", "Memset"))


def is_host_copy(name: str) -> bool:
    """A copy that touches the host: `Memcpy HtoD (Pageable -> Device)`, `DtoH`, to and from CUDA arrays (`HtoA`,
    `AtoH`) and `HtoH` (red team round 88). Not `PtoP`: a collective's peers copy GPU to GPU."""
    return name.startswith("Memcpy") and bool(re.search(r"\b(HtoD|DtoH|HtoA|AtoH|HtoH)\b", name))


def foreign(name: str) -> bool:
    """A kernel that is torch's or a vendor library's by its full name, whatever base name it shares with one of
    the submission's (a submission's kernel named `vectorized_elementwise_kernel` does not make torch's its own)."""
    head = re.sub(r"^(void|static|__global__)\s+", "", name.strip())
    return head.startswith(FOREIGN_NAMESPACES) or bool(VENDOR_TYPE.search(name)) or library_like(kernel_base_name(name))


def kernel_base_name(name: str) -> str:
    """'void ns::add_kernel<float>(float const*, ...)' -> 'add_kernel'; the function's own identifier, not its return
    type's (`std::enable_if<...>::type internal::gemvx::kernel<...>(...)` -> 'kernel')."""
    name = re.sub(r"(\(anonymous namespace\)|<unnamed>)::", "", name.strip())  # CUPTI's and ncu's spellings
    outside, depth = [], 0  # the characters outside template arguments, up to the parameter list
    for ch in name:
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(depth - 1, 0)
        elif ch == "(" and depth == 0:
            break
        elif depth == 0:
            outside.append(ch)
    words = "".join(outside).split()
    return words[-1].rsplit("::", 1)[-1] if words else ""


MAX_OTHER_RECORDS = 52  # records of kernels not the submission's beyond the largest 12: a reply stays small


def summarize_profile(activity: list[KernelInterval], calls: int, own_kernels: OwnKernels) -> ProfileStats:
    """The window's figures per call. Copies and memsets count as device time that is not the submission's own: busy
    time covers them, and they dilute its share. Red team round 43: the profile counted kernels only, so a call that
    did its work on the host (copies there and back) beside one padded kernel of its own had a 100 % own share and a
    busy time of the pad alone, while its timed calls hid the real kernel from the events on another stream."""
    def own(k: KernelInterval) -> bool:
        return k.name in own_kernels and not is_copy(k.name)

    total: dict[tuple[str, bool], list[float]] = {}
    for k in activity:
        total.setdefault((k.name, own(k)), []).append((k.end_ns - k.start_ns) / 1e6)
    kernel_ms = sum(sum(v) for (name, _), v in total.items() if not is_copy(name))
    records = sorted(
        (KernelRecord(name=name[:200], own=own, launches=len(v), ms_per_call=sum(v) / calls,
                      vendor=not own and library_kernel(name))
         for (name, own), v in total.items()),
        key=lambda r: -r.ms_per_call,
    )  # fmt: skip
    kernels = [k for k in activity if not is_copy(k.name)]
    busy_ms = _union_ms(activity)
    # The share is of the busy time in which only the submission's kernels ran (the busy time less everything else's):
    # an own kernel beside other work on another stream adds to the sum of durations, not to the time the call takes
    # (red team round 85: a one-block spin on side streams beside Inductor's kernels made 89 % of a summed share, none
    # of the time).
    own_ms = busy_ms - _union_ms([k for k in activity if not own(k)])
    host_copy_ms = sum((k.end_ns - k.start_ns) / 1e6 for k in activity if is_host_copy(k.name))
    # The largest kernels by time, and every other one that is not the submission's, for the judge's name rules
    # (red team round 87: a torch kernel below twelve own ones was in no list the worker's profile checked).
    others = [r for r in records[12:] if not r.own and not is_copy(r.name)][:MAX_OTHER_RECORDS]
    return ProfileStats(
        calls=calls, kernel_ms=kernel_ms / calls, busy_ms=busy_ms / calls,
        launches_per_call=len(kernels) / calls, streams=len({k.stream for k in activity}),
        own_share=own_ms / busy_ms if kernel_ms > 0 and busy_ms > 0 else None, kernels=records[:12] + others,
        host_copy_ms=host_copy_ms / calls,
    )  # fmt: skip


def _union_ms(kernels: list[KernelInterval]) -> float:
    busy, end = 0, None
    for k in sorted(kernels, key=lambda k: k.start_ns):
        if end is None or k.start_ns > end:
            busy += k.end_ns - k.start_ns
            end = k.end_ns
        elif k.end_ns > end:
            busy += k.end_ns - end
            end = k.end_ns
    return busy / 1e6


_TRITON_DECORATORS = {"jit", "autotune", "heuristics"}
# Packages whose Triton kernels are not a submission's doing: torch (inductor's generated kernels), Triton itself,
# and the judge's own.
NOT_THIRD_PARTY = ("torch", "triton", "kerneldojo")


# ast.parse on CPython 3.11 keeps its recursion depth in interpreter-wide state: a thread switch inside one parse
# (a collector's finalizer runs Python code) and a parse in the other thread make the first fail with SystemError
# ("AST constructor recursion depth mismatch", CPython gh-106905), which turned honest submissions into runtime errors
# in a pool's slots and a 500 in the service (red team round 42). Every parse of submission text goes through here.
_PARSING = threading.Lock()


def parse_source(source: str) -> ast.Module:
    """`ast.parse`, one thread at a time; raises as it does."""
    with _PARSING:
        return ast.parse(source)


# No submission's text is parsed past this many characters: a 21 MB source took 2 minutes and 11 GB of the judge's
# process to parse (red team round 59). Sources are refused past `graders.compile.MAX_SOURCE_CHARS` (200,000); an
# adapter's wrap adds a few lines.
PARSE_LIMIT_CHARS = 1_000_000


def parse_python(source: str) -> ast.Module | None:
    """A submission's syntax tree, or None where the parser cannot take it: besides a syntax error, a source can
    make the parser itself fail (thousands of nested unary minus signs: MemoryError or RecursionError, raised in
    the judge's process, which took down an env's step and a whole batch: red team round 18), or be too long."""
    if len(source) > PARSE_LIMIT_CHARS:
        return None
    try:
        return parse_source(source)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None


def defined_triton_kernels(source: str) -> set[str]:
    """The Triton kernels `source` defines, by name: functions at any depth decorated with triton's jit,
    autotune or heuristics (called or not, under any import spelling), or wrapped by `triton.jit(fn)`.
    A kernel made some other way (exec, getattr) is not found, and so counts against the submission."""
    if (tree := parse_python(source)) is None:
        return set()
    aliases: dict[str, str] = {}  # local name -> dotted triton path
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name == "triton" or a.name.startswith("triton."):
                    aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else "triton"
        elif isinstance(node, ast.ImportFrom) and node.module and (node.module + ".").startswith("triton."):
            for a in node.names:
                aliases[a.asname or a.name] = f"{node.module}.{a.name}"

    def is_triton(expr: ast.expr) -> bool:
        expr = expr.func if isinstance(expr, ast.Call) else expr
        parts = []
        while isinstance(expr, ast.Attribute):
            parts.append(expr.attr)
            expr = expr.value
        if not isinstance(expr, ast.Name) or expr.id not in aliases:
            return False
        dotted = ".".join([aliases[expr.id], *reversed(parts)])
        return dotted.startswith("triton") and dotted.rsplit(".", 1)[-1] in _TRITON_DECORATORS

    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(map(is_triton, node.decorator_list)):
            names.add(node.name)
        elif isinstance(node, ast.Call) and is_triton(node.func) and node.args and isinstance(node.args[0], ast.Name):
            names.add(node.args[0].id)  # triton.jit(fn): the kernel keeps fn's name
    return names


def triton_kernel_names(source: str) -> set[str]:
    """The Triton kernels that count as the submission's: those its source defines, and those of the third-party
    packages it imports (a library's kernels called as-is, e.g. Liger-Kernel's: Triton compiles them in the worker
    as it compiles the submission's). Found by reading files, never by running them: the same set in the judge and
    in the worker. Inductor's kernels (torch.compile) are torch's, never the submission's."""
    names = defined_triton_kernels(source)
    for path in _imported_package_files(source):
        names |= _file_triton_kernels(path)
    return names


# A package's files read for its Triton kernels, at most: bounds the judge's reading of whatever a source imports.
PACKAGE_FILES_READ, PACKAGE_FILE_BYTES, PACKAGE_ENTRIES_VISITED = 4000, 2 << 20, 40_000


@functools.cache  # installed files do not change under a running judge
def _file_triton_kernels(path: Path) -> frozenset[str]:
    with contextlib.suppress(OSError, UnicodeDecodeError):
        if path.stat().st_size <= PACKAGE_FILE_BYTES and "triton" in (text := path.read_text()):
            return frozenset(defined_triton_kernels(text))
    return frozenset()


def _imported_package_files(source: str) -> list[Path]:
    """Every .py file of the third-party top-level packages `source` imports (`import a.b`, `from a.b import c`: all
    of package a), or the module's own file for a single-file module. The whole package, not the named module's
    file: a library's public imports re-export kernels defined elsewhere in it (red team round 89: `from
    liger_kernel.ops import LigerRMSNormFunction` found none of its kernels, and the honest call was flagged
    decoy_kernel and torch_kernel)."""
    if (tree := parse_python(source)) is None:
        return []
    tops: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            tops |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            tops.add(node.module.split(".")[0])
    skipped = set(NOT_THIRD_PARTY) | set(getattr(sys, "stdlib_module_names", ()))
    return [f for top in sorted(tops - skipped) for f in _package_files(top)]


@functools.cache  # per process: a step's imports cost a walk once (red team round 90: every step walked them all)
def _package_files(top: str) -> tuple[Path, ...]:
    """A top-level package's .py files, at most PACKAGE_FILES_READ of them (the walk stops there), located with
    `find_spec` on the top-level name only (which runs nothing)."""
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return ()
    # A namespace package (no origin) is any folder of that name on the path, the trainer's `data/` beside its
    # script among them (red team round 114: `if False: import data` walked 300,000 files of one): not read.
    if spec is None or spec.origin is None or spec.origin == "namespace":
        return ()
    if spec.submodule_search_locations:  # the walk bounded by what it visits, .py or not
        visited = (path for folder in spec.submodule_search_locations for path in Path(folder).rglob("*"))
        return tuple(f for f in itertools.islice(visited, PACKAGE_ENTRIES_VISITED) if f.suffix == ".py")[
            :PACKAGE_FILES_READ]
    return (Path(spec.origin),) if spec.origin.endswith(".py") else ()


# Beside each library the judge built: its kernels, one name per line (`graders.compile` writes it), or a line
# starting INSPECT_FAILED that says why they could not be listed.
KERNEL_NAMES, INSPECT_FAILED = "kernel-names.txt", "# not listed"


@functools.cache  # a library's path names its content (the build cache is keyed by source and flags)
def native_kernel_names(library) -> frozenset[str]:
    """The __global__ functions compiled into one of the judge's builds, listed beside the library
    (`graders.compile.KERNEL_NAMES`, by cuobjdump in the build's confinement), or read from it when not listed."""
    from pathlib import Path

    listed = Path(library).with_name(KERNEL_NAMES)
    if listed.exists():
        text = listed.read_text()
        if text.startswith(INSPECT_FAILED):
            raise RuntimeError(f"judge: the kernels a CUDA submission compiled cannot be told from library ones: "
                               f"{text.strip()[len(INSPECT_FAILED) + 2:]} at its build (install the CUDA toolkit's "
                               "cuobjdump, then clear the build cache)")
        return frozenset(text.split())
    return inspected_kernel_names(library)


@functools.cache
def inspected_kernel_names(library) -> frozenset[str]:
    """The __global__ functions of a library's embedded cubins, read by cuobjdump. The only way for a library a
    worker built (load_inline's, at its run): a list beside it is the submission's word (red team round 86: a
    module registered in sys.modules beside a planted list claimed torch's and cuFFT's kernels as its own)."""
    import subprocess

    from kerneldojo.sandbox.device import cuda_tool

    tool = cuda_tool("cuobjdump")
    if tool is None:  # without it every native kernel would look foreign, and the decoy check would fire
        raise RuntimeError("judge: cuobjdump not found, so the kernels a CUDA submission compiled cannot be told "
                           "from library ones; install the CUDA toolkit's cuobjdump or put it on PATH")
    return kernel_names_from_symbols(subprocess.run([tool, "-symbols", str(library)], capture_output=True,
                                                    text=True, timeout=60).stdout)


def kernel_names_from_symbols(listing: str) -> frozenset[str]:
    """The kernel entry points of `cuobjdump -symbols`'s listing, demangled to their identifiers."""
    return frozenset(_demangled_base(line.split()[-1]) for line in listing.splitlines()
                     if "STT_FUNC" in line and "STO_ENTRY" in line)


def _demangled_base(mangled: str) -> str:
    """The function's own identifier from an Itanium-mangled name, enough to match the profile:
    the last <length><id> of a nested name (N ... E), or the only one; 'L' marks internal linkage."""
    if not mangled.startswith("_Z"):
        return mangled
    rest = mangled[2:]
    nested = rest.startswith("N")
    rest, last = rest[nested:], mangled
    while m := re.match(r"L?(\d+)", rest):
        n, start = int(m.group(1)), m.end()
        last, rest = rest[start:start + n], rest[start + n:]
        if not nested or rest.startswith(("I", "E")):
            break
    return last
