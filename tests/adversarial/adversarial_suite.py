"""The exploit suite's submissions: each file carries its own metadata in its header."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

HERE = Path(__file__).parent
FIELDS = ("task", "language", "modes", "defence", "statuses", "twin")
_FIELD = re.compile(r"^\s*(" + "|".join(FIELDS) + r"):\s*(.+?)\s*$", re.MULTILINE)


@dataclass(frozen=True)
class Submission:
    path: Path
    task: str
    language: str
    modes: tuple[str, ...]  # "cpu", "gpu"
    defence: str  # the check (or `wrong`) expected to stop it; "" for honest ones
    statuses: tuple[str, ...]  # statuses that count as caught (exploits) or as a pass (honest)
    twin: str = ""  # an attack on a figure: the honest submission whose result it must not beat when it ends `ok`

    @property
    def name(self) -> str:
        return self.path.stem

    @property
    def source(self) -> str:
        return self.path.read_text()


def load(folder: str, default_statuses: tuple[str, ...]) -> list[Submission]:
    out = []
    for path in sorted((HERE / folder).iterdir()):
        if path.suffix not in (".py", ".cu") or path.name.startswith("_"):
            continue
        header = path.read_text()[:3000]
        fields = dict(_FIELD.findall(header))
        missing = [f for f in ("task", "language", "modes") if f not in fields]
        if missing:
            raise ValueError(f"{path}: header lacks {', '.join(missing)}")
        out.append(Submission(
            path=path, task=fields["task"], language=fields["language"],
            modes=tuple(fields["modes"].replace(",", " ").split()),
            defence=fields.get("defence", ""),
            statuses=tuple(fields["statuses"].replace(",", " ").split()) if "statuses" in fields else default_statuses,
            twin=fields.get("twin", ""),
        ))  # fmt: skip
    return out


def cases(submissions: list[Submission], known_escapes: dict[tuple[str, str], str] | None = None) -> list:
    """One pytest param per (submission, mode); GPU ones are marked `gpu`; known escapes xfail(strict)."""
    params = []
    for sub in submissions:
        for mode in sub.modes:
            marks = [pytest.mark.gpu] if mode == "gpu" else []
            reason = (known_escapes or {}).get((sub.name, mode))
            if reason:
                marks.append(pytest.mark.xfail(strict=True, reason=f"KNOWN ESCAPE: {reason}"))
            params.append(pytest.param(sub, mode, id=f"{sub.name}-{mode}", marks=marks))
    return params


