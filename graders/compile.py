"""Compile step (in the judge): detect the language, then turn source into a file the sandbox can load.

Python/Triton source is written to a real file (Triton reads its kernels' source back from disk).
CUDA and CuTe source is built by `nvcc -shared` into a `.so`, once per dtype where the task's
signature uses `scalar_t`. Builds are cached under a key of everything that changes the binary.
"""

from __future__ import annotations

import ast
import concurrent.futures
import contextlib
import functools
import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from kerneldojo.graders.profile import INSPECT_FAILED, KERNEL_NAMES, kernel_names_from_symbols, parse_python
from kerneldojo.sandbox.device import cuda_tool
from kerneldojo.sandbox.protocol import Build, CompileError, read_regular_file
from kerneldojo.sandbox.worker.compiler import PROTECTIONS_PREFIX
from kerneldojo.sandbox.worker.environment import kept
from kerneldojo.tasks import C_SCALAR_TYPES, LANGUAGES, Task

NVCC_FLAGS = ("-shared", "-Xcompiler", "-fPIC", "-O3", "-std=c++17", "--expt-relaxed-constexpr", "-lineinfo")
# Export `solution` alone, and no GNU-unique symbols: template statics and kernels are otherwise
# bound process-wide, and a second library loaded into the same process would run the first's code.
EXPORT_FLAGS = ("-Xcompiler", "-fno-gnu-unique", "-Xlinker", "--version-script=exports.map")
EXPORTS_MAP = "{ global: solution; local: *; };\n"
# Forced includes do not shift the submission's line numbers, unlike a prepended prelude.
NVCC_INCLUDES = ("-include", "cuda_fp16.h", "-include", "cuda_bf16.h")
# The task's own declaration of the entry point, force-included into every build: a submission whose
# `extern "C" solution` has other parameter types is a compile error naming both declarations.
SIGNATURE_HEADER = "kd_signature.h"
# An honest build is bounded by the CPU time each compiler process (nvcc, cicc, ptxas) may use, which a
# loaded machine does not inflate; the wall clock only backs that up, generously, for a machine that
# is shared. A long build says, every PROGRESS_EVERY_S, what it is building and for how long so far.
# A submission's source, at most (the env's action space says the same): a kernel file is kilobytes.
MAX_SOURCE_CHARS = 200_000
COMPILE_CPU_S = 300
COMPILE_WALL_S = 1200
# A build's folder is dated by its start (nvcc writes in a folder below it), and a build may run COMPILE_WALL_S: a
# folder younger than that and a margin may still be building (red team round 68: one evicted mid-build failed).
RECENT_BUILD_S = COMPILE_WALL_S + 600.0
PROGRESS_EVERY_S = 20
log = logging.getLogger("kerneldojo.build")


class TransientCompileError(CompileError):
    """A build stopped by a limit, a signal or the host (the wall-clock backstop, the CPU-time limit, a SIGKILL from
    the memory cgroup, the host's OOM killer or outside, a full disk or build cache): not necessarily the source's
    fault, so the judge never stores it as a verdict (`judge.CACHED_STATUSES`; red team rounds 66 and 67)."""


def cache_dir() -> Path:
    root = os.environ.get("KERNELDOJO_CACHE") or Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    path = Path(root) / "kerneldojo" / "build"
    path.mkdir(parents=True, exist_ok=True)
    return path


# The build cache's bound (KERNELDOJO_BUILD_CACHE_BYTES, 20 GiB by default). Before a build the least recently used
# builds are removed down to the bound; those used in the last RECENT_BUILD_S may be building or loading in a worker
# and stay, and while they alone fill the bound no build starts (red team round 67: one service request of a few KB,
# distinct sources each linking a library of hundreds of MB, filled the host's disk, and an honest build then failed
# for good). The disk holds the bound plus the builds in flight (at most MAX_LIBRARY_BYTES a library).
BUILD_CACHE_BYTES = int(os.environ.get("KERNELDOJO_BUILD_CACHE_BYTES") or 20 << 30)


