"""The path of one evaluation, top to bottom: compile, load, check, time, score.

The judge draws the seeds, makes the inputs, runs the reference and compares; only
`sandbox.worker.harness.Solution` touches submission code, inside a single-use worker
(`sandbox.backends`: a process or a container) unless isolation="none".

Each result says where its time went (`EvalResult.phases`, see `result.PHASES`). Identical submissions
are not evaluated twice: `ResultCache` keeps deterministic verdicts on disk, keyed by everything that
decides them, and `evaluate` returns a stored one marked `reused=True` unless asked to `retime`.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import functools
import hashlib
import json
import math
import os
import platform
import secrets
import threading
import time
import warnings
from pathlib import Path

import torch

from kerneldojo.adapters.runtime import BuildsAhead
from kerneldojo.graders.checks import Flagged, message
from kerneldojo.graders.compile import (
    TransientCompileError,
    check_language,
    compile_submission,
    detect_language,
    native_checks_note,
    nvcc_version,
    source_problem,
    write_atomically,
)  # fmt: skip
from kerneldojo.graders.correctness import (
    WrongOutput,
    check_inputs_unchanged,
    check_outputs,
    check_structure,
    poisoned_like,
    same_layout_copy,
)  # fmt: skip
from kerneldojo.graders.evidence import (
    MIN_OWN_SHARE,
    REPLAY_CALLS,
    SAMPLE_ELEMENTS,
    check_own_names,
    decide,
    figures,
    outputs_from_bytes,
    sampled_outputs,
    triton_kernel_names,
)  # fmt: skip
from kerneldojo.graders.extensions import build_extensions
from kerneldojo.graders.ncu import NcuError, NcuReportAltered, parse_ncu_csv, summarise
from kerneldojo.graders.profile import OwnKernels, native_kernel_names, unexplained_kernel
from kerneldojo.graders.reward import RewardConfig
from kerneldojo.graders.roofline import datasheet_peaks, floor_ms, measured_peaks
from kerneldojo.graders.timing import POOL_SETS, gpu_state, pool_size, time_calls
from kerneldojo.result import (
    CaseTiming,
    EvalResult,
    Evidence,
    NcuProfile,
    ProfileStats,
    TimeStats,
    Versions,
    printable,
    speed_audited,
)
from kerneldojo.sandbox.backends import BACKENDS, check_isolation
from kerneldojo.sandbox.device import Device, ExportedMemory, resolve_device, synchronize
from kerneldojo.sandbox.docker import DockerConfig
from kerneldojo.sandbox.gpu_lock import GPULock, gpu_lock
from kerneldojo.sandbox.peers import CollectiveSolution, rank_devices, time_nccl_all_reduce
from kerneldojo.sandbox.process import (
    WorkerSolution,
    arm_evidence_replays,
    evidence_in_worker,
    take_armed_replay,
    time_reference_in_worker,
)
from kerneldojo.sandbox.protocol import (
    LIMITS_S,
    PROFILED_CALLS,
    REFILLS,
    CompileError,
    Retime,
    SubmissionError,
    SubmissionHandle,
    SubmissionTimeout,
    TimedRuns,
    Unavailable,
    WorkerNotReady,
    capped,
    last_seeds,
)  # fmt: skip
from kerneldojo.tasks import Case, Task, get_task, task_content_hash, task_ref
from kerneldojo.version import PROTOCOL_VERSION, __version__

NO_GPU_PROFILE = ("no profile: CPU mode has no GPU, so Nsight Compute cannot run; the same request on a GPU "
                  "(feedback='profile', `kerneldojo eval --profile`) replays the largest bench case under it")
NCU_CALLS, NCU_LIMIT_S = 2, 150.0  # calls profiled (after one to compile), and the replay's wall-clock bound
CPU_MODE_NOTE = "CPU mode: checked with the Triton interpreter at the `small` shapes; nothing was timed, so no speedup"
# A time under this fraction of the datasheet floor is impossible, whatever L2 absorbed of the writes.
FLOOR_SLACK = 0.5
# The profile's busy time per call (no L2 flush, so if anything shorter) over the event median beyond
# this means work ran outside the timed stream's window: a side stream left unjoined.
UNSYNCED_SLACK = 1.25
# Copies between the GPU and the host longer than moving this share of a call's data (its inputs and outputs) over
# the fastest host link there is (NVLink-C2C, 900 GB/s), beyond a slack for a few small ones (an `.item()`, a table
# uploaded), mean its data went through the host, where work escapes every kernel check. Red team round 87: the
# answer computed in numpy beside an own padding kernel (10 % of the copies' time) met the decoy share, and ncu
# records no copy; round 88: a bound relative to the paid time was met by sleeping (the default reward pays any
# correct answer slower than 0.5x the same), so the bound is the data's, which neither padding nor sleep moves.
HOST_COPY_SHARE, HOST_LINK_GB_S, HOST_COPY_SLACK_MS = 0.25, 900.0, 0.02
# A run's time limit, per device mode: max(floor s, multiplier × the reference's slowest call at the checked
# shapes). On a GPU 50× eager is far beyond any honest kernel. In CPU mode Triton runs in its interpreter,
# which executes every program instance in Python, orders of magnitude slower than torch's CPU reference,
# and CI machines are loaded: a generous multiplier and floor. The first run of each shape gets
# LIMITS_S["compile"] more (120 s by default): Triton's JIT and autotuning happen there. The allowance ends with
# the JIT: once that call has returned on the host, the run limit counts from then (`protocol.PROGRESS`).
RUN_LIMIT = {"gpu": (10.0, 50.0), "cpu": (30.0, 5000.0)}
# Unless a task allows one of these, cuBLAS, cuDNN or flash kernels may not run in its submissions.
LIBRARY_OPS = frozenset({"aten.mm", "aten.bmm", "aten.addmm", "aten.matmul", "aten._scaled_mm", "aten._int_mm",
                         "aten.scaled_dot_product_attention", "aten._scaled_dot_product_flash_attention"})


class Judge:
    """Evaluates submissions on one device. Keeps reference timings between evaluations."""

    def __init__(
        self,
        device: str | None = "auto",
        reward: RewardConfig | None = None,
        seeds: int = 3,
        time_compiled_reference: bool = True,
        timing_budget_s: float = 2.0,
        timed: bool = True,
        isolation: str = "process",
        limits: dict[str, float] | None = None,
        docker: DockerConfig | None = None,
        reference_cache: str | Path | None = "default",
        profile: bool = False,
        result_cache: str | Path | None = "default",
        evidence: str | None = None,
    ):
        check_isolation(isolation)
        self.device: Device = resolve_device(device)
        self.reward = reward or RewardConfig()
        self.seeds = seeds
        self.time_compiled_reference = time_compiled_reference
        self.timing_budget_s = timing_budget_s
        self.timed = timed and self.device.mode == "gpu"
        self.profile = profile  # Nsight Compute feedback (`result.ncu`): feedback only, never in the verdict
        # The evidence pass (`graders.evidence`): "always" replays one bench case per timed step under Nsight
        # Compute in a fresh worker (a worker start and an ncu run: 8-25 s per step on an H100), "sampled" on one
        # step in EVIDENCE_ONE_IN drawn here (a cheat cannot tell which), "off" trusts the worker's figures.
        self.evidence = evidence or os.environ.get("KERNELDOJO_EVIDENCE") or "always"
        if self.evidence not in EVIDENCE_MODES:
            raise ValueError(f"evidence must be one of {', '.join(EVIDENCE_MODES)} (or KERNELDOJO_EVIDENCE), "
                             f"not {self.evidence!r}")
        if self.evidence == "sampled" and not math.isfinite(self.reward.max_reward):
            raise ValueError("evidence='sampled' needs a reward with a maximum (its flag weighs what the unchecked "
                             "steps could pay: `RewardConfig.audited`); set the reward's speedup_max, or "
                             "evidence='always'")
        self.isolation = isolation
        self.limits = limits  # wall-clock seconds per worker request: load, run, time
        self.docker = docker  # isolation='docker': image, runtime, limits (default: DockerConfig())
        # Reference timings, kept on disk per task, case, device and software versions; None keeps
        # them in memory only, and deleting the file (or `refresh_reference_times`) measures anew.
        self.reference_cache = _default_reference_cache() if reference_cache == "default" else reference_cache
        self._reference_times: dict[str, dict | None] = self._load_reference_times()
        self._specs: dict[tuple[str, str], list] = {}  # per case, the reference's outputs' sizes (`_output_specs`)
        self._run_limits: dict[str, float] = {}  # task id -> seconds a run may take (`_run_limit_s`)
        self._exported = ExportedMemory(self.device)  # inputs and outputs sent to workers by CUDA IPC, alone
        self._ncu_alone: bool | None = None  # `_ncu_fails_alone`, once asked (two threads may both ask: harmless)
        # Verdicts of identical submissions, on disk ("default": under the kerneldojo cache folder, unless
        # KERNELDOJO_RESULT_CACHE=off); None evaluates every submission anew.
        self.result_cache = ResultCache.default() if result_cache == "default" else (
            ResultCache(Path(result_cache)) if result_cache else None)  # fmt: skip

    def evaluate(self, task: Task | str, source: str, language: str | None = None, retime: bool = False
                 ) -> EvalResult:  # fmt: skip
        """Compile, check and (on a GPU) time `source`. An identical submission judged before under the same
        task version, device, software and protocol returns its stored result (`reused=True`), unless `retime`."""
        started = time.perf_counter()
        task = get_task(task) if isinstance(task, str) else task
        task.reference  # noqa: B018  a broken reference.py is the task's fault: TaskError, naming the file
        language = language or detect_language(source)
        check_language(task, language)
        # A source no compiler takes fails in the compile step, as a result; it has no key (it cannot be encoded).
        key = self._result_key(task, language, source) if self.result_cache and not source_problem(source) else None
        stored = self.result_cache.get(key) if key and not retime else None
        if stored is not None and stored.status == "ok":
            # A stored `ok` is one draw of the inputs: its correctness is checked again on fresh seeds, bench shapes
            # included where it was timed, and only its timing is reused (red team round 61: a kernel wrong on one
            # input in six, resubmitted byte for byte once a variant's draw passed, was paid `ok` from then on;
            # round 62: the bench shapes too).
            again, _ = self._graded(task, source, language, timed=False, bench=self.timed)
            if again.status != "ok":
                again.messages.append("a stored `ok` of this exact source did not hold on fresh inputs")
                return self._finished(again, started)
        if stored is not None:
            stored.reused, stored.phases = True, {}
            stored.reward = self.reward.of(stored)
            stored.wall_s = time.perf_counter() - started
            return stored
        result, deterministic = self._graded(task, source, language, timed=self.timed, bench=self.timed)
        result = self._finished(result, started)
        # A timed `ok` is what every check says only where the evidence pass ran: one stored from a step the sampled
        # pass skipped paid a cheat it catches one step in EVIDENCE_ONE_IN on every resubmission of the same source
        # (red team round 31: reroll until a step is not drawn, then resubmit that string).
        unchecked = result.status == "ok" and self.evidence != "off" and not speed_audited(self.timed, result.evidence)
        if key and deterministic and not unchecked and result.status in CACHED_STATUSES:
            self.result_cache.put(key, result)
        return result

    def _graded(self, task: Task, source: str, language: str, timed: bool, bench: bool) -> tuple[EvalResult, bool]:
        """The verdict of one grading (`timed`: with the timing and its evidence; `bench`: the bench shapes checked
        too), and whether the machine's state could not have caused it."""
        result = EvalResult(
            task=task.id, language=language, device=self.device.name, mode=self.device.mode,
            status="ok", versions=versions(),
        )  # fmt: skip
        deterministic = True
        try:
            self._grade(task, source, language, result, timed, bench)
        except TransientCompileError as e:  # a loaded machine may have caused it: not stored
            result.status, result.messages, deterministic = "compile_error", [*result.messages, str(e)], False
        except CompileError as e:
            result.status, result.messages = "compile_error", [*result.messages, str(e)]
        except SubmissionTimeout as e:
            result.status, result.messages = "timeout", [*result.messages, str(e)]
        except SubmissionError as e:
            result.status, result.messages = "runtime_error", [*result.messages, str(e)]
        except Unavailable as e:
            result.status, result.messages = "skipped", [*result.messages, str(e)]
        except Flagged as e:
            result.status = "flagged"
            result.checks_fired += [c for c in e.checks if c not in result.checks_fired]
            result.messages += list(e.checks.values())
        except WrongOutput as e:
            result.status, result.mismatch = "wrong", e.mismatch
            result.messages.append(str(e))
            if e.mismatch:
                result.max_abs_error = e.mismatch.max_abs_error
        except Exception as e:  # a CUDA error surfacing at a synchronize, a bad return value, ...
            result.status = "runtime_error"
            result.messages.append(f"{type(e).__name__}: {e}")
        return result, deterministic

    def _finished(self, result: EvalResult, started: float) -> EvalResult:
        """Its messages printable, its reward, its wall time."""
        if self.device.mode == "gpu":  # the step's inputs and references, cached by torch, back to the GPU: its
            torch.cuda.empty_cache()  # workers and other judges need them (four judges held 14 GiB each, idle)
        # Every message may quote the submission (its errors, its output, its compiler's): printable, whoever shows it.
        result.messages = [printable(m) for m in result.messages]
        result.checks_fired = [printable(c) for c in result.checks_fired]
        try:
            result.reward = self.reward.of(result)
        except ValueError as e:  # a figure the reward cannot take: the step fails, the caller gets a result
            result.status, result.reward = "runtime_error", self.reward.failure
            result.messages.append(f"no reward: {e}")
        result.wall_s = time.perf_counter() - started
        return result

    def _result_key(self, task: Task, language: str, source: str) -> str:
        """Everything that decides a verdict: the task's files, the source, the device, the software, the
        protocol, and this judge's settings that change what is measured."""
        settings = [self.seeds, self.timed, self.isolation, self.time_compiled_reference, self.timing_budget_s,
                    *([self.evidence] if self.timed else [])]
        parts = [task.id, task_content_hash(task.folder), language, hashlib.sha256(source.encode()).hexdigest(),
                 self.device.name, self.device.mode, versions().model_dump_json(), str(PROTOCOL_VERSION),
                 judge_code_hash(), json.dumps(settings)]  # fmt: skip
        return hashlib.sha256("\0".join(parts).encode()).hexdigest()

    def _grade(self, task: Task, source: str, language: str, result: EvalResult, timed: bool, bench: bool
               ) -> None:  # fmt: skip
        if self.profile and self.device.mode == "cpu":
            result.ncu = NcuProfile(note=NO_GPU_PROFILE)
        with _phase(result, "compile"):
            build = compile_submission(task, source, language, self.device.arch)
            if isinstance(source, BuildsAhead):  # an adapter's wrapped solution: its load_inline calls, built ahead
                extensions, built = build_extensions([source])
                build = dataclasses.replace(build, extensions=extensions)
                if extensions:
                    result.messages.append(f"load_inline: {len(build.extensions)} extension(s) "
                                           + ("built ahead, confined" if built else "reused build (cached by content)"))
        result.compile_s = result.phases["compile"]
        own = self._own_kernels(build, source, language)  # refuses own kernels named like a vendor's
        if build.libraries and self.device.mode == "cpu":
            result.status = "compiled"
            result.messages.append(native_checks_note(self.device.arch))
            return
        if task.spec.distributed:  # before any reference is timed: where it cannot run, say so at once
            devices = self._rank_devices(task)
        if timed:  # before any submission code runs, so nothing it leaves behind can slow the reference
            with _phase(result, "reference"):
                reference_times = self.time_references(task)
        if timed and self.evidence != "off" and self.isolation == "process" and not task.spec.distributed:
            # Its replay readies (its inputs too) while this step runs; not while the reference is timed above. On
            # every timed step, drawn or not: a worker sees replays start (red team round 26: in sampled mode, one
            # started only on drawn steps told the submission when it was watched).
            arm_evidence_replays(self.device, self.limits, functools.partial(self._draw_evidence_seeds, task),
                                 _task_key(task))
        with _phase(result, "worker_start"):
            if task.spec.distributed:
                solution = self._collective(task, build, devices)
            else:
                solution = BACKENDS[self.isolation](task, build, self.device, self._limits_for(task), self.docker)
        # The backend says how much of its start-up was the submission's own load (the rest: the worker).
        load_s = min(max(float(getattr(solution, "load_s", 0.0) or 0.0), 0.0), result.phases["worker_start"])
        result.phases["worker_start"] -= load_s
        result.phases["load"] = load_s
        try:
            try:
                with _phase(result, "correctness"):
                    self._check(task, solution, result, bench)
                if timed:
                    with _waited(result, self._gpu.exclusive()):
                        self._time(task, solution, result, reference_times)  # its phases: timing, profile, recheck
                # The checks the run replies carried stay fired whatever the worker says last (red team round 94:
                # cleared in the worker, or its last answer hung): the final request only adds to them.
                flags = {**_seen_flags(solution), **solution.flags}
            except Flagged:
                raise
            except SubmissionTimeout:
                # The worker is gone with its hung call: the checks its earlier replies carried still outrank the
                # timeout (red team round 93: a flagged call, then a hang, paid a timeout's 0 over a flag's -1).
                if flags := _seen_flags(solution):
                    raise Flagged(flags) from None
                raise
            except Exception:
                # A check that fired explains a failure better than the failure does (a patched
                # aliasing check, then an output the worker cannot send): flagged outranks it.
                if flags := _flags_if_any(solution):
                    raise Flagged(flags) from None
                raise
            if flags:
                raise Flagged(flags)
            if self.profile and self.device.mode == "gpu":  # after the verdict is settled: it cannot change it
                self._ncu(task, solution, result)
        finally:
            solution.close()
        # Drawn now that the worker is gone: nothing it could observe depended on the draw.
        drawn = self.evidence == "always" or (self.evidence == "sampled" and secrets.randbelow(EVIDENCE_ONE_IN) == 0)
        if timed and drawn:  # nothing of the worker runs beside the replay
            self._evidence(task, build, own, result)
        if self.device.mode == "cpu":
            result.messages.append(CPU_MODE_NOTE)

    def _own_kernels(self, build, source: str, language: str) -> OwnKernels:
        """The submission's own kernel names, computed here, never by the worker: Triton's from the source's
        syntax, CUDA/CuTe's and load_inline extensions' from the built libraries (GPU only: the lists cuobjdump made
        in the builds' confinement). Vendor-like names are refused."""
        own = OwnKernels(triton=triton_kernel_names(source) if language in ("triton", "python") else set())
        if self.device.mode == "gpu":
            for library in (*build.libraries.values(), *build.extensions.values()):
                own.native |= native_kernel_names(library)
        check_own_names(own.triton | own.native)
        return own

    def _evidence(self, task: Task, build, own: OwnKernels, result: EvalResult) -> None:
        """The evidence pass: a bench case drawn at random, replayed under Nsight Compute by a fresh worker, and
        checked here against what the worker claimed (`graders.evidence`). Flags raise `Flagged`; a pass that
        cannot be made (no ncu, no counters, another backend) says why in `result.evidence.note`."""
        case = secrets.choice(task.cases("bench"))  # drawn now: nothing armed ahead depends on it (round 25)
        timing = next(t for t in result.timings if t.case == str(case))
        replayable = self.isolation == "process" and not task.spec.distributed
        armed, prep = take_armed_replay(self.device, self.limits, _task_key(task)) if replayable else (None, None)
        # The armed replay's seeds for this case, as this judge drew them (never read back from a worker).
        seeds = next((c["seeds"] for c in (prep or {}).get("cases", []) if c["shape"] == case.shape),
                     [secrets.randbits(31) for _ in range(REPLAY_CALLS)])
        claimed = timing.scored_ms  # what the speedup pays (red team round 14: the worker's kernel time was checked
        # here while its busy time was paid, and it reported one honest, the other cut)
        result.evidence = Evidence(case=str(case), claimed_ms=claimed,
                                   one_in=EVIDENCE_ONE_IN if self.evidence == "sampled" else 1)
        with _phase(result, "evidence"), _waited(result, _both(self._gpu.profiler(), self._gpu.shared(long=True)),
                                                 "evidence"):  # fmt: skip
            try:
                fired = self._gather_evidence(task, build, own, case, seeds, armed, claimed, result.evidence)
            except Exception as first:  # any failure of a drawn pass (red team round 37: a csv error)
                # Once more from fresh seeds, in every mode: replays have been killed beside other judges (ncu exit
                # 9, no outputs; H100 2026-11-24, H200 2026-11-27), the machine's doing, which a second replay
                # rarely meets again, and an honest kernel must not fail by it. A cheat that dies on purpose only
                # costs the judge a second replay.
                retry = [secrets.randbits(31) for _ in range(REPLAY_CALLS)]
                result.evidence.retried = capped(str(first))[:500]
                try:
                    fired = self._gather_evidence(task, build, own, case, retry, None, claimed, result.evidence)
                except Exception as again:
                    # Both replays' workers never ready: the machine's failure twice. Not when the first replay ran
                    # the submission and failed: a cheat that dies on its replay, its other submission filling the
                    # GPU's memory as the retry's worker starts, would turn the sampled pass's fine into a `skipped`
                    # (red team round 80).
                    if isinstance(again, WorkerNotReady) and isinstance(first, WorkerNotReady):
                        raise Unavailable(f"the evidence pass could not run: {capped(str(again))[:500]}") from first
                    if self.evidence != "sampled":
                        raise again from first  # every step replayed: dying there earns a failure's reward, no more
                    # Drawn on one step in EVIDENCE_ONE_IN, a replay that dies must cost the sampled pass's fine, or
                    # a cheat that detects the replay and dies there earns a failure's 0 on the drawn step and its
                    # forged reward on the rest.
                    fired = {"evidence_failed": message("evidence_failed", f"{capped(str(first))[:300]}; then: "
                                                                           f"{capped(str(again))[:300]}")}
        if result.evidence.own_share is not None and result.kernel_coverage is not None:  # the judge's figure bounds it
            result.kernel_coverage = min(result.kernel_coverage, result.evidence.own_share)
        if fired:
            raise Flagged(fired)

    def _ncu_fails_alone(self) -> bool:
        """Does ncu fail on this machine with no submission around: a replay of the starter of vector_add, a small
        shape, in a worker confined as every replay is (counter access can depend on the worker's capabilities)?
        Asked once per judge, only when a pass meets an ncu error."""
        if self._ncu_alone is not None:
            return self._ncu_alone
        task = get_task("vector_add")
        build = compile_submission(task, task.starter("triton"), "triton", self.device.arch)
        shape = task.cases("small")[-1].shape
        specs = [(tuple(t.shape), t.dtype) for t in task.expected(
            *task.reference.make_inputs(shape, 0, "cpu"), shape=shape)]
        reply = evidence_in_worker(self.device, task, build, shape, [1], specs, self.limits)
        if "unavailable" in reply:
            self._ncu_alone = True
            return True
        if reply.get("problems") or "timeout" in reply:  # the probe's replay died (the machine?): decides nothing,
            return False  # and is asked again next time; meanwhile the error counts as the replay's (fail closed)
        try:
            parse_ncu_csv(reply.get("csv", ""))
            self._ncu_alone = False
        except NcuError as e:  # only ncu's own refusal of the counters is the machine's (red team round 36)
            # The counters refused, or a metric this ncu does not know (`graders.ncu.replay_metrics`).
            self._ncu_alone = any(said in str(e).lower() for said in ("err_nvgpuctrperm", "permission",
                                                                       "failed to find metric"))
        return self._ncu_alone

    def _draw_evidence_seeds(self, task: Task) -> dict:
        """For a replay armed ahead (`sandbox.process.arm_evidence_replays`), which makes every bench case's inputs
        before the step needs one: each case's seeds, drawn here, and its outputs' sizes and dtypes."""
        return {"task": task_ref(task), "cases": [
            {"shape": case.shape, "seeds": [secrets.randbits(31) for _ in range(REPLAY_CALLS)],
             "outputs": self._output_specs(task, case)} for case in task.cases("bench")]}

    def _output_specs(self, task: Task, case: Case) -> list:
        """[[size], dtype] of each output of the reference at `case` (computed once per judge, on this GPU)."""
        key = (_task_key(task), str(case))
        if key not in self._specs:
            with self._gpu.shared():
                expected = task.expected(*task.reference.make_inputs(case.shape, 0, self.device.torch_device),
                                         shape=case.shape)
            self._specs[key] = [[list(t.shape), str(t.dtype).removeprefix("torch.")] for t in expected]
        return self._specs[key]

    def _gather_evidence(self, task: Task, build, own: OwnKernels, case: Case, seeds: list[int], armed,
                         claimed_ms: float, evidence: Evidence) -> dict[str, str]:
        if self.isolation != "process" or task.spec.distributed:
            which = "distributed tasks" if task.spec.distributed else f"isolation={self.isolation!r}"
            evidence.note = f"no evidence pass for {which} yet: the GPU figures are the worker's"
            return {}
        specs = [(tuple(size), getattr(torch, dtype)) for size, dtype in self._output_specs(task, case)]
        # A sample of each output comes back, at positions the replay cannot know; a suite's own check needs them all.
        sample = None if getattr(task.reference, "check", None) else (SAMPLE_ELEMENTS, secrets.randbits(31))
        with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="kerneldojo-evidence") as replaying:
            asked = replaying.submit(evidence_in_worker, self.device, task, build, case.shape, seeds, specs,
                                     self.limits, sample, armed)
            # Meanwhile, the inputs the replay makes on the host, moved here as there (by value: the same bytes).
            started = time.perf_counter()
            sets = [tuple(t.to(self.device.torch_device) for t in task.reference.make_inputs(case.shape, seed, "cpu"))
                    for seed in seeds]
            expected = [task.expected(*inputs, shape=case.shape) for inputs in sets]
            data_bytes = sum(t.nbytes for t in (*sets[0], *expected[0]))  # one call's: bounds its host-memory traffic
            inputs_s = time.perf_counter() - started
            reply = asked.result()
        evidence.armed = reply.get("armed") if isinstance(reply.get("armed"), bool) else None
        told = reply.get("seconds") if isinstance(reply.get("seconds"), dict) else {}  # the worker's word: feedback
        evidence.seconds = {"inputs": inputs_s, "take": reply.get("take_s", 0.0), "worker": reply.get("worker_s", 0.0),
                            **{k: float(v) for k, v in told.items() if k in ("wait", "replay") and
                               isinstance(v, (int, float))}}
        if "unavailable" in reply:
            evidence.note = f"no evidence pass: {capped(reply['unavailable'])}; the GPU figures are the worker's"
            return {}
        if "timeout" in reply:
            raise SubmissionTimeout(capped(reply["timeout"]))
        wrong = functools.partial(message, "evidence_wrong")
        if problems := reply.get("problems"):
            # A replay that died is a failed step, not a flag: its cause may be the machine's (ncu saves device
            # memory on the host to replay kernels; beside four workers replays were killed, exit 9, on the H100
            # on 2026-11-24), and a submission that dies on purpose gains nothing over an honest failure by it.
            # ncu's own lines (==ERROR==, ==PROF==) go to its stdout, among the CSV rows: why it ended, if it said
            ncu_lines = "\n".join(line for line in str(reply.get("csv", "")).splitlines() if line.startswith("=="))
            said = "\n".join(f"{who} said:\n{capped(text)[-1500:]}" for who, text in (
                ("ncu", ncu_lines + str(reply.get("stderr", ""))), ("the replay", reply.get("replay_log", ""))) if text)
            limits_hit = "".join(f"; {note.replace('the worker', 'the replay')}" for note in reply["limits_hit"])
            raise SubmissionError(f"the replay under Nsight Compute (exit {reply.get('returncode')}) wrote no outputs "
                                  f"({capped(problems)[:300]}){limits_hit}; {said}")
        if sample is not None:
            expected = [sampled_outputs(want, *sample) for want in expected]
            specs = [(tuple(t.shape), t.dtype) for t in expected[0]]
        try:
            got = outputs_from_bytes(reply.get("outputs"), specs, self.device.torch_device)
        except ValueError as e:
            return {"evidence_wrong": wrong(f"the replay's outputs were malformed ({e})")}
        for k, (inputs, outputs, want) in enumerate(zip(sets, got, expected)):
            try:
                _compare(task, case, inputs, outputs, want, f"{case}, call {k + 1} of {len(sets)}")
            except WrongOutput as e:
                return {"evidence_wrong": wrong(f"the outputs were wrong: {e}")}
        try:
            launches = parse_ncu_csv(reply.get("csv", ""), strict=True)
        except NcuReportAltered as e:
            return {"evidence_wrong": wrong(f"Nsight Compute's report was altered ({e})")}
        except NcuError as e:  # ncu's own failure (no counters on this machine), or text the replay wrote as ncu's
            if self._ncu_fails_alone():
                evidence.note = f"no evidence pass: ncu failed: {capped(str(e))[:900]}; the GPU figures: the worker's"
                return {}
            # ncu works here with no submission around (red team round 35: a replay wrote an `==ERROR==` line into
            # ncu's output and killed it, and the pass, failing open, decided nothing): the replay's doing.
            detail = capped(str(e))[:500]
            raise SubmissionError(f"Nsight Compute failed on this replay, and only on it: {detail}") from None
        except (ValueError, IndexError) as e:
            return {"evidence_wrong": wrong(f"Nsight Compute's report was not its table ({type(e).__name__})")}
        found = figures(launches, own, task.allowed_ops)
        evidence.launches, evidence.kernel_ms, evidence.own_share = found.launches, found.kernel_ms, found.own_share
        evidence.kernels = [name[:200] for name in found.names[:20]]
        evidence.host_bytes = found.host_bytes
        return decide(found, claimed_ms, str(case), vendor_forbidden=not LIBRARY_OPS & task.allowed_ops,
                      decoy_forbidden=not task.allowed_ops >= LIBRARY_OPS,
                      torch_forbidden=task.defaults_only, data_bytes=data_bytes)

    def _limits_for(self, task: Task) -> dict[str, float]:
        """The worker's limits for this task: a run's limit follows from the reference's own time (`run_limit_s`)
        unless the caller set one; the first run at each shape gets `limits["compile"]` more (JIT, autotuning)."""
        limits = {**LIMITS_S, **(self.limits or {})}
        if "run" not in (self.limits or {}):
            limits["run"] = self._run_limit_s(task)
        return limits

    def _run_limit_s(self, task: Task) -> float:
        """max(floor, multiplier × the slowest reference call at the checked shapes), measured once per task here."""
        if task.id not in self._run_limits:
            slowest = 0.0
            for case in task.cases("small" if self.device.mode == "cpu" else "test"):
                inputs = task.reference.make_inputs(case.shape, 0, self.device.torch_device)
                synchronize(self.device)
                started = time.perf_counter()
                task.expected(*inputs, shape=case.shape)
                synchronize(self.device)
                slowest = max(slowest, time.perf_counter() - started)
            floor, multiplier = RUN_LIMIT[self.device.mode]
            self._run_limits[task.id] = max(floor, multiplier * slowest)
        return self._run_limits[task.id]

    def _limit_advice(self, task: Task) -> str:
        floor, multiplier = RUN_LIMIT[self.device.mode]
        limits = self._limits_for(task)
        return (f"A run may take {limits['run']:.3g} s here: max({floor:g} s, {multiplier:g}x the reference's time at "
                f"the checked shapes), and the first run of each shape {limits['compile']:g} s more for JIT and "
                f"autotuning. Look for a loop that does not end or a launch grid far too large; a kernel that is "
                f"just slow needs a faster algorithm (a caller may raise it: Judge(limits={{'run': seconds}})).")

    def _rank_devices(self, task: Task) -> list[torch.device]:
        """A distributed task's devices, one per rank: the judge's GPU and the ones after it (CPU mode: CPU)."""
        if self.isolation != "process":
            raise Unavailable(f"distributed tasks run one worker process per rank: use isolation='process', not "
                              f"{self.isolation!r}")
        ranks = {s["ranks"] for s in (*task.spec.shapes.test, *task.spec.shapes.bench, *task.spec.shapes.small)}
        if len(ranks) != 1:
            raise Unavailable(f"{task.id}: every shape must have the same number of ranks, not {sorted(ranks)}")
        return rank_devices(self.device.torch_device, ranks.pop())

    def _collective(self, task: Task, build, devices: list[torch.device]) -> CollectiveSolution:
        """One worker per rank, and the peer memory they share."""
        cases = task.cases("small" if self.device.mode == "cpu" else "test") + task.cases("bench") * self.timed
        buffer_bytes = max(task.reference.peer_buffer_bytes(c.shape) for c in cases)
        all_ready = threading.Barrier(len(devices))  # no rank loads the submission while another's worker starts
        return CollectiveSolution(devices, lambda d: WorkerSolution(task, build, _on(self.device, d), self.limits,
                                                                    all_ready), buffer_bytes)

    def _check(self, task: Task, solution: SubmissionHandle, result: EvalResult, bench: bool) -> None:
        cases = task.cases("small" if self.device.mode == "cpu" else "test")
        seeds = [secrets.randbits(31) for _ in range(self.seeds)]
        worst = 0.0
        for case in cases:
            seen: list[tuple[tuple, tuple]] = []  # (outputs, expected) per seed, for the same-output check
            pristine: tuple = ()
            off = 0.0  # the largest error of this case's seeds: how far from the reference this kernel's answers sit
            for seed in [*seeds, None]:
                # The GPU is shared call by call, not for the whole phase: a slow call (honest or not) keeps
                # other judges' timings waiting for one call's limit at most (red team round 21). A shape's first
                # call (Triton's JIT, an autotuner: seconds) is a long hold, which a timing waits out without
                # holding the other judges' checks back meanwhile.
                with _waited(result, self._gpu.shared(long=not seen), "correctness"):
                    # last, the previous inputs with a few elements changed: a result cached under a sampled
                    # fingerprint of the inputs is stale here
                    if seed is None:
                        pristine = _perturbed(pristine, getattr(task.reference, "unperturbed", ()))
                    else:
                        pristine = task.reference.make_inputs(case.shape, seed, self.device.torch_device)
                    # Outputs the judge allocates hold NaN at first, then the previous seed's right answer: a
                    # kernel must write every element whatever it finds there (no skipping "done" work).
                    got, expected, error = self._checked_run(task, solution, case, pristine,
                                                             seen[-1][1] if seen else None)  # fmt: skip
                    perturbed = seed is None
                    _check_same_output(seen, got, expected, str(case), task.tolerance(case.dtype).atol,
                                       ulps=SAME_OUTPUT_ULPS if perturbed else 0, noise=2 * off if perturbed else 0.0)
                    off = off if perturbed else max(off, error)
                worst = max(worst, error)
                result.cases_checked += 1
        if bench:  # each bench shape's first call (its compile: Triton's ptxas, an autotuner) is made here, so no
            for case in task.cases("bench"):  # new process of the worker's belongs in the timing (red team round 49),
                # Its first call: a long hold. On inputs with a few elements changed: structure in how they are
                # drawn (rotary tables derived from one integer a token) is no shortcut at sizes no test shape has
                # (red team round 62)
                with _waited(result, self._gpu.shared(long=True), "correctness"):
                    pristine = _perturbed(task.reference.make_inputs(case.shape, secrets.randbits(31),
                                                                     self.device.torch_device),
                                          getattr(task.reference, "unperturbed", ()))
                    worst = max(worst, self._checked_run(task, solution, case, pristine, None)[2])
                result.cases_checked += 1
        result.max_abs_error = worst

    def _checked_run(self, task: Task, solution: SubmissionHandle, case: Case, pristine: tuple,
                     prefill: tuple | None) -> tuple[tuple, tuple, float]:  # fmt: skip
        """One call on copies of `pristine`, into outputs holding NaN (or `prefill`), checked: (outputs, expected,
        the largest absolute error). The caller holds the GPU shared."""
        expected = task.expected(*pristine, shape=case.shape)
        with self._exported.allocating():  # what the worker may map: nothing else in its segments
            inputs = tuple(same_layout_copy(t) for t in pristine)
            outputs = poisoned_like(expected) if prefill is None else tuple(t.clone() for t in prefill)
        try:
            got = solution.run(inputs, case.shape, outputs)
        except SubmissionTimeout as e:
            raise SubmissionTimeout(f"{case}: {e}\n{self._limit_advice(task)}") from None
        synchronize(self.device)
        check_inputs_unchanged(pristine, inputs, str(case))
        return got, expected, _compare(task, case, pristine, got, expected, str(case))

    def _ncu(self, task: Task, solution: SubmissionHandle, result: EvalResult) -> None:
        """Profiler feedback: the largest bench case replayed under Nsight Compute by the worker; never scored."""
        case = task.cases("bench")[-1]
        result.ncu = profile = NcuProfile(case=str(case), min_bytes=task.reference.bytes_moved(case.shape))
        started = time.perf_counter()
        try:
            with _phase(result, "ncu"):
                inputs = task.reference.make_inputs(case.shape, 0, self.device.torch_device)
                specs = [(tuple(t.shape), t.dtype) for t in task.expected(*inputs, shape=case.shape)]
                del inputs
                if not hasattr(solution, "ncu"):
                    raise RuntimeError(f"no profile: isolation={self.isolation!r} has no Nsight Compute replay yet")
                with self._gpu.profiler(), self._gpu.shared(long=True):
                    csv = solution.ncu(case.shape, specs, NCU_CALLS, NCU_LIMIT_S)
                profile.kernels = summarise(parse_ncu_csv(csv), NCU_CALLS)
                if not profile.kernels:
                    profile.note = "no profile: ncu saw no kernel in the replay"
        except Exception as e:  # feedback only: a profile that cannot be taken says why and changes nothing else
            profile.note = str(e) if str(e).startswith("no profile") else f"no profile: {type(e).__name__}: {e}"
        profile.seconds = time.perf_counter() - started

    def _time(self, task: Task, solution: SubmissionHandle, result: EvalResult, reference_times: dict) -> None:
        peaks, sheet = measured_peaks(self.device.torch_device), datasheet_peaks(self.device.name)
        for case in task.cases("bench"):
            shape, device = case.shape, self.device.torch_device
            inputs = task.reference.make_inputs(shape, 0, device)
            template = task.expected(*inputs, shape=shape)
            set_bytes = sum(t.nbytes for t in (*inputs, *template))
            sets = pool_size(set_bytes, self.device.l2_bytes)
            before, started = gpu_state(self.device), time.perf_counter()
            specs = [(tuple(t.shape), t.dtype) for t in template]
            draws: list[tuple[TimedRuns, list]] = []  # each timing, with the seeds its input sets held last
            steady: list[TimedRuns] = []  # of those, the ones no compile interrupted (a `Retime`'s is not)
            for attempt in ("first", "again"):
                seeds, refills, profile_seeds = _fresh_seeds(sets)
                try:
                    timed = solution.time(shape, seeds, refills, profile_seeds, specs, self.device.l2_bytes,
                                          self.timing_budget_s)
                except Retime as e:  # a compile in the shape's first timing (a value the checked calls did not
                    if attempt == "again":  # reach): timed again on fresh seeds, where no process may appear
                        raise RuntimeError(f"{case}: the worker asked for a third timing") from None
                    if e.timed is not None:
                        draws.append((e.timed, last_seeds(seeds, refills, e.timed.stats.runs, profile_seeds)))
                    continue
                draws.append((timed, last_seeds(seeds, refills, timed.stats.runs, profile_seeds)))
                steady.append(timed)
                if attempt == "again" or not _unsynced(timed.profile, timed.stats.median_ms):
                    break
                # Busy beyond the timed stream once: another process's context time-slicing the GPU (a spare worker
                # starting, one torn down: they take no lock) stretches the profile's intervals; an honest softmax was
                # flagged so in a batch of 4 slots (H200, 2026-11-28). An unjoined stream does it on every draw.
            # The slower draw is paid: a submission that forces a retime where its first draw was slow gets no
            # second chance at the noise (red team round 54).
            timed = max(draws, key=lambda draw: draw[0].stats.median_ms)[0]
            after, spent = gpu_state(self.device), time.perf_counter() - started
            told = sum(float(getattr(t, "profile_s", 0.0) or 0.0) for t, _ in draws)  # the worker's word
            profile_s = min(max(told, 0.0), spent)
            _add(result, "timing", spent - profile_s)
            _add(result, "profile", profile_s)
            with _phase(result, "recheck"):
                for drawn, held_last in draws:
                    self._recheck_timed_outputs(task, case, drawn, held_last)
            flops, moved = task.reference.flops(shape), task.reference.bytes_moved(shape)
            eager, compiled = reference_times[str(case)]
            timing = CaseTiming(
                case=str(case), submission=timed.stats, profile=timed.profile, eager=eager, compiled=compiled,
                floor_ms=floor_ms(flops, moved, case.dtype, peaks), gpu_before=before, gpu_after=after,
            )  # fmt: skip
            result.timings.append(timing)
            _check_timing(task, timing, floor_ms(flops, moved, case.dtype, sheet), set_bytes,
                          # a `Retime`'s draw does not count (red team round 100: a compile forced into the first
                          # timing left the one steady draw's unjoined stream unflagged)
                          steady=[(d.profile, d.stats.median_ms) for d in steady])
            del inputs, template, timed, draws
        result.timed = True
        result.speedup = _geomean([t.speedup for t in result.timings])
        result.speedup_vs_compile = _geomean([t.speedup_vs_compile for t in result.timings])
        result.roofline_fraction = _geomean([t.roofline_fraction for t in result.timings])
        shares = [t.profile.own_share for t in result.timings if t.profile and t.profile.own_share is not None]
        result.kernel_coverage = min(shares) if shares else None

    def _recheck_timed_outputs(self, task: Task, case: Case, timed: TimedRuns, seeds: list[int]) -> None:
        """The last output of each input set, against the reference on the content that set held last (`seeds`,
        the judge's own account): as the timed calls left it, and again after each profiled call
        (`protocol.TimedRuns`)."""
        for seed, got in zip(seeds, timed.outputs, strict=True):
            if (got is None) != (seed is None):  # the judge's account says whether a set ran, not the reply
                detail = f"{case}: the reply's outputs do not match the {timed.stats.runs} calls it reports"
                raise Flagged({"timing_channel": message("timing_channel", detail)})
            if got is None:  # this set never ran (a budget shorter than the pool); an empty output is compared
                continue
            inputs = task.reference.make_inputs(case.shape, seed, self.device.torch_device)
            expected = task.expected(*inputs, shape=case.shape)
            _compare(task, case, inputs, got, expected, f"{case}, a timed run")

    def time_references(self, task: Task | str) -> dict[str, tuple[TimeStats | None, TimeStats | None]]:
        """(eager, compiled) reference times of each bench case of `task`, from the reference cache or measured into
        it: a batch or a service calls it ahead so that no submission's step waits for them. Empty where nothing is
        timed (CPU mode)."""
        if not self.timed:
            return {}
        task = get_task(task) if isinstance(task, str) else task
        return {str(case): self._reference_times_for(task, case) for case in task.cases("bench")}

    def _reference_times_for(self, task: Task, case: Case) -> tuple[TimeStats | None, TimeStats | None]:
        if task.spec.distributed:  # a collective is compared with NCCL's; there is no compiled form of that
            return self._reference_time(task, case, "nccl"), None
        return tuple(self._reference_time(task, case, kind) for kind in ("eager", "compiled"))

    def _reference_time(self, task: Task, case: Case, kind: str) -> TimeStats | None:
        """`kind`: "eager", "compiled" (torch.compile of the reference) or "nccl" (a collective's)."""
        if kind == "compiled" and not self.time_compiled_reference:
            return None
        key = _reference_key(task, case, kind, self.device.name)
        # Only torch.compile's failure is kept (it can fail on a platform for good; the eager figure still stands). A
        # failed eager or NCCL measurement was cached as None, and every later step of the case had no speedup, which
        # the reward pays as "correct, untimed": a slow kernel earned more, a fast one its bonus lost (red team round
        # 30: another slot's worker can take the GPU's memory while the reference worker starts).
        if key not in self._reference_times or (self._reference_times[key] is None and kind != "compiled"):
            try:
                self._reference_times[key] = self._measure_reference(task, case, kind).model_dump()
            except Exception as e:
                if kind != "compiled":
                    raise Unavailable(f"{task.id} {case}: the judge could not time the {kind} reference, so this step "
                                      f"has no speedup and was not judged ({type(e).__name__}: {e}); nothing was "
                                      "stored: the next step measures it again") from None
                warnings.warn(f"{task.id} {case}: timing the {kind} reference failed, so the case has no {kind} "
                              f"figure (kept in the cache until refresh_reference_times()): {type(e).__name__}: {e}",
                              RuntimeWarning, stacklevel=2)
                self._reference_times[key] = None
            self._save_reference_times()
        stored = self._reference_times[key]
        return TimeStats(**stored) if stored else None

    def _measure_reference(self, task: Task, case: Case, kind: str) -> TimeStats:
        """Holding the GPU alone while the reference is timed, and only then: a worker compiles it first under
        the shared hold (torch.compile took 75-115 s per task on a fresh H100 machine, 2026-11-25, and held every
        other judge of the GPU off while the exclusive hold spanned it)."""
        if self.isolation != "none" and self.device.mode == "gpu" and kind != "nccl":
            # In a fresh worker that never loads a submission, by the harness's `time_calls`: the
            # reference runs in the same kind of clean process as the submission it is compared
            # with, with none of this judge's state (other tasks' compiled graphs).
            return time_reference_in_worker(self.device, task, case.shape, kind, POOL_SETS[0], self.device.l2_bytes,
                                            self.timing_budget_s, self.limits, self._gpu)
        with self._gpu.exclusive():
            if kind == "nccl":  # in clean rank processes of its own
                devices = rank_devices(self.device.torch_device, case.shape["ranks"])
                return time_nccl_all_reduce(task, case, devices, self.device.l2_bytes)
            fn = _compiled_reference(task.id) if kind == "compiled" else None
            return self._time_calls(task.reference_calls(case.shape, self.device.torch_device, POOL_SETS[0], fn))

    def refresh_reference_times(self) -> None:
        self._reference_times = {}
        self._save_reference_times()

    def _load_reference_times(self) -> dict:
        try:
            return json.loads(Path(self.reference_cache).read_text()) if self.reference_cache else {}
        except (OSError, ValueError):
            return {}

    def _save_reference_times(self) -> None:
        if not self.reference_cache:
            return
        path = Path(self.reference_cache)
        path.parent.mkdir(parents=True, exist_ok=True)
        # Merge with what other judges stored meanwhile, then replace atomically: a judge killed
        # mid-write leaves the old file. A refresh (an empty table) starts the file afresh.
        merged = {**self._load_reference_times(), **self._reference_times} if self._reference_times else {}
        write_atomically(path, json.dumps(merged, indent=0, sort_keys=True))

    @property
    def _gpu(self) -> GPULock:
        """Shared by this device's correctness checks, held alone by its timings, among every judge of this host."""
        return gpu_lock(self.device.torch_device)

    def _time_calls(self, calls) -> TimeStats:
        return time_calls(calls, self.device.torch_device, self.device.l2_bytes, budget_s=self.timing_budget_s)


