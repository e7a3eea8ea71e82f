"""The schema of `task.toml`, and the C signature that CUDA/CuTe submissions implement."""

from __future__ import annotations

import ctypes
import re
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

Language = Literal["triton", "python", "cuda", "cute"]
DType = Literal["float32", "float16", "bfloat16", "int8", "int32", "float8_e4m3fn"]
LANGUAGES: tuple[str, ...] = ("triton", "python", "cuda", "cute")
# The element type that a CUDA signature's `scalar_t` stands for, per dtype.
C_SCALAR_TYPES = {
    "float32": "float",
    "float16": "__half",
    "bfloat16": "__nv_bfloat16",
    "int8": "int8_t",
    "int32": "int32_t",
    "float8_e4m3fn": "__nv_fp8_e4m3",  # from <cuda_fp8.h>, which a submission includes itself
}


class Tolerance(BaseModel):
    model_config = ConfigDict(extra="forbid")
    atol: float = Field(ge=0)
    rtol: float = Field(ge=0)


class ShapeSets(BaseModel):
    """Named sizes, e.g. `{rows = 127, cols = 1000}`; each is run once per dtype."""

    model_config = ConfigDict(extra="forbid")
    test: list[dict[str, int]] = Field(min_length=1, description="correctness on the GPU, awkward sizes included")
    bench: list[dict[str, int]] = Field(min_length=1, description="timing on the GPU")
    small: list[dict[str, int]] = Field(min_length=1, description="correctness in CPU mode")


class CudaSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    signature: str = Field(description='the C declaration of `extern "C" void solution(...)`')


# What any submission may call outside its own kernels: allocation, views and copies, no arithmetic.
# Every other aten operator is flagged unless the task's `allowed` names it (docs/writing-a-task.md).
# Casts (`_to_copy`) and copies are here because a kernel's host code needs them around its own
# kernels (a float32 accumulator cast back, an output made contiguous); a task whose work is a copy
# or a cast takes them away in `forbidden`.
DEFAULT_ALLOWED_OPS = frozenset({
    # allocation and filling: what an output buffer needs
    "aten.empty", "aten.empty_like", "aten.empty_strided", "aten.new_empty", "aten.new_empty_strided",
    "aten.zeros", "aten.zeros_like", "aten.new_zeros", "aten.ones", "aten.ones_like", "aten.new_ones",
    "aten.full", "aten.full_like", "aten.new_full", "aten.fill", "aten.zero", "aten.scalar_tensor",
    "aten.arange", "aten.lift_fresh", "aten.resize",
    # views and metadata: no element is computed
    "aten.view", "aten._unsafe_view", "aten.reshape", "aten._reshape_alias", "aten.as_strided", "aten.expand",
    "aten.squeeze", "aten.unsqueeze", "aten.flatten", "aten.unflatten", "aten.t", "aten.transpose",
    "aten.permute", "aten.slice", "aten.select", "aten.narrow", "aten.split", "aten.split_with_sizes",
    "aten.chunk", "aten.unbind", "aten.alias", "aten.detach", "aten.view_as_real", "aten.view_as_complex",
    "aten.diagonal", "aten.unfold", "aten.sym_size", "aten.sym_stride", "aten.sym_numel",
    "aten.sym_storage_offset", "aten.is_same_size", "aten._local_scalar_dense", "aten.set",
    "aten.record_stream",  # the caching allocator's bookkeeping for a tensor used on a side stream
    # copies and casts of the submission's own tensors
    "aten.copy", "aten.clone", "aten._to_copy", "aten.contiguous",
})
# The allowed operators that copy a tensor's elements (the functional `resize` is a clone in the input's layout): a
# task whose work is a copy takes them all away. Every other allowed operator copies none, which
# tests/test_tasks.py checks from the operators' schemas (red team round 50: `lift_fresh_copy`, a clone, was
# allowed where clone was forbidden).
COPY_OPS = frozenset({"aten.copy", "aten.clone", "aten._to_copy", "aten.contiguous", "aten.resize"})


TASK_ID_PATTERN = r"^[a-z][a-z0-9_]*$"  # a task id is also its folder's name


class TaskSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str = Field(pattern=TASK_ID_PATTERN)
    title: str
    level: int = Field(ge=1, le=4)
    prompt: str = Field(min_length=1)
    languages: list[Language] = Field(min_length=1)
    dtypes: list[DType] = Field(min_length=1)
    inputs: list[str] = Field(min_length=1, description="names of the tensors make_inputs returns, in order")
    outputs: list[str] = Field(min_length=1, description="names of the tensors reference returns, in order")
    shapes: ShapeSets
    tolerance: dict[DType, Tolerance]
    allowed: list[str] = Field(default=[], description="aten operators a submission may call beyond "
                               "DEFAULT_ALLOWED_OPS (e.g. a reduction the task does not ask for)")
    forbidden: list[str] = Field(default=[], description="operators of DEFAULT_ALLOWED_OPS this task takes "
                                 "away, where they would do its work (copies in a transpose, casts in a quantizer)")
    aligned_sizes: list[str] = Field(
        default=[], description="sizes the test set may keep at multiples of 16 (e.g. a head dimension); the linter "
        "otherwise wants an awkward value of every size"
    )
    scalars: list[str] = Field(
        default=[], description="sizes passed, as ints after the tensors, to reference() and solution() (e.g. a "
        "causal flag); every shape must give them"
    )
    distributed: bool = Field(
        False, description="a collective over several GPUs: every shape gives `ranks`, one worker runs per rank, "
        "make_inputs stacks the ranks' inputs on dim 0 and reference gives every rank's output likewise; solution() "
        "receives this rank's slices and a `sandbox.peers.PeerGroup` after them"
    )
    cuda: CudaSpec | None = None

    @field_validator("allowed", "forbidden")
    @classmethod
    def _aten_names(cls, names: list[str]) -> list[str]:
        for name in names:
            if not re.fullmatch(r"aten\.\w+", name):
                raise ValueError(f"{name!r} is not an aten operator name such as 'aten.mm'")
        return names

    @model_validator(mode="after")
    def _consistent(self) -> TaskSpec:
        missing = [d for d in self.dtypes if d not in self.tolerance]
        if missing:
            raise ValueError(f"tolerance: no entry for dtype(s) {missing}; add [tolerance.{missing[0]}]")
        for set_name in ("test", "bench", "small"):
            for shape in getattr(self.shapes, set_name):
                if "dtype" in shape:
                    raise ValueError(f"shapes.{set_name}: 'dtype' is not a size; list dtypes in `dtypes`")
                if missing := [s for s in self.scalars if s not in shape]:
                    raise ValueError(f"shapes.{set_name}: {shape} does not give scalar(s) {missing}")
        if self.distributed:
            for set_name in ("test", "bench", "small"):
                if bad := [s for s in getattr(self.shapes, set_name) if s.get("ranks", 0) < 2]:
                    raise ValueError(f"shapes.{set_name}: {bad[0]} needs ranks >= 2 (distributed = true)")
            if set(self.languages) - {"triton", "python"}:
                raise ValueError("distributed tasks take Python/Triton submissions only (the peer group is a "
                                 "Python object)")
        native = {"cuda", "cute"} & set(self.languages)
        if native and self.cuda is None:
            raise ValueError(f"languages include {sorted(native)} but there is no [cuda] signature")
        if self.cuda is not None:
            sizes = set().union(*(s.keys() for s in self.shapes.test))
            tensors = set(self.inputs) | set(self.outputs)
            for param in parse_signature(self.cuda.signature):
                stride = STRIDE_PARAM.fullmatch(param.name)
                if param.name not in tensors | sizes | {"stream"} and not (stride and stride[1] in tensors):
                    raise ValueError(
                        f"cuda.signature: parameter {param.name!r} is neither an input, an output, "
                        f"a size ({sorted(sizes)}), a stride (<tensor>_stride<dim>) nor 'stream'"
                    )
        return self


@dataclass(frozen=True)
class CParam:
    name: str
    ctype: str  # as written, e.g. "const float*"
    is_pointer: bool

    def ctypes_type(self) -> type:
        if self.is_pointer or self.ctype.endswith("cudaStream_t"):
            return ctypes.c_void_p
        base = self.ctype.replace("const", "").strip()
        try:
            return _C_SCALARS[base]
        except KeyError:
            raise ValueError(
                f"cuda.signature: parameter {self.name!r} has type {self.ctype!r}; "
                f"use a pointer, cudaStream_t or one of {sorted(_C_SCALARS)}"
            ) from None


_C_SCALARS = {
    "int": ctypes.c_int32, "int32_t": ctypes.c_int32, "unsigned": ctypes.c_uint32,
    "int64_t": ctypes.c_int64, "long": ctypes.c_int64, "long long": ctypes.c_int64, "size_t": ctypes.c_size_t,
    "float": ctypes.c_float, "double": ctypes.c_double,
}  # fmt: skip
# `x_stride0` in a signature receives x.stride(0), in elements: for tasks whose inputs are views.
STRIDE_PARAM = re.compile(r"(\w+)_stride(\d)")
_SIGNATURE = re.compile(r'^\s*(?:extern\s+"C"\s+)?void\s+solution\s*\((?P<params>[^)]*)\)\s*;?\s*$', re.S)


def parse_signature(signature: str) -> list[CParam]:
    """Parse `void solution(const float* x, ..., cudaStream_t stream)` into its parameters."""
    match = _SIGNATURE.match(signature)
    if not match:
        raise ValueError(f"cuda.signature must look like 'void solution(<params>)', got {signature!r}")
    params = []
    for raw in match["params"].split(","):
        words = raw.replace("*", " * ").split()
        if len(words) < 2:
            raise ValueError(f"cuda.signature: cannot read parameter {raw.strip()!r}; write 'type name'")
        param = CParam(name=words[-1], ctype=" ".join(words[:-1]).replace(" *", "*"), is_pointer="*" in words)
        param.ctypes_type()  # reject unknown scalar types when the task loads, not when it runs
        params.append(param)
    return params
