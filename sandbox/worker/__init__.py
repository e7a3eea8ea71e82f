"""The worker side of the trust boundary: everything in this package runs inside the sandbox, in the
single-use process (or container) that loads one untrusted submission. It imports nothing of the judge
(`tests/test_layering.py`); what it may trust ends at its own address space, so nothing here decides a
verdict on its own: what it reports, the judge checks.

    loop.py                the request loop (serve), the worker's own confinement and warm-up
    confine.py             namespaces, read-only file system, limits, dropped privileges (process backend)
    container.py           the entry point inside a docker container
    harness.py             loads the submission and calls it: checked runs, timed and profiled runs
    watches.py             in-process watches: forbidden operators, tampering, threads, the reference
    collective.py          a distributed task's rank: peers' memory, the barrier before timed calls
    triton_interpreter.py  fixes to Triton's CPU interpreter (CPU mode)
"""