EVIDENCE_MODES = ("always", "sampled", "off")
EVIDENCE_ONE_IN = 8  # evidence="sampled": the share of timed steps replayed under Nsight Compute

# Stored verdicts: a compile error the source alone decides, and `ok` for its timing (its correctness is checked
# again on fresh inputs before it is served: red team round 61). A timeout or a runtime error can come from the
# machine (another process holding the GPU or the memory, a loaded host, a worker killed from outside), "skipped" from
# what this host lacks, a compile error from a build's limits, a kill or a full disk (`TransientCompileError`: rounds
# 66, 67), `wrong` from a draw of the inputs (an honest kernel unlucky once kept it: round 62), and `flagged` from
# either (two seeds whose outputs collide, a value compiled in a bench shape's second timing, a replay killed twice,
# ncu's durations stretched by other judges' kernels: rounds 36, 37, 65): those are judged again each time.
CACHED_STATUSES = frozenset({"ok", "compile_error"})


class ResultCache:
    """Content-addressed EvalResult JSON files, `<folder>/<key[:2]>/<key>.json`, each written atomically
    (a temporary file renamed), so concurrent judges and killed ones never leave half a result."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)

    @classmethod
    def default(cls) -> ResultCache | None:
        if os.environ.get("KERNELDOJO_RESULT_CACHE", "").lower() in ("0", "off", "no", "false"):
            return None
        return cls(_default_reference_cache().parent / "results")

    def get(self, key: str) -> EvalResult | None:
        try:
            return EvalResult.model_validate_json((self.folder / key[:2] / f"{key}.json").read_text())
        except (OSError, ValueError):  # absent, or written by another schema: evaluate anew
            return None

    def put(self, key: str, result: EvalResult) -> None:
        path = self.folder / key[:2] / f"{key}.json"
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomically(path, result.model_dump_json())
        except OSError as e:  # a full or read-only disk costs the reuse, not the result
            warnings.warn(f"the result cache {self.folder} could not store a result: {e}", RuntimeWarning,
                          stacklevel=2)


_SAME_SIZE_INT = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def _fresh_seeds(sets: int) -> tuple[list[int], list[int], list[int]]:
    """A case's timing seeds: its input sets', their refills' and the profiled sets'."""
    return tuple([secrets.randbits(31) for _ in range(count)] for count in (sets, REFILLS, PROFILED_CALLS))


def _perturbed(inputs: tuple, unperturbed: tuple[int, ...] = ()) -> tuple:
    """A copy, in the same layout (strides included), with a few elements of each input of two elements or more
    replaced by values found elsewhere in that input, so every task's input contract (a range, a codebook) still
    holds; a scale or a scalar parameter is left as it is. Integer inputs too (red team round 43: a histogram's
    inputs are all integers, so the last check's inputs were the previous call's, and the previous answer it is
    pre-filled with passed for a kernel that wrote nothing); inputs whose values are a structure a copied value
    breaks are the reference module's `unperturbed` indices (a GPU MODE output buffer's shape: red team round 55,
    [17, 34] became [34, 34] and the reference raised)."""
    out = []
    for i, t in enumerate(inputs):
        copy = torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=t.device).copy_(t)
        if t.numel() > 1 and t.dtype != torch.bool and not t.is_complex() and i not in unperturbed:
            count = max(1, t.numel() // 1000)
            where = torch.unravel_index(torch.randint(0, t.numel(), (count,), device=t.device), t.shape)
            source = torch.unravel_index(torch.randint(0, t.numel(), (count,), device=t.device), t.shape)
            if not t.is_floating_point():
                copy[where] = t[source]
                out.append(copy)
                continue
            # Gathered and scattered as same-sized integers, the arithmetic in float32: CUDA has
            # neither indexing kernels nor arithmetic for fp8.
            bits = _SAME_SIZE_INT[t.element_size()]
            moved = t.view(bits)[source].view(t.dtype).float()
            unchanged = moved == t.view(bits)[where].view(t.dtype).float()
            nudge = max(float(t.float().std()), 1e-3) / 4  # where the value found is the one it replaces
            copy.view(bits)[where] = torch.where(unchanged, moved + nudge, moved).to(t.dtype).view(bits)
        out.append(copy)
    return tuple(out)


@contextlib.contextmanager
def _phase(result: EvalResult, name: str):
    """Adds the block's wall time to `result.phases[name]`, also when it raises."""
    started = time.perf_counter()
    try:
        yield
    finally:
        _add(result, name, time.perf_counter() - started)


