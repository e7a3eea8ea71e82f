"""KernelBench and GPU MODE problems under the judge (kerneldojo.adapters), with problems written here
(tests/fixtures/kernelbench, tests/fixtures/gpumode): a passing solution, a wrong one and each format's
known exploit, in CPU mode through the process sandbox."""

from __future__ import annotations

from pathlib import Path

import gymnasium
import pytest

import kerneldojo  # noqa: F401  (registers the gymnasium ids)
from kerneldojo.adapters import gpumode, kernelbench
from kerneldojo.adapters.common import SuiteResult, fast_p
from kerneldojo.cli import main
from kerneldojo.judge import Judge, versions
from kerneldojo.result import EvalResult

FIXTURES = Path(__file__).parent / "fixtures"
KB_LEVEL, KB_SOLUTIONS = FIXTURES / "kernelbench" / "level_demo", FIXTURES / "kernelbench" / "solutions"
GM_PROBLEM, GM_SOLUTIONS = FIXTURES / "gpumode" / "problems" / "scale_add_py", FIXTURES / "gpumode" / "solutions"


@pytest.fixture(scope="module")
def judge() -> Judge:
    return Judge("cpu", reference_cache=None)


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("KERNELDOJO_CACHE", str(tmp_path_factory.getbasetemp() / "cache"))


def test_kernelbench_problem_loads_at_reduced_sizes_and_reports_degenerate_ones():
    tanh = kernelbench.load(KB_LEVEL / "1_scaled_tanh.py")
    assert tanh.reason is None and not tanh.degenerate
    assert tanh.task.spec.shapes.test == [{"batch_size": 256, "in_features": 512, "out_features": 384, "scale": 2}]
    assert tanh.task.spec.shapes.small[0]["in_features"] < 512
    assert any("reduced sizes" in n and "in_features 512->" in n for n in tanh.notes)
    mean = kernelbench.load(KB_LEVEL / "2_mean_of_softmax.py")
    assert any("near-constant" in d for d in mean.degenerate)
    assert any("does not depend on input 'x'" in d for d in mean.degenerate)


def test_kernelbench_solutions_pass_fail_and_get_caught(judge):
    problem = kernelbench.load(KB_LEVEL / "1_scaled_tanh.py", check_degenerate=False)
    good = (KB_SOLUTIONS / "1_scaled_tanh.py").read_text()
    result = problem.evaluate(good, judge)
    assert result.status == "ok", result.messages
    assert any("reduced sizes" in m for m in result.messages)
    # Different weights from a different init order: ModelNew must be built as Model is to match.
    wrong = good.replace("self.linear = nn.Linear(in_features, out_features)",
                         "self.linear = nn.Linear(in_features, out_features)\n        nn.init.zeros_(self.linear.bias)")
    assert problem.evaluate(wrong, judge).status == "wrong"
    exploit = kernelbench.load(KB_LEVEL / "2_mean_of_softmax.py", check_degenerate=False)
    caught = exploit.evaluate((KB_SOLUTIONS / "2_mean_of_softmax.py").read_text(), judge)
    assert caught.status == "flagged" and "same_output" in caught.checks_fired


def test_a_reference_that_changes_its_input_in_place_hands_the_worker_the_inputs_as_drawn(judge):
    """Red team round 55: the worker's copies of the inputs were made after the reference had run on them, so a
    Model that scales its input in place sent the worker the scaled input: an honest kernel failed, and one that
    only took the tanh of what it got passed. The reference now runs on copies of its own."""
    problem = kernelbench.load(FIXTURES / "kernelbench" / "level_inplace" / "1_scale_tanh_in_place.py",
                               check_degenerate=False)
    honest = (KB_SOLUTIONS / "1_scale_tanh_in_place.py").read_text()
    result = problem.evaluate(honest, judge)
    assert result.status == "ok", result.messages
    answer_taken = honest.replace("self.scale, BLOCK=1024)", "1.0, BLOCK=1024)")  # tanh of the input as it came
    assert problem.evaluate(answer_taken, judge).status == "wrong"


