"""Honest: a third-party Triton library's forward kernel called as-is (Liger-Kernel's softmax).

The submission imports `liger_kernel.ops.softmax._softmax_forward` (a single-block kernel for rows
that fit one block, an online two-pass kernel for longer ones) and returns its output; nothing is
written here but the call. A library's Triton kernels are compiled in the worker like the
submission's own (Triton's JIT), so they count as its kernels: they must not trip `vendor_kernel`,
`decoy_kernel` or the operator allowlist (its wrapper only allocates and makes views).

task: softmax
language: triton
modes: cpu gpu
"""

from liger_kernel.ops.softmax import _softmax_forward


def solution(x):
    return _softmax_forward(x)[0]
