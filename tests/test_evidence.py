"""The evidence pass (graders/evidence.py, sandbox/worker/evidence_replay.py) without a GPU: the decisions on
ncu CSV fixtures, the judge's own kernel names from a source's syntax, the refusal of vendor-like names, the
reader of the replay's raw output files. The real replay is in tests/test_gpu_evidence.py (gpu marker)."""

import math
import os
from pathlib import Path

import pytest
import torch

from kerneldojo.graders.evidence import (
    check_own_names,
    decide,
    figures,
    outputs_from_bytes,
    triton_kernel_names,
)  # fmt: skip
from kerneldojo.graders.ncu import NcuReportAltered, ncu_command, parse_ncu_csv
from kerneldojo.graders.profile import OwnKernels, foreign
from kerneldojo.sandbox.protocol import CompileError
from kerneldojo.sandbox.worker.evidence_replay import CHUNK_BYTES, OutputFileError, read_output, read_raw

EXPLOITS = Path(__file__).parent / "adversarial" / "exploits"

HEADER = '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","gpu__time_duration.sum"'
UNITS = '"","","","","","","","nsecond"'
TORCH_FILL = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char *, 1>>"
CUBLAS = "nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NNT"
OWN = OwnKernels(triton={"add_kernel", "matmul_kernel"}, native={"gemm_tn_kernel"})


def csv_text(launches: list[tuple[str, float]]) -> str:
    """ncu's --csv --page raw output for launches (name, µs), with its own messages around the table."""
    rows = [f'"{i}","4242","python3.11","127.0.0.1","{name}","1","7","{us * 1000:.0f}"'
            for i, (name, us) in enumerate(launches)]
    return "\n".join(["==PROF== Connected to process 4242", HEADER, UNITS, *rows, "==PROF== Disconnected"])


def judged(launches, claimed_ms, vendor_forbidden=True, decoy_forbidden=True):
    found = figures(parse_ncu_csv(csv_text(launches), strict=True), OWN)
    print(csv_text(launches), found, sep="\n")
    return found, decide(found, claimed_ms, "n=1048576, float32", vendor_forbidden, decoy_forbidden)


def test_an_honest_replay_raises_nothing():
    found, fired = judged([("add_kernel", 41.0)] * 3, claimed_ms=0.040)
    assert fired == {} and found.launches == 3 and found.own_share == 1.0
    assert found.kernel_ms == pytest.approx(0.041)


def test_no_kernel_at_all_is_host_compute():
    found, fired = judged([], claimed_ms=2.0)
    assert set(fired) == {"no_kernel"} and found.own_share is None


def test_a_vendor_kernel_is_flagged_where_the_task_forbids_libraries():
    _, fired = judged([("matmul_kernel", 5.0), (CUBLAS, 300.0)] * 3, claimed_ms=0.31)
    assert set(fired) == {"vendor_kernel", "decoy_kernel"} and "nvjet_tst" in fired["vendor_kernel"]
    _, allowed = judged([("matmul_kernel", 5.0), (CUBLAS, 300.0)] * 3, claimed_ms=0.31, vendor_forbidden=False,
                        decoy_forbidden=False)
    assert allowed == {}


def test_a_decoy_beside_torch_work_is_flagged():
    _, fired = judged([("add_kernel", 2.0), (TORCH_FILL, 50.0)] * 3, claimed_ms=0.06)
    assert set(fired) == {"decoy_kernel"} and "96%" in fired["decoy_kernel"]


def test_a_forged_timer_claims_far_less_than_ncu_measured():
    _, fired = judged([("add_kernel", 41.0)] * 3, claimed_ms=0.041 / 1000)
    assert set(fired) == {"time_disagrees"} and "41.0 µs" in fired["time_disagrees"]
    # Within the slack (ncu's serialized replay, a 20 µs floor) nothing fires.
    assert judged([("add_kernel", 41.0)] * 3, claimed_ms=0.030)[1] == {}


def test_autotuning_counts_each_name_once_at_its_shortest_launch():
    # Four configs benchmarked (the slow ones included), then three calls of the chosen one, and a second kernel.
    tuning = [("matmul_kernel", us) for us in (900.0, 400.0, 120.0, 250.0) for _ in range(5)]
    found, fired = judged([*tuning, *[("matmul_kernel", 121.0), ("add_kernel", 10.0)] * 3], claimed_ms=0.125)
    assert found.kernel_ms == pytest.approx(0.130) and fired == {}
    assert judged([*tuning, ("matmul_kernel", 121.0)], claimed_ms=0.001)[1].keys() == {"time_disagrees"}


def test_kernels_overlapping_on_two_streams_are_bounded_by_the_busier_stream():
    """Red team round 91: two honest kernels of different names on two joined streams overlap, so the event time is
    their union; ncu replays them one at a time, and the sum of both was flagged `time_disagrees`. Kernels of one
    stream still add up."""
    def launches(streams):
        rows = [f'"{i}","4242","python3.11","127.0.0.1","{name}","1","{stream}","{us * 1000:.0f}"'
                for i, (name, stream, us) in enumerate(streams * 2)]
        return parse_ncu_csv("\n".join([HEADER, UNITS, *rows]), strict=True)

    apart = figures(launches([("add_kernel", "7", 100.0), ("matmul_kernel", "13", 100.0)]), OWN)
    assert apart.kernel_ms == pytest.approx(0.1) and not decide(apart, 0.1, "case", True, True)
    one = figures(launches([("add_kernel", "7", 100.0), ("matmul_kernel", "7", 100.0)]), OWN)
    assert one.kernel_ms == pytest.approx(0.2) and "time_disagrees" in decide(one, 0.1, "case", True, True)


def test_kernels_that_move_the_data_through_host_memory_are_flagged():
    """Red team round 88 (the zero-copy Open item): own kernels that write the inputs to pinned host memory and read
    the host's answer back leave no copy and no foreign kernel; ncu's count of their sectors in host memory does."""
    from kerneldojo.graders.evidence import REPLAY_CALLS
    from kerneldojo.graders.ncu import HOST_MEMORY_METRIC, replay_metrics

    data = 3 * (1 << 24) * 4  # vector_add at n = 2^24, float32: two inputs and an output
    def replayed(sectors_per_launch: float):
        launch = {"Kernel Name": "add_kernel", "Stream": "7", "gpu__time_duration.sum": 1.0,
                  HOST_MEMORY_METRIC: sectors_per_launch}
        return figures([launch] * REPLAY_CALLS, OWN)

    host = replayed(data / 32)  # every byte of the call through host memory
    assert host.host_bytes == pytest.approx(data)
    assert "host_memory" in decide(host, 1.0, "case", True, True, data_bytes=data)
    assert not decide(replayed(0), 1.0, "case", True, True, data_bytes=data)
    assert not decide(replayed(100), 1.0, "case", True, True, data_bytes=data)  # a few sectors: not the data
    assert HOST_MEMORY_METRIC in replay_metrics(90)  # its name checked on GH100 only (round 92)
    assert not {HOST_MEMORY_METRIC} & {*replay_metrics(80), *replay_metrics(100), *replay_metrics(120)}
    assert HOST_MEMORY_METRIC not in replay_metrics(None)