def _add(result: EvalResult, name: str, seconds: float) -> None:
    result.phases[name] = result.phases.get(name, 0.0) + seconds


@contextlib.contextmanager
def _waited(result: EvalResult, hold: contextlib.AbstractContextManager, within: str | None = None):
    """`hold` (the GPU lock's) entered, the wait for it the phase `gpu_wait`, taken out of the enclosing phase
    `within`: where a batch's slots queue behind each other's timings shows as itself (issue 14)."""
    started = time.perf_counter()
    with hold:
        waited = time.perf_counter() - started
        _add(result, "gpu_wait", waited)
        if within is not None:
            _add(result, within, -waited)
        yield


@contextlib.contextmanager
def _both(first: contextlib.AbstractContextManager, second: contextlib.AbstractContextManager):
    with first, second:
        yield


def _on(device: Device, torch_device: torch.device) -> Device:
    """`device`'s description for another device of the same kind (a distributed task's rank)."""
    return device if device.mode == "cpu" else resolve_device(str(torch_device))


def _compare(task: Task, case: Case, inputs: tuple, got: tuple, expected: tuple, where: str) -> float:
    """Raise WrongOutput unless `got` is right; the largest absolute error. A reference module's own
    `check(inputs, outputs, shape)` (an adapted suite's verdict, e.g. GPU MODE's check_implementation)
    replaces the comparison with `expected`; it returns what is wrong, or nothing."""
    own = getattr(task.reference, "check", None)
    if own is None:
        return check_outputs(got, expected, task.tolerance(case.dtype), where)
    check_structure(got, expected, where)
    if problem := own(inputs, got, case.shape):
        raise WrongOutput(f"{where}: {problem}")
    return 0.0


