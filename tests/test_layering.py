"""The trust boundary in the import graph: the worker side (`kerneldojo.sandbox.worker`, which runs next to
untrusted code) imports nothing of the judge side; what both share imports neither; no module imports
itself in a loop. The contracts are import-linter's, in pyproject.toml.

An editable install maps `kerneldojo.env` to `env/` and so on through a finder hook, which import
graphs do not follow: they would see `kerneldojo/` alone and check nothing. So the package is laid
out as installed, in a temporary folder, and the graph is built there (its size is asserted).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
CONTRACTS = {c["id"]: c for c in PYPROJECT["tool"]["importlinter"]["contracts"]}
WORKER = CONTRACTS["worker"]["source_modules"]
JUDGE = CONTRACTS["worker"]["forbidden_modules"]
SHARED = CONTRACTS["shared"]["source_modules"]
ROOT_ONLY = {"kerneldojo", "kerneldojo.__main__"}  # the API and `python -m kerneldojo`: judge side
# Folders only: they import nothing.
EMPTY_PACKAGES = {"kerneldojo.sandbox", "kerneldojo.graders", "kerneldojo.adapters"}

grimp = pytest.importorskip("grimp", reason="import-linter (the dev extra) is not installed")


def lay_out_package(target: Path) -> int:
    """Copy every module of the package to where an installed copy has it; return how many there are."""
    count = 0
    for name, folder in sorted(PYPROJECT["tool"]["setuptools"]["package-dir"].items(), key=lambda kv: kv[0].count(".")):
        destination = target.joinpath(*name.split("."))
        for source in (ROOT / folder).rglob("*.py"):
            relative = source.relative_to(ROOT / folder)
            # A module belongs to the package if every folder down to it is a package.
            if not all((ROOT / folder / p / "__init__.py").is_file() for p in [Path(), *relative.parents][:-1]):
                continue
            if (destination / relative).exists():
                continue
            (destination / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, destination / relative)
            count += 1
    return count


@pytest.fixture(scope="module")
def laid_out(tmp_path_factory) -> tuple[Path, int]:
    target = tmp_path_factory.mktemp("layout")
    return target, lay_out_package(target)


def graph_in(target: Path):
    sys.path.insert(0, str(target))
    saved = {k: v for k, v in sys.modules.items() if k == "kerneldojo" or k.startswith("kerneldojo.")}
    for name in saved:
        del sys.modules[name]
    try:
        return grimp.build_graph("kerneldojo", cache_dir=None)
    finally:
        sys.path.remove(str(target))
        for name in [k for k in sys.modules if k == "kerneldojo" or k.startswith("kerneldojo.")]:
            del sys.modules[name]
        sys.modules.update(saved)


def side(module: str) -> list[str]:
    return [name for name, prefixes in (("worker", WORKER), ("judge", JUDGE), ("shared", SHARED))
            if any(module == p or module.startswith(p + ".") for p in prefixes)]


def test_the_graph_sees_every_module(laid_out):
    target, count = laid_out
    graph = graph_in(target)
    assert len(graph.modules) == count, (count, sorted(graph.modules))
    # Every mapped folder is in it, not only kerneldojo/ (36 modules on 2026-11-24).
    assert {"kerneldojo.env.kernel_env", "kerneldojo.sandbox.worker.harness", "kerneldojo.graders.timing",
            "kerneldojo.tasks.spec", "kerneldojo.baselines"} <= graph.modules and count >= 30


def test_every_module_is_on_one_side(laid_out):
    graph = graph_in(laid_out[0])
    unplaced = {m: side(m) for m in graph.modules if m not in ROOT_ONLY | EMPTY_PACKAGES and len(side(m)) != 1}
    assert not unplaced, f"add each module to one side in pyproject's [tool.importlinter] contracts: {unplaced}"
    reaching_root = [m for m in graph.modules if side(m) in (["worker"], ["shared"])
                     and "kerneldojo" in graph.find_modules_directly_imported_by(m)]
    assert not reaching_root, f"these import the API package (judge side): {reaching_root}"
    assert not any(graph.find_modules_directly_imported_by(p) for p in EMPTY_PACKAGES)


def test_import_linter_contracts_hold(laid_out):
    env = {**os.environ, "PYTHONPATH": str(laid_out[0])}
    lint = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or "lint-imports"
    run = subprocess.run([lint, "--config", str(ROOT / "pyproject.toml"), "--no-cache"], capture_output=True,
                         text=True, env=env, cwd=laid_out[0])
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"Contracts: {len(CONTRACTS)} kept, 0 broken" in run.stdout, run.stdout


def test_no_import_loops(laid_out):
    graph = graph_in(laid_out[0])
    loops = []
    for module in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(module)):
            back = graph.find_shortest_chain(importer=imported, imported=module)
            if back:
                loops.append(" -> ".join((module, *back)))
    assert not loops, "import loops:\n" + "\n".join(loops)


def test_a_worker_module_importing_the_judge_breaks_the_contract(laid_out, tmp_path):
    """The layering test can fail: a copy where the harness imports the judge is refused."""
    broken = tmp_path / "broken"
    shutil.copytree(laid_out[0], broken)
    harness = broken / "kerneldojo" / "sandbox" / "worker" / "harness.py"
    harness.write_text(harness.read_text() + "\nfrom kerneldojo.judge import Judge  # noqa\n")
    env = {**os.environ, "PYTHONPATH": str(broken)}
    lint = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or "lint-imports"
    run = subprocess.run([lint, "--config", str(ROOT / "pyproject.toml"), "--no-cache"], capture_output=True,
                         text=True, env=env, cwd=broken)
    assert run.returncode != 0 and "kerneldojo.sandbox.worker.harness -> kerneldojo.judge" in run.stdout, run.stdout