def test_torchs_jiterated_kernels_are_never_an_own_triton_kernels():
    """Red team round 92: torch's jiterator compiles kernels at run time as plain identifiers
    (`mul_kernel_vectorized4_kernel`), which an unlaunched Triton function of that name claimed."""
    jitted = "mul_kernel_vectorized4_kernel"
    assert jitted not in OwnKernels(triton={jitted}) and foreign(jitted)
    with pytest.raises(CompileError):
        check_own_names({jitted})


def test_torch_kernels_named_like_an_own_native_kernel_are_not_own():
    own = OwnKernels(native={"vectorized_elementwise_kernel", "gemm_tn_kernel"})
    assert TORCH_FILL not in own
    assert "void gemm_tn_kernel<128>(const __nv_bfloat16 *, int)" in own
    assert "void (anonymous namespace)::gemm_tn_kernel<128>(float *)" in own
    assert "add_kernel" in OWN and "add_kernel_2" not in OWN and "void add_kernel(float *)" not in OWN


def test_a_report_the_replay_wrote_into_is_refused():
    honest = csv_text([("add_kernel", 41.0)])
    with pytest.raises(NcuReportAltered):  # a forged table printed before ncu's own
        forged = '"0","1","p","h","add_kernel","1","7","1"'
        parse_ncu_csv(f"{HEADER}\n{UNITS}\n{forged}\n{honest}", strict=True)
    with pytest.raises(NcuReportAltered):
        parse_ncu_csv(honest + '\n"0","4242","p","h","add_kernel","1","7","5"', strict=True)
    assert parse_ncu_csv("==PROF== No kernels were profiled.", strict=True) == []


def test_the_evidence_command_profiles_every_launch_from_the_start():
    command = ncu_command("ncu", ["python", "-m", "replay"], launch_count=None, metrics=("gpu__time_duration.sum",))
    assert command[command.index("--profile-from-start") + 1] == "on" and "--launch-count" not in command
    assert "--kernel-name" not in command and "--nvtx" not in command
    assert command[command.index("--metrics") + 1] == "gpu__time_duration.sum"
    assert command[command.index("--cache-control") + 1] == "all"
    assert command[command.index("--clock-control") + 1] == "none"
    feedback = ncu_command("ncu", ["x"], from_start=False)
    assert feedback[feedback.index("--profile-from-start") + 1] == "off"


SOURCE = '''
import triton as tr
import triton.language as tl
from triton import jit as J, autotune
from triton.runtime import jit as rj

@tr.jit
def plain(x): pass

@autotune(configs=[tr.Config({"B": 64})], key=["n"])
@tr.heuristics({"EVEN": lambda a: True})
@J(do_not_specialize=["n"])
def tuned(x, n): pass

@rj.jit
def through_runtime(x): pass

def solution(x):
    @tr.jit
    def nested(x): pass
    wrapped = tr.jit(helper)
    return x

def helper(x): pass

@some.other.jit
def not_triton(x): pass

@tl.constexpr_function
def not_a_kernel(x): pass
'''


def test_own_triton_names_come_from_the_syntax_under_any_import_spelling():
    assert triton_kernel_names(SOURCE) == {"plain", "tuned", "through_runtime", "nested", "helper"}
    assert triton_kernel_names("def solution(:") == set()


def test_own_kernels_named_like_a_vendor_library_are_refused_at_compile_time():
    for name in ("nvjet_tst_128x256_64x4", "sm90_xmma_gemm_f32f32", "cutlass_80_tensorop_gemm", "ampere_sgemm_128",
                 "triton_poi_fused_add_0", "triton_red_fused_sum_1", "triton_per_fused__softmax_0",  # Inductor's
                 "triton_", "mine_triton_poi_fused_add_relu_0"):
        with pytest.raises(CompileError, match="rename"):
            check_own_names({name, "add_kernel"})
    check_own_names({"gemm_kernel", "fp8_gemm_kernel", "gemm_tn_kernel", "softmax_kernel", "triton_softmax"})
    assert foreign("triton_poi_fused_add_0") and not foreign("triton_softmax")


def test_a_source_with_a_vendor_named_kernel_is_a_compile_error(cpu_judge):
    source = triton_source_named("nvjet_tst_128x64_h_bz_NNT")
    result = cpu_judge.evaluate("vector_add", source, "triton")
    assert result.status == "compile_error" and "rename" in result.messages[-1], result.messages


def triton_source_named(name: str) -> str:
    return f'''
import torch, triton, triton.language as tl

@triton.jit
def {name}(x, y, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=mask) + tl.load(y + offs, mask=mask), mask=mask)

def solution(x, y):
    out = torch.empty_like(x)
    {name}[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK=1024)
    return out
'''


def test_the_raw_output_reader_takes_exactly_the_expected_bytes(tmp_path):
    (tmp_path / "ok.bin").write_bytes(b"x" * 16)
    assert read_raw(tmp_path / "ok.bin", 16) == b"x" * 16
    (tmp_path / "short.bin").write_bytes(b"x" * 15)
    (tmp_path / "long.bin").write_bytes(b"x" * 17)
    os.symlink(tmp_path / "ok.bin", tmp_path / "link.bin")
    os.mkfifo(tmp_path / "fifo.bin")
    for name, why in [("short", "15 bytes"), ("long", "17 bytes"), ("link", "cannot be opened"),
                      ("fifo", "not a regular file"), ("absent", "cannot be opened")]:
        with pytest.raises(OutputFileError, match=why):
            read_raw(tmp_path / f"{name}.bin", 16)


