"""Hand-written solutions shipped with each task: `baselines/<task>/<language>.{py,cu}`."""

from __future__ import annotations

from pathlib import Path

BASELINES_DIR = Path(__file__).parent
_FILES = {"triton": "triton.py", "cuda": "cuda.cu", "cute": "cute.cu"}


def shipped_solutions(task_id: str) -> dict[str, Path]:
    """The baseline files for a task, by language."""
    folder = BASELINES_DIR / task_id
    return {lang: folder / name for lang, name in _FILES.items() if (folder / name).is_file()}
