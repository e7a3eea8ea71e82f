"""The judge end to end in CPU mode: Triton through the interpreter, CUDA compiled but not run."""

import shutil
from pathlib import Path

import pytest
import submissions as subs

from kerneldojo.baselines import shipped_solutions
from kerneldojo.graders.compile import detect_language
from kerneldojo.tasks import get_task, list_tasks

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")


@pytest.mark.parametrize("task_id", [t for t in list_tasks() if get_task(t).allows("triton")])
def test_triton_starter_and_baseline_pass(cpu_judge, task_id):
    task = get_task(task_id)
    sources = {"starter": task.starter("triton"), "baseline": shipped_solutions(task_id)["triton"].read_text()}
    for name, source in sources.items():
        result = cpu_judge.evaluate(task, source, "triton")
        assert result.status == "ok", (name, result.messages)
        assert result.cases_checked == len(task.cases("small")) * (cpu_judge.seeds + 1)  # + a perturbed call
        assert not result.timed and result.speedup is None and result.timings == []
        assert any("nothing was timed" in m for m in result.messages)
        assert result.reward == cpu_judge.reward.correct


def test_off_by_one_is_wrong_with_error_and_index(cpu_judge):
    result = cpu_judge.evaluate("vector_add", subs.VECTOR_ADD_OFF_BY_ONE)
    assert result.status == "wrong" and result.reward == 0
    m = result.mismatch
    assert m.index == [m.total - 1]  # the last element, which the bad mask skips
    assert result.max_abs_error == m.max_abs_error > 0
    assert f"index ({m.total - 1},)" in result.messages[0]


def test_syntax_error_is_a_compile_error_with_its_line(cpu_judge):
    result = cpu_judge.evaluate("vector_add", subs.VECTOR_ADD_SYNTAX_ERROR, "triton")
    assert result.status == "compile_error"
    assert "submission.py, line 6" in result.messages[0]


def test_exception_is_a_runtime_error_citing_submission_lines(cpu_judge):
    result = cpu_judge.evaluate("vector_add", subs.VECTOR_ADD_RAISES, "python")
    assert result.status == "runtime_error"
    text = result.messages[0]
    assert "submission.py, line 3, in helper" in text and "submission.py, line 7, in solution" in text
    assert "AttributeError" in text


def test_forbidden_op_is_flagged_below_an_honest_failure(cpu_judge):
    result = cpu_judge.evaluate("vector_add", subs.VECTOR_ADD_TORCH, "python")
    assert result.status == "flagged" and result.checks_fired == ["forbidden_op"]
    assert "aten.add" in result.messages[0]
    assert result.reward < cpu_judge.reward.failure


def test_missing_entry_point(cpu_judge):
    result = cpu_judge.evaluate("vector_add", "import torch\n", "python")
    assert result.status == "compile_error" and "solution" in result.messages[0]


def test_wrong_return_type(cpu_judge):
    result = cpu_judge.evaluate("vector_add", "def solution(x, y):\n    return x.tolist()\n", "python")
    assert result.status == "wrong" and "is a list" in result.messages[0]


def test_mutating_an_input_is_wrong(cpu_judge):
    src = subs.VECTOR_ADD_TRITON.replace("    return out", "    x.zero_()\n    return out")
    result = cpu_judge.evaluate("vector_add", src, "triton")
    assert result.status == "wrong" and "input 0 was modified" in result.messages[0]


def test_unknown_or_disallowed_language_is_a_clear_error(cpu_judge):
    with pytest.raises(ValueError, match="'rust' is not one of"):
        cpu_judge.evaluate("vector_add", subs.VECTOR_ADD_TRITON, "rust")
    with pytest.raises(ValueError, match="accepts triton, cuda, not 'cute'"):
        cpu_judge.evaluate("vector_add", subs.VECTOR_ADD_CUDA, "cute")


