"""Other suites' problems and solutions, unchanged, under kerneldojo's judge.

    kerneldojo.adapters.kernelbench   KernelBench (ScalingIntelligence): Model / get_inputs / ModelNew
    kerneldojo.adapters.gpumode       GPU MODE reference-kernels: reference.py + task.yml / custom_kernel
    kerneldojo.adapters.gym           gymnasium ids kerneldojo/kernelbench-v0 and kerneldojo/gpumode-v0

Each turns a problem from a path the user gives into an ordinary `Task` (a generated task folder whose
reference.py is the problem's own text with a few lines appended, `adapters.runtime`) and a solution
into a submission the worker loads (the solution's text with `solution(*inputs)` appended): the judge,
sandbox, protocol and checks are the same as for the library's tasks. docs/interop.md has the details.
Nothing is imported here: the worker imports `adapters.runtime` alone.
"""
