"""The task library: one folder per task, holding `task.toml`, `reference.py` and the starters.

`reference.py` defines:
    make_inputs(shape: dict, seed: int, device) -> tuple[Tensor, ...]   # shape has the sizes and "dtype"
    reference(*inputs) -> Tensor | tuple[Tensor, ...]
    flops(shape: dict) -> int           # useful arithmetic
    bytes_moved(shape: dict) -> int     # each input read once, each output written once
and may define
    expected(*inputs)                   # what submissions must match, where `reference` (the timed
                                        # baseline) rounds worse than the prompt's formula allows
"""

from __future__ import annotations

import difflib
import functools
import hashlib
import importlib.util
import re
import secrets
import sys
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Literal

from pydantic import ValidationError

from .spec import (
    C_SCALAR_TYPES,
    DEFAULT_ALLOWED_OPS,
    LANGUAGES,
    TASK_ID_PATTERN,
    CParam,
    CudaSpec,
    TaskSpec,
    Tolerance,
    parse_signature,
)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = [
    "C_SCALAR_TYPES", "LANGUAGES", "CParam", "Case", "CudaSpec", "Task", "TaskError", "TaskSpec", "Tolerance",
    "broken_tasks", "case_label", "get_task", "list_tasks", "load_task", "parse_signature", "starter_filename",
    "task_content_hash", "task_folders", "task_from_ref", "task_ref",
]  # fmt: skip

TASKS_DIR = Path(__file__).parent
REFERENCE_FUNCTIONS = ("make_inputs", "reference", "flops", "bytes_moved")
ShapeSet = Literal["test", "bench", "small"]


class TaskError(ValueError):
    """A task folder is malformed or a task name is unknown; the message names the file and the field."""


@dataclass(frozen=True)
class Case:
    """One size of one dtype: what make_inputs, flops and bytes_moved receive as `shape`."""

    sizes: tuple[tuple[str, int], ...]
    dtype: str

    @property
    def shape(self) -> dict:
        return {**dict(self.sizes), "dtype": self.dtype}

    def __str__(self) -> str:
        return case_label(self.shape)


def case_label(shape: dict) -> str:
    """"rows=3 cols=17 float32": how messages name a case."""
    return " ".join(f"{k}={v}" for k, v in shape.items() if k != "dtype") + f" {shape['dtype']}"


def starter_filename(language: str) -> str:
    return "starter_triton.py" if language in ("triton", "python") else f"starter_{language}.cu"