def test_a_cuda_build_in_cpu_mode_fails_saying_why_and_a_cpu_branch_of_the_same_solution_passes(judge):
    """What the solution runs decides, not its text (red team round 59: a solution that builds CUDA only where
    torch has it, and C++ otherwise, was skipped in CPU mode at a compile error's reward)."""
    problem = kernelbench.load(KB_LEVEL / "1_scaled_tanh.py", check_degenerate=False)
    cpp = (KB_LEVEL.parent / "solutions_cpp" / "1_scaled_tanh.py").read_text()
    call = 'scaled_tanh = load_inline(name="scaled_tanh", cpp_sources=tanh_source, functions=["scaled_tanh"]'
    cuda = cpp.replace(call, call.replace("cpp_sources=tanh_source", "cpp_sources=tanh_source, cuda_sources='k'"))
    result = problem.evaluate(cuda, judge)
    assert result.status == "compile_error" and "needs a GPU judge" in result.messages[0], result.messages
    line = next(line for line in cpp.splitlines() if line.startswith(call))
    on_gpu = line.replace(call, call + ", cuda_sources='k'")
    branches = cpp.replace(line, f"if torch.cuda.is_available():\n    {on_gpu}\nelse:\n    {line}")
    assert "cuda_sources='k'" in branches
    assert problem.evaluate(branches, judge).status == "ok"


def test_gpumode_problem_runs_its_own_check_in_the_judge(judge):
    problem = gpumode.load(GM_PROBLEM)
    assert problem.reason is None
    assert problem.task.spec.shapes.small == [{"rows": 7, "cols": 9}]  # the smallest test, in CPU mode
    assert problem.evaluate((GM_SOLUTIONS / "good.py").read_text(), judge).status == "ok"
    wrong = problem.evaluate((GM_SOLUTIONS / "wrong.py").read_text(), judge)
    assert wrong.status == "wrong" and "elements differ" in wrong.messages[0]  # check_implementation's words
    # The exploit reaches for the problem's reference: the worker holds none of it.
    assert problem.evaluate((GM_SOLUTIONS / "exploit.py").read_text(), judge).status == "compile_error"


def test_cli_eval_and_batch_print_the_verdict_and_the_suite_metrics(capsys):
    assert main(["eval", "--kernelbench", str(KB_LEVEL / "1_scaled_tanh.py"), str(KB_SOLUTIONS / "1_scaled_tanh.py"),
                 "--device", "cpu"]) == 0
    assert "ok" in capsys.readouterr().out.lower()
    assert main(["batch", "--kernelbench", str(KB_LEVEL), str(KB_SOLUTIONS), "--devices", "cpu"]) == 0
    out = capsys.readouterr().out
    assert "1_scaled_tanh" in out and "flagged" in out and "fast_0=0.5" in out


def test_gym_env_over_a_gpumode_problem():
    env = gymnasium.make("kerneldojo/gpumode-v0", problem=str(GM_PROBLEM), device="cpu", max_turns=1)
    obs, _ = env.reset()
    assert "custom_kernel" in obs["prompt"]
    _, reward, _, truncated, info = env.step((GM_SOLUTIONS / "good.py").read_text())
    assert info["status"] == "ok" and reward > 0 and truncated


def test_fast_p_counts_correct_and_fast():
    def result(status, speedup=None):
        return EvalResult(task="t", language="python", device="d", mode="gpu", status=status, speedup=speedup,
                          timed=speedup is not None, versions=versions())

    results = [result("ok", 2.5), result("ok", 0.5), result("wrong"), result("flagged")]
    assert fast_p(results, 0) == 0.5 and fast_p(results, 1) == 0.25 and fast_p(results, 2) == 0.25
    assert SuiteResult(dict(enumerate(results))).metrics()["geomean_speedup"] == pytest.approx((2.5 * 0.5) ** 0.5)
    assert fast_p([result("ok")], 1) is None  # nothing timed: CPU mode has no speedups


# -- error lines, pmpp_v2's layout, load_inline naming (CPU) -------------------------------------------------------

GM_V2 = FIXTURES / "gpumode" / "problems_v2" / "relu_py"