def make_room() -> None:
    """The build cache down to its bound, or a TransientCompileError that says why it cannot be."""
    root = cache_dir()
    builds = []  # (last use, bytes, folder): a source's folder, an extension's
    for parent in (root, root / "extensions"):
        with contextlib.suppress(FileNotFoundError):
            for entry in os.scandir(parent):
                if entry.is_dir(follow_symlinks=False) and entry.path != str(root / "extensions"):
                    builds.append((entry.stat(follow_symlinks=False).st_mtime, _folder_bytes(entry.path), entry.path))
    total, now = sum(size for _, size, _ in builds), time.time()
    for used, size, folder in sorted(builds):
        if total <= BUILD_CACHE_BYTES or now - used < RECENT_BUILD_S:
            break
        shutil.rmtree(folder, ignore_errors=True)
        total -= size
    if total > BUILD_CACHE_BYTES:
        raise TransientCompileError(
            f"judge: the build cache ({root}) holds {total >> 20} MiB of builds used in the last "
            f"{RECENT_BUILD_S / 60:.0f} minutes, over its bound of {BUILD_CACHE_BYTES >> 20} MiB "
            "(KERNELDOJO_BUILD_CACHE_BYTES): submit it again later")


def _folder_bytes(path: str) -> int:
    return sum(os.lstat(os.path.join(folder, name)).st_size for folder, _, names in os.walk(path) for name in names)


def missing_builds(libraries: dict) -> list:
    """The keys of `libraries` not built yet (a library and its kernel list); the others are reused, so the youngest
    to be evicted (`make_room`)."""
    missing = []
    for key, library in libraries.items():
        if not (library.exists() and library.with_name(KERNEL_NAMES).exists()):
            missing.append(key)
        else:
            with contextlib.suppress(OSError):
                os.utime(library.parent)
    return missing


def detect_language(source: str) -> str:
    """Guess the language of a submission from its text. Valid Python with Python's signs is Python whatever its
    strings hold (a KernelBench solution carries its CUDA in a load_inline string)."""
    if re.search(r"^[ \t]*(import|from|def)\s", source, re.M) and parse_python(source) is not None:
        return "triton" if re.search(r"^[ \t]*(import|from)[ \t]+triton\b", source, re.M) else "python"
    if re.search(r"#include\s*[<\"](cute|cutlass)/", source):
        return "cute"
    if re.search(r"__global__|extern\s+\"C\"|#include\s*[<\"]cuda", source):
        return "cuda"
    if re.search(r"^[ \t]*(import|from)[ \t]+triton\b", source, re.M):
        return "triton"
    return "python"


def language_mismatch(source: str, language: str) -> str | None:
    """Why `source` cannot be `language` (CUDA sent as Triton, Python sent as CUDA, CuTe as CUDA), or None.

    Only a clear sign counts: CUDA or CuTe includes and `__global__`, or Python imports and `def`."""
    detected = detect_language(source)
    if detected == "python" and not re.search(r"^[ \t]*(import|from|def)\s", source, re.M):
        return None  # no sign of Python either: let the compiler speak
    native = {"cuda", "cute"}
    if (language in native) == (detected in native) and not (language == "cuda" and detected == "cute"):
        return None
    return (f"this env takes {language}; the source looks like {detected}: send {language} source, or make the env "
            f"(or call evaluate) with language={detected!r}, or None to detect it per submission")


class LanguageError(ValueError):
    """A language the judge does not know or the task does not take: the caller's (or the agent's) mistake."""


def check_language(task: Task, language: str) -> None:
    if language not in LANGUAGES:
        raise LanguageError(f"language {language!r} is not one of {', '.join(LANGUAGES)}")
    if not task.allows(language):
        raise LanguageError(
            f"task {task.id!r} accepts {', '.join(task.spec.languages)}, not {language!r}; "
            f"pass language= one of those"
        )


