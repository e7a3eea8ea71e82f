"""Load a built submission and call it. This is the only code that executes submission code.

It runs either inside a single-use worker process (`sandbox.process`, the default) or, with
isolation="none", in the judge's own process.
"""

from __future__ import annotations

import ctypes
import functools
import importlib.util
import itertools
import os
import sys
import traceback
from collections.abc import Callable
from pathlib import Path

import torch

from kerneldojo.graders.checks import ForbiddenOps
from kerneldojo.graders.compile import Build, CompileError
from kerneldojo.graders.correctness import check_no_aliasing
from kerneldojo.graders.timing import time_calls
from kerneldojo.result import TimeStats
from kerneldojo.tasks import Task, case_label
from kerneldojo.tasks.spec import STRIDE_PARAM

from .device import Device
from .triton_interpreter import interpreter

_module_ids = itertools.count()


class SubmissionError(Exception):
    """The submission raised; the message is its traceback, cut to the submission's own frames."""


class Solution:
    """A loaded submission: `run(inputs, shape, outputs)` returns its output tensors as a tuple.

    `outputs` are judge-allocated, poisoned tensors; native (cuda/cute) entry points write into
    them, Python submissions return their own.
    """

    def __init__(self, task: Task, build: Build, device: Device):
        self.task, self.build, self.device = task, build, device
        self._module_name: str | None = None
        self._forbidden = ForbiddenOps(task.spec.forbidden)
        if build.language in ("triton", "python"):
            self._fn = self._import_python()
        else:
            self._entries = {dtype: self._load_native(lib) for dtype, lib in build.libraries.items()}

    @property
    def forbidden_called(self) -> list[str]:
        """Forbidden operators seen in checked runs (not timed ones, where the watcher would cost time)."""
        return self._forbidden.called

    def run(self, inputs: tuple[torch.Tensor, ...], shape: dict, outputs: tuple[torch.Tensor, ...], watch=True):
        if watch:
            with self._forbidden:
                return self.run(inputs, shape, outputs, watch=False)
        if self.build.language in ("triton", "python"):
            try:
                with interpreter(self.device.mode == "cpu"):
                    result = self._fn(*inputs)
            except Exception as e:
                # Triton compiles a kernel at its first launch: its errors are compile errors.
                if type(e).__name__ == "CompilationError" or isinstance(e.__cause__, SyntaxError):
                    raise CompileError(self._format_triton_compile_error(e)) from None
                if "PassManager::run failed" in str(e):  # Triton's MLIR pipeline crashed on this kernel
                    raise CompileError(f"Triton's compiler failed on this kernel:\n{self._format(e)}") from None
                raise SubmissionError(self._format(e)) from None
            result = result if isinstance(result, tuple) else (result,)
            # Here, not in the judge: across a process boundary the judge sees copies, never views.
            check_no_aliasing(result, inputs, case_label(shape))
            return result
        self._call_native(inputs, shape, outputs)
        return outputs

    def time(self, arg_sets: list[tuple], shape: dict, output_sets: list[tuple], l2_bytes: int, budget_s: float,
             ) -> TimeStats:
        calls = [functools.partial(self.run, a, shape, o, watch=False) for a, o in zip(arg_sets, output_sets)]
        return time_calls(calls, self.device.torch_device, l2_bytes, budget_s=budget_s)

    def close(self) -> None:
        if self._module_name:
            sys.modules.pop(self._module_name, None)

    def _import_python(self) -> Callable:
        path = self.build.source_path
        self._module_name = f"kerneldojo_submission_{os.getpid()}_{next(_module_ids)}"
        spec = importlib.util.spec_from_file_location(self._module_name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[self._module_name] = module
        try:
            with interpreter(self.device.mode == "cpu"):
                spec.loader.exec_module(module)
        except Exception as e:
            raise CompileError(f"importing the submission failed:\n{self._format(e)}") from None
        fn = getattr(module, "solution", None)
        if not callable(fn):
            raise CompileError("the submission defines no function `solution(*inputs)`")
        return fn

    def _load_native(self, library: Path) -> ctypes._CFuncPtr:
        try:
            lib = ctypes.CDLL(str(library), mode=os.RTLD_LOCAL)
            entry = lib.solution
        except (OSError, AttributeError) as e:
            raise CompileError(f'loading the built library failed: {e}; define extern "C" void solution(...)') from None
        entry.argtypes = [p.ctypes_type() for p in self.task.c_params]
        entry.restype = None
        return entry

    def _call_native(self, inputs, shape: dict, outputs) -> None:
        if self.device.mode != "gpu":
            raise SubmissionError("CUDA submissions run only on a GPU")
        tensors = dict(zip(self.task.spec.inputs, inputs)) | dict(zip(self.task.spec.outputs, outputs))
        stream = torch.cuda.current_stream(self.device.torch_device).cuda_stream
        args = []
        for param in self.task.c_params:
            if param.name == "stream":
                args.append(stream)
            elif param.name in tensors:
                args.append(tensors[param.name].data_ptr())
            elif param.name in shape:
                args.append(shape[param.name])
            else:  # validated when the task loaded: <tensor>_stride<dim>
                tensor, dim = STRIDE_PARAM.fullmatch(param.name).groups()
                args.append(tensors[tensor].stride(int(dim)))
        self._entries[shape["dtype"]](*args)

    def _format_triton_compile_error(self, error: BaseException) -> str:
        """Triton numbers lines from the kernel's `def`; turn that into the submission's line."""
        src, node = getattr(error, "src", None), getattr(error, "node", None)
        if not src or not hasattr(node, "lineno"):
            return self._format(error)
        lines = self.build.source_path.read_text().splitlines()
        first = src.strip().splitlines()[0].strip()
        start = next((i for i, line in enumerate(lines) if line.strip() == first), None)
        if start is None:
            return self._format(error)
        lineno = start + node.lineno
        cause = error.__cause__
        detail = (getattr(error, "error_message", None) or "").strip() or (
            f"{type(cause).__name__} {cause}".strip() if cause else "")
        return f"submission.py, line {lineno}: Triton compile error: {detail}\n    {lines[lineno - 1].strip()}"

    def _format(self, error: BaseException) -> str:
        """The traceback frames in the submission file, then the error itself."""
        path = str(self.build.source_path)
        frames = [f for f in traceback.extract_tb(error.__traceback__) if f.filename == path]
        lines = [f"  submission.py, line {f.lineno}, in {f.name}\n    {f.line}" for f in frames[-5:]]
        message = str(error).replace(path, "submission.py").strip()
        return "\n".join([*lines, f"{type(error).__name__}: {message}"])