def test_outputs_over_the_file_size_cap_come_in_chunks(tmp_path):
    data = bytes(range(256)) * ((CHUNK_BYTES + 1000) // 256)
    (tmp_path / "out0_1_0.bin").write_bytes(data[:CHUNK_BYTES])
    (tmp_path / "out0_1_1.bin").write_bytes(data[CHUNK_BYTES:])
    assert read_output(tmp_path, 0, 1, len(data)) == data
    with pytest.raises(OutputFileError):
        read_output(tmp_path, 0, 1, len(data) + 1)


def test_outputs_are_rebuilt_in_the_judges_shapes_and_nothing_else():
    t = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    specs = [((2, 3), torch.float32)]
    (got,) = outputs_from_bytes([[t.numpy().tobytes()]], specs, torch.device("cpu"))
    assert torch.equal(got[0], t)
    for bad in ([[t.numpy().tobytes()[:-4]]], [[None]], [[t.numpy().tobytes(), b""]], "calls", [["text"]]):
        with pytest.raises(ValueError):
            outputs_from_bytes(bad, specs, torch.device("cpu"))


@pytest.mark.parametrize(("size", "dtype"), [([1000, 3], torch.bfloat16), ([50], torch.float32), ([7, 9], torch.int32)])
def test_the_replays_sample_is_the_judges(size, dtype):
    """The evidence worker keeps `count` elements of each output at positions from the judge's seed; the judge
    picks the same positions of its expected outputs (output k from seed + k)."""
    from kerneldojo.graders.evidence import sampled_outputs
    from kerneldojo.sandbox.worker.evidence_replay import _sampled

    full = (torch.arange(math.prod(size)) * 3 % 1001).to(dtype).reshape(size)
    raw = full.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
    count, seed = 100, 12345
    kept = _sampled(raw, size, str(dtype).removeprefix("torch."), count, seed + 1)
    want = sampled_outputs((full, full), count, seed)[1]
    assert want.numel() == min(count, full.numel())
    assert torch.equal(torch.frombuffer(bytearray(kept), dtype=torch.uint8).view(dtype), want)


def test_the_evidence_request_reaches_the_worker_and_says_why_it_cannot_run(monkeypatch):
    """The whole request path on a machine without ncu: a fresh worker answers {"unavailable": ...}."""
    from kerneldojo.graders import compile as compile_mod
    from kerneldojo.sandbox.device import resolve_device
    from kerneldojo.sandbox.process import evidence_in_worker
    from kerneldojo.tasks import get_task

    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # no ncu on it
    task = get_task("vector_add")
    build = compile_mod.compile_submission(task, "def solution(x, y):\n    return x + y\n", "python", None)
    reply = evidence_in_worker(resolve_device("cpu"), task, build, {"n": 8, "dtype": "float32"}, [1, 2],
                               [((8,), torch.float32)], sample=(4, 7))
    assert set(reply) == {"unavailable", "limits_hit", "take_s", "worker_s"} and "ncu" in reply["unavailable"], reply
    assert reply["limits_hit"] == []  # the judge's reading of the worker's cgroup: nothing stopped


def test_a_replay_that_died_fails_the_step_and_says_what_stopped_it(monkeypatch):
    """An H100 run (2026-11-24) flagged honest kernels `evidence_wrong` when their replays were killed beside four
    workers: a replay that writes no outputs is a failure (not a flag, not cached), with the limit it met."""
    from kerneldojo import judge as judge_mod
    from kerneldojo.result import Evidence
    from kerneldojo.sandbox.protocol import SubmissionError
    from kerneldojo.tasks import get_task

    died = {"problems": ["no output file for call 1"], "returncode": -9, "stderr": "",
            "csv": '"ID","Kernel Name"\n==PROF== Connected to process 7\n==ERROR== The application returned an error',
            "limits_hit": ["the worker ran out of host memory: its limit is 16 GiB and the OOM killer ended it"]}
    monkeypatch.setattr(judge_mod, "evidence_in_worker", lambda *a, **k: died)
    task = get_task("vector_add")
    judge = judge_mod.Judge("cpu")
    with pytest.raises(SubmissionError, match=r"exit -9.*the replay ran out of host memory") as failed:
        judge._gather_evidence(task, None, OwnKernels(), task.cases("bench")[0], [1, 2], None, 1.0,
                               Evidence(case="c", claimed_ms=1))
    assert "==PROF== Connected to process 7\n==ERROR== The application" in str(failed.value)  # ncu's own lines
    assert "Kernel Name" not in str(failed.value)
    assert "runtime_error" not in judge_mod.CACHED_STATUSES


@pytest.mark.parametrize(("mode", "replies", "outcome"), [
    ("always", ["died", "died"], "runtime_error"),  # every step replayed: dying there pays a failure every step
    ("always", ["died", "unavailable"], "note"),  # an honest kernel whose first replay the machine killed
    ("sampled", ["died", "died"], "evidence_failed"),  # drawn one step in 8: dying must cost the pass's fine
    ("sampled", ["died", "unavailable"], "note"),  # the second replay decided nothing: the machine's (no ncu)
    ("sampled", ["raises", "raises"], "evidence_failed"),  # any failure of a drawn pass (round 37: a csv error)
    ("sampled", ["not_ready", "not_ready"], "skipped"),  # neither replay's worker started: the machine's, twice
    # round 80: the replay ran the submission and died, then the retry's worker could not start (its other
    # submission filling the GPU's memory): not the machine's alone, so the pass's fine stands
    ("sampled", ["died", "not_ready"], "evidence_failed"),
])
def test_a_replay_that_dies_is_replayed_once_then_fails_or_when_sampled_is_flagged(monkeypatch, mode, replies,
                                                                                     outcome):
    """A dead replay is replayed once from fresh seeds in every mode (the machine kills replays at times: an honest
    kernel must not fail by it). A cheat that detects the replay (red team round 32) and dies there would earn a
    failure's 0 on the drawn step and its forged reward on the other seven: in sampled mode a second death is
    `evidence_failed`, which the reward fines; replayed on every step, it is the step's failure."""
    from kerneldojo import judge as judge_mod
    from kerneldojo.graders.checks import Flagged
    from kerneldojo.result import CaseTiming, EvalResult, TimeStats
    from kerneldojo.sandbox.protocol import SubmissionError, Unavailable, WorkerNotReady
    from kerneldojo.tasks import get_task

    answers = {"died": {"problems": ["no output file for call 1"], "returncode": 9, "limits_hit": []},
               "unavailable": {"unavailable": "ncu is not on PATH", "limits_hit": []}}
    asked = []
    def replay(*args, **kwargs):
        asked.append(args[4])
        if replies[len(asked) - 1] == "raises":
            raise RuntimeError("field larger than field limit (131072)")
        if replies[len(asked) - 1] == "not_ready":
            raise WorkerNotReady("the worker process died (exit 1) before it was ready for replay")
        return answers[replies[len(asked) - 1]]

    monkeypatch.setattr(judge_mod, "evidence_in_worker", replay)
    task = get_task("vector_add")
    make = task.reference.make_inputs  # the judge makes the drawn case's inputs itself meanwhile: keep them small
    monkeypatch.setattr(task.reference, "make_inputs", lambda shape, seed, dev: make({**shape, "n": 8}, seed, dev))
    stats = TimeStats(median_ms=1.0, mean_ms=1.0, min_ms=1.0, max_ms=1.0, iqr_ms=0.0, runs=5)
    result = EvalResult(task="vector_add", language="triton", device="cpu", mode="cpu", status="ok",
                        versions=judge_mod.versions(),
                        timings=[CaseTiming(case=str(c), submission=stats) for c in task.cases("bench")])
    judge = judge_mod.Judge("cpu", evidence=mode)
    if outcome == "runtime_error":
        with pytest.raises(SubmissionError, match="exit 9"):
            judge._evidence(task, None, OwnKernels(), result)
        assert "exit 9" in result.evidence.retried
    elif outcome == "skipped":
        with pytest.raises(Unavailable, match="could not run"):
            judge._evidence(task, None, OwnKernels(), result)
    elif outcome == "evidence_failed":
        with pytest.raises(Flagged) as flagged:
            judge._evidence(task, None, OwnKernels(), result)
        assert set(flagged.value.checks) == {"evidence_failed"}
        assert ("exit 9" if replies[0] == "died" else "field limit") in flagged.value.checks["evidence_failed"]
        assert result.evidence.one_in == judge_mod.EVIDENCE_ONE_IN  # so the reward fines it (`RewardConfig.of`)
    else:
        judge._evidence(task, None, OwnKernels(), result)
        assert "ncu is not on PATH" in result.evidence.note
    assert len(asked) == len(replies) and (len(asked) < 2 or asked[0] != asked[1])  # the retry's seeds are fresh


@pytest.mark.parametrize(("alone", "outcome"), [(False, "failed"), (True, "note")])
def test_an_ncu_error_in_a_replay_fails_the_step_unless_ncu_fails_alone(monkeypatch, alone, outcome):
    """Red team round 35: a replay that wrote ncu's permission error into ncu's output and killed ncu turned the pass
    off ("ncu failed", the worker's figures trusted, the `ok` cached). An ncu error counts as the machine's only where
    ncu also fails on a replay the judge chose, with no submission around (`Judge._ncu_fails_alone`)."""
    from kerneldojo import judge as judge_mod
    from kerneldojo.graders.evidence import sampled_outputs
    from kerneldojo.result import Evidence
    from kerneldojo.sandbox.protocol import SubmissionError
    from kerneldojo.tasks import get_task

    task = get_task("vector_add")
    case = task.cases("small")[-1]

    def honest_outputs_forged_error(device, task, build, shape, seeds, specs, limits, sample, armed):
        sets = [task.reference.make_inputs(shape, seed, "cpu") for seed in seeds]
        rows = [[t.contiguous().view(torch.uint8).numpy().tobytes()
                 for t in sampled_outputs(task.expected(*inputs, shape=shape), *sample)] for inputs in sets]
        return {"csv": "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU "
                       "Performance Counters\n", "outputs": rows, "problems": [], "returncode": -9, "limits_hit": []}

    monkeypatch.setattr(judge_mod, "evidence_in_worker", honest_outputs_forged_error)
    judge = judge_mod.Judge("cpu")
    monkeypatch.setattr(judge, "_ncu_fails_alone", lambda: alone)
    evidence = Evidence(case=str(case), claimed_ms=1.0)
    if outcome == "failed":
        with pytest.raises(SubmissionError, match="only on it"):
            judge._gather_evidence(task, None, OwnKernels(), case, [1, 2], None, 1.0, evidence)
    else:
        assert judge._gather_evidence(task, None, OwnKernels(), case, [1, 2], None, 1.0, evidence) == {}
        assert "ERR_NVGPUCTRPERM" in evidence.note


@pytest.mark.parametrize(("reply", "fails", "asked"), [
    ({"csv": '"ID","Kernel Name","gpu__time_duration.sum"\n"","","ms"\n"0","add","0.5"\n'}, False, 1),
    ({"csv": "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance "
             "Counters\n"}, True, 1),
    ({"unavailable": "ncu is not on PATH"}, True, 1),
    # Red team round 36: a probe whose replay died (the machine's doing) decided "ncu fails here" for the judge's
    # life, and every later ncu error passed: now it decides nothing (the error stays the replay's) and is asked again.
    ({"problems": ["out0_0_0.bin: cannot be opened"], "csv": "==ERROR== The application returned an error code\n"},
     False, 2),
    ({"csv": "==ERROR== The application returned an error code (1)\n"}, False, 1),  # not the counters' refusal
    # Red team round 92: a metric this ncu does not know fails every replay, honest or not: the machine's.
    ({"csv": "==ERROR== Failed to find metric lts__t_sectors_srcunit_tex_aperture_sysmem.sum\n"}, True, 1),
])
def test_whether_ncu_fails_alone_is_asked_of_a_judge_chosen_replay(monkeypatch, reply, fails, asked):
    from kerneldojo import judge as judge_mod

    calls = []
    monkeypatch.setattr(judge_mod, "evidence_in_worker", lambda *a, **k: calls.append(a[1].id) or reply)
    judge = judge_mod.Judge("cpu")
    assert judge._ncu_fails_alone() is fails and judge._ncu_fails_alone() is fails
    assert calls == ["vector_add"] * asked


def test_the_replay_cannot_reach_ncus_output_nor_signal_it():
    """Red team round 35: the replay opened ncu's stdout through /proc/<ncu>/fd/1, wrote a forged error into it and
    killed ncu. In a nested Landlock domain (`confine.nest_domain`, entered before the submission loads) it can do
    none of that to a process outside it; here the test's process stands in for ncu."""
    import subprocess
    import sys

    probe = (
        "import os\n"
        "from kerneldojo.sandbox.worker.confine import nest_domain\n"
        "print(nest_domain())\n"
        "import tempfile, pathlib\n"  # Triton's cache renames a file out of a folder: no EXDEV (H200, 2026-11-27)
        "top = pathlib.Path(tempfile.mkdtemp()); (top / 'sub').mkdir(); (top / 'sub' / 'f').write_text('x')\n"
        "(top / 'sub' / 'f').rename(top / 'f')\n"
        "for what, act in (('fd', lambda: open(f'/proc/{os.getppid()}/fd/1', 'w')),\n"
        "                  ('mem', lambda: open(f'/proc/{os.getppid()}/mem', 'rb')),\n"
        "                  ('kill', lambda: os.kill(os.getppid(), 0))):\n"
        "    try:\n"
        "        act()\n"
        "        print(what, 'reached')\n"
        "    except PermissionError:\n"
        "        print(what, 'refused')\n"
    )
    lines = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60).stdout.split("\n")
    if lines[0].startswith("unavailable"):
        pytest.skip(f"no Landlock here: {lines[0]}")
    assert lines[1:3] == ["fd refused", "mem refused"], lines
    assert lines[3] == "kill refused", lines


