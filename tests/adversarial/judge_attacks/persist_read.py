# target: matmul (any). Idea, step 2 of 2: a later submission in a fresh worker reads what
# persist_write.py left in the judge's shared multiprocessing folder. Defeats: single-use isolation.
import glob

import triton  # noqa: F401


def solution(a, b):
    found = {p: open(p).read()[-300:] for p in glob.glob("/tmp/pymp-*/rt_stash.txt")}  # noqa: SIM115
    raise RuntimeError("found from an earlier step: " + repr(found))
