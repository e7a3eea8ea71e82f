"""`EvalResult`: the one record an evaluation produces. JSON-serialisable and versioned."""

from __future__ import annotations

import math
import re
from typing import Any, Literal

from pydantic import BaseModel, Field, SerializationInfo, SerializerFunctionWrapHandler, model_serializer

SCHEMA_VERSION = 2

Status = Literal["ok", "compiled", "compile_error", "runtime_error", "timeout", "wrong", "flagged", "skipped"]
STATUS_MEANING: dict[str, str] = {
    "ok": "correct on every checked input",
    "compiled": "compiled, but not run: no GPU (CPU mode runs only Triton)",
    "compile_error": "did not compile or load",
    "runtime_error": "raised or crashed while running",
    "timeout": "ran past its time limit",
    "wrong": "ran, but an output differs from the reference",
    "flagged": "an anti-cheat check fired",
    "skipped": "not run: this machine lacks what the task needs (e.g. several GPUs); the message says what",
}


# C0 and C1 controls (not newline, tab), lone surrogates, and the format and separator characters a terminal or a
# browser lays text out by: bidirectional overrides and isolates (U+202A-202E, U+2066-2069, marks U+200E-200F),
# zero-width characters, U+2028-2029 (red team round 23: a right-to-left override reversed a leaderboard row).
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]")


def printable(text: str) -> str:
    """Text a submission could have written, safe on a terminal: control characters but newline and tab written
    out as escapes (red team round 16: ESC sequences in an exception message erased the real verdict on the
    operator's screen and printed a forged `Status: ok`)."""
    return _CONTROL.sub(lambda m: repr(m.group())[1:-1], text)


def one_line(text: str) -> str:
    """`printable`, and newline and tab escaped too: a cell of a table (a newline in a label forged rows)."""
    return printable(text).replace("\n", "\\n").replace("\t", "\\t")


class Mismatch(BaseModel):
    """Where the first failing output differs most from the reference."""

    case: str
    output: int = Field(description="which output tensor, counting from 0")
    index: list[int] = Field(description="the element with the largest error beyond tolerance")
    got: float
    expected: float
    max_abs_error: float
    max_rel_error: float
    mismatched: int = Field(description="elements outside tolerance")
    total: int


class TimeStats(BaseModel):
    median_ms: float
    mean_ms: float
    min_ms: float
    max_ms: float
    iqr_ms: float = Field(description="interquartile range, the spread")
    runs: int
    ci_low_ms: float | None = Field(None, description="95% confidence interval of the median, lower end")
    ci_high_ms: float | None = Field(None, description="95% confidence interval of the median, upper end")


class KernelRecord(BaseModel):
    name: str
    own: bool = Field(description="compiled by the submission (not torch's or a library's)")
    vendor: bool = Field(False, description="a math library's kernel (cuBLAS, cuDNN, CUTLASS in cuBLAS, ...)")
    launches: int
    ms_per_call: float


class ProfileStats(BaseModel):
    """From the CUPTI records of a window of calls (torch.profiler), every stream included."""

    calls: int
    kernel_ms: float = Field(description="GPU time per call summed over all kernels and streams")
    busy_ms: float = Field(description="time per call the GPU ran any kernel, copy or memset (overlaps counted once)")
    launches_per_call: float
    streams: int
    own_share: float | None = Field(description="share of device time (kernels, copies, memsets) in kernels the "
                                    "submission compiled; None with no kernel at all")
    kernels: list[KernelRecord] = Field([], description="the largest kernels by time, then the others not the "
                                        "submission's")
    host_copy_ms: float = Field(0.0, description="time per call in copies between the GPU and the host")


class GPUState(BaseModel):
    """The GPU as NVML saw it just before or after a case was timed (clocks cannot be locked everywhere)."""

    sm_clock_mhz: int | None = None
    memory_clock_mhz: int | None = None
    temperature_c: int | None = None
    power_w: float | None = None
    throttle_reasons: list[str] = Field([], description="NVML's clock-event reasons active, by name")


