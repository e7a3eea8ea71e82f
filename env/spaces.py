"""Spaces for source code and prose, which gymnasium's `Text` (a fixed alphabet) cannot hold."""

from __future__ import annotations

import string
from typing import Any

from gymnasium.spaces import Text


class SourceText(Text):
    """Any string up to `max_length` characters; samples are drawn from printable ASCII."""

    def __init__(self, max_length: int, min_length: int = 0, seed: int | None = None):
        super().__init__(max_length, min_length=min_length, charset=string.printable, seed=seed)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"SourceText({self.min_length}, {self.max_length})"
