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


def test_kernelbench_load_inline_is_skipped_in_cpu_mode(judge):
    problem = kernelbench.load(KB_LEVEL / "1_scaled_tanh.py", check_degenerate=False)
    source = "from torch.utils.cpp_extension import load_inline\nmod = load_inline('x', '', cuda_sources='')\n"
    result = problem.evaluate(source, judge)
    assert result.status == "skipped" and "load_inline" in result.messages[0]


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