def test_prelude_keeps_every_line_of_the_source_where_it_was():
    from kerneldojo.adapters.runtime import with_prelude

    assert with_prelude("#!POPCORN x\nimport torch\n", "P") == "P  #!POPCORN x\nimport torch\n"
    assert with_prelude("import torch\nx = 1\n", "P") == "P; import torch\nx = 1\n"
    assert with_prelude("from __future__ import annotations\nimport torch\n", "P").splitlines()[1] == "P; import torch"
    assert with_prelude("def f():\n    pass\n", "P") is None  # nothing at top level runs before the footer
    # a module docstring may come before the future imports (red team round 70: the prelude went in front of it)
    headed = '"""Doc."""\nfrom __future__ import annotations\nimport torch\n'
    assert with_prelude(headed, "P") == '"""Doc."""\nfrom __future__ import annotations\nP; import torch\n'
    compile(with_prelude(headed, "P"), "submission.py", "exec")
    # Python's line ends only (red team round 59): a form feed or U+2028 stays inside its comment or string
    odd = "# page\x0cbreak \u2028 x = 1\nimport torch\nS = 'a\u2028b'\n"
    assert with_prelude(odd, "P") == "P  " + odd
    assert with_prelude("import torch\r\nx = 1", "P") == "P; import torch\nx = 1\n"


def test_gpumode_error_lines_are_the_submissions_own(judge):
    result = gpumode.load(GM_PROBLEM).evaluate((GM_SOLUTIONS / "raises_on_line_7.py").read_text(), judge)
    assert result.status == "runtime_error" and "submission.py, line 7, in custom_kernel" in result.messages[0]


def test_gpumode_pmpp_v2_layout_with_an_output_buffer_in_data(judge, tmp_path):
    problem = gpumode.load(GM_V2)
    assert problem.reason is None, problem.reason
    assert "def custom_kernel" in problem.task.folder.joinpath("starter_triton.py").read_text()  # ../template.py
    assert problem.evaluate((GM_SOLUTIONS / "relu_v2.py").read_text(), judge).status == "ok"
    wrong = (GM_SOLUTIONS / "relu_v2.py").read_text().replace("tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0)",
                                                              "tl.load(x_ptr + offs, mask=mask)")
    result = problem.evaluate(wrong, judge)
    assert result.status == "wrong" and "differ from the reference" in result.messages[0]  # its utils' check
    import shutil

    shutil.copytree(GM_V2.parent, tmp_path / "suite")
    task_yml = tmp_path / "suite" / "relu_py" / "task.yml"
    task_yml.write_text(task_yml.read_text().replace('lang: "py"', 'lang: "cu"'))
    assert "lang: 'cu'" in gpumode.load(task_yml.parent).reason


def test_load_inline_extensions_are_named_by_their_content():
    from kerneldojo.adapters import runtime

    source = (KB_SOLUTIONS.parent / "solutions_gpu" / "1_relu_inline.py").read_text()
    (call,) = runtime.load_inline_calls(source)
    assert call["functions"] == ["relu_cuda"] and "__global__" in call["cuda_sources"]
    (same,) = runtime.load_inline_calls(source.replace('name="relu"', 'name="my_other_name"'))
    key = runtime.extension_key(call, "2.11", "12.8", "sm_90")
    assert runtime.extension_key(same, "2.11", "12.8", "sm_90") == key  # one build for both solutions
    assert runtime.extension_name(call, key) == f"kd_{key}"
    other = [runtime.extension_key(call | {"extra_cuda_cflags": ["-O2"]}, "2.11", "12.8", "sm_90"),
             runtime.extension_key(call, "2.12", "12.8", "sm_90"), runtime.extension_key(call, "2.11", "13.0", "sm_90"),
             runtime.extension_key(call, "2.11", "12.8", "sm_100")]
    assert key not in other and len(set(other)) == 4
    bound = call | {"cpp_sources": "PYBIND11_MODULE(mine, m) {}"}
    assert runtime.extension_name(bound, key) == "mine"  # a module name the library binds itself stays
    problem = kernelbench.load(KB_LEVEL.parent / "level_gpu" / "1_relu.py", check_degenerate=False)
    wrapped = problem.wrap(source)
    assert wrapped.splitlines()[0].startswith(runtime.EXTENSION_PRELUDE)
    assert wrapped.splitlines()[1:source.count("\n")] == source.splitlines()[1:]  # every line where it was


