"""KernelBench load_inline solutions: built by the judge ahead of the run, confined, cached by content
(graders/extensions.py), imported prebuilt by the worker. On the CPU with a C++-only load_inline solution
(tests/fixtures/kernelbench/solutions_cpp): one real build (some 20 s: torch's headers) shared by the module."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest
import torch

from kerneldojo.adapters import kernelbench, runtime
from kerneldojo.graders import extensions
from kerneldojo.graders.compile import cache_dir
from kerneldojo.graders.extensions import build_extensions
from kerneldojo.judge import Judge
from kerneldojo.sandbox.protocol import CompileError

FIXTURES = Path(__file__).parent / "fixtures" / "kernelbench"
PROBLEM = FIXTURES / "level_demo" / "1_scaled_tanh.py"
SOLUTION = FIXTURES / "solutions_cpp" / "1_scaled_tanh.py"
CUDA_PROBLEM, CUDA_SOLUTION = FIXTURES / "level_gpu" / "1_relu.py", FIXTURES / "solutions_gpu" / "1_relu_inline.py"

NINJA = shutil.which("ninja", path=f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}")
pytestmark = pytest.mark.skipif(not NINJA or not shutil.which("c++"),
                                reason="load_inline needs ninja (pip install ninja) and a C++ compiler")


@pytest.fixture(scope="module", autouse=True)
def _cache(tmp_path_factory):
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("KERNELDOJO_CACHE", str(tmp_path_factory.mktemp("cache")))
        yield


@pytest.fixture(scope="module")
def judge() -> Judge:
    return Judge("cpu", reference_cache=None, result_cache=None)  # no stored verdicts: every evaluation runs


@pytest.fixture(scope="module")
def problem():
    return kernelbench.load(PROBLEM, check_degenerate=False)


@pytest.fixture(scope="module")
def first(problem, judge):
    """The cold evaluation: its build is the one every test of this module reuses."""
    return problem.evaluate(SOLUTION.read_text(), judge)


def _library(source: str) -> tuple[str, Path]:
    (call,) = runtime.load_inline_calls(source)
    key = runtime.extension_key(call, torch.__version__, torch.version.cuda, runtime.device_arch())
    name = runtime.extension_name(call, key)
    return name, cache_dir() / "extensions" / key / f"{name}.so"


def test_a_second_evaluation_of_the_same_source_reuses_the_build(problem, judge, first):
    assert first.status == "ok", first.messages
    assert any("built ahead" in m for m in first.messages)
    name, library = _library(problem.wrap(SOLUTION.read_text()))
    assert library.is_file() and name.startswith("kd_")
    # Its kernels were listed in the build's confinement (the worker cannot run cuobjdump): "# not listed: ..." here,
    # where this machine has no cuobjdump, which on a GPU machine fails the step with that reason.
    assert library.with_name("kernel-names.txt").is_file()
    built_at = library.stat().st_mtime_ns
    # The same source again, and the same call under another name of the solution's: no build, the same library.
    for source in (SOLUTION.read_text(), SOLUTION.read_text().replace('name="scaled_tanh"', 'name="mine"')):
        again = problem.evaluate(source, judge)
        assert again.status == "ok", again.messages
        assert any("reused build" in m for m in again.messages), again.messages
    assert library.stat().st_mtime_ns == built_at


def test_a_batch_builds_ahead_and_finds_the_build_cached(judge, first):
    suite = kernelbench.evaluate_folder(FIXTURES / "level_demo", SOLUTION.parent, judge)
    tanh = suite.results["1_scaled_tanh"]
    assert tanh.status == "ok" and any("reused build" in m for m in tanh.messages), tanh.messages
    assert suite.results["2_mean_of_softmax"].status == "skipped"  # no solution for it in that folder


def test_two_different_sources_get_different_names_and_libraries(problem):
    source = problem.wrap(SOLUTION.read_text())
    other = source.replace("std::tanh(", "std::sinh(")
    assert _library(source)[0] != _library(other)[0] and _library(source)[1] != _library(other)[1]


def test_the_worker_imports_the_prebuilt_library(problem, first, monkeypatch):
    from torch.utils import cpp_extension

    source = problem.wrap(SOLUTION.read_text())
    name, library = _library(source)
    monkeypatch.setattr(cpp_extension, "load_inline", cpp_extension.load_inline)  # restored after the test
    monkeypatch.setattr(runtime, "_prebuilt", {})
    runtime.name_extensions_by_content()
    runtime.use_prebuilt_extensions({name: library})
    (call,) = runtime.load_inline_calls(source)
    module = cpp_extension.load_inline(**call)  # what the solution's own line runs in the worker
    assert module.__name__ == name and Path(module.__file__) == library
    x = torch.randn(64)
    torch.testing.assert_close(module.scaled_tanh(x, 0.5), torch.tanh(x * 0.5))


def test_a_build_failure_is_a_compile_error_with_the_compilers_message(problem):
    source = problem.wrap(SOLUTION.read_text().replace('verbose=False', 'verbose=False, extra_cflags=["-std=c++0q"]'))
    _, library = _library(source)
    with pytest.raises(CompileError) as failed:
        build_extensions([source])
    message = str(failed.value)
    print(message)
    assert "load_inline build failed" in message and "c++0q" in message, message
    assert str(cache_dir()) not in message  # paths relative to the build folder
    assert not library.exists()  # a failure is not cached


def test_a_confined_build_cannot_write_into_the_cache(problem, first):
    """gcc's -wrapper runs any program: here `touch` on another key's library and on a file beside it. Only the
    build's own folder is writable, so the cache's entries come from the judge's copy of a build's own output."""
    _, victim = _library(problem.wrap(SOLUTION.read_text()))
    planted = victim.with_name("planted.so")
    (call,) = runtime.load_inline_calls(SOLUTION.read_text())
    call["extra_cflags"] = ["-wrapper", f"/usr/bin/touch,--,{victim},{planted}"]  # the judge refuses it: built here
    touched = victim.stat().st_mtime_ns
    with pytest.raises(CompileError) as failed:
        extensions._build("kd_touch", call, victim.parent.parent / "touch" / "kd_touch.so", "none", 1)
    assert "touch: cannot touch" in str(failed.value), failed.value  # the wrapper ran, and failed
    assert not planted.exists() and victim.stat().st_mtime_ns == touched


# Red team round 9: torch writes load_inline's flags unquoted into build.ninja, whose commands run through a shell.
INJECTED = "-O2; env | sed 's/^/LEAK /' >&2; exit 1; #"


def test_a_flag_a_shell_would_run_is_refused_naming_it(problem):
    for flags in (f"extra_cflags=[{INJECTED!r}]", "extra_ldflags=['-Wl,-O1', '-Xcompiler=-wrapper,sh,-c,id']",
                  "extra_include_paths=['/etc']", "extra_ldflags=['-Wl,--plugin,evil.so']",  # round 22: ld loads it
                  "extra_ldflags=['-Xlinker=--plugin']"):
        source = problem.wrap(SOLUTION.read_text().replace("verbose=False", f"verbose=False, {flags}"))
        with pytest.raises(CompileError) as refused:
            build_extensions([source])
        assert "the judge does not pass to a build" in str(refused.value), refused.value
        assert flags.split("=", 1)[0] in str(refused.value)


def test_honest_spellings_of_flags_are_built_and_what_reaches_a_shell_is_not():
    """Red team round 73: KernelBench's example passes `extra_cflags=[""]`, and nvcc's flags are often a flag and its
    value as two entries or two flags in one string; each was refused, a stored `compile_error` for honest code.
    Round 74: a denylist of program-running flags missed gcc's long spellings (`--prefix` for -B, `--use-ld`) and a
    specs file written by -MF: flags are an allowlist now, checked on the words build.ninja's shell gets."""
    honest = ([""], [" -O3 "], ["-O3 --use_fast_math"], ["-gencode", "arch=compute_90,code=sm_90"],
              ["-gencode=arch=compute_90a,code=[sm_90a,compute_90a]"], ["-arch", "sm_90"], ["-maxrregcount", "64"],
              ["-Xptxas", "-O3,-v"], ["--expt-relaxed-constexpr"], ["-lcublas"], ["-Wl,-Bsymbolic"],
              ["-U__CUDA_NO_HALF_OPERATORS__", "--expt-extended-lambda", "-lineinfo", "-std=c++17", "-DBLOCK=128"],
              ["-Xcompiler", "-fopenmp,-O3"], ["-march=native", "-ffast-math", "-Wno-unused-variable"],
              # round 75: nvcc's long spellings and a few more of its switches
              ["--ftz=true", "--fmad", "false", "--std=c++17", "--threads", "4", "--disable-warnings"],
              ["-arch=native", "-Xcudafe", "--diag_suppress=177", "-Xptxas", "--def-load-cache=ca", "-rdc=true"])
    for flags in honest:
        assert extensions.refused_flag({"extra_cuda_cflags": flags}) is None, flags
    assert extensions.refused_flag({"extra_include_paths": ["include/"]}) is None
    for flags in (["-O3\nbuild x: phony"], ["-O3\t-g"], ["-ccbin", "gcc"], ["-Xcompiler", "-fplugin=x.so"],
                  ["-Xcompiler -wrapper,gdb"], ["-O3 `id`"], ["-O3;id"], ["/tmp/x.o"], ["-I/etc"], ["-MFspecs"],
                  ["-MT.o:xargs"], ["--prefix=."], ["--use-ld=gold"], ["-B."], ["--blah"], ["main.cpp"],
                  ["-arch", "sm_90;id"], ["-L/usr/lib"], ["-Wl,-rpath,/tmp"], ["-optf", "x"], ["-gencode"]):
        assert "does not pass to a build" in (extensions.refused_flag({"extra_cuda_cflags": flags}) or ""), flags
    # round 80: a flag argument the allowlist does not read is refused whole, an empty one is no flag
    assert "extra_sycl_cflags is not an argument" in (extensions.refused_flag(
        {"extra_sycl_cflags": ["-O2; touch /tmp/x;"]}) or "")
    assert extensions.refused_flag({"extra_sycl_cflags": None, "extra_cflags": ["-O3"]}) is None


