# target: matmul. NOT an attack: a deliberately WRONG submission (zeros), used as the "next step"
# after an attack, to show whether the judge's state leaked (a fresh judge scores it wrong / 0).
import torch
import triton  # noqa: F401


def solution(a, b):
    return torch.zeros(a.shape[0], b.shape[1], dtype=a.dtype)