def test_a_long_kernel_name_parses_and_a_table_that_does_not_is_altered(monkeypatch):
    """Red team round 37: a demangled kernel name past the csv module's field limit (131,072 characters) raised an
    error the pass did not expect. A name of any length within the capped report parses; a table the csv module
    cannot read is one ncu did not print."""
    name = "tiny<" + "A" * 200_000 + ">"
    table = f'"ID","Kernel Name","gpu__time_duration.sum"\n"","","msecond"\n"0","{name}","0.5"\n'
    (launch,) = parse_ncu_csv(table, strict=True)
    assert launch["Kernel Name"] == name and launch["gpu__time_duration.sum"] == 0.5
    import csv

    from kerneldojo.graders import ncu

    def unreadable(lines):
        raise csv.Error("field larger than field limit (131072)")

    monkeypatch.setattr(ncu.csv, "reader", unreadable)
    with pytest.raises(NcuReportAltered, match="does not parse"):
        parse_ncu_csv(table, strict=True)


def test_a_third_party_librarys_triton_kernels_count_as_the_submissions():
    """Liger-Kernel's kernels, called as-is, are compiled by Triton in the worker like the submission's own; torch's
    (inductor) and Triton's own modules are never searched. Found by reading files, running none of them."""
    pytest.importorskip("liger_kernel")
    source = ("from liger_kernel.ops.softmax import _softmax_forward\n\n"
              "def solution(x):\n    return _softmax_forward(x)[0]\n")
    assert "_softmax_single_block_forward_kernel" in triton_kernel_names(source)
    assert triton_kernel_names("import torch._inductor.kernel.mm\nimport triton.language as tl\n") == set()