def test_language_detection():
    assert detect_language(subs.VECTOR_ADD_TRITON) == "triton"
    assert detect_language(subs.VECTOR_ADD_TORCH) == "python"
    assert detect_language(subs.VECTOR_ADD_CUDA) == "cuda"
    assert detect_language('#include <cute/tensor.hpp>\n__global__ void k() {}') == "cute"


def test_result_round_trips_through_json(cpu_judge):
    from kerneldojo.result import SCHEMA_VERSION, EvalResult

    result = cpu_judge.evaluate("vector_add", subs.VECTOR_ADD_OFF_BY_ONE)
    again = EvalResult.model_validate_json(result.model_dump_json())
    assert again == result and again.schema_version == SCHEMA_VERSION and again.versions.torch


@needs_nvcc
def test_cuda_compiles_in_cpu_mode_and_says_it_did_not_run(cpu_judge):
    result = cpu_judge.evaluate("vector_add", subs.VECTOR_ADD_CUDA)
    assert result.status == "compiled" and result.language == "cuda"
    assert "not run" in result.messages[0]
    assert result.reward == cpu_judge.reward.failure


@needs_nvcc
def test_cuda_compile_error_cites_the_submission_line(cpu_judge):
    result = cpu_judge.evaluate("vector_add", subs.VECTOR_ADD_CUDA_ERROR)
    assert result.status == "compile_error"
    line = 1 + subs.VECTOR_ADD_CUDA_ERROR.splitlines().index("    if (i < n) out[i] = x[i] + undeclared[i];")
    assert f"submission.cu({line}): error" in result.messages[0]
    assert "undeclared" in result.messages[0]


@needs_nvcc
def test_the_result_caches_key_covers_every_file_of_the_judges_packages():
    """Red team round 79: the key's hash of the judge's code read its modules only, so a changed sandbox/Dockerfile
    (the docker backend's image) left verdicts reached by the old image in place."""
    import kerneldojo.sandbox
    from kerneldojo.judge import judge_code_files

    names = {name for name, _ in judge_code_files()}
    beside = {f"kerneldojo.sandbox/{p.name}" for p in Path(kerneldojo.sandbox.__file__).parent.iterdir()
              if p.is_file() and not p.name.endswith((".py", ".pyc"))}  # the Dockerfile, from a checkout
    assert beside <= names and {"kerneldojo.sandbox/process.py", "kerneldojo.tasks/spec.py",
                                "kerneldojo.graders/extensions.py", "kerneldojo.sandbox.worker/loop.py"} <= names
    assert not any(name.endswith(".pyc") for name in names)


def test_compile_cache_hits_on_the_same_source(cpu_judge):
    from kerneldojo.graders.compile import compile_submission

    task = get_task("vector_add")
    src = subs.VECTOR_ADD_CUDA + "// cache test\n"
    first = compile_submission(task, src, "cuda", "90a")
    second = compile_submission(task, src, "cuda", "90a")
    other_arch = compile_submission(task, src, "cuda", "80")
    assert not first.cached and second.cached and not other_arch.cached
    assert first.libraries == second.libraries != other_arch.libraries


@needs_nvcc
@pytest.mark.parametrize(
    ("task_id", "language", "kind"),
    [(t, lang, kind) for t in list_tasks() for lang in ("cuda", "cute") for kind in ("starter", "baseline")
     if get_task(t).allows(lang) and (kind == "starter" or lang in shipped_solutions(t))],
)
def test_cuda_and_cute_sources_compile(cpu_judge, task_id, language, kind):
    task = get_task(task_id)
    source = task.starter(language) if kind == "starter" else shipped_solutions(task_id)[language].read_text()
    result = cpu_judge.evaluate(task, source, language)
    assert result.status == "compiled", result.messages


@needs_nvcc
@pytest.mark.skipif(shutil.which("nm") is None, reason="nm is not installed")
def test_built_library_exports_only_the_entry_point():
    import subprocess

    from kerneldojo.graders.compile import compile_submission

    source = get_task("matmul").starter("cute")
    build = compile_submission(get_task("matmul"), source, "cute", "90a")
    symbols = subprocess.run(["nm", "-D", "--defined-only", str(build.libraries["bfloat16"])],
                             capture_output=True, text=True, check=True).stdout
    exported = {line.split()[-1] for line in symbols.splitlines() if line.split()[1] in "TDBVWu"}
    assert exported == {"solution"}, exported


