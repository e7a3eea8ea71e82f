"""Red team round 34, adapted problems. (1) A KernelBench problem's `make_inputs` is a closure that looks the
problem's `get_inputs` up in the problem's namespace at every call, so a submission that replaced it there had its
code run in the harness's refills, off the clock and unwatched (each timed input set's answer computed there by torch,
each paid call a token kernel and a copy). Everything the refills can reach is guarded now
(`watches.reachable_bindings`). (2) A suite's own check replaced the judge's structure check."""

from __future__ import annotations

from pathlib import Path

import pytest

from kerneldojo.adapters import kernelbench
from kerneldojo.judge import Judge

PROBLEM = Path(__file__).parents[1] / "fixtures" / "kernelbench" / "level_demo" / "1_scaled_tanh.py"
SOLUTION = (Path(__file__).parents[1] / "fixtures" / "kernelbench" / "solutions" / "1_scaled_tanh.py").read_text()
# Wraps the problem's get_inputs where the adapter's closure finds it: precomputing there is what the refills paid for.
HOOK = '''
import sys


def _hook():
    for module in list(sys.modules.values()):
        space = getattr(module, "__dict__", None)
        if space and callable(space.get("get_inputs")) and callable(space.get("make_inputs")) and "Model" in space:
            original = space["get_inputs"]
            space["get_inputs"] = lambda: original()


_hook()
'''


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("KERNELDOJO_CACHE", str(tmp_path_factory.getbasetemp() / "cache"))


def test_a_replaced_get_inputs_of_an_adapted_problem_is_tampering():
    problem = kernelbench.load(PROBLEM, check_degenerate=False)
    judge = Judge("cpu", reference_cache=None)
    assert problem.evaluate(SOLUTION, judge).status == "ok"
    hooked = problem.evaluate(SOLUTION + HOOK, judge)
    assert hooked.status == "flagged" and "tampering" in hooked.checks_fired, hooked.messages
    assert any("get_inputs" in m for m in hooked.messages)


def test_an_adapted_suites_own_check_comes_after_the_judges_structure_check():
    """Red team round 34: a suite's own check (GPU MODE's check_implementation) replaced the judge's comparison,
    structure included, and took a float16 output for a float32 one and a strided one."""
    from types import SimpleNamespace

    import torch

    from kerneldojo.graders.correctness import WrongOutput
    from kerneldojo.judge import _compare
    from kerneldojo.tasks import Tolerance

    x = torch.randn(1 << 12)
    task = SimpleNamespace(reference=SimpleNamespace(check=lambda inputs, got, shape: None),  # accepts anything
                           tolerance=lambda dtype: Tolerance(atol=1e-2, rtol=1e-2))
    case = SimpleNamespace(shape={}, dtype="float32")
    for got, why in (((x.half(),), "dtype"), ((torch.empty(2 << 12)[::2].copy_(x),), "strides"), ((x, x), "output")):
        with pytest.raises(WrongOutput, match=why):
            _compare(task, case, (x,), got, (x,), "case")
    assert _compare(task, case, (x,), (x.clone(),), (x,), "case") == 0.0


def test_refills_at_other_shapes_are_not_tampering():
    """The guard covers code the refills may run, not data: an adapted problem's size constants are rebound at every
    refill (on the H200, 2026-11-27, the first version flagged every timed KernelBench step `tampering`)."""
    from kerneldojo.sandbox.worker.harness import _reference_dependencies
    from kerneldojo.sandbox.worker.watches import Tampering

    task = kernelbench.load(PROBLEM, check_degenerate=False).task
    tampering = Tampering(_reference_dependencies(task.reference))
    for case in (*task.cases("small"), *task.cases("test")):
        task.reference.make_inputs(case.shape, 1, "cpu")
    assert tampering.changed() == []
