"""`load_inline` extensions of adapted KernelBench solutions, built by the judge ahead of the run and cached by
content (a cold `load_inline` build of one small CUDA kernel took 59 s on an H100).

The calls are found in the solution's text without running it (`runtime.load_inline_calls`); each is keyed
by what its binary depends on (`runtime.extension_key`: sources, functions, flags, torch and CUDA versions,
the GPU's arch) and named `kd_<key>` (`runtime.extension_name`), as the worker's prelude names it. A key
with no library in the cache is built by torch's own `load_inline`, in a Python process confined as the
worker is (`sandbox/worker/extension_build.py` under `sandbox/worker/compiler.py`: its folder its only
writable path, no network, no GPU), which builds without importing the result. The judge copies the library
out (`compile.copy_out`: no link followed, size-capped, written once under its key), so the cache holds only
what a confined build of that key's text produced: no worker ever writes to it. Several keys build at once,
one confined build per core. The libraries travel with the submission (`Build.extensions`); the worker's
`load_inline` imports a prebuilt one by its name and builds only what was not prebuilt (a call built at
run time from computed arguments).
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import re
import sys
from pathlib import Path

import torch

from kerneldojo.adapters import runtime
from kerneldojo.graders.compile import (
    INSPECT,
    build_folder,
    cache_dir,
    copy_out,
    inspected,
    make_room,
    missing_builds,
    run_confined,
    store_kernel_names,
)
from kerneldojo.sandbox.protocol import CompileError

BUILD_ENTRY = Path(__file__).resolve().parent.parent / "sandbox" / "worker" / "extension_build.py"
MAX_MESSAGE_CHARS = 4000


def build_extensions(sources: list[str], arch: str | None = None, strict: bool = True
                     ) -> tuple[dict[str, Path], list[str]]:  # fmt: skip
    """The statically found load_inline calls of `sources`, built where not cached: (module name -> library,
    the names built now). `arch` as `runtime.device_arch` gives it (the worker keys its calls with the same).
    The first failure, in the sources' order, is a CompileError with the compiler's message; not `strict` (a
    batch building ahead), failures are left out (not cached: the solution's own compile phase says why)."""
    arch = arch or runtime.device_arch()
    wanted: dict[str, tuple[str, dict]] = {}  # name -> (key, arguments)
    for source in sources:
        for call in runtime.load_inline_calls(source):
            if call.get("is_python_module", True) is not True or call.get("is_standalone"):
                continue  # a torch.ops library or an executable: built by the worker, as before
            if not runtime.buildable_here(call):
                continue  # not on this judge: the worker's call says why, if the solution makes it
            if refused := refused_flag(call):
                if strict:
                    raise CompileError(refused)
                continue
            key = runtime.extension_key(call, torch.__version__, torch.version.cuda, arch)
            wanted[runtime.extension_name(call, key)] = key, call
    libraries = {name: cache_dir() / "extensions" / key / f"{name}.so" for name, (key, _) in wanted.items()}
    missing = missing_builds(libraries)
    if missing:
        cores = len(os.sched_getaffinity(0))
        jobs = max(1, cores // len(missing))  # ninja's jobs in each build: the cores shared out
        with concurrent.futures.ThreadPoolExecutor(min(cores, len(missing)), "kerneldojo-load-inline") as pool:
            futures = [pool.submit(_build, name, wanted[name][1], libraries[name], arch, jobs) for name in missing]
            for future in futures:
                try:
                    future.result()
                except CompileError:
                    if strict:
                        raise
    return {n: lib for n, lib in libraries.items() if lib.exists()}, missing


# load_inline joins a flag argument's entries with spaces into build.ninja, unquoted, and its commands run through
# `/bin/sh -c`; gcc, nvcc and ld take flags that run programs or read files as instructions (-wrapper, -B and its
# --prefix, -specs, -fplugin, -ccbin, --use-ld; -MF writing a specs file that -B then finds: red team rounds 9, 22,
# 74). A list of such flags is a race the judge loses, so flags are an allowlist: what an honest extension asks of
# its compilers (optimisation, debug info, standards, warnings, macros, fast math, target architectures, register
# limits, libraries by name), none that names a file, a path or a program. The words checked are the ones the shell
# gets: entries split at spaces (an empty entry adds none; other whitespace would break build.ninja's lines), a
# flag's value either after `=` or as the next word. An include path is a relative one inside the build folder.
_ARCH = r"(sm|compute)_\d+[af]?"
_HOST_FLAG = (r"-O[0-3sgz]?|-Ofast|-g[0-3]?|-w|-W(no-)?(error|all|extra|pedantic|[a-z]+(-[a-z0-9+]+)*)(=\w+)?"
              r"|-D[A-Za-z_]\w*(=[\w.+-]*)?|-U[A-Za-z_]\w*|-pthread|-fPIC|-fpic|-ftemplate-depth=\d+"
              r"|-f(no-)?(fast-math|unroll-loops|openmp|omit-frame-pointer|strict-aliasing|tree-vectorize|exceptions"
              r"|finite-math-only|rtti|math-errno|visibility-inlines-hidden)|-fvisibility=(hidden|default)"
              r"|-m(arch|tune)=[\w-]+|-m(no-)?(avx\w*|fma|sse[\w.]*|f16c|bmi2?|popcnt|amx[\w-]*)")
_PTXAS_FLAG = (r"-O[0-3]|-v|--verbose|--?allow-expensive-optimizations(=(true|false))?|--?warn-on-spills|-warn-spills"
               r"|-warn-lmem-usage|--?maxrregcount=\d+|-dlcm=(ca|cg|cs)|-dscm=(wb|cg|cs|wt)"
               r"|--def-load-cache=(ca|cg|cs|lu|cv)|--def-store-cache=(wb|cg|cs|wt)")
_LINK_FLAG = r"-l[\w+.-]+|-Wl,(-O[0-3]|--as-needed|--no-as-needed|-Bsymbolic(-functions)?|--no-undefined)"
_DEVICE_FLAG = (r"--?use_fast_math|--?use-fast-math|--?expt-relaxed-constexpr|--?expt-extended-lambda"
                r"|--?extended-lambda|-lineinfo|--?generate-line-info|-G|--?resource-usage|-res-usage"
                r"|--?restrict|-t\d+|--?disable-warnings|--?Wno-deprecated-gpu-targets|--?extra-device-vectorization")
_STD = r"(c|gnu)(\+\+)?\d\w"
_BOOL = r"true|false"
_GENCODE = rf"arch=compute_\d+[af]?,code=(\[?{_ARCH}(,{_ARCH})*\]?|{_ARCH})"
# Flags whose value is the rest after `=` or the next word, each spelling of a flag beside its others: the value's rule.
_VALUES = {
    ("-std", "--std"): _STD, ("-t", "--threads"): r"\d+", ("-maxrregcount", "--maxrregcount"): r"\d+",
    ("-ftz", "--ftz", "-prec-div", "--prec-div", "-prec-sqrt", "--prec-sqrt", "-fmad", "--fmad"): _BOOL,
    ("-rdc", "--relocatable-device-code"): _BOOL, ("--default-stream",): r"per-thread|legacy|null",
    ("-Xcudafe",): r"(--diag_suppress=[\w,]+|--diag_warning=[\w,]+|--display_error_number)",
    ("-arch", "--gpu-architecture"): rf"{_ARCH}|native|all|all-major", ("-code", "--gpu-code"): rf"{_ARCH}(,{_ARCH})*",
    ("-gencode", "--generate-code"): _GENCODE,
    ("-Xptxas", "--ptxas-options"): rf"({_PTXAS_FLAG})(,({_PTXAS_FLAG}))*",
    ("-Xcompiler", "--compiler-options"): rf"({_HOST_FLAG})(,({_HOST_FLAG}))*",
}
_VALUED = {flag: rule for flags, rule in _VALUES.items() for flag in flags}
FLAG = re.compile(f"{_HOST_FLAG}|{_LINK_FLAG}|{_DEVICE_FLAG}")
INCLUDE_PATH = re.compile(r"(?!/)(?!.*(^|/)\.\.(/|$))[\w.+-]+(/[\w.+-]+)*/?")
FLAG_ARGUMENTS = ("extra_cflags", "extra_cuda_cflags", "extra_ldflags")


def refused_word(text: str) -> str | None:
    """The first word of a flag entry the judge does not pass to a build, or None."""
    if re.search(r"[^\S ]", text):
        return text
    words = iter(w for w in text.split(" ") if w)  # consumed in order: popping a list's head was quadratic
    for word in words:
        flag, equals, value = word.partition("=")
        if flag in _VALUED:
            if not equals:
                value = next(words, "")
            if not re.fullmatch(_VALUED[flag], value):
                return f"{word} {value}".strip() if not equals else word
        elif not FLAG.fullmatch(word):
            return word
    return None


def refused_flag(call: dict) -> str | None:
    """Why a load_inline call's flags cannot be built by the judge (naming the flag), or None."""
    # Flags of another kind (extra_sycl_cflags, whatever torch adds next) go to a build this allowlist never read
    # (red team round 80): refused whole.
    unknown = sorted(a for a, v in call.items() if a.startswith("extra_") and v
                     and a not in (*FLAG_ARGUMENTS, "extra_include_paths"))
    if unknown:
        return (f"load_inline: {unknown[0]} is not an argument the judge passes to a build; flags go in "
                f"{', '.join(FLAG_ARGUMENTS)} and headers' folders in extra_include_paths")
    for argument in (*FLAG_ARGUMENTS, "extra_include_paths"):
        values = call.get(argument) or []
        entries = [values] if isinstance(values, str) else list(values)
        if argument == "extra_include_paths":
            refused = next((str(v) for v in entries if not INCLUDE_PATH.fullmatch(str(v))), None)
        else:  # a value may be the next entry: the words of the whole argument, as build.ninja has them
            refused = refused_word(" ".join(str(v) for v in entries))
        if refused is not None:
            kind = "a relative path inside the build folder" if argument == "extra_include_paths" else (
                "a compiler flag the judge knows: -O3, -g, -lineinfo, -std=c++17, -DNAME=VALUE, -UNAME, -W..., "
                "--use_fast_math, --expt-relaxed-constexpr, -arch=sm_90a (or -arch sm_90a), -gencode "
                "arch=compute_90a,code=sm_90a, -maxrregcount=64, -Xptxas -v, -Xcompiler -fopenmp, -march=native, "
                "-lNAME, -Wl,-O1 (no paths, files, programs or shell syntax; docs/interop.md lists them)")
            return (f"load_inline: {argument} holds {refused[:200]!r}, which the judge does not pass to a build: "
                    f"each must be {kind}")
    return None


def _build(name: str, arguments: dict, library: Path, arch: str, jobs: int) -> None:
    make_room()  # a TransientCompileError: this extension is left out where not `strict` (red team round 68)
    library.parent.mkdir(parents=True, exist_ok=True)
    with build_folder() as tmp:
        folder = Path(tmp)
        call = {"arguments": {**arguments, "name": name, "build_directory": str(folder), "verbose": False},
                "environ": _environ(arch, jobs)}
        (folder / "call.json").write_text(json.dumps(call))
        # Its kernels are listed by cuobjdump in the same confinement (`compile.INSPECT`): the worker reads the list
        # (it cannot run cuobjdump itself: without the list, every kernel of the extension looked foreign).
        env, tools = inspected(f"{name}.so", nm=False)
        returncode, output = run_confined("/bin/sh", ["-c", INSPECT, sys.executable, "-I", str(BUILD_ENTRY),
                                                      "call.json"], folder, f"load_inline extension {name}",
                                          "the load_inline build", tools, env)
        if returncode != 0:
            raise CompileError(clean_build_output(output, folder))
        store_kernel_names(folder, library)
        copy_out(folder / f"{name}.so", library)


def _environ(arch: str, jobs: int) -> dict[str, str]:
    """What torch's build reads: the CUDA toolkit (a CPU-only torch finds none itself) and the arch to build for
    (the confined build sees no GPU: `sm_90` -> `9.0+PTX`, what torch picks on that GPU)."""
    from torch.utils import cpp_extension

    # ninja: the one on PATH, or beside this Python (`pip install ninja`, a venv not activated)
    env = {"MAX_JOBS": str(jobs), "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH') or '/usr/bin:/bin'}"}
    home = cpp_extension.CUDA_HOME or os.environ.get("CUDA_HOME") or next(
        (p for p in ("/usr/local/cuda",) if os.path.isdir(p)), None)
    if home:
        env["CUDA_HOME"] = home
    if arch.startswith("sm_") and arch[3:].isdigit():
        env["TORCH_CUDA_ARCH_LIST"] = f"{arch[3:-1]}.{arch[-1]}+PTX"
    elif arch != "none":
        env["TORCH_CUDA_ARCH_LIST"] = arch
    return env


def clean_build_output(output: str, folder: Path) -> str:
    """torch's build error as a user reads it: paths relative to the build folder, ninja's compiler command lines
    (hundreds of include flags) left out, the compiler's own lines kept, capped."""
    text = output.replace(f"{folder}/", "").replace(str(folder), ".")
    text = re.sub(r"(Error building extension '\w+'):.*", r"\1:", text)  # then ninja's first command line
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith(("FAILED: ", "[", "ninja: "))
             and not re.search(r"\s-(isystem|I|c)\s", ln)]
    message = "\n".join(lines)
    if len(message) > MAX_MESSAGE_CHARS:
        message = message[:MAX_MESSAGE_CHARS] + f"\n[... {len(message) - MAX_MESSAGE_CHARS} more characters]"
    return f"the load_inline build failed:\n{message}"
