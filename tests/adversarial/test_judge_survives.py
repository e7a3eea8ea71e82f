"""Attacks on the judge itself rather than on a score (red team, 2026-11-24): a worker that stalls or
floods its reply channel, one that sends a huge message, one that stops a judge-side service, one that
leaves a file for a later step. Each step must end within its limits with bounded messages, and the
next honest step must pass."""

from __future__ import annotations

import time

import pytest
import torch

from kerneldojo.judge import Judge

HONEST = """
import triton  # noqa: F401


def solution(x, y):
    return x.clone().copy_(x.new_tensor([a + b for a, b in zip(x.tolist(), y.tolist())]))
"""

# The worker's end of its socket, found through gc as a submission would, then `frame` written raw.
_WRITE_RAW = """
import gc
import struct
import time

import triton  # noqa: F401


def solution(x, y):
    end = next(o for o in gc.get_objects() if type(o).__name__ == "WorkerEnd")
    end.sock.sendall({frame})
    time.sleep(10**6)
"""
STALL = _WRITE_RAW.format(frame='struct.pack("!Q", 100) + b"x"')  # half a frame, then silence
FLOOD = _WRITE_RAW.format(frame='struct.pack("!Q", 1 << 40) + b"x" * 4096')  # announces a terabyte
HUGE_MESSAGE = "def solution(x, y):\n    raise RuntimeError('x' * 20_000_000)\n"


@pytest.fixture(scope="module")
def short_judge():
    return Judge("cpu", seeds=1, limits={"load": 60, "run": 5, "compile": 10})


def _honest_passes(judge: Judge) -> None:
    result = judge.evaluate("vector_add", HONEST, "triton")
    assert result.status == "ok", result.messages


def test_half_a_frame_then_silence_ends_at_the_limit(short_judge):
    started = time.monotonic()
    result = short_judge.evaluate("vector_add", STALL, "triton")
    assert result.status == "timeout", result.messages
    # Within its limits (a worker's load 60 s, run 5 s, compile 10 s) and some slack for a loaded machine: the
    # judge did not wait for the frame's missing bytes. Not a speed figure.
    assert time.monotonic() - started < 60 + 5 + 10 + 30
    _honest_passes(short_judge)


def test_a_check_that_fired_outranks_a_later_hang(short_judge):
    """Red team round 93: a call the watch flagged, then a hang on the next call, ended `timeout` (0) in place of
    `flagged` (-1): the flags lived in the hung worker only. Each call's reply now carries them."""
    source = ("import time\ncalls = [0]\n\n\ndef solution(x, y):\n    calls[0] += 1\n    if calls[0] > 1:\n"
              "        time.sleep(10**6)\n    return x + y\n")
    result = short_judge.evaluate("vector_add", source, "python")
    assert result.status == "flagged" and "forbidden_op" in result.checks_fired, result.messages
    assert result.reward == short_judge.reward.flagged
    _honest_passes(short_judge)


FLAGGED_THEN = """
import gc, time
calls = [0]


class Hang(dict):  # run replies still go out (items()); the judge's last `flags` request hangs
    def __iter__(self):
        time.sleep(10**6)

    def keys(self):
        time.sleep(10**6)


def solution(x, y):
    calls[0] += 1
    sol = next(o for o in gc.get_objects() if type(o).__name__ == "Solution" and hasattr(o, "_forbidden"))
    if calls[0] == 1:
        return x + y  # forbidden on vector_add: the check fires, and its run reply carries it
    if MODE == "hang_at_flags" and type(sol.flags) is not Hang:
        sol.flags = Hang(sol.flags)
    if MODE == "clear":
        sol._forbidden.called.clear()
        sol.flags.clear()
    return x.new_tensor([a + b for a, b in zip(x.tolist(), y.tolist())])
"""