# -- on a GPU: python3 -P -m pytest -m gpu tests/test_adapters.py -v -----------------------------------------------

KB_GPU, KB_GPU_SOLUTIONS = FIXTURES / "kernelbench" / "level_gpu", FIXTURES / "kernelbench" / "solutions_gpu"


@pytest.fixture(scope="module")
def gpu_judge() -> Judge:
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    return Judge("cuda:0")


@pytest.mark.gpu
def test_gpu_kernelbench_triton_modelnew_reports_its_own_kernel_share(gpu_judge):
    problem = kernelbench.load(KB_GPU / "1_relu.py")
    result = problem.evaluate((KB_GPU_SOLUTIONS / "1_relu_triton.py").read_text(), gpu_judge)
    print(result.status, result.speedup, result.kernel_coverage, result.messages)
    assert result.status == "ok" and result.timed and result.speedup
    assert result.kernel_coverage > 0.5 and any("own kernels" in m for m in result.messages)


@pytest.mark.gpu
def test_gpu_kernelbench_all_pytorch_modelnew_is_flagged(gpu_judge):
    problem = kernelbench.load(KB_GPU / "1_relu.py")
    result = problem.evaluate((KB_GPU_SOLUTIONS / "1_relu_torch.py").read_text(), gpu_judge)
    print(result.status, result.kernel_coverage, result.messages)
    assert result.status == "flagged" and {"no_kernel", "decoy_kernel"} & set(result.checks_fired)


@pytest.mark.gpu
def test_gpu_kernelbench_load_inline_modelnew_builds_and_its_kernel_counts_as_its_own(gpu_judge):
    problem = kernelbench.load(KB_GPU / "1_relu.py")
    source = (KB_GPU_SOLUTIONS / "1_relu_inline.py").read_text()
    first = problem.evaluate(source, gpu_judge)
    print("cold", first.status, first.phases, first.kernel_coverage, first.messages, first.evidence)
    assert first.status == "ok" and first.kernel_coverage > 0.5, first.messages
    second = problem.evaluate(source.replace('name="relu"', 'name="relu_again"'), gpu_judge)
    print("again", second.status, second.phases, second.kernel_coverage)
    assert second.status == "ok"


@pytest.mark.gpu
def test_gpu_suite_metrics_and_a_gpumode_submission(gpu_judge, tmp_path):
    solutions = tmp_path / "solutions"
    solutions.mkdir()
    (solutions / "1_relu.py").write_text((KB_GPU_SOLUTIONS / "1_relu_triton.py").read_text())
    suite = kernelbench.evaluate_folder(KB_GPU, solutions, gpu_judge)
    print(suite.render())
    metrics = suite.metrics()
    assert metrics["fast_0"] == 1.0 and metrics["geomean_speedup"] is not None and metrics["fast_1"] is not None
    for folder, file in ((GM_PROBLEM, GM_SOLUTIONS / "good.py"), (GM_V2, GM_SOLUTIONS / "relu_v2.py")):
        result = gpumode.load(folder).evaluate(file.read_text(), gpu_judge)
        print(folder.name, result.status, result.speedup, result.kernel_coverage)
        assert result.status == "ok" and result.timed


def test_a_solution_that_asks_to_be_skipped_is_judged_and_an_unreadable_call_crashes_nothing():
    """Red team round 24: a comment naming `cuda_sources` made a wrong CPU-mode solution `skipped`, with a reward of
    0.0 (a preset's failure is lower: -0.25 under kernrl); `load_inline(name={[]: 1})` raised TypeError out of the
    env's step. Round 58: skipped at a failure's reward, a broken or cheating solution escaped its own lower one
    (a compile error's, a flag's). A comment no longer skips it: nothing is skipped for its text."""
    from kerneldojo.adapters import runtime
    from kerneldojo.graders.reward import RewardConfig

    judge = Judge("cpu", result_cache=None, reward=RewardConfig.preset("kernrl"))
    problem = kernelbench.load(KB_LEVEL / "1_scaled_tanh.py")
    wrong = ("# load_inline cuda_sources\nimport torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n"
             "    def __init__(self, *args):\n        super().__init__()\n\n"
             "    def forward(self, x, *rest):\n        return torch.zeros_like(x)\n")
    assert problem.evaluate(wrong, judge).status == "wrong"
    assert problem.evaluate(wrong + "\ndef broken(:\n", judge).status == "compile_error"
    unreadable = "from torch.utils.cpp_extension import load_inline\nif False:\n    load_inline(name={[]: 1})\n"
    assert runtime.load_inline_calls(unreadable) == []
    assert problem.evaluate(unreadable + wrong.split("\n", 1)[1], judge).status != "skipped"


