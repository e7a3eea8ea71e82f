"""What the benchmark scripts share: where they write (results.json and results.md in a folder given as
argument), the machine they ran on, and percentiles."""

from __future__ import annotations

import json
import platform
import statistics
import time
from pathlib import Path


def machine() -> dict:
    import torch

    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    return {"date": time.strftime("%Y-%m-%d %H:%M"), "gpu": gpu, "host": platform.node(),
            "python": platform.python_version(), "torch": torch.__version__}


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[round(q) - 1]


def write(folder: str | Path, name: str, data: dict, table: list[str]) -> None:
    """`<folder>/<name>.json` (the data and the machine) and `<folder>/<name>.md` (the table); prints the table."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    data = {"machine": machine(), **data}
    (folder / f"{name}.json").write_text(json.dumps(data, indent=1, default=str))
    m = data["machine"]
    text = "\n".join([f"{name}: {m['gpu'] or 'CPU mode (no GPU)'}, {m['date']}, torch {m['torch']}", "", *table, ""])
    (folder / f"{name}.md").write_text(text)
    print(text)


def fmt(value, spec: str = ".2f") -> str:
    return "-" if value is None else format(value, spec)
