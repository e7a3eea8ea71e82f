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
        while _libdevice_swaps:  # the kernels' modules get their libdevice names back, for the GPU's compiler
            namespace, name, stub = _libdevice_swaps.pop()
            namespace[name] = stub
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
_libdevice_swaps: list[tuple[dict, str, object]] = []
# The interpreter's float operations (InterpreterBuilder.create_<name>) that bf16 needs computed on values.
_FLOAT_OPS = frozenset({
    "fadd", "fsub", "fmul", "fdiv", "frem", "fneg", "fma", "precise_divf", "approx_divf", "minimumf", "minnumf",
    "maximumf", "maxnumf", "clampf", "exp", "exp2", "log", "log2", "sqrt", "precise_sqrt", "rsqrt", "sin", "cos",
    "erf", "floor", "ceil", "fcmpOEQ", "fcmpONE", "fcmpOLT", "fcmpOLE", "fcmpOGT", "fcmpOGE", "fcmpUEQ", "fcmpUNE",
    "fcmpULT", "fcmpULE", "fcmpUGT", "fcmpUGE", "fcmpORD", "fcmpUNO",
})  # fmt: skip


def _math(name: str):
    """numpy's version of a libdevice function (`__nv_rsqrtf` -> rsqrt), computed in the argument's precision."""
    import math

    import numpy as np

    def erf(x):  # not torch's: an aten operator inside a launch is the submission's to the operator watch (round 64)
        return np.vectorize(math.erf, otypes=[np.float64])(x).astype(np.asarray(x).dtype)

    table = {
        "rsqrt": lambda x: 1 / np.sqrt(x), "sqrt": np.sqrt, "exp": np.exp, "exp2": np.exp2, "log": np.log,
        "log2": np.log2, "log10": np.log10, "log1p": np.log1p, "expm1": np.expm1, "tanh": np.tanh, "sin": np.sin,
        "cos": np.cos, "tan": np.tan, "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan, "sinh": np.sinh,
        "cosh": np.cosh, "erf": erf, "pow": np.power, "powf": np.power, "fmod": np.fmod, "floor": np.floor,
        "ceil": np.ceil, "trunc": np.trunc, "round": np.round, "rint": np.rint, "nearbyint": np.rint,
        "fabs": np.abs, "abs": np.abs, "fmax": np.fmax, "fmin": np.fmin, "atan2": np.arctan2, "isnan": np.isnan,
        "isinf": np.isinf, "cbrt": np.cbrt, "hypot": np.hypot, "copysign": np.copysign, "exp10": lambda x: 10**x,
        "rcp": lambda x: 1 / x, "div": np.divide, "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    }  # fmt: skip
    base = name.removeprefix("__nv_").removeprefix("fast_")
    for candidate in (base, base.removesuffix("f"), base.split("_")[0], base.split("_")[0].removesuffix("f")):
        if candidate in table:
            return table[candidate]
    return None


def _patch_bf16() -> None:
    """Where Triton 3.x's interpreter differs from the GPU, make it agree. It stores bf16 as raw 16-bit
    patterns, so tl.dot, arithmetic, comparisons and reductions on bf16 work on the patterns (garbage):
    here they work on the values in fp32, rounded back as the hardware rounds (fp16 is numpy's own
    float16 and right already); float32 -> bf16 casts truncate where the GPU rounds to nearest even.
    `libdevice` functions (rsqrt, tanh, ...) have no interpreter version: here they run as numpy.
    A Python float argument stays a float where the GPU makes it an fp32 scalar (`eps.to(tl.float32)`).
    Also mark launches (`in_launch`), so that the operator watch leaves Triton's own copies out."""
    global _patched
    if _patched:
        return
    import numpy as np
    import triton.language as tl
    from triton.runtime import interpreter as interp

    needed = ("_convert_float", "_get_np_dtype", "_patch_lang", "_implicit_cvt", "ReduceOps", "interpreter_semantic")
    if not all(hasattr(interp, n) for n in needed) or not hasattr(interp.InterpreterBuilder, "create_dot"):
        return  # a Triton whose interpreter differs (3.6 to 3.9 have these internals); nothing known to fix
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

    def extern_elementwise(self, lib_name, lib_path, symbol, args, ret_type, is_pure):
        fn = _math(symbol)
        if fn is None:
            raise NotImplementedError(f"{symbol} (libdevice) has no CPU-mode version; use triton.language's own "
                                      "math (tl.exp, tl.sqrt, ...) or run on a GPU")
        with np.errstate(all="ignore"):  # as the GPU: inf and nan, no warnings
            out = fn(*(a.data for a in args))
        scalar = ret_type.scalar if hasattr(ret_type, "scalar") else ret_type
        return interp.TensorHandle(np.asarray(out).astype(interp._get_np_dtype(scalar)), scalar)

    patch_lang = interp._patch_lang

    def patch_lang_and_libdevice(fn):
        """Triton's `extra.libdevice` stubs are bound by the GPU compiler; here, to the CUDA libdevice's own
        functions, whose extern calls run as numpy (`extern_elementwise`)."""
        scope = patch_lang(fn)
        # the kernel's own names, and the libdevice modules' (`libdevice.tanh`, `tl.extra.cuda.libdevice.tanh`: red
        # team round 64, an honest kernel calling through the module ran the stub's empty body)
        modules = [vars(m) for name in ("triton.language.extra.libdevice", "triton.language.extra.cuda.libdevice")
                   if (m := sys.modules.get(name)) is not None]
        for namespace in (fn.__globals__, *modules):
            for name, value in list(namespace.items()):
                if _is_libdevice_stub(value):
                    try:
                        interpreted = _interpreted_libdevice(value)
                    except NotImplementedError:
                        if namespace is fn.__globals__:
                            raise
                        continue  # a module's function no kernel here named: it fails if called, saying why
                    _libdevice_swaps.append((namespace, name, value))
                    namespace[name] = interpreted
        return scope

    int_to_tensor = interp._implicit_cvt

    def float_as_fp32(arg):
        """A Python float argument is an fp32 scalar in a compiled kernel (`eps.to(tl.float32)` works)."""
        if isinstance(arg, float):
            return tl.tensor(interp.TensorHandle(np.array([arg], dtype=np.float32), tl.float32), tl.float32)
        return int_to_tensor(arg)

    def in_fp32(op):
        """bf16 arithmetic and comparisons as the GPU does them: on the values in fp32, rounded back to bf16
        (the interpreter's own ops would add, multiply and compare the raw 16-bit patterns)."""

        @functools.wraps(op)
        def widened(self, *args):
            if not any(isinstance(a, interp.TensorHandle) and a.dtype.scalar == tl.bfloat16 for a in args):
                return op(self, *args)
            out = op(self, *(widen(a) if isinstance(a, interp.TensorHandle) else a for a in args))
            return to_bf16_nearest_even(out) if out.dtype.scalar == tl.float32 else out

        return widened

    def reduced_in_fp32(reduce):
        @functools.wraps(reduce)
        def widened(self, input, *args, **kwargs):
            if isinstance(input, tl.tensor) and input.dtype.scalar == tl.bfloat16:
                wide = widen(input.handle)
                out = reduce(self, tl.tensor(wide, input.type.with_element_ty(tl.float32)), *args, **kwargs)
                outs = out if isinstance(out, tuple) else (out,)
                outs = tuple(tl.tensor(to_bf16_nearest_even(o.handle), o.type.with_element_ty(tl.bfloat16))
                             if o.dtype.scalar == tl.float32 else o for o in outs)
                return outs if isinstance(out, tuple) else outs[0]
            return reduce(self, input, *args, **kwargs)

        return widened

    for name, value in list(vars(interp.InterpreterBuilder).items()):
        if name.startswith("create_") and callable(value) and name.removeprefix("create_") in _FLOAT_OPS:
            setattr(interp.InterpreterBuilder, name, in_fp32(value))
    interp.ReduceOps.sum = reduced_in_fp32(interp.ReduceOps.sum)
    interp.ReduceOps.min_max = reduced_in_fp32(interp.ReduceOps.min_max)

    launch = interp.GridExecutor.__call__

    @functools.wraps(launch)
    def marked_launch(self, *args, **kwargs):
        _launching.depth = getattr(_launching, "depth", 0) + 1
        try:
            return launch(self, *args, **kwargs)
        finally:
            _launching.depth -= 1

    interp.GridExecutor.__call__ = marked_launch
    interp.InterpreterBuilder.create_extern_elementwise = extern_elementwise
    interp._patch_lang = patch_lang_and_libdevice
    interp._implicit_cvt = float_as_fp32
    interp.InterpreterBuilder.create_dot = create_dot_widened
    interp.InterpreterBuilder.cast_impl = cast_rounding
    interp.InterpreterBuilder.create_fp_trunc = cast_rounding
    interp.InterpreterBuilder.create_fp_to_fp = fp_to_fp_rounding
    _patched = True


def _is_libdevice_stub(value: object) -> bool:
    module = getattr(value, "__module__", "") or ""
    fresh = not getattr(value, "_kerneldojo_interpreted", False)
    return fresh and callable(value) and module.startswith("triton.language.extra") and "libdevice" in module


def _interpreted_libdevice(stub):
    """The CUDA libdevice function of the stub's name, called with the interpreter's semantic."""
    from triton.language.extra.cuda import libdevice
    from triton.runtime import interpreter as interp

    target = getattr(libdevice, stub.__name__, None)
    if target is None:
        raise NotImplementedError(f"libdevice.{stub.__name__} has no CPU-mode version")

    @functools.wraps(stub)
    def call(*args, **kwargs):
        kwargs.pop("_semantic", None)
        return target(*args, _semantic=interp.interpreter_semantic, **kwargs)

    call._kerneldojo_interpreted = True
    return call