def source_problem(source: str) -> str | None:
    """Why `source` cannot be a submission's text at all, or None: too long, or holding a character no compiler
    takes and no UTF-8 file or text column can hold (a NUL byte stopped every later write of the service's
    PostgreSQL store, red team round 23; a lone surrogate raised out of `Judge.evaluate`, round 57)."""
    if len(source) > MAX_SOURCE_CHARS:
        return (f"the source has {len(source)} characters, more than the {MAX_SOURCE_CHARS} a submission may have: "
                "send the kernel file alone")
    if bad := _UNENCODABLE.search(source):
        return (f"the source holds {'a NUL byte' if bad[0] == chr(0) else 'a lone surrogate'} "
                f"(U+{ord(bad[0]):04X}): send it as UTF-8 text")
    return None


_UNENCODABLE = re.compile("[\0\ud800-\udfff]")  # one scan in C: the rule runs at every entry of a step


def compile_submission(task: Task, source: str, language: str, arch: str) -> Build:
    """Write or build the submission. `arch` is e.g. '90a' (the GPU's, or the CPU-mode default)."""
    if problem := source_problem(source):
        raise CompileError(problem)
    if mismatch := language_mismatch(source, language):
        raise CompileError(mismatch)
    if language in ("triton", "python"):
        key = _digest(language, source)
        folder = cache_dir() / key
        folder.mkdir(exist_ok=True)
        path = folder / "submission.py"
        write_atomically(path, source)
        # The parser only: compile() would run CPython's constant folder on the submission's text in the judge's
        # process (red team round 112: `'😀'*4096 + '😀'*4096 + ...`, 18 kB, folded into gigabytes, and the OOM
        # killer ended the judge with every step in it). What only the compiler finds, the worker's import reports.
        try:
            ast.parse(source, "submission.py")
        except SyntaxError as e:
            where = f"submission.py, line {e.lineno}"
            raise CompileError(f"{where}: SyntaxError: {e.msg}\n    {(e.text or '').rstrip()}") from None
        except (MemoryError, RecursionError) as e:  # the parser itself gave up (`profile.parse_python`)
            raise CompileError(f"submission.py: Python's parser cannot take this source ({type(e).__name__}: "
                               "an expression nested thousands deep?)") from None
        return Build(language, path)
    return _build_native(task, source, language, arch)


def _build_native(task: Task, source: str, language: str, arch: str) -> Build:
    nvcc = cuda_tool("nvcc")
    if nvcc is None:
        raise CompileError("judge: nvcc not found; install the CUDA toolkit or put nvcc on PATH")
    uses_scalar_t = "scalar_t" in task.spec.cuda.signature
    dtypes = task.spec.dtypes if uses_scalar_t else task.spec.dtypes[:1]
    gencode = f"-gencode=arch=compute_{arch},code=sm_{arch}"
    base_flags = [*NVCC_FLAGS, *EXPORT_FLAGS, gencode, *NVCC_INCLUDES]
    toolchain = [nvcc_version(nvcc)]
    if language == "cute":
        base_flags += ["-I", str(cutlass_include_dir())]
        toolchain.append(cutlass_version())
    header = signature_header(task)
    builds = {}  # dtype -> (flags, library): reused by content hash, else built
    for dtype in dtypes:
        flags = [*base_flags, f"-Dscalar_t={C_SCALAR_TYPES[dtype]}", f"-DKD_DTYPE_{dtype.upper()}",
                 "-include", SIGNATURE_HEADER]
        key = _digest(language, source, header, *flags, *toolchain)
        builds[dtype] = flags, cache_dir() / key / "submission.so"
    missing = missing_builds({dtype: library for dtype, (_, library) in builds.items()})
    if missing:
        make_room()

    def build(dtype: str) -> None:
        flags, library = builds[dtype]
        extra_ro = (str(cutlass_include_dir()),) if language == "cute" else ()  # CUTLASS_INCLUDE may lie anywhere
        _run_nvcc(nvcc, source, flags, library, f"{task.id} ({language}, {dtype})", header, extra_ro)

    # A file's dtypes build at once (nvcc is one process per build, mostly single-threaded); the first
    # dtype's error, in the task's order, is the one reported.
    if len(missing) > 1:
        with concurrent.futures.ThreadPoolExecutor(len(missing), thread_name_prefix="kerneldojo-nvcc") as pool:
            for future in [pool.submit(build, dtype) for dtype in missing]:
                future.result()
    elif missing:
        build(missing[0])
    libraries = {dtype: library for dtype, (_, library) in builds.items()}
    last = next(reversed(libraries.values()))
    return Build(language, last.with_name("submission.cu"), libraries, cached=not missing)