@dataclass(frozen=True)
class Task:
    spec: TaskSpec
    folder: Path

    @property
    def id(self) -> str:
        return self.spec.id

    @functools.cached_property
    def reference(self) -> ModuleType:
        """reference.py, imported at first use (listing or registering tasks executes none of them).
        Raises `TaskError`, naming the file, when it does not import or lacks what the task needs."""
        module = _load_reference(self.folder)
        if self.spec.distributed and not callable(getattr(module, "peer_buffer_bytes", None)):
            raise TaskError(f"{self.folder / 'reference.py'}: a distributed task must define peer_buffer_bytes(shape), "
                            "the scratch each rank gets")
        return module

    @property
    def reference_source(self) -> str:
        return (self.folder / "reference.py").read_text()

    def expected(self, *inputs, shape: dict | None = None) -> tuple:
        """The outputs a submission must match for these inputs (and the shape's scalars), always as a
        tuple: the reference module's `expected` where it has one, else its `reference`."""
        fn = getattr(self.reference, "expected", self.reference.reference)
        # On copies: a reference that changes its inputs in place (nn.ReLU(inplace=True) on an input) would hand
        # the worker, which gets the same tensors' copies later, the answer, and honest kernels other inputs (red
        # team round 55).
        out = fn(*(t.clone() if hasattr(t, "clone") else t for t in inputs), *self.scalars(shape))
        return out if isinstance(out, tuple) else (out,)

    def reference_calls(self, shape: dict, device, sets: int, fn=None) -> list:
        """Zero-argument calls of `fn` (default: the reference; or a compiled form of it), one per
        fresh input set from a seed of its own: what a reference timing times."""
        fn = fn or self.reference.reference
        return [functools.partial(fn, *self.reference.make_inputs(shape, secrets.randbits(31), device),
                                  *self.scalars(shape)) for _ in range(sets)]

    def scalars(self, shape: dict | None) -> tuple[int, ...]:
        """The shape's values that reference() and solution() take after the tensors (`scalars`)."""
        if self.spec.scalars and shape is None:
            raise TypeError(f"task {self.id} takes scalars {self.spec.scalars}: pass the shape")
        return tuple(int(shape[name]) for name in self.spec.scalars)

    def allows(self, language: str) -> bool:
        return language in self.spec.languages or (language == "python" and "triton" in self.spec.languages)

    def instructions(self, language: str) -> str:
        """The prompt plus the submission contract for `language`: what to define and how it is called."""
        inputs, outputs = ", ".join(self.spec.inputs), ", ".join(self.spec.outputs)
        if language in ("triton", "python"):
            contract = (
                f"Submit a Python file (Triton allowed) that defines `solution({inputs})` and returns {outputs} "
                f"as {'a tuple of tensors' if len(self.spec.outputs) > 1 else 'a tensor'}, allocated on the "
                "inputs' device, shaped and typed as reference.py returns."
            )
            if self.spec.distributed:
                contract = (
                    f"Submit a Python file (Triton allowed) that defines `solution({inputs}, group)`. It runs once per "
                    f"rank, each in its own process on its own GPU: its inputs are this rank's rows of what "
                    f"make_inputs stacks, and it returns this rank's {outputs} (its row of reference()'s result), "
                    "allocated on the inputs' device."
                )
            contract += (" Outside your own kernels you may allocate, view, copy and cast tensors; any other torch "
                         "operator flags the submission")
            contract += f", except {', '.join(self.spec.allowed)}." if self.spec.allowed else "."
            if self.spec.forbidden:
                contract += f" This task also forbids {', '.join(self.spec.forbidden)}."
            return f"{self.spec.prompt.strip()}\n\n{contract}"
        signature = self.spec.cuda.signature.strip().rstrip(";")
        notes = [
            f'Submit a .cu file that defines `extern "C" {signature}`.',
            f"Pointers are device pointers; the outputs ({outputs}) are allocated by the judge, filled with NaN, "
            "and every element must be written. Launch on `stream`; do not synchronize.",
        ]
        if "scalar_t" in signature:
            notes.append("`scalar_t` is the case's dtype (float or __nv_bfloat16); the file is built once per "
                         "dtype, with KD_DTYPE_FLOAT32 or KD_DTYPE_BFLOAT16 defined.")
        if "_stride" in signature:
            notes.append("A parameter named <tensor>_stride<d> receives that tensor's stride d, in elements.")
        if language == "cute":
            notes.append("The CUTLASS/CuTe headers are on the include path.")
        return f"{self.spec.prompt.strip()}\n\n{' '.join(notes)}"

    def starter(self, language: str) -> str:
        return (self.folder / starter_filename(language)).read_text()

    def cases(self, shape_set: ShapeSet) -> list[Case]:
        shapes = getattr(self.spec.shapes, shape_set)
        return [Case(tuple(s.items()), dtype) for dtype in self.spec.dtypes for s in shapes]

    def tolerance(self, dtype: str) -> Tolerance:
        return self.spec.tolerance[dtype]

    @functools.cached_property
    def allowed_ops(self) -> frozenset[str]:
        """The aten operators a submission may call outside its own kernels (`spec.DEFAULT_ALLOWED_OPS`)."""
        return (DEFAULT_ALLOWED_OPS - set(self.spec.forbidden)) | set(self.spec.allowed)

    @property
    def defaults_only(self) -> bool:
        """The task allows no operator beyond the defaults: any kernel of torch's or a library's that none of them
        launches did work the submission should have (`torch_kernel`)."""
        return self.allowed_ops <= DEFAULT_ALLOWED_OPS

    @functools.cached_property
    def c_params(self) -> list[CParam]:
        if self.spec.cuda is None:
            raise TaskError(f"task {self.id!r} declares no CUDA signature")
        return parse_signature(self.spec.cuda.signature)


def load_task(folder: Path) -> Task:
    """Read and validate one task folder's task.toml and files. Errors name the file and the field at fault.
    reference.py is not executed here: `Task.reference` imports it at first use."""
    toml_path = folder / "task.toml"
    if not toml_path.is_file():
        raise TaskError(f"{toml_path}: missing; every task folder needs a task.toml")
    try:
        raw = tomllib.loads(toml_path.read_text())
    except tomllib.TOMLDecodeError as e:
        raise TaskError(f"{toml_path}: not valid TOML: {e}") from None
    try:
        spec = TaskSpec.model_validate(raw)
    except ValidationError as e:
        problems = "; ".join(
            ".".join(map(str, err["loc"])) + ": " * bool(err["loc"]) + err["msg"].removeprefix("Value error, ")
            for err in e.errors()
        )
        raise TaskError(f"{toml_path}: {problems}") from None
    if spec.id != folder.name:
        raise TaskError(f"{toml_path}: id: {spec.id!r} must equal the folder name {folder.name!r}")
    for language in spec.languages:
        if not (folder / starter_filename(language)).is_file():
            raise TaskError(f"{folder / starter_filename(language)}: missing; languages lists {language!r}")
    if not (folder / "reference.py").is_file():
        raise TaskError(f"{folder / 'reference.py'}: missing; every task folder needs a reference.py")
    return Task(spec, folder)


