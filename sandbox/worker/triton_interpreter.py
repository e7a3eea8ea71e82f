"""CPU mode for Triton: run `@triton.jit` kernels through Triton's interpreter.

Triton reads TRITON_INTERPRET both when a kernel is decorated and when it runs (for its own
library functions such as tl.zeros), so it must be on while the submission is imported and while
it is called, and off again so that GPU evaluations in the same process compile for real.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import threading
from collections.abc import Iterator

_patched = False
_launching = threading.local()


def in_launch() -> bool:
    """Inside an interpreted kernel's launch, where Triton itself moves tensors with aten copies."""
    return getattr(_launching, "depth", 0) > 0


@contextlib.contextmanager
def interpreter(enabled: bool) -> Iterator[None]:
    if not enabled:
        yield
        return
    _patch_bf16()
    before = os.environ.get("TRITON_INTERPRET")
    os.environ["TRITON_INTERPRET"] = "1"
    swapped = _interpret_library_functions()
    try:
        yield
    finally:
        for module, name, jit_function in swapped:
            setattr(module, name, jit_function)
        if before is None:
            del os.environ["TRITON_INTERPRET"]
        else:
            os.environ["TRITON_INTERPRET"] = before


def _interpret_library_functions() -> list[tuple[object, str, object]]:
    """Library functions such as tl.zeros and tl.cdiv are `@jit`s made when triton was imported;
    if that was without TRITON_INTERPRET, they refuse to run inside an interpreted kernel.
    Swap in interpreted twins for the duration, and return what to put back."""
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    swapped = []
    for module_name, module in list(sys.modules.items()):
        if not module_name.startswith("triton.language") or module is None:
            continue
        for name, value in list(vars(module).items()):
            if isinstance(value, JITFunction):
                twin = _twins.setdefault(id(value), InterpretedFunction(value.fn))
                setattr(module, name, twin)
                swapped.append((module, name, value))
    return swapped


_twins: dict[int, object] = {}


def _patch_bf16() -> None:
    """Two bf16 bugs of Triton 3.x's interpreter, which stores bf16 as raw 16-bit patterns:
    tl.dot multiplies the patterns (garbage), and float32 -> bf16 casts truncate where the GPU
    rounds to nearest even (one ulp off in half the elements). Fix both, as the hardware does.
    Also mark launches (`in_launch`), so that the operator watch leaves Triton's own copies out."""
    global _patched
    if _patched:
        return
    import numpy as np
    import triton.language as tl
    from triton.runtime import interpreter as interp

    if not hasattr(interp, "_convert_float") or not hasattr(interp.InterpreterBuilder, "create_dot"):
        return  # a Triton whose interpreter differs; nothing known to fix
    create_dot = interp.InterpreterBuilder.create_dot

    def widen(t):
        if t.dtype != tl.bfloat16:
            return t
        return interp.TensorHandle(interp._convert_float(t.data, tl.bfloat16, tl.float32, None).view(np.float32),
                                   tl.float32)

    def create_dot_widened(self, a, b, d, *args):
        return create_dot(self, widen(a), widen(b), d, *args)

    cast_impl, fp_to_fp = interp.InterpreterBuilder.cast_impl, interp.InterpreterBuilder.create_fp_to_fp

    def to_bf16_nearest_even(src):
        x = src.data.astype(np.float32)
        bits = x.view(np.uint32)
        rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
        rounded[np.isnan(x)] = 0x7FC0
        return interp.TensorHandle(rounded, tl.bfloat16)

    def cast_rounding(self, src, dst_type):
        if src.dtype.scalar == tl.float32 and dst_type.scalar == tl.bfloat16:
            return to_bf16_nearest_even(src)
        return cast_impl(self, src, dst_type)

    def fp_to_fp_rounding(self, src, dst_type, rounding_mode):
        if src.dtype.scalar == tl.float32 and dst_type.scalar == tl.bfloat16:
            return to_bf16_nearest_even(src)
        return fp_to_fp(self, src, dst_type, rounding_mode)

    launch = interp.GridExecutor.__call__

    @functools.wraps(launch)
    def marked_launch(self, *args, **kwargs):
        _launching.depth = getattr(_launching, "depth", 0) + 1
        try:
            return launch(self, *args, **kwargs)
        finally:
            _launching.depth -= 1

    interp.GridExecutor.__call__ = marked_launch
    interp.InterpreterBuilder.create_dot = create_dot_widened
    interp.InterpreterBuilder.cast_impl = cast_rounding
    interp.InterpreterBuilder.create_fp_trunc = cast_rounding
    interp.InterpreterBuilder.create_fp_to_fp = fp_to_fp_rounding
    _patched = True