def write_atomically(path: Path, text: str) -> None:
    """Readers never see half a file: concurrent builds of one source (threads of a pool, other judges), or
    a judge killed mid-write (the old file stays)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def signature_header(task: Task) -> str:
    """A header declaring the task's `extern "C" solution`, with what its types need."""
    signature = task.spec.cuda.signature.strip().rstrip(";")
    fp8 = "#include <cuda_fp8.h>\n" if "fp8" in signature else ""
    return (f"// generated by kerneldojo from task {task.id!r}: the entry point the judge calls\n#pragma once\n"
            f"#include <cstdint>\n#include <cuda_runtime.h>\n#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n{fp8}"
            f'extern "C" {signature};\n')


def native_checks_note(arch: str) -> str:
    """What CPU mode verified of a CUDA/CuTe submission, and what it could not."""
    exports = "the library exports `solution`" if shutil.which("nm") else (
        "not whether the library exports `solution` (no `nm` here)")
    return (f"compiled for sm_{arch}; not run: CPU mode has no GPU. Verified: it compiles with the task's declaration "
            f"of `extern \"C\" solution` (so its parameter types match the task's signature), and {exports}. "
            "Not verified: that it launches, that its outputs are right, or its speed (run it on a GPU)")


def _check_exports(listed: str) -> None:
    """The built library must export `solution`: `nm -D --defined-only`'s listing of it (made in the build's
    confinement, `INSPECT`), never by loading it here."""
    if listed.startswith(INSPECT_FAILED):
        return  # nm could not read it; the worker's load says what is missing
    if "solution" not in {ln.split()[-1] for ln in listed.splitlines() if ln.strip()}:
        raise CompileError('the built library does not export `solution`: define it as extern "C" with the task\'s '
                           "signature (a C++ function of that name is mangled, and an overload is another function)")


# What the judge needs to know of a built library is read by nm and cuobjdump in the build's own confinement,
# right after nvcc (one sandbox, no second start-up): they parse a binary the submission shaped, so their bugs
# must not run in the judge's process. The judge reads only their text, capped.
EXPORTS, SYMBOLS = "exports.txt", "symbols.txt"
INSPECT_OUTPUT_BYTES = 4 << 20
# `/bin/sh -c INSPECT BUILD-COMMAND...` with KD_LIBRARY (the built file), KD_NM and KD_CUOBJDUMP (empty: not run).
INSPECT = ('"$0" "$@" || exit; '
           'if [ -n "$KD_NM" ]; then "$KD_NM" -D --defined-only "$KD_LIBRARY" >exports.txt 2>&1 '
           '|| echo "' + INSPECT_FAILED + '" >exports.txt; fi; '
           'if [ -n "$KD_CUOBJDUMP" ]; then "$KD_CUOBJDUMP" -symbols "$KD_LIBRARY" >symbols.txt 2>&1 '
           '|| grep -q "does not contain device code" symbols.txt '  # a C++-only extension: no kernels, listed so
           '|| echo "' + INSPECT_FAILED + '" >symbols.txt; fi')


def inspected(library: str, nm: bool = True) -> tuple[dict[str, str], tuple[str, ...]]:
    """The environment INSPECT reads for `library`, and the tools' real paths (for the build's read-only list)."""
    tools = {"KD_NM": shutil.which("nm") if nm else None, "KD_CUOBJDUMP": cuda_tool("cuobjdump")}
    return ({"KD_LIBRARY": library, **{k: v or "" for k, v in tools.items()}},
            tuple(os.path.realpath(t) for t in tools.values() if t))