@pytest.mark.parametrize("mode", ["hang_at_flags", "clear"])
def test_a_check_a_reply_carried_stays_fired_whatever_the_worker_says_last(short_judge, mode):
    """Red team round 94: round 93's carried checks were read only when the worker was gone; a worker whose last
    `flags` answer hung ended `timeout` (0), and one that cleared its record after the flagged call ended `ok`."""
    result = short_judge.evaluate("vector_add", f"MODE = {mode!r}\n" + FLAGGED_THEN, "python")
    assert result.status == "flagged" and "forbidden_op" in result.checks_fired, result.messages
    assert result.reward == short_judge.reward.flagged


# A tensor record whose shape is thousands of 255-byte integers and a 0 (the span check's product is then 0, and
# big-integer products are quadratic, one C call holding the judge's GIL), written as a reply by the worker.
BIG_INTEGERS = """
import gc, io, pickle, struct, time

import triton  # noqa: F401


class Record(pickle.Pickler):
    def persistent_id(self, obj):
        if obj is Record:
            big = int.from_bytes(b"\\x7f" + b"\\xff" * 254, "big")
            return ("tensor", b"", "float32", 0, (big,) * 2000 + (0,), (0,) * 2001, False)
        return None


def solution(x, y):
    end = next(o for o in gc.get_objects() if type(o).__name__ == "WorkerEnd")
    buf = io.BytesIO()
    pickler = Record(buf, protocol=4)
    pickler.fast = True
    pickler.dump((1, "ok", ((Record,), {})))
    end.sock.sendall(struct.pack("!Q", len(buf.getvalue())) + buf.getvalue())
    time.sleep(600)
"""


def test_a_reply_of_big_integers_is_refused_before_any_arithmetic(short_judge):
    """Red team round 111: the same record with 8,000 such integers froze the judge's process for 190 s, and an honest
    step judged in another thread meanwhile ran out its run limit (`timeout`)."""
    result = short_judge.evaluate("vector_add", BIG_INTEGERS, "triton")
    assert result.status == "runtime_error", result.messages
    assert "64 bits" in result.messages[0], result.messages
    _honest_passes(short_judge)


def test_a_frame_longer_than_the_reply_may_be_is_refused_unread(short_judge):
    result = short_judge.evaluate("vector_add", FLOOD, "triton")
    assert result.status == "runtime_error", result.messages
    assert "over the limit" in result.messages[0], result.messages
    _honest_passes(short_judge)


def test_frames_past_a_requests_reply_are_refused_unread():
    """Red team round 38: after its reply, a worker that resent one maximal frame had each copy decoded into the judge's
    inbox (up to the request's cap each, no limit on their number) until the judge's next read. A request may bring
    its reply and its progress frames; the next frame is refused from its header, unread, and closes the channel."""
    import socket

    from kerneldojo.sandbox.channel import Channel
    from kerneldojo.sandbox.protocol import PROGRESS, PROGRESS_CAP, READY, dumps, reply_cap, send_frame

    judge_end, worker_end = socket.socketpair()
    channel = Channel(judge_end, torch.device("cpu"))
    send_frame(worker_end, dumps((0, READY, None)))
    try:
        channel.put((1, "run", ()), reply_cap(1 << 20))
        # as many as the request allows, all read: its progress frames, then its reply (round 71: the reply ends it)
        frames = [(1, PROGRESS, None)] * PROGRESS_CAP + [(1, "ok", (torch.zeros(1 << 18),))]
        for frame in frames:
            send_frame(worker_end, dumps(frame))
        for frame in frames:
            assert channel.get(timeout=10)[1] == frame[1]
        send_frame(worker_end, dumps((1, "ok", (torch.zeros(8),))))  # one more (small: nobody reads it): refused
        assert channel.closed.wait(10) and "no pending request asked for" in channel.error
        assert channel.inbox.empty()
    finally:
        channel.close()
        worker_end.close()


def test_a_huge_error_message_is_capped(short_judge):
    result = short_judge.evaluate("vector_add", HUGE_MESSAGE, "python")
    assert result.status == "runtime_error"
    assert sum(len(m) for m in result.messages) < 50_000, [len(m) for m in result.messages]
    _honest_passes(short_judge)


