# target: matmul. CONTROL (not an attack): plain torch.mm with no evasion, to show that the
# forbidden-op watch does fire when nothing defeats it.
import torch
import triton  # noqa: F401


def solution(a, b):
    return torch.mm(a.float(), b.float()).to(a.dtype)
