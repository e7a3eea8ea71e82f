"""Fixtures of the exploit suite: module-scoped judges (one spare worker each), and a guard that
every judge-side function an exploit could reach is unchanged after each test, so one exploit
that gets code into the judge cannot poison the tests after it."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def adv_cpu_judge():
    from kerneldojo.judge import Judge

    return Judge("cpu", seeds=2, limits={"load": 60, "run": 30})  # two seeds: enough for cache_by_shape


@pytest.fixture(scope="module")
def adv_gpu_judge():
    from kerneldojo.judge import Judge

    return Judge("cuda", timing_budget_s=0.5, time_compiled_reference=False)


@pytest.fixture
def judge_for(adv_cpu_judge, request):
    """The judge of a mode. With KERNELDOJO_SUITE_RESULTS=<folder>, each result is also written there as JSON when
    it is made, so a GPU run that ends at its time limit keeps the messages of the cases it reached."""
    import os

    folder = os.environ.get("KERNELDOJO_SUITE_RESULTS")

    def pick(mode: str):
        judge = adv_cpu_judge if mode == "cpu" else request.getfixturevalue("adv_gpu_judge")
        return judge if not folder else _Recording(judge, Path(folder) / f"{_safe(request.node.name)}.json")

    return pick


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:150]


class _Recording:
    """A judge whose `evaluate` also writes each result to `path` (the last one wins)."""

    def __init__(self, judge, path: Path):
        self._judge, self._path = judge, path

    def __getattr__(self, name: str):
        return getattr(self._judge, name)

    def evaluate(self, *args, **kwargs):
        result = self._judge.evaluate(*args, **kwargs)
        self._path.parent.mkdir(parents=True, exist_ok=True)
        self._path.write_text(result.model_dump_json(indent=1))
        return result


def _judge_side_functions() -> dict[str, object]:
    import kerneldojo.graders.correctness as correctness
    import kerneldojo.graders.timing as timing
    import kerneldojo.judge as judge_module

    modules = (judge_module, correctness, timing)
    return {f"{m.__name__}.{k}": v for m in modules for k, v in vars(m).items() if callable(v)}


@pytest.fixture(autouse=True)
def judge_untouched():
    """An exploit that runs code in the judge (e.g. through the reply's unpickling) must not leave
    anything behind: fail loudly, and put the originals back for the tests that follow."""
    import sys

    before = _judge_side_functions()
    yield
    after = _judge_side_functions()
    changed = sorted(k for k in before if after.get(k) is not before[k])
    for key in changed:
        module, _, name = key.rpartition(".")
        setattr(sys.modules[module], name, before[key])
    assert not changed, f"judge-side functions were replaced during the test: {changed}"