@pytest.mark.parametrize("attack", ["sharer_dos", "persist_write"])
def test_nothing_of_the_judge_is_reachable_from_a_worker(short_judge, attack):
    """The red team's attacks in judge_attacks/: stopping the judge's multiprocessing listener, and leaving a
    file in the judge's multiprocessing folder for a later step. Neither is reachable from a worker."""
    from pathlib import Path

    attacks = Path(__file__).parent / "judge_attacks"
    source = (attacks / f"{attack}.py").read_text()
    result = short_judge.evaluate("matmul", source, "triton")
    assert result.status in ("wrong", "runtime_error"), result.messages
    assert "rt_stash.txt'" not in "".join(result.messages)  # persist_write lists what it wrote: nothing
    found = short_judge.evaluate("matmul", (attacks / "persist_read.py").read_text(), "triton")
    assert "found from an earlier step: {}" in found.messages[0], found.messages
    _honest_passes(short_judge)


# The second red team (2026-11-24): the worker swaps its own output file, which the judge reads after
# a death to quote the submission's last words, for a link to a judge-side file, a FIFO or /dev/zero.
_SWAP_OUTPUT = "import os\n\ndef solution(x, y):\n    os.unlink('output.txt')\n    {make}\n    os._exit(3)\n"


@pytest.mark.parametrize("make", ["os.symlink({secret!r}, 'output.txt')", "os.mkfifo('output.txt')",
                                  "os.symlink('/dev/zero', 'output.txt')"], ids=["symlink", "fifo", "dev_zero"])
def test_the_judge_reads_no_file_the_worker_swapped_in(short_judge, tmp_path, make):
    secret = tmp_path / "judge_secret.txt"
    secret.write_text("the judge's secret")
    started = time.monotonic()
    result = short_judge.evaluate("vector_add", _SWAP_OUTPUT.format(make=make.format(secret=str(secret))), "python")
    assert result.status == "runtime_error", result.messages
    assert "the judge's secret" not in "".join(result.messages)
    assert time.monotonic() - started < 60
    _honest_passes(short_judge)


def test_the_worker_cannot_write_to_the_judges_resource_tracker(short_judge):
    probe = ("from multiprocessing import resource_tracker\n\ndef solution(x, y):\n"
             "    raise RuntimeError(f'tracker fd: {resource_tracker._resource_tracker._fd}')\n")
    result = short_judge.evaluate("vector_add", probe, "python")
    assert "tracker fd: None" in result.messages[0], result.messages