def _seen_flags(solution) -> dict[str, str]:
    """The checks the worker's run replies carried (`WorkerSolution.seen_flags`; an in-process solution has none)."""
    return dict(getattr(solution, "seen_flags", None) or {})


def _flags_if_any(solution) -> dict[str, str]:
    """The checks the replies carried, and those the worker reports now where it still answers."""
    try:
        return {**_seen_flags(solution), **solution.flags}
    except Exception:  # the worker is gone: what its replies carried is all there is
        return _seen_flags(solution)


def _check_same_output(seen: list, got: tuple, expected: tuple, case: str, atol: float, ulps: int = 0,
                       noise: float = 0.0) -> None:
    """Flag outputs identical to an earlier seed's where the reference's differ; `seen` gets this seed's. Differences
    between two values both within the absolute tolerance of zero do not count: an honest kernel may repeat its
    answer exactly there (an honest GELU gives -0.0 for any x below about -5, where the reference gives -3e-7 and
    -1e-8: flagged about one step in a hundred at n=1, and the perturbed last check could meet it at any n). Any
    other difference does, however small, if the output's dtype can show it: a cached loss of cross_entropy is off
    by less than atol after the perturbed check moves a few logits of its row. For the perturbed check (`ulps`),
    nor do differences within SAME_OUTPUT_ULPS units in the last place of the output's dtype: a float32 sum of 10^8
    elements near 5.6e7 has a unit of 4, and the perturbed check's change of it, a sum of 10^5 random differences,
    falls within a few units often enough that an honest kernel's answer stayed the same (sum_all's baseline on an
    H200, 2026-11-28). Nor, there, differences within `noise`, twice the largest error the kernel showed on the
    case's seeds: a kernel whose answers sit that far from the reference's can repeat one where the reference moved
    less (sum_all's atomic starter, off by hundreds at n=10^8 where the perturbation moves the sum by about 130,
    flagged on an H200, 2026-11-28); a cache gets no more room than the error it showed, within the tolerance.
    Between seeds every difference counts: a constant answer to a problem whose reference varies by rounding only
    (KernelBench's mean of a softmax) is still flagged."""
    for other_got, other_expected in seen:
        same = all(torch.equal(a, b) for a, b in zip(got, other_got))
        if same and any(_differ_visibly(a, b, g.dtype, atol, ulps, noise)
                        for a, b, g in zip(expected, other_expected, got)):
            raise Flagged({"same_output": message("same_output", case)})
    seen.append((got, expected))