def test_load_inline_calls_read_a_spread_dict_and_leave_out_what_load_inline_would_not_take():
    """Red team round 96: `load_inline(**opts)` made a call with a None key, and `extra_cflags=5` an int flag: both
    crashed the judge's pre-build (an honest solution `runtime_error`, a whole suite's folder run stopped)."""
    from kerneldojo.adapters import runtime
    from kerneldojo.graders.extensions import build_extensions

    head = "from torch.utils.cpp_extension import load_inline\n"
    spread = head + "_opts = {'name': 'k', 'cpp_sources': 'int f();', 'functions': ['f']}\nmod = load_inline(**_opts)\n"
    (call,) = runtime.load_inline_calls(spread)
    assert call["name"] == "k" and call["cpp_sources"] == "int f();" and None not in call
    for bad in ("load_inline(name='k', cpp_sources='int f();', extra_cflags=5)\n",
                "load_inline(name='k', cpp_sources='int f();', extra_include_paths=3)\n",
                "load_inline(name='k', cpp_sources=['int f();', 7])\n",
                "load_inline(**{1: 'k'})\n"):
        assert runtime.load_inline_calls(head + bad) == [], bad
        build_extensions([head + bad], "90", strict=False)  # nothing to build ahead: no exception of the judge's


def test_the_judges_reading_of_load_inline_calls_is_linear_in_the_source(monkeypatch):
    """Red team round 113: `load_inline(**F, **F, ...)`, 24,500 spreads of one 12,000-key dict in a 198 kB source,
    made the judge's pre-build evaluate F each time (8 minutes of its process). The literal nodes it evaluates are now
    bounded by twice the source's; past that, the calls are left to the worker's own build."""
    import ast

    from kerneldojo.adapters import runtime
    from kerneldojo.graders.extensions import refused_word

    evaluated = []
    literal_eval = ast.literal_eval
    monkeypatch.setattr(runtime.ast, "literal_eval", lambda node: evaluated.append(node) or literal_eval(node))
    keys = 2000
    source = ("from torch.utils.cpp_extension import load_inline\n"
              "F = {" + ", ".join(f"'{k}': 0" for k in range(keys)) + "}\n"
              "x = load_inline(" + ", ".join(["**F"] * 2000) + ")\n")
    assert runtime.load_inline_calls(source) == []
    assert len(evaluated) <= 2 * 4  # the tree's ~4 nodes a key (and a spread's name), twice: a few evaluations of F
    honest = ("from torch.utils.cpp_extension import load_inline\nsrc = 'int f();'\n"
              "a = load_inline(name='a', cpp_sources=src, functions=['f'])\n"
              "b = load_inline(name='b', cpp_sources=src, functions=['f'])\n")
    assert [call["name"] for call in runtime.load_inline_calls(honest)] == ["a", "b"]
    assert refused_word(" ".join(["-w"] * 1000)) is None and refused_word("-w -I /x") is not None


def test_a_solution_past_the_source_limit_is_refused_before_any_parse_or_wrap(judge, monkeypatch):
    """Red team round 59: a 21 MB solution was parsed by the adapter (2 minutes, 11 GB in the judge's process) before
    the judge refused its length."""
    from kerneldojo.adapters import runtime
    from kerneldojo.graders import profile

    def never(*args):
        raise AssertionError("parsed")

    problem = kernelbench.load(KB_LEVEL / "1_scaled_tanh.py", check_degenerate=False)
    monkeypatch.setattr(runtime, "parse_python", never)
    monkeypatch.setattr(problem, "wrap", never)
    huge = (KB_SOLUTIONS / "1_scaled_tanh.py").read_text() + "# load_inline\n" + "x = 1\n" * 40_000
    result = problem.evaluate(huge, judge)
    assert result.status == "compile_error" and "more than the" in result.messages[-1], result.messages
    assert profile.parse_python("x = 1\n" * 200_000) is None  # past PARSE_LIMIT_CHARS: no parse anywhere


