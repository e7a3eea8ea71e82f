"""Anti-cheat checks that run while the submission is called. Each has a name and a clear message."""

from __future__ import annotations

from torch.utils._python_dispatch import TorchDispatchMode


class ForbiddenOps(TorchDispatchMode):
    """Records calls to aten operators the task forbids (e.g. `aten.mm` in a GEMM task).

    Composite operators decompose before they reach the dispatcher, so `torch.matmul` shows up as
    `aten.mm`; tasks list the operators that do the work, not the Python spellings. An in-place
    variant counts as its operator: forbidding `aten.mul` forbids `x.mul_(y)` too.
    """

    name = "forbidden_op"

    def __init__(self, forbidden: list[str]):
        super().__init__()
        self.forbidden = frozenset(forbidden)
        self.called: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        op = f"aten.{func.overloadpacket.__name__}"
        if op.endswith("_") and not op.endswith("__"):  # in-place twins (mul_, exp_) do the same work
            op = op[:-1]
        if op in self.forbidden and op not in self.called:
            self.called.append(op)
        return func(*args, **(kwargs or {}))

    @classmethod
    def message_for(cls, called: list[str]) -> str:
        return (f"{cls.name}: the submission called {', '.join(called)}, which this task forbids; "
                "do the work in your own kernel")