def test_in_place_variant_of_a_forbidden_op_is_flagged(cpu_judge):
    src = "def solution(x, y):\n    out = x.clone()\n    out.add_(y)\n    return out\n"
    result = cpu_judge.evaluate("vector_add", src, "python")
    assert result.status == "flagged" and "aten.add" in result.messages[0]


def test_returning_a_view_of_an_input_is_wrong(cpu_judge):
    src = "import torch\n\ndef solution(x):\n    return torch.relu_(x)\n"  # relu in place, x returned
    result = cpu_judge.evaluate("relu", src, "python")
    assert result.status in ("wrong", "flagged")
    src = "def solution(x):\n    return x.view(-1).view(x.shape)\n"
    result = cpu_judge.evaluate("softmax", src, "python")
    assert result.status == "wrong" and "shares memory with an input" in result.messages[0]


def _fake_gpu():
    """A device the judge takes for a GPU (mode "gpu") whose tensors live on the CPU."""
    import torch

    from kerneldojo.sandbox.device import Device

    return Device(torch.device("cpu"), "gpu", "Fake GPU", "90a", 1 << 20)


def test_reference_is_timed_in_a_worker_and_cached(monkeypatch, tmp_path):
    import kerneldojo.judge as judge_module
    from kerneldojo.judge import POOL_SETS, Judge
    from kerneldojo.result import TimeStats
    from kerneldojo.sandbox.protocol import SubmissionError

    stats = TimeStats(median_ms=1.0, mean_ms=1.1, min_ms=0.9, max_ms=2.0, iqr_ms=0.1, runs=10)
    asked = []

    def time_reference_in_worker(device, task, shape, kind, sets, l2_bytes, budget_s, limits, gpu):
        assert gpu is judge._gpu  # the worker's compile shares the GPU; only its timing holds it alone
        asked.append((device, task.id, shape, kind, sets, l2_bytes, budget_s, limits))
        if kind == "compiled" and failing:
            raise SubmissionError("torch.compile could not build here")
        return stats

    failing = False
    monkeypatch.setattr(judge_module, "time_reference_in_worker", time_reference_in_worker)
    cache = tmp_path / "reference_times.json"
    judge = Judge("cpu", timing_budget_s=0.25, limits={"time_reference": 30}, reference_cache=cache)
    judge.device = _fake_gpu()
    task = get_task("vector_add")
    case = task.cases("bench")[0]
    assert judge._reference_times_for(task, case) == (stats, stats)
    assert asked == [(judge.device, "vector_add", case.shape, kind, POOL_SETS[0], 1 << 20, 0.25, {"time_reference": 30})
                     for kind in ("eager", "compiled")]
    assert judge._reference_times_for(task, case) == (stats, stats) and len(asked) == 2  # cached
    again = Judge("cpu", reference_cache=cache)
    again.device = judge.device
    assert again._reference_times_for(task, case) == (stats, stats) and len(asked) == 2  # cached on disk
    judge.refresh_reference_times()
    failing = True
    with pytest.warns(RuntimeWarning, match="timing the compiled reference failed.*could not build here"):
        assert judge._reference_times_for(task, case) == (stats, None)
    assert len(asked) == 4