def test_an_adapted_problem_can_be_armed_for_the_evidence_pass():
    """On an H100 (2026-11-25) every KernelBench step failed with `TypeError: unhashable type: 'dict'`: the armed
    replays were keyed by task_ref, which is a dict of files for an adapter's task. The keys and the draw, on the
    CPU."""
    from kerneldojo.judge import _task_key

    task = kernelbench.load(KB_LEVEL / "1_scaled_tanh.py").task
    judge = Judge("cpu", result_cache=None)
    drawn = judge._draw_evidence_seeds(task)
    assert isinstance(_task_key(task), str) and len(drawn["cases"]) == len(task.cases("bench"))
    assert all(len(c["seeds"]) == 2 and c["outputs"] for c in drawn["cases"]) and drawn["task"]["id"] == task.id


def test_an_allocation_a_problems_input_code_leaves_unwritten_reaches_no_worker_with_old_memory():
    """Red team round 55: GPU MODE's pmpp_v2 matmul makes its output buffer with `torch.empty` and sends it as an
    input; a submission read 8 KiB of the judge's heap from it. Allocations made by a problem's own input code, in
    the judge, are zeroed as they are made, whatever their spelling (round 56), KernelBench's `get_inputs` too."""
    import torch

    from kerneldojo.adapters.runtime import gpumode_reference, kernelbench_reference

    def generate_input(n, seed):  # round 56: every spelling of an allocation, not torch.empty's alone
        return (torch.randn(n, n), torch.empty(n, n), torch.randn(n).new_empty(n), torch.empty_like(torch.ones(n)),
                torch.Tensor(n), torch.zeros(1).new(n), torch.empty(0).resize_(n),
                torch.ops.aten.empty.memory_format([n]))

    make_inputs = gpumode_reference({"generate_input": generate_input}, "tuple", {})[0]
    for _ in range(3):
        marker = torch.full((4096,), 7.0)  # memory that held data, freed just before
        del marker
        _, *unwritten = make_inputs({"n": 64, "dtype": "float32"}, 1, "cpu")
        assert all(torch.count_nonzero(t) == 0 for t in unwritten)
    ns = {"get_inputs": lambda: [torch.randn(8), torch.empty(8, 8)], "Model": None, "get_init_inputs": list}
    _, unwritten = kernelbench_reference(ns, [], 0)[0]({"dtype": "float32"}, 1, "cpu")
    assert torch.count_nonzero(unwritten) == 0


def test_a_gpumode_output_buffers_shape_is_left_out_of_the_perturbed_check():
    """Red team round 55: the worker gets a GPU MODE output buffer as its shape ([17, 34]); the last check's
    perturbation copied one entry over the other ([34, 34]) and the reference raised: an honest kernel ended
    `runtime_error` on about half the steps of a problem whose buffer is not square. The adapter names those inputs
    `unperturbed`, and the perturbation leaves them as they are."""
    import torch

    from kerneldojo.judge import _perturbed

    assert gpumode.load(GM_V2).task.reference.unperturbed == (1,)
    x, shape = torch.randn(64, 128), torch.tensor([17, 34])
    for _ in range(20):
        moved = _perturbed((x, shape), unperturbed=(1,))
        assert torch.equal(moved[1], shape) and not torch.equal(moved[0], x)


def test_an_adapted_tasks_allowlist_is_every_aten_operator_whatever_the_process_touched():
    """Red team round 103: the list came from `dir(torch.ops.aten)`, which holds only what the process had touched,
    so a fresh judge lacked `scaled_dot_product_attention` (library math) and judged an honest problem keeping
    cuBLAS's GEMM `decoy_kernel`. Read in a fresh interpreter, the list holds every library operator."""
    import subprocess
    import sys

    from kerneldojo.judge import LIBRARY_OPS

    code = "from kerneldojo.adapters.kernelbench import _all_aten_ops; print(' '.join(_all_aten_ops()))"
    fresh = set(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split())
    assert fresh >= LIBRARY_OPS and "aten.scaled_dot_product_attention" in fresh