def test_evidence_modes(monkeypatch):
    from kerneldojo.judge import EVIDENCE_MODES, Judge

    monkeypatch.delenv("KERNELDOJO_EVIDENCE", raising=False)
    assert EVIDENCE_MODES == ("always", "sampled", "off") and Judge("cpu").evidence == "always"
    with pytest.raises(ValueError, match="evidence must be one of"):
        Judge("cpu", evidence="sometimes")
    from kerneldojo.env.kernel_env import KernelEnv

    env = KernelEnv(task="vector_add", device="cpu")
    assert env.judge.evidence == "sampled"  # an RL loop pays the replay on one step in EVIDENCE_ONE_IN


@pytest.mark.parametrize("appended", ['"7","own","nan"\n', '"1","own","-4.99"\n', '"1","own","inf"\n',
                                      '"0","own","1.0"\n', '"1","own"\n'])
def test_rows_written_after_ncus_table_are_refused_unless_they_look_like_ncus(appended):
    """Red team round 10: bare rows after ncu's table (a fresh ID, a NaN or negative duration) turned the pass's
    figures into NaN, which no comparison flags."""
    table = ('"ID","Kernel Name","gpu__time_duration.sum"\n"","","msecond"\n'
             '"0","nvjet_hsh_256x128_64x4_2x1_v_bz_coopA_NTN","5.0"\n')
    assert len(parse_ncu_csv(table, strict=True)) == 1
    with pytest.raises(NcuReportAltered):
        parse_ncu_csv(table + appended, strict=True)


def test_a_kernel_named_like_torchs_or_a_vendors_never_makes_theirs_the_submissions():
    """Red team round 12: own names from a rewritten source file made torch's and cuBLAS's kernels count as the
    submission's in the worker's profile. Names are fixed before the submission runs, and a full name in torch's
    namespaces or a vendor's pattern is never its own, whatever base name it shares."""
    from kerneldojo.graders.profile import KernelInterval, summarize_profile

    torch_kernel = "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>(int, float*)"
    cublas_kernel = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_cublas"
    assert foreign(torch_kernel) and foreign(cublas_kernel) and not foreign("add_kernel")
    kernels = [KernelInterval(torch_kernel, 7, 0, 1000), KernelInterval(cublas_kernel, 7, 1000, 2000),
               KernelInterval("add_kernel", 7, 2000, 2100)]
    own = {"vectorized_elementwise_kernel", cublas_kernel, "add_kernel"}
    stats = summarize_profile(kernels, 1, OwnKernels(triton=own, native=own))
    assert abs(stats.own_share - 100 / 2100) < 1e-9


def test_a_triton_kernel_named_like_a_torch_kernel_claims_it_nowhere():
    """Red team round 29: a Triton kernel named `softmax_warp_forward` made torch's persistent softmax (in the global
    anonymous namespace, so not `at::`) count as the submission's in the worker's profile, which matched Triton names
    by base name; the evidence pass already matched them exactly. Both match exactly now."""
    from kerneldojo.graders.profile import KernelInterval, summarize_profile

    torchs = ("void (anonymous namespace)::softmax_warp_forward<float, float, float, 10, false, false>(float*, "
              "float const*, int, int, int, bool const*, int, bool)")
    own = OwnKernels(triton={"softmax_warp_forward", "softmax_kernel"})
    assert torchs not in own and "softmax_warp_forward" in own
    assert "void at_cuda_detail::cub::DeviceScanKernel<int>(int*)" not in OwnKernels(native={"DeviceScanKernel"})
    stats = summarize_profile([KernelInterval(torchs, 7, 0, 1000), KernelInterval("softmax_kernel", 7, 1000, 1010)],
                              1, own)
    assert abs(stats.own_share - 10 / 1010) < 1e-9


@pytest.mark.parametrize(("field", "value"), [("median_ms", float("nan")), ("min_ms", -1.0), ("own_share", 1.5),
                                              ("kernel_ms", float("inf")), ("own_share", float("nan")),
                                              ("runs", 10**6), ("runs", 0)])
def test_figures_a_worker_cannot_have_measured_are_refused(field, value):
    """Red team round 12: a NaN median made every bound the judge checks false; an own share above 1 paid more.
    Round 39: a run count past the harness's made the judge's seed accounting fail (a failure's 0, not a flag)."""
    from kerneldojo.result import ProfileStats, TimeStats
    from kerneldojo.sandbox.process import _implausible
    from kerneldojo.sandbox.protocol import TimedRuns

    stats = TimeStats(median_ms=0.5, mean_ms=0.5, min_ms=0.4, max_ms=0.6, iqr_ms=0.01, runs=10)
    profile = ProfileStats(calls=3, kernel_ms=0.5, busy_ms=0.5, launches_per_call=1, streams=1, own_share=1.0)
    ran = [(torch.zeros(1),)] * 2  # one set as the timed calls left it, then as the profiled call did
    assert _implausible(TimedRuns(stats, profile, ran), 1, gpu=True) is None
    target = stats if field in TimeStats.model_fields else profile
    setattr(target, field, value)
    problem = _implausible(TimedRuns(stats, profile, ran), 1, gpu=True)
    assert field in problem or "own share" in problem or "timed runs" in problem


@pytest.mark.parametrize("outputs", [[], [()], [(0,)], [(0,), (0,), (0,)], [None, (0,)], [(0,), None]])
def test_a_timing_reply_that_skips_the_recheck_is_refused(outputs):
    """Red team round 13: the judge rechecks the sets a reply holds, so a reply with none (or none run) skipped it."""
    from kerneldojo.result import TimeStats
    from kerneldojo.sandbox.process import _implausible
    from kerneldojo.sandbox.protocol import TimedRuns

    stats = TimeStats(median_ms=0.5, mean_ms=0.5, min_ms=0.4, max_ms=0.6, iqr_ms=0.01, runs=10)
    assert "input sets" in _implausible(TimedRuns(stats, None, outputs), 1, gpu=False)


def test_a_gpu_timing_reply_without_a_profile_is_refused():
    """A GPU timing reply with no profile skipped every check of it (`vendor_kernel`, `torch_kernel`, `decoy_kernel`,
    `no_kernel`, `unsynchronized_stream`): the harness profiles every GPU timing, so only a forged reply has none."""
    from kerneldojo.result import ProfileStats, TimeStats
    from kerneldojo.sandbox.process import _implausible
    from kerneldojo.sandbox.protocol import TimedRuns

    stats = TimeStats(median_ms=0.5, mean_ms=0.5, min_ms=0.4, max_ms=0.6, iqr_ms=0.01, runs=10)
    ran = [(torch.zeros(1),)] * 2
    assert "no profile" in _implausible(TimedRuns(stats, None, ran), 1, gpu=True)
    assert _implausible(TimedRuns(stats, None, ran), 1, gpu=False) is None  # CPU mode has no profiler
    profile = ProfileStats(calls=1, kernel_ms=0.5, busy_ms=0.5, launches_per_call=1, streams=1, own_share=1.0)
    assert _implausible(TimedRuns(stats, profile, ran), 1, gpu=True) is None