def test_a_failed_eager_reference_timing_is_never_stored(monkeypatch, tmp_path):
    """Red team round 30: one failed eager measurement (a reference worker out of memory while another slot's worker
    held the GPU's) was cached as None for good, and every later step had no speedup, which the reward pays as
    "correct, untimed". The step is `skipped` now, nothing is stored, and the next step measures again; a None left
    in an older cache is measured again too."""
    import kerneldojo.judge as judge_module
    from kerneldojo.judge import Judge
    from kerneldojo.result import TimeStats
    from kerneldojo.sandbox.peers import Unavailable
    from kerneldojo.sandbox.protocol import SubmissionError

    stats = TimeStats(median_ms=1.0, mean_ms=1.1, min_ms=0.9, max_ms=2.0, iqr_ms=0.1, runs=10)
    failing = [True]

    def time_reference_in_worker(device, task, shape, kind, *args):
        if failing[0]:
            raise SubmissionError("CUDA out of memory")
        return stats

    monkeypatch.setattr(judge_module, "time_reference_in_worker", time_reference_in_worker)
    cache = tmp_path / "reference_times.json"
    judge = Judge("cpu", time_compiled_reference=False, reference_cache=cache)
    judge.device = _fake_gpu()
    task = get_task("vector_add")
    case = task.cases("bench")[0]
    with pytest.raises(Unavailable, match=r"could not time the eager reference.*measures it again"):
        judge._reference_times_for(task, case)
    assert not cache.exists() or "null" not in cache.read_text()
    failing[0] = False
    assert judge._reference_times_for(task, case) == (stats, None)
    key = next(iter(judge._reference_times))
    judge._reference_times[key] = None  # as an older judge stored it
    assert judge._reference_times_for(task, case) == (stats, None)


def test_a_result_with_nan_or_inf_serialises_to_strict_json_and_back():
    """Red team round 30: an unwritten element (NaN) or an overflow (inf) in a wrong result's mismatch made the
    service's JSON responses fail with 500, the leaderboard's too, and PostgreSQL refuse the record."""
    import json

    from kerneldojo.judge import versions
    from kerneldojo.result import EvalResult, Mismatch

    mismatch = Mismatch(case="n=7", output=0, index=[3], got=float("nan"), expected=1.0, max_abs_error=float("inf"),
                        max_rel_error=float("-inf"), mismatched=1, total=7)
    result = EvalResult(task="vector_add", language="triton", device="cpu", mode="cpu", status="wrong",
                        versions=versions(), max_abs_error=float("inf"), mismatch=mismatch)
    data = result.model_dump(mode="json")
    text = json.dumps(data, allow_nan=False)  # strict JSON, as Starlette and PostgreSQL take it
    back = EvalResult.model_validate(json.loads(text))
    assert back.max_abs_error == float("inf") and back.mismatch.got != back.mismatch.got  # NaN
    assert back.mismatch.max_rel_error == float("-inf")
    assert EvalResult.model_validate_json(result.model_dump_json()).max_abs_error == float("inf")
    assert result.model_dump()["max_abs_error"] == float("inf")  # Python mode keeps the float


def test_reference_is_timed_in_process_without_isolation(monkeypatch):
    import kerneldojo.judge as judge_module
    from kerneldojo.judge import Judge
    from kerneldojo.result import TimeStats

    def no_worker(*args):
        raise AssertionError("isolation='none' times the reference in the judge's process")

    monkeypatch.setattr(judge_module, "time_reference_in_worker", no_worker)
    stats = TimeStats(median_ms=1.0, mean_ms=1.1, min_ms=0.9, max_ms=2.0, iqr_ms=0.1, runs=10)
    judge = Judge("cpu", isolation="none", time_compiled_reference=False, reference_cache=None)
    judge.device = _fake_gpu()
    outputs = []
    judge._time_calls = lambda calls: outputs.extend(call() for call in calls) or stats
    task = get_task("vector_add")
    assert judge._reference_times_for(task, task.cases("small")[-1]) == (stats, None)
    assert len(outputs) == 3 and all(out.shape == (task.cases("small")[-1].shape["n"],) for out in outputs)


def test_python_that_carries_cuda_in_a_string_is_python():
    # A KernelBench solution's load_inline source: CUDA text inside a valid Python module.
    from kerneldojo.graders.compile import detect_language, language_mismatch

    source = 'import torch\nCUDA = """\n#include <cuda_runtime.h>\n__global__ void k() {}\n"""\n\ndef f():\n    pass\n'
    assert detect_language(source) == "python" and language_mismatch(source, "python") is None
    cuda = '#include <cuda_runtime.h>\n__global__ void k() {}\nextern "C" void solution() {}\n'
    assert detect_language(cuda) == "cuda"


