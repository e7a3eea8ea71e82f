import shutil

import pytest

from kerneldojo.lint import lint_solutions, lint_task
from kerneldojo.tasks import TASKS_DIR, list_tasks, load_task


@pytest.mark.parametrize("task_id", list_tasks())
def test_every_task_definition_is_sound(task_id):
    from kerneldojo.tasks import get_task

    assert lint_task(get_task(task_id)) == []


@pytest.fixture
def broken_copy(tmp_path):
    folder = tmp_path / "vector_add"
    shutil.copytree(TASKS_DIR / "vector_add", folder)

    def edit(file, old, new):
        text = (folder / file).read_text()
        assert old in text
        (folder / file).write_text(text.replace(old, new))

    return folder, edit


def test_linter_catches_an_ignored_input(broken_copy):
    folder, edit = broken_copy
    edit("reference.py", "return x + y", "return x + 0 * y.sum()")
    assert any("does not depend on input 'y'" in p for p in lint_task(load_task(folder)))


def test_linter_catches_a_constant_output(broken_copy):
    folder, edit = broken_copy
    edit("reference.py", "return x + y", "return torch.ones_like(x)")
    problems = lint_task(load_task(folder))
    assert any("same output for 4 seeds" in p for p in problems)
    assert any("near-constant" in p for p in problems)


def test_linter_catches_an_expected_that_is_not_the_reference(broken_copy):
    folder, edit = broken_copy
    edit("reference.py", "return x + y", "return x + y\n\n\ndef expected(x, y):\n    return x - y")
    assert any("expected() and reference() disagree" in p for p in lint_task(load_task(folder)))


def test_linter_wants_awkward_test_sizes_and_big_benchmarks(broken_copy):
    folder, edit = broken_copy
    edit("task.toml", "{ n = 1 }, { n = 7 }, { n = 1000 }, { n = 65537 }, { n = 1048577 }, { n = 16777219 }",
         "{ n = 1024 }, { n = 4096 }")
    edit("task.toml", "bench = [{ n = 16777216 }, { n = 134217728 }]", "bench = [{ n = 4096 }]")
    problems = lint_task(load_task(folder))
    assert any("every n is a multiple of 16" in p for p in problems)
    assert any("under the 10 us minimum; make it larger" in p for p in problems)


def test_linter_runs_the_starters(broken_copy, cpu_judge):
    folder, edit = broken_copy
    edit("starter_triton.py", "mask = offs < n ", "mask = offs < n - 1 ")
    problems = lint_solutions(load_task(folder), cpu_judge)
    assert any(p.startswith("starter_triton: wrong: ") for p in problems)


def test_linter_counts_failures_over_repeated_evaluations(broken_copy, cpu_judge):
    folder, edit = broken_copy
    edit("starter_triton.py", "mask = offs < n ", "mask = offs < n - 1 ")
    problems = lint_solutions(load_task(folder), cpu_judge, repeat=2)
    assert any(p.startswith("starter_triton: wrong in 2 of 2 evaluations: ") for p in problems), problems
    assert not any(p.startswith("baseline") for p in problems), problems


def test_docs_tasks_md_is_generated_from_the_task_folders():
    from kerneldojo.docgen import render

    committed = (TASKS_DIR.parent / "docs" / "tasks.md").read_text()
    assert committed == render(), "docs/tasks.md is stale: python -m kerneldojo.docgen > docs/tasks.md"


def test_linter_wants_inputs_that_follow_the_seed(broken_copy):
    folder, edit = broken_copy
    edit("reference.py", "g = torch.Generator(device=device).manual_seed(seed)", "g = None")
    assert any("different inputs for the same seed" in p for p in lint_task(load_task(folder)))
    edit("reference.py", "g = None", "g = torch.Generator(device=device).manual_seed(0)")
    assert any("ignores `seed`" in p for p in lint_task(load_task(folder)))