def _load_reference(folder: Path) -> ModuleType:
    path = folder / "reference.py"
    if not path.is_file():
        raise TaskError(f"{path}: missing; every task folder needs a reference.py")
    digest = hashlib.sha256(str(path.resolve()).encode() + path.read_bytes()).hexdigest()[:12]
    name = f"kerneldojo.tasks._reference.{folder.name}_{digest}"
    if name in sys.modules:
        return sys.modules[name]
    module_spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(module_spec)
    try:
        module_spec.loader.exec_module(module)
    except Exception as e:
        raise TaskError(f"{path}: importing it failed: {type(e).__name__}: {e}") from None
    absent = [f for f in REFERENCE_FUNCTIONS if not callable(getattr(module, f, None))]
    if absent:
        raise TaskError(f"{path}: must define {', '.join(absent)}")
    sys.modules[name] = module
    return module


@functools.cache
def _load_all() -> tuple[dict[str, Task], dict[str, TaskError]]:
    # One malformed folder must not take the other tasks (and every command) down with it.
    tasks, broken = {}, {}
    for folder in sorted(p.parent for p in TASKS_DIR.glob("*/task.toml")):
        try:
            tasks[folder.name] = load_task(folder)
        except TaskError as e:
            broken[folder.name] = e
    for error in broken.values():
        warnings.warn(f"skipping a malformed task: {error}", stacklevel=2)
    return tasks, broken


def _registry() -> dict[str, Task]:
    return _load_all()[0]


def task_content_hash(task_or_folder: str | Path) -> str:
    """The version of a task: a hash of every file in its folder (names and bytes). Results compare only
    within one version: an edited reference, shape set or tolerance makes a new one."""
    folder = task_or_folder if isinstance(task_or_folder, Path) else get_task(task_or_folder).folder
    h = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        h.update(path.relative_to(folder).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def task_folders() -> list[str]:
    """Every task folder's name, loadable or not: what gets a gym id (a broken one fails on `make`)."""
    return sorted(p.parent.name for p in TASKS_DIR.glob("*/task.toml"))


def broken_tasks() -> dict[str, TaskError]:
    """Task folders that failed to load, with the error that names the file and field."""
    return _load_all()[1]


def list_tasks() -> list[str]:
    """The ids of all tasks that load, by level then name."""
    return sorted(_registry(), key=lambda t: (_registry()[t].spec.level, t))


def task_ref(task: Task) -> str | dict:
    """How a worker is told which task to load: a library task by id; any other (an adapter's, in a folder
    the worker cannot see) by its folder's files, which `get_task` writes into a folder of the worker's."""
    if task.folder.parent == TASKS_DIR:
        return task.id
    return {"id": task.id, "files": {p.name: p.read_text() for p in sorted(task.folder.iterdir()) if p.is_file()}}


def task_from_ref(ref: str | dict) -> Task:
    """The task a `task_ref` names, for the judge's own processes and its workers only: an adapter's task comes as its
    files, and whoever loads the task imports its reference.py. Never for a caller's input (`get_task` is: red team
    round 83, a task's files sent to an OpenEnv server's reset ran their reference.py in the server)."""
    if isinstance(ref, dict):
        return _task_from_files(ref["id"], tuple(sorted(ref["files"].items())))
    return get_task(ref)


@functools.cache
def _task_from_files(task_id: str, files: tuple[tuple[str, str], ...]) -> Task:
    if not (isinstance(task_id, str) and re.fullmatch(TASK_ID_PATTERN, task_id)):
        raise TaskError(f"task id {str(task_id)[:80]!r}: a task id is lower-case letters, digits and _")
    if bad := [n for n, _ in files if n != Path(n).name or n.startswith(".")]:
        raise TaskError(f"task {task_id}: {bad[0][:80]!r} is not a file name of a task folder")
    folder = Path(tempfile.mkdtemp(prefix="kerneldojo-task-")) / task_id
    folder.mkdir()
    for name, text in files:
        (folder / name).write_text(text)
    return load_task(folder)


def get_task(task_id: str) -> Task:
    """A library task by its id."""
    if not isinstance(task_id, str):
        raise TaskError(f"a task is named by its id, a string such as 'vector_add', not a {type(task_id).__name__}")
    if task_id in broken_tasks():
        raise broken_tasks()[task_id]
    try:
        return _registry()[task_id]
    except KeyError:
        close = difflib.get_close_matches(task_id, list(_registry()), n=3, cutoff=0.4)
        hint = f"; did you mean {', '.join(close)}?" if close else f"; known tasks: {', '.join(list_tasks())}"
        raise TaskError(f"unknown task {task_id!r}{hint}") from None
