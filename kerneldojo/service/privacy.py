"""What a caller may see of the service's records: one rule, applied to every response that can hold one.

A record (a result store's record, a job's view or its `result`) carries its `owner` (the token that submitted
it) and `public` (the owner let everyone read it). Anyone else gets the record without `PRIVATE`: the source
and what identifies the submitter or the submission. A record without an owner (written by `kerneldojo batch`,
or by a store that keeps no owner) is nobody's to read: fail closed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

# The source, what quotes it (a traceback's or a compiler's messages quote its lines; the kernel names in its
# timings' profiles, its ncu feedback and evidence), and what names or identifies its submitter and submission
# (`hash` confirms a guessed source).
PRIVATE = frozenset({"source", "messages", "timings", "ncu", "evidence", "label", "hash", "owner", "submitter", "job",
                     "batch"})


def visible_to(record: Mapping, viewer: str | None) -> bool:
    """`viewer` (a token's name) may read `record` whole: it submitted it, or its owner made it public."""
    return record.get("public") is True or (viewer is not None and record.get("owner") == viewer)


def for_viewer(data: Any, viewer: str | None, granted: bool = False) -> Any:
    """`data` as `viewer` may see it: a record, or any JSON-like structure or dataclass holding records (a
    leaderboard standing, a job's view, a batch), copied, each mapping that holds a `PRIVATE` field and is not
    `visible_to` the viewer without those fields. Each record is judged by its own `owner` and `public`, and what
    it holds (a job's `result`) as it is."""
    if dataclasses.is_dataclass(data) and not isinstance(data, type):
        data = dataclasses.asdict(data)
    if isinstance(data, Mapping):
        granted = granted or visible_to(data, viewer)
        hidden = not granted and not PRIVATE.isdisjoint(data)
        return {k: for_viewer(v, viewer, granted) for k, v in data.items() if not (hidden and k in PRIVATE)}
    if isinstance(data, (list, tuple)):
        return [for_viewer(v, viewer, granted) for v in data]
    return data