def test_the_build_gets_no_secret_of_the_judges(problem, monkeypatch):
    """Whatever runs in a load_inline build (here a shell command, the judge's check bypassed) finds the worker's
    allowlisted environment, not the judge's."""
    monkeypatch.setenv("KERNELDOJO_TOKENS", "kd-service-token-0123456789")
    monkeypatch.setenv("HF_TOKEN", "hf_secret_of_the_judge")
    (call,) = runtime.load_inline_calls(SOLUTION.read_text())
    call["extra_cflags"] = [INJECTED]
    with pytest.raises(CompileError) as failed:
        extensions._build("kd_env", call, cache_dir() / "extensions" / "env" / "kd_env.so", "none", 1)
    message = str(failed.value)
    assert "LEAK PATH=" in message, message  # the command ran
    assert "kd-service-token" not in message and "hf_secret_of_the_judge" not in message


def test_the_prelude_in_a_submissions_text_builds_nothing_in_the_judge(judge):
    """The judge builds ahead only what an adapter wrapped (`runtime.BuildsAhead`): the prelude's text in a plain
    submission (a comment) starts no build; its load_inline runs in the worker, which may not fork a compiler."""
    call = f"load_inline(name='x', cpp_sources='int f() {{ return 1; }}', functions=['f'], extra_cflags=[{INJECTED!r}])"
    source = (f"# {runtime.EXTENSION_PRELUDE}\nimport torch\nfrom torch.utils.cpp_extension import load_inline\n"
              f"ext = {call}\n\n\ndef solution(x, y):\n    return x + y\n")
    result = judge.evaluate("vector_add", source, "python")
    text = "\n".join(result.messages)
    assert "importing the submission failed" in text, result.messages  # the worker ran it: no build came first
    assert "built ahead" not in text and "load_inline build failed" not in text and "LEAK PATH" not in text