def _inspection(folder: Path, name: str) -> str | None:
    """One listing the confined build left (`INSPECT`), as untrusted text: a regular file, capped."""
    if not os.path.lexists(folder / name):
        return None
    try:
        return read_regular_file(folder / name, INSPECT_OUTPUT_BYTES).decode(errors="replace")
    except ValueError as e:
        raise CompileError(f"the build's {name} is not a regular file of at most {INSPECT_OUTPUT_BYTES >> 20} MiB "
                           f"({e})") from None


def store_kernel_names(folder: Path, library: Path) -> None:
    """The __global__ functions of the library, one per line beside it (`graders.profile.native_kernel_names`
    reads them); written before the library lands, so a cached library always has them."""
    symbols = _inspection(folder, SYMBOLS)
    if symbols is None or symbols.startswith(INSPECT_FAILED):
        text = f"{INSPECT_FAILED}: cuobjdump {'could not read the library' if symbols else 'not found'}\n"
    else:
        text = "".join(f"{name}\n" for name in sorted(kernel_names_from_symbols(symbols)))
    write_atomically(library.with_name(KERNEL_NAMES), text)


def _run_nvcc(nvcc: str, source: str, flags: list[str], library: Path, what: str, header: str,
              extra_ro: tuple[str, ...] = ()) -> None:
    library.parent.mkdir(parents=True, exist_ok=True)
    inputs = {SIGNATURE_HEADER: header, "submission.cu": source, "exports.map": EXPORTS_MAP}
    for name, text in inputs.items():  # beside the library: what `Build` names, and `kerneldojo show` reads
        write_atomically(library.with_name(name), text)
    # nvcc runs confined (`sandbox/worker/compiler.py`), in a folder of its own that holds only its inputs: an
    # `#include` reaches the worker's allowlisted root, not the judge's files, nor the other builds in the cache.
    with build_folder() as tmp:
        for name, text in inputs.items():
            (Path(tmp) / name).write_text(text)
        env, tools = inspected("submission.so")
        returncode, output = run_confined("/bin/sh", ["-c", INSPECT, nvcc, *flags, "submission.cu", "-o",
                                                      "submission.so"], Path(tmp), what, "nvcc",
                                          (*extra_ro, os.path.realpath(nvcc), *tools), env)
        if returncode != 0:
            message = _clean_nvcc_output(output, Path(tmp))
            if "solution" in message:  # e.g. the submission's declaration conflicts with the task's
                message += f"\nthe task's entry point (kerneldojo show TASK): {header.splitlines()[-1]}"
            raise CompileError(message)
        if (exports := _inspection(Path(tmp), EXPORTS)) is not None:
            _check_exports(exports)
        store_kernel_names(Path(tmp), library)
        copy_out(Path(tmp) / "submission.so", library)


def build_folder() -> tempfile.TemporaryDirectory:
    """A confined build's only writable folder: in the judge's temporary folder, as a worker's scratch is, never
    beside the library in the cache. A cache inside an allowlisted tree (a venv, a package folder) put the build's
    folder inside the root it is given, which cannot then be built, and the build ran with the judge's whole file
    system in view (red team round 95: an `#include` of /etc/shadow came back in the compile error)."""
    return tempfile.TemporaryDirectory(prefix="kerneldojo-build-")


_KILLED_LINE = re.compile(r"^(nvcc error\s*: '[\w.+-]+' died due to signal (9|24)\b|[\w./+-]+: fatal error: Killed "
                          r"signal terminated program|collect2: fatal error: .* terminated with signal (9|24)\b)",
                          re.MULTILINE)


def _disk_nearly_full(folder: Path) -> bool:
    """The build's file system, looked at after it failed: the output's "No space left" may be the source's text."""
    try:
        return shutil.disk_usage(folder).free < DISK_NEARLY_FULL_BYTES
    except OSError:
        return True


DISK_NEARLY_FULL_BYTES = 1 << 30


