"""Correctness: compare a submission's outputs with the reference's, element by element."""

from __future__ import annotations

import torch

from kerneldojo.result import Mismatch
from kerneldojo.tasks import Tolerance

# Where the judge allocates the outputs it fills them with this first, so unwritten elements show.
POISON = float("nan")


class WrongOutput(Exception):
    """The outputs are not what the reference gives; `mismatch` says where, when it is numeric."""

    def __init__(self, message: str, mismatch: Mismatch | None = None):
        super().__init__(message)
        self.mismatch = mismatch


def poisoned_like(expected: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
    return tuple(torch.full_like(t, _poison(t.dtype), memory_format=torch.contiguous_format) for t in expected)


def _poison(dtype: torch.dtype) -> float | complex | int | bool:
    """What an output holds before the kernel writes it: a value no right answer is likely to be (red team round 55:
    bool and complex outputs had none, so every submission of such a problem failed, and an unsigned type's was 0)."""
    if dtype.is_complex:
        return complex(POISON, POISON)
    if dtype.is_floating_point:
        return POISON
    if dtype == torch.bool:
        return True
    info = torch.iinfo(dtype)
    return info.max if info.min == 0 else info.min


def same_layout_copy(t: torch.Tensor, device: torch.device | str | None = None) -> torch.Tensor:
    """A copy of `t` (on `device`, by default its own) with its storage, offset and strides as they are (an expanded or
    strided input stays so); one copy of the storage's bytes (a memcpy, never a kernel)."""
    device = t.device if device is None else torch.device(device)
    raw = torch.empty(0, dtype=torch.uint8, device=t.device).set_(t.untyped_storage()).to(device, copy=True)
    return torch.empty(0, dtype=t.dtype, device=device).set_(raw.untyped_storage(), t.storage_offset(), t.shape,
                                                            t.stride())


def check_outputs(got: tuple, expected: tuple[torch.Tensor, ...], tol: Tolerance, case: str) -> float:
    """Raise WrongOutput unless every output matches; return the largest absolute error."""
    check_structure(got, expected, case)
    return max((_compare_values(i, g, e, tol, case) for i, (g, e) in enumerate(zip(got, expected))), default=0.0)


def check_structure(got: tuple, expected: tuple[torch.Tensor, ...], case: str) -> None:
    """Raise WrongOutput unless `got` has the reference's outputs' count, types, shapes, dtypes, device and layout:
    what every task requires, whoever compares the values (an adapted suite's own check included, red team round 34:
    GPU MODE's took a float16 output for a float32 one)."""
    if len(got) != len(expected):
        raise WrongOutput(f"{case}: returned {len(got)} output(s), expected {len(expected)}")
    for i, (g, e) in enumerate(zip(got, expected)):
        _check_structure(i, g, e, case)


def _check_structure(i: int, got, expected: torch.Tensor, case: str) -> None:
    where = f"{case}: output {i}"
    if type(got) is not torch.Tensor:
        raise WrongOutput(f"{where} is a {type(got).__name__}, expected a plain torch.Tensor")
    for attribute in ("shape", "dtype", "device"):
        if getattr(got, attribute) != getattr(expected, attribute):
            have, want = getattr(got, attribute), getattr(expected, attribute)
            raise WrongOutput(f"{where} has {attribute} {have}, expected {want}")
    if expected.is_contiguous() and not got.is_contiguous():  # a caller indexes it as the reference's layout
        raise WrongOutput(f"{where} has strides {got.stride()}, expected a contiguous tensor with strides "
                          f"{expected.stride()}; return it contiguous (your kernel writes it row-major)")


def _compare_values(i: int, got: torch.Tensor, expected: torch.Tensor, tol: Tolerance, case: str) -> float:
    if got.numel() == 0:
        return 0.0
    if got.is_complex():  # as real pairs: `double()` keeps the real part alone (round 55: the imaginary went unchecked)
        got, expected = torch.view_as_real(got.detach().resolve_conj()), torch.view_as_real(expected.resolve_conj())
    g, e = got.detach().double(), expected.detach().double()
    error = (g - e).abs()
    bad = error > tol.atol + tol.rtol * e.abs()
    # NaN passes only where the reference has NaN too; inf only where it has the same inf.
    bad |= torch.isnan(g) != torch.isnan(e)
    bad |= torch.isinf(e) & (g != e)
    bad &= ~(torch.isnan(g) & torch.isnan(e))
    finite_error = torch.where(torch.isfinite(error), error, torch.zeros_like(error))
    max_abs = float(finite_error.max())
    count = int(bad.sum())
    if count == 0:
        return max_abs
    # Report the worst element among those that fail (an unwritten NaN counts as infinitely wrong).
    score = torch.where(bad, torch.nan_to_num(error, nan=float("inf"), posinf=float("inf")), -1.0)
    flat = int(score.argmax())
    index = [int(x) for x in torch.unravel_index(torch.tensor(flat), got.shape)]
    rel = finite_error / e.abs().clamp_min(1e-12)
    mismatch = Mismatch(
        case=case, output=i, index=index,
        got=float(g.flatten()[flat]), expected=float(e.flatten()[flat]),
        max_abs_error=max_abs if not torch.isnan(g).any() else float("inf"),
        max_rel_error=float(rel[bad].max()), mismatched=count, total=got.numel(),
    )  # fmt: skip
    what = "unwritten or NaN" if torch.isnan(g.flatten()[flat]) else "differs"
    raise WrongOutput(
        f"{case}: output {i} {what} at index {tuple(index)}: got {mismatch.got:.6g}, expected {mismatch.expected:.6g} "
        f"({count} of {got.numel()} elements outside atol={tol.atol:g}, rtol={tol.rtol:g})",
        mismatch,
    )


def check_no_aliasing(got: tuple, inputs: tuple[torch.Tensor, ...], case: str) -> None:
    """An output that shares memory with an input is a view, not a result (and breaks in-place callers).
    Decided by address ranges, not by storage identity: a second mapping or a `from_blob` of an input's
    memory is a different storage over the same bytes."""
    spans = [_span(t) for t in inputs if t.numel()]
    for i, g in enumerate(got):
        if isinstance(g, torch.Tensor) and g.numel():
            start, end = _span(g)
            if any(start < e and s < end for s, e in spans):
                raise WrongOutput(f"{case}: output {i} shares memory with an input; return a new tensor")


def _span(t: torch.Tensor) -> tuple[int, int]:
    """The bytes of `t`'s storage: any view into it overlaps this range."""
    storage = t.untyped_storage()
    return storage.data_ptr(), storage.data_ptr() + max(storage.nbytes(), 1)


def check_inputs_unchanged(before: tuple[torch.Tensor, ...], after: tuple[torch.Tensor, ...], case: str) -> None:
    for i, (b, a) in enumerate(zip(before, after)):
        if not torch.equal(b, a) and not (b.is_floating_point() and torch.equal(b.isnan(), a.isnan())
                                          and torch.equal(b.nan_to_num(), a.nan_to_num())):
            raise WrongOutput(f"{case}: input {i} was modified; a submission must not write to its inputs")