class CaseTiming(BaseModel):
    case: str
    submission: TimeStats = Field(description="CUDA events around each call, cold L2, device synchronized")
    profile: ProfileStats | None = None
    eager: TimeStats | None = None
    compiled: TimeStats | None = Field(None, description="the reference under torch.compile")
    floor_ms: float | None = Field(None, description="max(flops / peak flops, bytes / peak bandwidth), measured peaks")
    gpu_before: GPUState | None = Field(None, description="NVML before the timed runs (None in CPU mode)")
    gpu_after: GPUState | None = Field(None, description="NVML after the timed runs and the profile")

    @property
    def scored_ms(self) -> float:
        """The more conservative of the event median and the profiled busy time per call."""
        return max(self.submission.median_ms, self.profile.busy_ms if self.profile else 0.0)

    @property
    def speedup(self) -> float | None:
        return self.eager.median_ms / self.scored_ms if self.eager else None

    @property
    def speedup_vs_compile(self) -> float | None:
        return self.compiled.median_ms / self.scored_ms if self.compiled else None

    @property
    def roofline_fraction(self) -> float | None:
        return self.floor_ms / self.scored_ms if self.floor_ms else None


class NcuKernel(BaseModel):
    """One kernel's Nsight Compute figures, averaged over its profiled launches (graders/ncu.py)."""

    name: str
    launches_per_call: float
    ms_per_call: float = Field(description="ncu's gpu__time_duration, caches flushed: not the timed figure")
    compute_pct: float | None = Field(None, description="SM throughput, % of peak (speed of light)")
    memory_pct: float | None = Field(None, description="memory throughput (DRAM, L2, L1), % of peak")
    dram_pct: float | None = None
    dram_bytes_per_call: float | None = None
    achieved_occupancy_pct: float | None = None
    theoretical_occupancy_pct: float | None = None
    occupancy_limiter: str | None = Field(None, description="registers, shared_mem, warps or blocks")
    registers_per_thread: float | None = None
    block_size: float | None = None
    grid_size: float | None = None
    top_stalls: list[tuple[str, float]] = Field([], description="warp stall reasons and their share")


class NcuProfile(BaseModel):
    """Profiler feedback on request (`feedback="profile"`): a replay of one bench case under Nsight Compute."""

    case: str | None = None
    kernels: list[NcuKernel] = []
    min_bytes: int | None = Field(None, description="the task's minimum traffic for the case (bytes_moved)")
    seconds: float = 0.0
    note: str | None = Field(None, description="why there is no profile, when there is none")


class Evidence(BaseModel):
    """The evidence pass (issue 13): a bench case replayed under Nsight Compute by a worker that never loaded the
    submission, checked by the judge (`graders.evidence`)."""

    case: str | None = None
    one_in: int = Field(1, ge=1, description="the pass ran on one step in this many, drawn at random (1: every step); "
                        "a flag it raises scores `RewardConfig.audited(one_in)`")
    launches: int = 0
    kernel_ms: float | None = Field(None, description="ncu's lower bound on one call's GPU work (per stream and name "
                                    "the shortest launch, the busiest stream's sum)")
    host_bytes: float = Field(0.0, description="bytes per call the kernels read or wrote in host memory (ncu)")
    claimed_ms: float | None = Field(None, description="the worker's figure it was checked against")
    own_share: float | None = None
    kernels: list[str] = Field([], description="the kernel names ncu saw (at most 20)")
    note: str | None = Field(None, description="why the pass decided nothing (no ncu, no counters): then the GPU's "
                             "evidence is the worker's")
    armed: bool | None = Field(None, description="the replay was started under ncu ahead of the step (None: unknown)")
    retried: str | None = Field(None, description="why the first replay failed, when the pass replayed once more "
                                "(a replay killed by the machine, or the submission's doing)")
    seconds: dict[str, float] = Field({}, description="where the pass's time went: `inputs` (the judge's expected "
                                      "outputs), `take` (an armed or spare worker), `wait` (for the armed replay to "
                                      "read its spec), `replay` (ncu and the replay, after the spec), `worker` (the "
                                      "worker's whole request)")


class Versions(BaseModel):
    kerneldojo: str
    python: str
    torch: str
    triton: str | None = None
    nvcc: str | None = None
    cuda_driver: str | None = None


