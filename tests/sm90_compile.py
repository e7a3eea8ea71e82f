"""Compile every Triton kernel a submission launches for sm_90 (an H100), without a GPU, with whatever
Triton is importable (tests/test_triton_sm90.py puts the GPU machine's version first on the path).

    python tests/sm90_compile.py TASK:FILE ...  ->  a line per file: "ok TASK:FILE N" or "failed TASK:FILE: why"

solution() runs on CPU tensors from the task's `small` shapes; every launch (through an autotuner: each
config) is compiled for GPUTarget("cuda", 90, 32) from the launch's own argument types, and not run."""

import inspect
import sys
from pathlib import Path

import torch
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from triton.runtime.autotuner import Autotuner
from triton.runtime.jit import JITFunction, mangle_type

from kerneldojo.tasks import get_task

TARGET = GPUTarget("cuda", 90, 32)
OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg")
compiled: set[tuple] = set()


def compile_launch(self, *args, grid, warmup, **kwargs):
    options = {k: kwargs.pop(k) for k in OPTIONS if k in kwargs}
    bound = inspect.signature(self.fn).bind(*args, **kwargs)
    bound.apply_defaults()
    constexprs = {p.name for p in self.params if p.is_constexpr}
    signature, values = {}, {}
    for name, value in bound.arguments.items():
        if name in constexprs or value is None:
            signature[name], values[name] = "constexpr", value
        else:
            signature[name] = mangle_type(value)
    key = (self.fn.__qualname__, tuple(sorted(signature.items())), tuple(sorted(map(str, values.items()))),
           tuple(sorted(options.items())))
    if key not in compiled:
        compiled.add(key)
        triton.compile(ASTSource(self, signature, values), target=TARGET, options=options)


def every_config(self, *args, **kwargs):
    for config in self.configs:
        self.fn.run(*args, **kwargs, **config.all_kwargs())


# A test shape whose inputs are made on the CPU here, at most this many bytes moved (`reference.bytes_moved`): the
# largest such shape reaches the size classes the level-3 baselines choose configs by (they do not autotune: issue 14),
# which the `small` shapes do not.
TEST_SHAPE_BYTES = 1 << 27


def shapes(task, dtype: str) -> list[dict]:
    """The largest `small` shape (real block sizes) and, at level 3, the largest `test` within TEST_SHAPE_BYTES."""
    small = [c.shape for c in task.cases("small") if c.dtype == dtype][-1]
    if task.spec.level < 3:
        return [small]
    sized = sorted((task.reference.bytes_moved(c.shape), i, c.shape)
                   for i, c in enumerate(task.cases("test")) if c.dtype == dtype)
    return [small, *[shape for size, _, shape in sized if size <= TEST_SHAPE_BYTES][-1:]]


def check(task_id: str, path: str) -> int:
    """Compiles what `path`'s solution() launches; returns how many kernel variants."""
    task = get_task(task_id)
    if task.spec.distributed:
        raise RuntimeError(f"{task_id}: a distributed task's solution() needs its ranks' group; not compiled here")
    before = len(compiled)
    namespace: dict = {"__name__": "submission", "__file__": path}
    exec(compile(Path(path).read_text(), path, "exec"), namespace)
    for dtype in task.spec.dtypes:
        for shape in shapes(task, dtype):
            namespace["solution"](*task.reference.make_inputs(shape, 0, torch.device("cpu")), *task.scalars(shape))
    return len(compiled) - before


def main(pairs: list[str]) -> int:
    JITFunction.run, Autotuner.run = compile_launch, every_config
    print(f"triton {triton.__version__}", flush=True)
    failed = 0
    for pair in pairs:
        task_id, path = pair.split(":", 1)
        try:
            print(f"ok {pair} {check(task_id, path)}", flush=True)
        except Exception as e:  # the compiler's message, first lines: what fails on the GPU machine
            failed += 1
            print(f"failed {pair}: {type(e).__name__}: {str(e)[:1500]}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
