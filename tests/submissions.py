"""Small submissions the tests share: honest ones and broken ones, as source text."""

VECTOR_ADD_TRITON = '''
import torch
import triton
import triton.language as tl


@triton.jit
def add(x, y, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=mask) + tl.load(y + offs, mask=mask), mask=mask)


def solution(x, y):
    out = torch.empty_like(x)
    add[(triton.cdiv(x.numel(), 256),)](x, y, out, x.numel(), BLOCK=256)
    return out
'''

# The classic bound bug: the last element is never written.
VECTOR_ADD_OFF_BY_ONE = VECTOR_ADD_TRITON.replace("mask = offs < n", "mask = offs < n - 1")

VECTOR_ADD_SYNTAX_ERROR = """
import torch


def solution(x, y):
    out = torch.empty_like(x
    return out
"""

VECTOR_ADD_RAISES = """
def helper(x):
    return x.no_such_method()


def solution(x, y):
    return helper(x)
"""

VECTOR_ADD_TORCH = """
def solution(x, y):
    return x + y
"""

VECTOR_ADD_CUDA = r'''
#include <cuda_runtime.h>
#include <cstdint>

__global__ void add(const float* x, const float* y, float* out, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[i] + y[i];
}

extern "C" void solution(const float* x, const float* y, float* out, int64_t n, cudaStream_t stream) {
    add<<<(n + 255) / 256, 256, 0, stream>>>(x, y, out, n);
}
'''

VECTOR_ADD_CUDA_OFF_BY_ONE = VECTOR_ADD_CUDA.replace("if (i < n)", "if (i < n - 1)")

VECTOR_ADD_CUDA_ERROR = VECTOR_ADD_CUDA.replace("out[i] = x[i] + y[i];", "out[i] = x[i] + undeclared[i];")

# A kernel that is valid Python but not valid Triton: Triton rejects it when it compiles (on a GPU).
VECTOR_ADD_TRITON_COMPILE_ERROR = VECTOR_ADD_TRITON.replace(
    "    mask = offs < n\n", "    mask = offs < n\n    bad = tl.no_such_function(offs)\n"
)

# Device faults: a write far out of bounds (illegal address) and a kernel that never ends.
VECTOR_ADD_CUDA_ILLEGAL_ADDRESS = VECTOR_ADD_CUDA.replace(
    "if (i < n) out[i] = x[i] + y[i];", "if (i < n) out[i + (1ll << 40)] = x[i] + y[i];"
)
VECTOR_ADD_CUDA_HANG = VECTOR_ADD_CUDA.replace(
    # Spins on the clock (a side effect the compiler must keep), then writes: a loop it cannot drop.
    "if (i < n) out[i] = x[i] + y[i];",
    "long long t0 = clock64();\n    while (clock64() - t0 >= 0) {}\n    if (i < n) out[i] = x[i] + y[i];"
)