def run_confined(tool: str, args: list[str], folder: Path, what: str, compiler: str,
                 extra_ro: tuple[str, ...] = (), extra_env: dict[str, str] | None = None) -> tuple[int, str]:
    """`tool args` run confined in `folder` (`confined`): its exit status and output (stdout and stderr), the
    confinement it had logged; `extra_env` joins the worker's allowlisted environment. Past COMPILE_WALL_S it is
    killed, and a compiler process stopped past COMPILE_CPU_S or by any SIGKILL, or short of disk, fails too
    (TransientCompileError). `what` and `compiler` name the build in messages."""
    from kerneldojo.sandbox.isolation import Cgroup
    from kerneldojo.sandbox.protocol import MEMORY_CAP_BYTES, PROCESSES_CAP

    # A build runs code of the submission's (a load_inline flag reaches ninja's shell; a compiler is a large
    # attack surface): it gets a worker's environment (the allowlist, no secret of the judge's) and its limits (a
    # cgroup of MEMORY_CAP_BYTES and PROCESSES_CAP for all its processes, where the judge can make one).
    cgroup = Cgroup(MEMORY_CAP_BYTES, PROCESSES_CAP)
    try:
        environment = {**kept(dict(os.environ)), **(extra_env or {})}
        proc = subprocess.Popen(confined(tool, args, folder, extra_ro, cgroup), cwd=folder, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, env=environment)
        started = time.monotonic()
        while True:
            try:
                output, _ = proc.communicate(timeout=PROGRESS_EVERY_S)
                break
            except subprocess.TimeoutExpired:
                elapsed = time.monotonic() - started
                if elapsed > COMPILE_WALL_S:
                    proc.kill()  # the processes below it die with it; the tool is pid 1 of its pid namespace
                    proc.communicate()
                    raise TransientCompileError(
                        f"{compiler} ran past {COMPILE_WALL_S} s of wall-clock time building {what} (the machine may "
                        "be overloaded); simplify the templates or unrolling") from None
                log.info("building %s with %s (%s): %.0f s so far", what, compiler, folder, elapsed)
        notes, own_memory = cgroup.notes(), cgroup.oom_killed()
    finally:
        cgroup.kill()
        cgroup.remove()
    if proc.returncode and notes:
        output += "".join(f"\n{note.replace('the worker', 'the build')}" for note in notes)
    output = _log_protections(output)
    # SIGKILL, SIGXCPU: as a signal, or as 128 + it (pid 1 of the build's pid namespace mirrors it so)
    # ... unless the build's own memory limit stopped it: the source's doing, whatever the machine's load
    # In the output, only a compiler driver's own line counts (nvcc's "'cicc' died due to signal 9", gcc's "Killed
    # signal terminated program"), never a diagnostic, which quotes the source (red team round 118: `#error killed by
    # signal 9` made every resubmission a transient error, rebuilt each time, never stored)
    killed = proc.returncode in (-9, -24, 137, 152) or (proc.returncode and re.search(_KILLED_LINE, output))
    if killed and not own_memory:
        raise TransientCompileError(f"{compiler} was stopped building {what}: a compiler process used more than "
                                    f"{COMPILE_CPU_S} s of CPU time or was killed (memory, or the machine's); simplify "
                                    "the templates or unrolling")
    if proc.returncode and "No space left on device" in output and _disk_nearly_full(folder):  # the host's (round 67)
        raise TransientCompileError(f"{compiler} could not build {what}: the judge's disk is full (No space left on "
                                    "device); submit it again later")
    return proc.returncode, output


# The confined compiler's entry point, run by its path (`sandbox/worker/compiler.py` imports no torch).
COMPILER_ENTRY = Path(__file__).resolve().parent.parent / "sandbox" / "worker" / "compiler.py"
MAX_LIBRARY_BYTES = 512 << 20


def confined(tool: str, args: list[str], folder: Path, extra_ro: tuple[str, ...] = (), cgroup=None) -> list[str]:
    """The command line that runs `tool args` confined as a worker is, `folder` its only writable path, in `cgroup`
    (a `sandbox.isolation.Cgroup`) where given."""
    import sys

    from kerneldojo.sandbox.isolation import build_plan

    plan = json.dumps(build_plan(folder, (*extra_ro, os.path.realpath(tool)), cgroup))
    return [sys.executable, "-I", str(COMPILER_ENTRY), plan, str(COMPILE_CPU_S), str(MAX_LIBRARY_BYTES), "--", tool,
            *args]