# Where an evaluation's time went (`EvalResult.phases`, seconds; a phase that did not happen is absent).
PHASES: dict[str, str] = {
    "queue": "waiting for a pool slot (batch evaluation only)",
    "gpu_wait": "waiting for the GPU lock: a check for other judges' timings, a timing for every check to end",
    "compile": "writing the source, or nvcc building it (a build-cache hit is near 0)",
    "reference": "timing the reference, when its time was not cached yet",
    "worker_start": "taking a pre-started worker, and waiting for it to finish starting when it was not ready",
    "load": "the worker importing or loading the submission (Triton's JIT happens at its first run)",
    "correctness": "running the test shapes for every seed and comparing (includes JIT at each new shape)",
    "timing": "the timed runs of every bench shape",
    "profile": "the profiled calls after the timing (own-kernel share, vendor kernels, streams)",
    "ncu": "the Nsight Compute replay, when feedback='profile' asks for it",
    "recheck": "checking the timed runs' last outputs against the reference",
    "evidence": "a fresh worker replaying one bench case under Nsight Compute (the evidence pass, GPU only)",
}


def speed_audited(timed: bool, evidence: Evidence | dict | None) -> bool:
    """Is a result's speed the judge's word: untimed, or timed on a step whose evidence pass ran and decided (no
    `note`)? The one rule by which the judge's result cache stores a timed `ok` (red team round 31: one the sampled
    pass skipped, stored, paid a cheat on every resubmission) and the leaderboard ranks a speed (round 40: a pass that
    only noted why it decided nothing, on the docker backend or without ncu, ranked the worker's own figures).
    `evidence` as stored (a dict) or as judged."""
    if isinstance(evidence, dict):
        note = evidence.get("note")
    elif isinstance(evidence, Evidence):
        note = evidence.note
    else:
        return not timed
    return not timed or not note


def _finite_json(data: Any) -> Any:
    """A float that JSON cannot hold ("nan", "inf", "-inf"), as the string pydantic reads back into the float."""
    if isinstance(data, float) and not math.isfinite(data):
        return str(data)
    if isinstance(data, dict):
        return {k: _finite_json(v) for k, v in data.items()}
    if isinstance(data, list):
        return [_finite_json(v) for v in data]
    return data


class EvalResult(BaseModel):
    schema_version: int = SCHEMA_VERSION
    task: str
    language: str
    device: str = Field(description="the GPU's name, or 'cpu' in CPU mode")
    mode: Literal["gpu", "cpu"]
    status: Status
    messages: list[str] = []
    max_abs_error: float | None = Field(None, description="largest |out - ref| over every checked input")
    mismatch: Mismatch | None = None
    cases_checked: int = 0
    timed: bool = False
    timings: list[CaseTiming] = []
    speedup: float | None = Field(None, description="geometric mean over bench cases of eager / submission")
    speedup_vs_compile: float | None = None
    roofline_fraction: float | None = Field(None, description="geometric mean of floor / submission")
    kernel_coverage: float | None = Field(
        None, description="share of profiled GPU time in kernels the submission compiled (smallest over bench cases)")
    checks_fired: list[str] = []
    compile_s: float = 0.0
    wall_s: float = 0.0
    phases: dict[str, float] = Field({}, description="seconds per phase of the evaluation: see `PHASES`")
    ncu: NcuProfile | None = Field(None, description="Nsight Compute feedback when asked for; not in the verdict")
    evidence: Evidence | None = Field(None, description="the evidence pass's figures, or why it decided nothing")
    reused: bool = Field(False, description="answered from the result cache: an identical earlier evaluation")
    versions: Versions
    reward: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    # How long the judge itself took is not part of the verdict: two evaluations that agree on
    # everything else are equal (gymnasium's determinism check compares step infos this way).
    _JUDGE_CLOCKS = frozenset({"wall_s", "compile_s", "phases", "reused"})

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, EvalResult):
            return NotImplemented
        return self.model_dump(exclude=self._JUDGE_CLOCKS) == other.model_dump(exclude=self._JUDGE_CLOCKS)

    __hash__ = None

    def summary(self) -> str:
        """One line: status, and time and speedup when timed."""
        parts = [self.status]
        if self.timed and self.timings:
            parts.append(f"{self.timings[-1].submission.median_ms:.4g} ms")
        if self.speedup is not None:
            parts.append(f"{self.speedup:.2f}x eager")
        return ", ".join(parts)

    @model_serializer(mode="wrap")
    def _json_holds_no_nan(self, handler: SerializerFunctionWrapHandler, info: SerializationInfo) -> Any:
        # A wrong output's NaN or inf (an unwritten element, an overflow) in a mismatch or a max error made the
        # service's strict JSON fail with 500 on the submitter's job and on every token's leaderboard, and
        # PostgreSQL's json column refuse the record (red team round 30): in JSON they are strings.
        data = handler(self)
        return _finite_json(data) if info.mode_is_json() else data