SAME_OUTPUT_ULPS = 4


def _differ_visibly(a: torch.Tensor, b: torch.Tensor, dtype: torch.dtype, atol: float, ulps: int,
                    noise: float = 0.0) -> bool:
    """Some element differs away from zero (beyond atol), by more than `noise` and by more than `ulps` units in the
    last place of `dtype`."""
    if torch.equal(a, b):
        return False
    a, b = a.double(), b.double()
    unit = torch.finfo(dtype).eps if dtype.is_floating_point else 0.0
    resolved = ((a - b).abs() > ulps * unit * torch.maximum(a.abs(), b.abs())) & ((a - b).abs() > noise)
    return bool(((a != b) & ((a.abs() > atol) | (b.abs() > atol)) & resolved).any())


def _unsynced(profile: ProfileStats | None, median_ms: float) -> bool:
    """The GPU busy beyond the timed stream's time (work on another stream the call did not join)."""
    return bool(profile and profile.busy_ms > UNSYNCED_SLACK * median_ms + 0.005)


def _check_timing(task: Task, timing: CaseTiming, sheet_floor_ms: float | None, data_bytes: int = 0,
                  steady: list[tuple[ProfileStats | None, float]] | None = None) -> None:
    """The judge's checks on one case's timing: physical floor, vendor kernels, who did the work. `data_bytes`: one
    call's inputs and outputs (the host-copy bound's measure). `steady`: (profile, median) of each draw of the case
    that no compile interrupted (the figures paid are the slowest draw's); `unsynchronized_stream` fires where every
    one of them looks unsynchronized. By default, the paid draw alone."""
    fired = {}
    if sheet_floor_ms and timing.scored_ms < FLOOR_SLACK * sheet_floor_ms:
        detail = f"{timing.case}: {timing.scored_ms * 1e3:.2f} µs against a floor of {sheet_floor_ms * 1e3:.2f} µs"
        fired["below_floor"] = message("below_floor", detail)
    profile: ProfileStats | None = timing.profile
    steady = [(profile, timing.submission.median_ms)] if steady is None else steady
    if steady and all(_unsynced(*draw) for draw in steady):
        busy, median_ms = steady[-1][0].busy_ms, steady[-1][1]
        detail = (f"{timing.case}: the GPU was busy {busy * 1e3:.1f} µs per call, the timed stream "
                  f"{median_ms * 1e3:.1f} µs")
        fired["unsynchronized_stream"] = message("unsynchronized_stream", detail)
    if profile and profile.host_copy_ms > HOST_COPY_SHARE * data_bytes / HOST_LINK_GB_S / 1e6 + HOST_COPY_SLACK_MS:
        detail = (f"{timing.case}: {profile.host_copy_ms * 1e3:.1f} µs of each call went in copies between the GPU "
                  f"and the host, more than moving a quarter of its {data_bytes / 1e6:.1f} MB would take")
        fired["host_copy"] = message("host_copy", detail)
    if profile:
        vendor = [k.name[:60] for k in profile.kernels if k.vendor]
        if vendor and not LIBRARY_OPS & task.allowed_ops:
            fired["vendor_kernel"] = message("vendor_kernel", "; ".join(vendor[:3]))
        unexplained = [k.name[:60] for k in profile.kernels
                       if not k.own and unexplained_kernel(k.name, task.allowed_ops)]
        if unexplained and task.defaults_only:
            fired["torch_kernel"] = message("torch_kernel", "; ".join(unexplained[:3]))
        if profile.own_share is None:  # copies at most: host compute, or a cached answer
            fired["no_kernel"] = message("no_kernel", timing.case)
        # A task that allows the vendor libraries' operators (an adapted KernelBench problem) lets a submission
        # keep PyTorch's kernels: its share is reported, not flagged, unless none of the time is its own.
        elif profile.own_share == 0 and task.allowed_ops >= LIBRARY_OPS:
            fired["no_kernel"] = message("no_kernel", f"{timing.case}: every kernel was PyTorch's or a library's")
        elif profile.own_share < MIN_OWN_SHARE and not task.allowed_ops >= LIBRARY_OPS:
            fired["decoy_kernel"] = message("decoy_kernel", f"{1 - profile.own_share:.0%}")
    if fired:
        raise Flagged(fired)