def copy_out(built: Path, library: Path) -> None:
    """The library the confined compiler left, into the cache: a regular file (no symlink followed, no FIFO
    blocking), at most MAX_LIBRARY_BYTES, written once under its content-addressed name (a concurrent build of
    the same key keeps the first)."""
    if not os.path.lexists(built):
        raise CompileError("the build left no library")
    try:
        data = read_regular_file(built, MAX_LIBRARY_BYTES)
    except ValueError as e:
        raise CompileError(f"the built library is not a regular file of at most {MAX_LIBRARY_BYTES >> 20} MiB "
                           f"({e})") from None
    tmp = library.with_name(f".{library.name}.{os.getpid()}.{threading.get_ident()}")
    tmp.write_bytes(data)
    try:
        os.link(tmp, library)
    except FileExistsError:
        pass
    finally:
        tmp.unlink()


def _log_protections(output: str) -> str:
    """The confined compiler's first line says what it could set up: logged where something is missing."""
    first, _, rest = output.partition("\n")
    if not first.startswith(PROTECTIONS_PREFIX):
        return output
    with contextlib.suppress(ValueError):
        missing = [f"{k}: {v}" for k, v in json.loads(first[len(PROTECTIONS_PREFIX):]).items()  # rlimits only:
                   if str(v).startswith(("unavailable", "off")) and not k.endswith("_limit")]  # no cgroup for a build
        if missing:
            log.warning("the compiler ran with less confinement than a worker: %s", "; ".join(missing))
        # A build folder inside what the root keeps is the judge's misconfiguration, not a kernel's limit: its output
        # may quote any file of the judge's, so none of it goes back (red team round 95).
        if any(m.startswith("filesystem") and "allowlisted" in m for m in missing):
            raise TransientCompileError("the build could not be confined: its folder lies inside a folder the sandbox "
                                        "keeps (the judge's temporary folder or build cache inside a venv or package "
                                        "folder?); the judge must set TMPDIR outside them")
    return rest


def _clean_nvcc_output(text: str, folder: Path) -> str:
    text = text.replace(f"{folder}/", "")
    lines = [ln for ln in text.splitlines() if ln.strip() and "Compilation terminated" not in ln]
    errors = [ln for ln in lines if "error" in ln]
    head = "\n".join(lines[:40])
    return head if errors else f"nvcc failed:\n{head}"


def _digest(*parts: str) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:24]


@functools.cache
def nvcc_version(nvcc: str | None = None) -> str | None:
    nvcc = nvcc or cuda_tool("nvcc")
    if nvcc is None:
        return None
    out = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout
    match = re.search(r"release ([\d.]+), V([\d.]+)", out)
    return match.group(2) if match else out.strip().splitlines()[-1]


@functools.cache
def cutlass_version() -> str:
    """Identifies the CuTe headers for the build cache: their version.h, or the package version."""
    header = cutlass_include_dir() / "cutlass" / "version.h"
    if header.exists():
        return hashlib.sha256(header.read_bytes()).hexdigest()[:16]
    from importlib.metadata import PackageNotFoundError, version

    try:
        return "nvidia-cutlass " + version("nvidia-cutlass")
    except PackageNotFoundError:
        return "unknown"


@functools.cache
def cutlass_include_dir() -> Path:
    """CUTLASS/CuTe headers: $CUTLASS_INCLUDE, else the `nvidia-cutlass` package's copy."""
    if os.environ.get("CUTLASS_INCLUDE"):
        return Path(os.environ["CUTLASS_INCLUDE"])
    try:
        import cutlass_library
    except ImportError:
        raise CompileError(
            "judge: CuTe headers not found; `pip install nvidia-cutlass` or set CUTLASS_INCLUDE"
        ) from None
    return Path(cutlass_library.__file__).parent / "source" / "include"