def test_the_evidence_checks_the_time_the_speedup_pays(monkeypatch):
    """Red team round 14: the pass checked ncu against the worker's kernel time while the speedup paid its busy
    time; a worker that reported the first honestly and cut the second (and its event median) was paid 2.5x."""
    from kerneldojo import judge as judge_mod
    from kerneldojo.result import CaseTiming, EvalResult, ProfileStats, TimeStats, Versions
    from kerneldojo.tasks import get_task

    task = get_task("vector_add")
    case = task.cases("bench")[0]
    forged = TimeStats(median_ms=0.076, mean_ms=0.076, min_ms=0.07, max_ms=0.08, iqr_ms=0.001, runs=50)
    profile = ProfileStats(calls=3, kernel_ms=0.389, busy_ms=0.076, launches_per_call=1, streams=1, own_share=1.0)
    result = EvalResult(task=task.id, language="triton", device="cuda", mode="gpu", status="ok",
                        versions=Versions(kerneldojo="0", python="3", torch="2"))
    result.timings = [CaseTiming(case=str(case), submission=forged, profile=profile)]
    checked = []

    def gather(self, task, build, own, case, seeds, armed, claimed_ms, evidence):
        checked.append(claimed_ms)
        return decide(figures([{"Kernel Name": "add", "gpu__time_duration.sum": 0.389}], OwnKernels({"add"})),
                      claimed_ms, str(case), True, True)

    monkeypatch.setattr(judge_mod.Judge, "_gather_evidence", gather)
    monkeypatch.setattr(judge_mod.secrets, "choice", lambda cases: case)
    with pytest.raises(judge_mod.Flagged) as raised:
        judge_mod.Judge("cpu")._evidence(task, None, OwnKernels({"add"}), result)
    assert checked == [result.timings[0].scored_ms] and "time_disagrees" in raised.value.checks


def test_a_cuda_ipc_record_names_a_ref_counter_inside_torchs_file():
    """Red team round 15: torch decrements the counter at the record's offset, unchecked, when the judge frees the
    tensor (an offset of 2**40: a SIGSEGV in the judge). Refused at decode, before torch sees it."""
    import io
    import pickle

    from kerneldojo.sandbox import protocol

    def frame(counter_offset: int) -> protocol.Frame:
        record = ("cuda_ipc", "float32", (4,), (1,), 0, 0, b"\x01" * 64, 16, 0, False, b"/torch_4242_1234567",
                  counter_offset, None, False)

        class Writer(pickle.Pickler):
            def persistent_id(self, obj):
                return record if obj == "RECORD" else None

        buffer = io.BytesIO()
        writer = Writer(buffer, protocol=pickle.HIGHEST_PROTOCOL)
        writer.fast = True
        writer.dump((3, "ok", ("RECORD",)))
        return protocol.Frame(buffer.getvalue())

    if not torch.cuda.is_available():  # the device check comes first: a CPU judge refuses every CUDA record
        with pytest.raises(pickle.UnpicklingError, match="bad CUDA tensor record"):
            protocol.loads(frame(3), torch.device("cpu"))
    with pytest.raises(pickle.UnpicklingError, match="bad CUDA tensor record"):
        protocol.loads(frame(1 << 40), torch.device("cuda", 0))


def _time_with_stand_ins(monkeypatch, source: Path, split: bool = False):
    """The harness's own `time` on the CPU, with stand-ins for the two GPU-only helpers that call the calls as they
    do (`builtins.kd_test_timing['on']` while the timed calls run); (task, case, timed reply, the judge's account
    of the sets' last seeds)."""
    import builtins

    from kerneldojo.graders.timing import WARMUP_CALLS, summarize
    from kerneldojo.sandbox.device import resolve_device
    from kerneldojo.sandbox.protocol import REFILLS, Build, last_seeds
    from kerneldojo.sandbox.worker import harness
    from kerneldojo.tasks import get_task

    timing = {"on": False}

    def time_calls(calls, device, l2_bytes, prepare=None, **_):
        timing["on"] = True
        runs = 2 * len(calls) + 1
        for i in range(WARMUP_CALLS + runs):
            prepare(i)
            calls[i % len(calls)]()
        timing["on"] = False
        return summarize([1.0] * runs)

    monkeypatch.setattr(harness, "time_calls", time_calls)
    monkeypatch.setattr(harness, "profile_calls", lambda calls, *a, **k: [call() for call in calls] and [])
    monkeypatch.setattr(builtins, "kd_test_timing", timing, raising=False)
    task = get_task("vector_add")
    case = task.cases("small")[0]
    specs = [(tuple(t.shape), t.dtype) for t in task.reference.make_inputs(case.shape, 0, "cpu")[:1]]
    solution = harness.Solution(task, Build("python", source), resolve_device("cpu"))
    # The worker gets copies of the judge's lists (pickled), which the judge's account never reads back.
    seeds, refills = [1, 2, 3], list(range(100, 100 + REFILLS))
    if split:  # as a worker does: the profile's seeds in a request of their own, made after the timing reply
        first = solution.timed(case.shape, list(seeds), list(refills), specs, 1 << 20, 0.1)
        profile_seeds = [900 + k for k in range(3)]
        timed = first.joined(solution.profiled(list(profile_seeds)))
    else:
        profile_seeds = [900 + k for k in range(3)]
        timed = solution.time(case.shape, list(seeds), list(refills), list(profile_seeds), specs, 1 << 20, 0.1)
    assert len(timed.outputs) == 6 and all(o is not None for o in timed.outputs)
    return task, case, timed, lambda runs=timed.stats.runs: last_seeds(seeds, refills, runs, profile_seeds), solution


@pytest.mark.parametrize("right_when_timed", [False, True])
def test_the_outputs_of_the_paid_calls_are_rechecked(monkeypatch, tmp_path, right_when_timed):
    """Red team round 18: the reply held the outputs of the profiled calls only (each refilled set rerun), so a
    kernel wrong in every timed call, and right elsewhere, passed the recheck. The judge's account of the
    refills' seeds (`last_seeds`) finds an honest kernel right."""
    from kerneldojo.graders.correctness import WrongOutput
    from kerneldojo.judge import Judge

    source = tmp_path / "submission.py"
    when_timed = "x + y" if right_when_timed else "torch.zeros_like(x)"
    source.write_text("import builtins\nimport torch\n\n\ndef solution(x, y):\n"
                      f"    return {when_timed} if builtins.kd_test_timing['on'] else x + y\n")
    task, case, timed, seeds_after, _ = _time_with_stand_ins(monkeypatch, source)
    recheck = Judge("cpu")._recheck_timed_outputs
    if right_when_timed:
        recheck(task, case, timed, seeds_after())
        with pytest.raises(WrongOutput):  # one call more or less, and the account names other content
            recheck(task, case, timed, seeds_after(timed.stats.runs + 1))
    else:
        with pytest.raises(WrongOutput):
            recheck(task, case, timed, seeds_after())