def _reference_key(task: Task, case: Case, kind: str, device_name: str) -> str:
    v = versions()
    source = hashlib.sha256(task.reference_source.encode()).hexdigest()[:16]
    return "|".join([task.id, str(case), kind, device_name, v.torch, v.triton or "-", v.kerneldojo, source])


def _default_reference_cache() -> Path:
    root = os.environ.get("KERNELDOJO_CACHE") or Path.home() / ".cache" / "kerneldojo"
    return Path(root) / "reference_times.json"


@functools.cache
def _compiled_reference(task_id: str):
    return torch.compile(get_task(task_id).reference.reference)


def _task_key(task: Task) -> str:
    """A task's identity as a key: its id and its files' version (an adapter's task_ref is a dict of its files)."""
    return f"{task.id}@{task_content_hash(task.folder)}"


def _geomean(values: list[float | None]) -> float | None:
    if not values or any(v is None or v <= 0 for v in values):
        return None
    return math.exp(sum(math.log(v) for v in values) / len(values))


@functools.cache
def judge_code_hash() -> str:
    """The judge's own code, in a result's key: a stored verdict is served only by the code that reached it (red team
    round 73: a flag rule, since widened, kept an honest source's stored `compile_error` under the same version)."""
    digest = hashlib.sha256()
    for name, path in judge_code_files():
        digest.update(f"{name}\0".encode() + path.read_bytes())
    return digest.hexdigest()