@pytest.mark.parametrize("wrong_at_bench", [False, True])
def test_each_bench_shape_is_called_and_checked_before_the_timing(monkeypatch, wrong_at_bench):
    """Red team round 49: the first call of a bench shape compiled (Triton's ptxas) inside the timing requests, so the
    judge's look for new processes there had to let the toolchain's programs through, and ptxas ran the submission's
    library under LD_PRELOAD. Where the judge times, each bench shape is called once more in the correctness phase,
    at a fresh seed, and checked; a solution that is wrong only at a bench shape fails there."""
    from kerneldojo.graders.correctness import WrongOutput
    from kerneldojo.judge import Judge
    from kerneldojo.result import EvalResult, Versions
    from kerneldojo.tasks import Case, Task

    task = get_task("vector_add")
    bench = [Case((("n", 5003),), "float32"), Case((("n", 9001),), "float32")]
    cases = Task.cases
    monkeypatch.setattr(Task, "cases", lambda self, kind: bench if kind == "bench" else cases(self, kind))
    called = []

    class Solution:  # the adds, as a worker would answer; wrong at the bench shapes if asked to be
        def run(self, inputs, shape, outputs):
            called.append(shape["n"])
            out = inputs[0] + inputs[1]
            return (out + 1,) if wrong_at_bench and shape["n"] in (5003, 9001) else (out,)

    judge = Judge("cpu", seeds=1)
    judge.timed = True  # as on a GPU
    result = EvalResult(task="vector_add", language="triton", device="cpu", mode="cpu", status="ok",
                        versions=Versions(kerneldojo="0", python="3", torch="2"))  # fmt: skip
    small = [case.shape["n"] for case in task.cases("small")]
    if wrong_at_bench:
        with pytest.raises(WrongOutput, match="n=5003"):
            judge._check(task, Solution(), result, judge.timed)
        assert called == [n for n in small for _ in range(2)] + [5003]
    else:
        judge._check(task, Solution(), result, judge.timed)
        assert called == [n for n in small for _ in range(2)] + [5003, 9001]  # a seed and the perturbed, then bench
        assert result.cases_checked == 2 * len(small) + 2


def test_each_bench_shapes_checked_call_has_a_few_inputs_changed(monkeypatch):
    """Red team round 62: rotary_embedding's tables are derived from one integer position a token, so a kernel that
    read one pair of them and recomputed the rest passed at the bench shapes, where no check changed an input (the
    perturbed last check ran at test shapes only). The bench shapes' checked calls now get the same few changes."""
    import secrets

    from kerneldojo.judge import Judge
    from kerneldojo.result import EvalResult, Versions
    from kerneldojo.tasks import Case, Task

    task = get_task("vector_add")
    bench = Case((("n", 20011),), "float32")
    cases = Task.cases
    monkeypatch.setattr(Task, "cases", lambda self, kind: [bench] if kind == "bench" else cases(self, kind))
    monkeypatch.setattr(secrets, "randbits", lambda bits: 7)
    seen = {}

    class Solution:
        def run(self, inputs, shape, outputs):
            seen[shape["n"]] = [t.clone() for t in inputs]
            return (inputs[0] + inputs[1],)

    judge = Judge("cpu", seeds=1)
    result = EvalResult(task="vector_add", language="triton", device="cpu", mode="cpu", status="ok",
                        versions=Versions(kerneldojo="0", python="3", torch="2"))  # fmt: skip
    judge._check(task, Solution(), result, bench=True)
    drawn = task.reference.make_inputs(bench.shape, 7, "cpu")
    changed = [int((got != want).sum()) for got, want in zip(seen[20011], drawn)]
    assert all(0 < n <= 20011 // 1000 for n in changed), changed