def test_the_timed_calls_cannot_see_the_profiled_calls_seeds(monkeypatch, tmp_path):
    """Red team round 44: the profiled sets' seeds came with the `time` request, so the timed calls (where work on
    another stream hides from the events) computed the profiled calls' answers, and the profiled calls, which a
    submission can recognise, returned them with no work to see. They now come in a request of their own (`profile`),
    once the timing is done: a timed call that searches every frame finds none of them, and the profiled calls are
    still rechecked against the judge's account."""
    import builtins

    from kerneldojo.judge import Judge

    source = tmp_path / "submission.py"
    source.write_text(
        "import builtins, gc, sys\n\n\n"
        "def _ints(value, depth=0):\n"
        "    if isinstance(value, int):\n"
        "        yield value\n"
        "    elif isinstance(value, (list, tuple, set, dict)) and depth < 3:\n"
        "        for item in (value.values() if isinstance(value, dict) else value):\n"
        "            yield from _ints(item, depth + 1)\n\n\n"
        "def solution(x, y):\n"
        "    if builtins.kd_test_timing['on']:\n"
        "        frame = sys._getframe()\n"
        "        while frame is not None:\n"
        "            for value in frame.f_locals.values():\n"
        "                builtins.kd_seen.update(_ints(value))\n"
        "            frame = frame.f_back\n"
        "        for obj in gc.get_objects():\n"
        "            if isinstance(obj, list):\n"
        "                builtins.kd_seen.update(v for v in obj if isinstance(v, int))\n"
        "    return x + y\n")
    monkeypatch.setattr(builtins, "kd_seen", set(), raising=False)
    task, case, timed, seeds_after, _ = _time_with_stand_ins(monkeypatch, source, split=True)
    assert {100, 101} <= builtins.kd_seen  # the search works: it finds the timed calls' own refill seeds
    assert not {900, 901, 902} & builtins.kd_seen
    Judge("cpu")._recheck_timed_outputs(task, case, timed, seeds_after())


def test_refill_seeds_rewritten_in_the_worker_change_nothing_the_judge_checks(monkeypatch):
    """Red team round 20: the submission rewrote the seeds the worker reported, so every set kept its first
    content and first answer. Now the refills' seeds are the judge's and it keeps its own account of them."""
    from kerneldojo.graders.correctness import WrongOutput
    from kerneldojo.judge import Judge

    task, case, timed, seeds_after, _ = _time_with_stand_ins(monkeypatch, EXPLOITS / "forged_refill_seeds.py")
    with pytest.raises(WrongOutput):
        Judge("cpu")._recheck_timed_outputs(task, case, timed, seeds_after())



def test_a_replaced_make_inputs_computes_nothing_at_the_refills_and_is_tampering(monkeypatch):
    """Red team round 21: a `make_inputs` replaced in the reference module did every timed call's work at the
    harness's refills, off the clock. The harness refills from the function it took before the submission loaded."""
    import sys

    from kerneldojo.tasks import get_task

    module = get_task("vector_add").reference  # the exploit replaces it in this process: put back after the test
    monkeypatch.setattr(module, "make_inputs", module.make_inputs)
    *_, solution = _time_with_stand_ins(monkeypatch, EXPLOITS / "precompute_in_refill.py")
    exploit = next(m for name, m in sys.modules.items() if name.startswith("kerneldojo_submission_")
                   and hasattr(m, "_queue"))
    assert exploit.STATS["precomputed"] == 0 and exploit.STATS["token"] == 0, exploit.STATS
    assert "tampering" in solution.flags and "make_inputs" in solution.flags["tampering"]


def test_no_code_of_the_submissions_runs_where_the_harness_lists_modules(monkeypatch):
    """Red team round 21: a module whose `__file__` was a property ran in `time`'s frame after the profile (the
    harness listed modules to find load_inline extensions) and wrote the rechecked outputs and the figures."""
    import sys

    from kerneldojo.graders.correctness import WrongOutput
    from kerneldojo.judge import Judge

    monkeypatch.setitem(sys.modules, "kd_placeholder", None)  # sys.modules put back as it was after the test
    task, case, timed, seeds_after, _ = _time_with_stand_ins(monkeypatch, EXPLOITS / "post_profile_module_hook.py")
    exploit = next(m for name, m in sys.modules.items() if name.startswith("kerneldojo_submission_")
                   and hasattr(m, "_after_profile"))
    assert exploit.STATS["hook"] == 0 and exploit.STATS["idle"] > 0, exploit.STATS
    with pytest.raises(WrongOutput):
        Judge("cpu")._recheck_timed_outputs(task, case, timed, seeds_after())
    sys.modules.pop("kd_not_an_extension", None)


def test_a_set_the_judge_knows_ran_cannot_come_back_empty(monkeypatch, tmp_path):
    """Red team round 22 (a hardening): a None output skipped that set's recheck; now only a set the judge's own
    account says no call reached may be None."""
    from kerneldojo.graders.checks import Flagged
    from kerneldojo.judge import Judge

    source = tmp_path / "submission.py"
    source.write_text("def solution(x, y):\n    return x + y\n")
    task, case, timed, seeds_after, _ = _time_with_stand_ins(monkeypatch, source)
    recheck = Judge("cpu")._recheck_timed_outputs
    recheck(task, case, timed, seeds_after())
    timed.outputs[0] = None
    with pytest.raises(Flagged):
        recheck(task, case, timed, seeds_after())


FAKE_NCU = '''#!/usr/bin/env python3
# Stands in for ncu: runs no program, answers as an armed or a plain replay would (the spec from the FIFO or file).
import json, math, pathlib, sys
rest = sys.argv[sys.argv.index("kerneldojo.sandbox.worker.evidence_replay") + 1:]
with open(rest[1] if rest[0] == "--wait" else rest[0]) as f:
    spec = json.loads(f.read())
for call, _ in enumerate(spec["seeds"]):
    for index, (size, dtype) in enumerate(spec["outputs"]):
        pathlib.Path(f"out{call}_{index}_0.bin").write_bytes(bytes([call + 1]) * (math.prod(size) * 4))
print(%r)
print("started as", rest[0], "for", spec["task"], file=sys.stderr)
'''


def test_an_armed_replay_takes_its_spec_through_a_fifo_and_a_dead_one_is_replaced(tmp_path):
    """`evidence_replay.arm` starts the replay under ncu before the spec exists; `gather` sends the spec to it, once;
    the next gather (nothing armed), one whose armed replay died first, or one whose replay prepared other seeds for
    the case asked for, starts its own from a spec file. Run in a child: gather makes its process undumpable."""
    import subprocess
    import sys

    (tmp_path / "ncu").write_text(FAKE_NCU % csv_text([("add_kernel", 5.0)]))
    (tmp_path / "ncu").chmod(0o755)
    program = '''
import os, torch
from pathlib import Path
from kerneldojo.sandbox.protocol import Build
from kerneldojo.sandbox.worker import evidence_replay as replay

def gather():
    return replay.gather("vector_add", Build("triton", Path("s.py")), {"n": 4}, [1, 2], [((4,), torch.float32)], 60,
                         device="cuda:0")

replay.arm("cuda:0")
assert replay._armed is not None and replay._armed["fifo"].exists()
armed = gather()
assert replay._armed is None
plain = gather()
replay.arm("cuda:0")
replay._armed["process"].kill()  # died before its spec
replay._armed["process"].wait()
after_death = gather()
case = {"shape": {"n": 4}, "seeds": [1, 2], "outputs": [[[4], "float32"]]}
other = {"shape": {"n": 8}, "seeds": [5, 6], "outputs": [[[8], "float32"]]}
replay.arm("cuda:0", {"task": "vector_add", "cases": [other, case]})
prepared = gather()
replay.arm("cuda:0", {"task": "vector_add", "cases": [other, {**case, "seeds": [3, 4]}]})
another_case = gather()
for got, how in ((armed, "--wait"), (plain, "/"), (after_death, "/"), (prepared, "--wait"), (another_case, "/")):
    assert got["armed"] is (how == "--wait") and set(got["seconds"]) == {"wait", "replay"}
    assert got["returncode"] == 0 and got["outputs"] == [[bytes([1]) * 16], [bytes([2]) * 16]], got
    assert got["stderr"].startswith("started as " + how) and "add_kernel" in got["csv"], got["stderr"]
print("fine")
'''
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"}, cwd=tmp_path)
    assert done.stdout.strip() == "fine", done.stderr[-3000:]