def judge_code_files() -> list[tuple[str, Path]]:
    """Every file of the judge's packages (not only modules: the docker backend's image is built from
    sandbox/Dockerfile, red team round 79), named by package."""
    import importlib

    files = []
    for package in ("kerneldojo", "kerneldojo.adapters", "kerneldojo.graders", "kerneldojo.sandbox",
                    "kerneldojo.sandbox.worker", "kerneldojo.tasks"):  # the tasks' shared code; each task's own files
        # are in `task_content_hash` (red team round 74: `tasks/spec.py` decides tolerances and allowed operators)
        folder = Path(importlib.import_module(package).__file__).parent
        files += [(f"{package}/{p.name}", p) for p in sorted(folder.iterdir()) if p.is_file() and p.suffix != ".pyc"]
    return files


def versions() -> Versions:
    try:
        import triton

        triton_version = triton.__version__
    except ImportError:
        triton_version = None
    driver = None
    if torch.cuda.is_available():
        try:
            import pynvml

            pynvml.nvmlInit()
            driver = pynvml.nvmlSystemGetDriverVersion()
        except Exception:
            driver = None
    return Versions(
        kerneldojo=__version__, python=platform.python_version(), torch=torch.__version__,
        triton=triton_version, nvcc=nvcc_version(), cuda_driver=driver,
    )  # fmt: skip


@functools.cache
def default_judge(device: str | None = "auto") -> Judge:
    return Judge(device)
