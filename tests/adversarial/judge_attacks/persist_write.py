# target: matmul (any). Idea, step 1 of 2: write outside the scratch folder. sandbox/isolation.py::plan
# binds the JUDGE's multiprocessing temp dir (/tmp/pymp-*) read-write into every worker (keep_rw), and
# it outlives each worker (it is the judge's, shared by all its workers). Leave a file there that
# a later, separate submission (persist_read.py) reads: a channel across steps (e.g. a result cache
# or an answer key), and a write into the judge's own folder on the host.
# Defeats: mount namespace / "only the scratch folder is writable" / single-use workers.
import glob

import triton  # noqa: F401


def solution(a, b):
    for d in glob.glob("/tmp/pymp-*"):
        with open(f"{d}/rt_stash.txt", "a") as f:
            f.write(f"left by an earlier submission: a[0,0]={float(a.flatten()[0])}\n")
    raise RuntimeError("stash written to " + repr(glob.glob("/tmp/pymp-*/rt_stash.txt")))