def test_armed_replays_are_kept_per_task_and_the_least_recently_asked_for_go_first(monkeypatch):
    """A mixed batch keeps several tasks' replays armed, ARMED_TOTAL at most; a task asked for again keeps its own.
    The case each prepared is the judge's record, handed back with the worker."""
    import dataclasses
    import threading

    from kerneldojo.sandbox import process
    from kerneldojo.sandbox.device import resolve_device

    class Alive:
        def is_alive(self):
            return True

        def join(self, timeout=None):
            pass

    stopped, done = [], threading.Semaphore(0)

    class Worker:
        def __init__(self, prep):
            self.prep, self.process = prep, Alive()

        def stop(self):
            stopped.append(self.prep["task"])

    def arm_one(key, device, limits, draw):
        with process._spares_lock:
            process._armed[key].append(Worker(draw()))
            process._arming[key] -= 1
        done.release()

    monkeypatch.setattr(process, "_arm_one", arm_one)
    monkeypatch.setattr(process, "_stop_all", lambda workers: [w.stop() for w in workers])
    monkeypatch.setattr(process, "_armed", {})
    monkeypatch.setattr(process, "_arming", {})
    monkeypatch.setattr(process, "_closing", threading.Event())  # another test may have run the exit's _stop_spares
    monkeypatch.setattr(process, "ARMED_REPLAYS", 2)
    monkeypatch.setattr(process, "ARMED_TOTAL", 4)
    gpu = dataclasses.replace(resolve_device("cpu"), mode="gpu")
    for task in ("a", "b", "a", "c"):
        process.arm_evidence_replays(gpu, {}, lambda task=task: {"task": task}, task)
        while process._arming.get((process._spare_key(gpu, {})[0], task)):
            done.acquire(timeout=5)
    armed = {key[1]: [w.prep["task"] for w in queue_] for key, queue_ in process._armed.items()}
    assert armed == {"b": [], "a": ["a", "a"], "c": ["c", "c"]} and sorted(stopped) == ["b", "b"]
    worker, prep = process.take_armed_replay(gpu, {}, "c")
    assert prep == {"task": "c"} and worker.prep is prep
    assert process.take_armed_replay(gpu, {}, "d") == (None, None)


def test_sampled_evidence_arms_on_every_timed_step_and_draws_after_the_worker_is_gone(monkeypatch):
    """Red team round 26: in sampled mode replays were armed only on drawn steps, and a submission that saw one start
    (its command line in the host's /proc) knew it was watched. Arming may not depend on the draw, which is made
    once the submission's worker is gone."""
    import submissions as subs

    from kerneldojo import judge as judge_mod
    from kerneldojo.tasks import Task

    events = []
    judge = judge_mod.Judge("cpu", evidence="sampled", result_cache=None)
    judge.timed = True  # as on a GPU; the reference and the timing are stand-ins
    cases = Task.cases  # the bench shapes, checked too where the judge times, at the interpreter's sizes
    monkeypatch.setattr(Task, "cases", lambda self, kind: cases(self, "small" if kind == "bench" else kind))
    monkeypatch.setattr(judge, "_reference_times_for", lambda task, case: (None, None))
    monkeypatch.setattr(judge, "_time", lambda task, solution, result, times: events.append("time"))
    monkeypatch.setattr(judge_mod, "arm_evidence_replays", lambda *args: events.append("arm"))
    monkeypatch.setattr(judge_mod.secrets, "randbelow", lambda n: events.append("draw") or 1)  # never drawn
    for _ in range(2):
        result = judge.evaluate("vector_add", subs.VECTOR_ADD_TRITON, "triton")
        assert result.status == "ok" and result.evidence is None, result.messages
    assert events == ["arm", "time", "draw"] * 2


def test_a_library_kernel_sharing_an_own_kernels_base_name_is_not_own():
    """Red team round 28: a CUDA submission defined an unlaunched `axpy_kernel_val` and called cuBLAS's saxpy, whose
    kernel has that base name; a name that mentions a vendor library's types is that library's."""
    own = OwnKernels(native={"axpy_kernel_val", "relu_kernel", "add_kernel", "kernel"})
    cublas = "void axpy_kernel_val<float, float>(cublasAxpyParamsVal<float, float, float>)"
    gemvx = ("std::enable_if<(bool)1, void>::type internal::gemvx::kernel<int, int, float, float, 7, false, "
             "cublasGemvParamsEx<int, cublasGemvTensorStridedBatched<float const>, float> >(cublasGemvParamsEx<int, "
             "cublasGemvTensorStridedBatched<float const>, float>)")
    assert cublas not in own and gemvx not in own and foreign(cublas) and foreign(gemvx)
    # Honest kernels keep torch's types in their signatures (load_inline's accessors, AT_DISPATCH's c10::Half).
    for honest in ("void relu_kernel(float const*, float*, long)",
                   "void add_kernel<c10::Half>(c10::Half const*, c10::Half const*, c10::Half*, long)",
                   "void relu_kernel<float>(at::GenericPackedTensorAccessor<float, 2ul, at::RestrictPtrTraits, int>)",
                   "void add_kernel(float*, curandStatePhilox4_32_10*, long)"):
        assert honest in own and not foreign(honest), honest
    found = figures([{"Kernel Name": cublas, "gpu__time_duration.sum": 0.01}], own)
    assert found.own_share == 0 and found.vendor  # the evidence pass: vendor_kernel, not an own kernel's time


def test_no_namespace_package_is_read_for_a_sources_kernel_names(tmp_path, monkeypatch):
    """Red team round 114: `if False: import data` made the judge walk every file of a `data/` folder beside the
    trainer's script (a namespace package to `find_spec`): a namespace package is not read, and a package's walk is
    bounded by the entries it visits, not only by its .py files."""
    from kerneldojo.graders import profile

    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "kernels.py").write_text("import triton\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert profile._imported_package_files("if False:\n    import data\n") == []
    assert any("liger_kernel" in str(f) for f in profile._imported_package_files("import liger_kernel\n"))