def test_a_reply_that_repeats_a_tensors_data_is_refused():
    """A pickle's memo lets a few bytes stand for a tensor record already sent: each use would cost the
    judge a fresh copy (3 bytes of frame for megabytes of memory)."""
    import io
    import pickle

    import torch

    from kerneldojo.sandbox.protocol import Frame, loads

    record = ("tensor", b"\0" * 4096, "float32", 0, (1024,), (1,), False)

    class Marker:
        pass

    class Repeating(pickle.Pickler):
        def persistent_id(self, obj):
            return record if isinstance(obj, Marker) else None

    buffer = io.BytesIO()
    Repeating(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump((1, "ok", tuple(Marker() for _ in range(1000))))
    assert len(buffer.getvalue()) < 8000  # a thousand tensors of 4 kB each in a few kB of frame
    with pytest.raises(pickle.UnpicklingError, match="reuse an object"):
        loads(Frame(buffer.getvalue()), torch.device("cpu"))


def test_outputs_carved_from_one_allocation_travel_as_their_own_elements():
    """Red team round 61 (a false positive): an honest kernel's two outputs, views of one buffer, each sent their
    whole storage, and the reply was refused over its cap (the outputs' bytes and 4 MiB). A contiguous view now
    travels as its own elements; a strided one keeps its storage, so it arrives as the same view (its layout is
    checked against the reference's)."""
    from kerneldojo.sandbox.protocol import dumps, loads

    buffer = torch.randn(2, 600, 1024)
    h, y = buffer[0], buffer[1]
    frame = dumps((h, y))
    assert len(frame.data) < h.nbytes + y.nbytes + 4096
    got_h, got_y = loads(frame, torch.device("cpu"))
    assert torch.equal(got_h, h) and torch.equal(got_y, y) and got_h.is_contiguous()
    strided = buffer[:, :, ::2]
    (got,) = loads(dumps((strided,)), torch.device("cpu"))
    assert torch.equal(got, strided) and got.stride() == strided.stride()


DEEP_TREE = """
import os

def solution(x, y):
    scratch = os.getcwd()
    for _ in range(3000):
        os.mkdir("d")
        os.chdir("d")
    raise RuntimeError(f"scratch at {scratch}")
"""


def test_a_scratch_folder_too_deep_for_rmtree_is_still_removed(short_judge):
    from pathlib import Path

    result = short_judge.evaluate("vector_add", DEEP_TREE, "python")
    assert result.status == "runtime_error", result.messages
    scratch = result.messages[0].rsplit("scratch at ", 1)[1].split()[0]
    assert scratch.startswith("/") and not Path(scratch).exists(), scratch
    _honest_passes(short_judge)


# Red team round 3 (2026-11-24): replies whose few bytes unfold into work or memory in the judge.
def _raw_reply(body: str) -> str:
    """A submission that, at import, answers the judge's load request (seq 1) with a hand-made reply whose
    body is the pickle opcodes that the expression `body` gives."""
    frame = f'b"\\x80\\x04(J" + (1).to_bytes(4, "little") + b"\\x8c\\x02ok" + {body} + b"t."'
    return ("import gc\n\n"
            f"frame = {frame}\n"
            "end = next(o for o in gc.get_objects() if type(o).__name__ == 'WorkerEnd')\n"
            "end.sock.sendall(len(frame).to_bytes(8, 'big') + frame)\n\n\n"
            "def solution(x, y):\n    return x\n")


# {K: 1} where K = (K', K') forty times over, through the memo: 2**40 tuple hashes in one C call.
HASH_BOMB = _raw_reply('b"})" + b"".join(b"\\x94j" + i.to_bytes(4, "little") + b"\\x86" for i in range(40))'
                       ' + b"K\\x01s"')
# A dict key nested 300,000 tuples deep: hashing it recurses in C until the judge's stack overflows.
DEEP_KEY = _raw_reply('b"})" + b"\\x85" * 300_000 + b"K\\x01s"')


# Red team round 13: 60,000 int keys that all hash to 0 (multiples of 2**61 - 1): each insert compares with every
# key before it, in one C call holding the judge's GIL (33 s of a frozen judge from a 780 kB frame). A set alike.
_COLLIDING = 'b"".join(b"\\x8a\\x10" + (k * (2**61 - 1)).to_bytes(16, "little") + b"K\\x01" for k in range(60_000))'
COLLIDING_KEYS = _raw_reply(f'b"}}(" + {_COLLIDING} + b"u"')
# Red team round 15: a memo store's index sizes the judge's memo array (16 bytes an entry, written at once).
MEMO_RESIZE = _raw_reply('b"K\\x01p134217728\\n"')
# Red team round 16: one-byte opcodes that each make an object in the judge (4 MiB of them: 11.5 s, 420 MiB).
EMPTY_LISTS = _raw_reply('b"(" + b"]" * 200_000 + b"l"')
COLLIDING_SET = _raw_reply(f'b"\\x8f(" + {_COLLIDING}.replace(b"K\\x01", b"") + b"\\x90"')


@pytest.mark.parametrize("attack", [HASH_BOMB, DEEP_KEY, COLLIDING_KEYS, COLLIDING_SET, MEMO_RESIZE, EMPTY_LISTS],
                         ids=["memo_hash_bomb", "deep_key", "colliding_keys", "colliding_set", "memo_resize",
                              "empty_lists"])
def test_a_reply_that_unfolds_in_the_judge_is_refused_unbuilt(short_judge, attack):
    started = time.monotonic()
    result = short_judge.evaluate("vector_add", attack, "python")
    assert result.status == "runtime_error", result.messages
    assert any(why in result.messages[0] for why in ("reuse an object", "nested deeper", "only str keys",
                                                     "not pickle's EMPTY_SET", "pickle opcodes", "64 bits")
               ), result.messages  # the colliding ints are 77 bits wide: refused by round 111's rule first
    assert time.monotonic() - started < 60  # the load limit, plus the worker's start
    _honest_passes(short_judge)


# Red team round 14: a tensor record, then BUILD (Tensor.__setstate__ -> set_) re-views it as 2**40 elements over
# 4 bytes, past the span check; the error payload's repr then walked every element and the judge never returned.
_TENSOR_RECORD = ('b"(X\\x06\\x00\\x00\\x00tensorB\\x04\\x00\\x00\\x00\\x00\\x00\\x00\\x00X\\x07\\x00\\x00\\x00'
                  'float32K\\x00(K\\x01t(K\\x01t\\x89tQ"')
RESTATED_TENSOR = _raw_reply(f'{_TENSOR_RECORD} + b"(" + {_TENSOR_RECORD} + b"K\\x00(" + b"K\\x02" * 40 + b"t("'
                             ' + b"K\\x00" * 40 + b"tt" + b"b"')


def test_a_reply_that_restates_an_object_after_its_checks_is_refused(short_judge):
    started = time.monotonic()
    result = short_judge.evaluate("vector_add", RESTATED_TENSOR, "python")
    assert result.status == "runtime_error" and "not pickle's BUILD" in result.messages[0], result.messages
    assert time.monotonic() - started < 60


def test_a_reply_tensor_is_shown_by_its_shape_never_printed():
    from kerneldojo.sandbox.protocol import capped

    stretched = torch.zeros(1).as_strided((2,) * 40, (0,) * 40)  # 2**40 elements over one
    shown = "('error', tensor(shape=[" + ", ".join(["2"] * 40) + "], dtype=torch.float32))"
    assert capped(("error", stretched)) == shown
    assert "bits" in capped(1 << 100_000)


def test_a_worker_text_is_shown_bounded_whatever_its_shape():
    from kerneldojo.sandbox.protocol import MESSAGE_CAP_CHARS, capped

    tree: list = []
    for _ in range(40):  # as a reply it would need the memo; in the judge's own hands it must not be printed whole
        tree = [tree, tree]
    assert len(capped(tree)) <= MESSAGE_CAP_CHARS + 100


def test_the_language_of_a_source_is_read_in_linear_time():
    """A source of blank lines once cost the judge's language detection quadratic time (re.M with ^\\s*)."""
    import subprocess
    import sys

    code = ("from kerneldojo.graders.compile import detect_language, language_mismatch\n"
            "s = '\\n' * 199_000 + 'pass\\n'\n"
            "assert detect_language(s) == 'python' and language_mismatch(s, 'triton') is None\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)  # quadratic: hours


# Red team round 16: cursor moves and erasures in an exception's message rewrote the operator's screen (the real
# `Status: runtime_error` erased, a forged `Status: ok` and `Reward: 1.000` written, the rest concealed).
FORGED_SCREEN = ("def solution(x, y):\n"
                 "    raise RuntimeError('\\x1b[2A\\x1b[2K\\rStatus: ok\\x1b]0;kerneldojo: ok\\x07\\x1b[8;30;40m')\n")


def test_a_submissions_text_reaches_no_terminal_as_control_characters(short_judge):
    from kerneldojo.env.feedback import render_feedback

    result = short_judge.evaluate("vector_add", FORGED_SCREEN, "python")
    shown = render_feedback(result) + "\n".join(result.messages + result.checks_fired)
    assert result.status == "runtime_error" and "\\x1b[2A" in shown, result.messages
    assert not any((ord(c) < 32 and c not in "\n\t") or 0x7F <= ord(c) <= 0x9F for c in shown)


def test_a_source_the_parser_cannot_take_is_a_compile_error_at_every_entry(short_judge):
    """Red team round 18: 6,000 unary minus signs made `ast.parse` raise MemoryError (or RecursionError) in the
    judge's process while it detected the language: `evaluate`, an env's step and a whole batch raised."""
    from kerneldojo.batch import submission

    bomb = "import triton\n\ndef solution(x, y):\n    return " + "-" * 6000 + "x\n"
    result = short_judge.evaluate("vector_add", bomb)  # the language detected from the source
    assert result.status == "compile_error" and "parser" in result.messages[-1], result.messages
    assert submission("vector_add", bomb, None, "bomb").language == "triton"


@pytest.mark.parametrize("character", ["\ud800", "\0"], ids=["lone_surrogate", "nul"])
def test_a_source_no_file_can_hold_is_a_compile_error_at_every_entry(tmp_path, character):
    """Red team round 57: a lone surrogate in a comment (an agent's JSON `\\ud800` escape) raised out of
    `evaluate` and `env.step` while the result cache's key was built (the source cannot be encoded): a trainer drops
    a step that raises, so the submission escaped a failure's reward. Refused as a compile error, with the cache on."""
    from kerneldojo.batch import submission
    from kerneldojo.env.kernel_env import KernelEnv
    from kerneldojo.tasks import get_task

    source = get_task("vector_add").starter("triton") + f"\n# {character}\n"
    judge = Judge("cpu", seeds=1, result_cache=tmp_path / "results")
    result = judge.evaluate("vector_add", source)
    assert result.status == "compile_error" and "UTF-8" in result.messages[-1], result.messages
    assert result.reward == judge.reward("compile_error", None)
    env = KernelEnv("vector_add", judge=judge)
    env.reset(seed=0)
    _, reward, *_, info = env.step(source)
    assert info["status"] == "compile_error" and reward == result.reward, info
    with pytest.raises(ValueError, match="UTF-8"):
        submission("vector_add", source, None, "odd")


def test_a_reply_runs_no_code_of_the_submissions_objects():
    """Red team round 19: a tensor subclass left in the timing reply computed its outputs in `detach()` while the
    worker encoded the reply, after every check. Outputs are made plain with no subclass hook running, and the
    worker's encoder refuses any object that is not plain data or a record."""
    import pickle

    from kerneldojo.sandbox.protocol import dumps
    from kerneldojo.sandbox.worker.harness import plain

    ran = []

    class Deferred(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            ran.append(getattr(func, "__name__", str(func)))
            return super().__torch_function__(func, types, args, kwargs or {})

    class Sneaky:
        def __reduce__(self):
            ran.append("__reduce__")
            return (str, ("x",))

    deferred = torch.zeros(3).as_subclass(Deferred)
    ran.clear()
    out = plain((deferred, Sneaky(), 7))
    assert type(out[0]) is torch.Tensor and out[1:] == (None, 7) and ran == []  # plain data stays as it is
    for reply in ((1, "ok", (deferred,)), (1, "ok", (Sneaky(),))):
        with pytest.raises(pickle.PicklingError, match="a reply may not hold"):
            dumps(reply)
    assert ran == []


def test_submissions_parsed_in_threads_at_once_all_parse():
    """Red team round 42: on CPython 3.11, `ast.parse` in two threads at once (a pool's slots, the service's requests)
    failed one with SystemError ("AST constructor recursion depth mismatch") when the collector ran a finalizer
    inside a parse, and an honest submission ended `runtime_error`. Every judge-side parse holds one lock."""
    import threading
    from pathlib import Path

    from kerneldojo.graders.compile import detect_language
    from kerneldojo.graders.evidence import triton_kernel_names
    from kerneldojo.graders.profile import parse_python

    honest = (Path(__file__).parents[2] / "baselines" / "transformer_block" / "triton.py").read_text()
    stop, failures, done = time.monotonic() + 3, [], [0]

    def with_finalizer():
        try:
            yield 1
        finally:
            sum(range(50))  # Python code the collector runs, wherever it meets the cycle below

    def garbage():
        while time.monotonic() < stop:
            for _ in range(200):
                g = with_finalizer()
                next(g)
                cycle = [g]
                cycle.append(cycle)
            time.sleep(0.001)

    def parse(work):
        while time.monotonic() < stop:
            try:
                work()
                done[0] += 1
            except SystemError as e:
                failures.append(e)

    threads = [threading.Thread(target=garbage),
               threading.Thread(target=parse, args=(lambda: parse_python("import triton\nx = [1, (2, 3)]\n"),)),
               threading.Thread(target=parse, args=(lambda: (detect_language(honest), triton_kernel_names(honest)),))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures and done[0] > 0, failures[:3]


@pytest.mark.parametrize("starts_failing", [1, 2])
def test_a_worker_that_dies_before_it_is_ready_is_the_machines_failure(monkeypatch, starts_failing):
    """H200, 2026-11-27: a worker whose CUDA context the GPU's memory could not hold died at its start, and the step
    was the submission's `runtime_error` "during load". Such a worker never sent its READY, so no submission code ran
    in it: another worker is tried, and if that one cannot start either the step is `skipped`, the machine's."""
    from kerneldojo.sandbox import process

    taken: list = []
    real_take = process._take_worker

    def take(device, limits=None, replace=True):
        if len(taken) < starts_failing:
            worker = process._Worker(device, limits)
            worker.protections(timeout=60)  # confined; its warm-up (imports, a Triton launch: seconds) has begun
            worker._kill()  # as a worker the machine could not start
        else:
            worker = real_take(device, limits, replace)
        taken.append(worker)
        return worker

    judge = Judge("cpu", seeds=1, limits={"load": 60, "run": 5, "compile": 10}, result_cache=None)
    monkeypatch.setattr(process, "_take_worker", take)
    result = judge.evaluate("vector_add", HONEST, "triton")
    if starts_failing == 1:
        assert result.status == "ok" and len(taken) == 2, result.messages
    else:
        assert result.status == "skipped" and len(taken) == 2, result.messages
        assert any("before any submission code ran" in m for m in result.messages), result.messages
        assert judge.reward.of(result) == judge.reward.failure
    monkeypatch.undo()
    _honest_passes(judge)


# Red team round 112: one statement adding 400 constants of 4096 characters, which CPython's constant folder (run by
# compile(), not by the parser) turns into ~330 MB of intermediate strings, held until compilation ends.
FOLDING = "import triton\n\nx = " + " + ".join(["'a' * 4096"] * 400) + "\n\ndef solution(x, y):\n    return x\n"
_PEAK_AFTER_COMPILING = """
import resource, sys
from kerneldojo.graders.compile import compile_submission
from kerneldojo.tasks import get_task
compile_submission(get_task("vector_add"), sys.stdin.read(), "triton", "90")
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def test_the_judges_syntax_check_folds_no_constants(tmp_path):
    """The 18 kB version of FOLDING (emoji, 1,000 terms) made the judge's own syntax check allocate gigabytes, and
    the OOM killer ended the judge with every step in it. The judge now only parses (`ast.parse`); the worker's
    import, under its memory limit, is where the submission's text is compiled."""
    import os
    import subprocess
    import sys

    def peak_kib(source: str) -> int:
        done = subprocess.run([sys.executable, "-c", _PEAK_AFTER_COMPILING], input=source, capture_output=True,
                              text=True, timeout=300, env={**os.environ, "KERNELDOJO_CACHE": str(tmp_path)})
        assert done.returncode == 0, done.stderr[-2000:]
        return int(done.stdout.split()[-1])

    grown_mib = (peak_kib(FOLDING) - peak_kib(HONEST.replace("import triton", "import triton\nx = 'a' * 4096"))) / 1024
    assert grown_mib < 100, grown_mib  # compile() grew it by ~330 MiB