def test_a_worker_cannot_write_into_the_cache(problem, judge, first):
    """The solution, in the worker, tries to replace the library its own call is keyed to: the cache is not in
    the worker's root, so the library stays the judge's."""
    _, library = _library(problem.wrap(SOLUTION.read_text()))
    original = library.read_bytes()
    attack = "".join(f"\ntry:\n    open({str(path)!r}, 'wb').write(b'x')\nexcept OSError:\n    pass\n"
                     for path in (library, library.with_name("planted.so")))
    result = problem.evaluate(SOLUTION.read_text() + attack, judge)
    assert result.status == "ok", result.messages
    assert library.read_bytes() == original and not library.with_name("planted.so").exists()


def test_a_cuda_load_inline_in_cpu_mode_is_not_built_ahead_and_fails_saying_why(judge):
    result = kernelbench.load(CUDA_PROBLEM, check_degenerate=False).evaluate(CUDA_SOLUTION.read_text(), judge)
    assert result.status == "compile_error" and "needs a GPU judge" in result.messages[0], result.messages


@pytest.mark.gpu
def test_gpu_a_cuda_load_inline_build_is_cached_across_evaluations(gpu_judge):
    judge = Judge("cuda", timing_budget_s=0.5, time_compiled_reference=False, result_cache=None)
    problem = kernelbench.load(CUDA_PROBLEM)
    source = CUDA_SOLUTION.read_text()
    cold = problem.evaluate(source, judge)
    print("cold", cold.status, cold.phases, cold.messages)
    assert cold.status == "ok", cold.messages
    warm = problem.evaluate(source, judge)
    print("cached", warm.status, warm.phases, warm.messages)
    assert warm.status == "ok" and any("reused build" in m for m in warm.messages), warm.messages
