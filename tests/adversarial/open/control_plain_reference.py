# target: softmax. CONTROL (not an attack): call the task's reference directly, no evasion, to show
# that the tripwire and forbidden-op watch fire when nothing defeats them.
import sys
import triton  # noqa: F401


def solution(x):
    return sys.modules["kerneldojo.tasks"].get_task("softmax").reference.reference(x).clone()
