"""The level-3 baselines against their peers, side by side in one run on one GPU.

    python baselines/bench/bench_level3.py --json OUT.json [--only task,...] [--budget S] [--quick]
    python baselines/bench/bench_level3.py --render OUT.json
    python baselines/bench/bench_level3.py --dry-run --json /tmp/dry.json     # CPU: every path, fake timings

Per task, each shipped baseline (every .py/.cu file in baselines/<task>/, loaded through the judge's
compile_submission and sandbox.worker.harness.Solution, in this process) and its peers:

- flash_attention: torch SDPA with each backend forced (FLASH_ATTENTION, EFFICIENT_ATTENTION,
  CUDNN_ATTENTION; a backend that raises is recorded and skipped). The issue's target is causal,
  batch 2, heads 16, seq 4096, head_dim 128 at >= 70% of the best backend. When the task has a
  causal flag (a `causal` scalar in its shapes) that is a flash_attention case; otherwise it is
  measured with the flash_attention_gqa baseline at kv_heads = heads (plain causal multi-head).
- flash_attention_gqa: SDPA per backend with enable_gqa=True, or where that raises (older torch,
  or a backend without GQA) with k and v repeated to one head per query head outside the timed call.
- paged_decode_attention: the eager reference, and a peer that gathers the pages and runs SDPA
  with a length mask, the gather inside the timed call. GB/s against the task's bytes_moved and the
  measured copy bandwidth.
- cute_gemm: torch.mm (cuBLAS); fp8_gemm: torch._scaled_mm (cuBLASLt fp8, b column-major).
- mlp_block, transformer_block: the eager reference and torch.compile(reference) (default mode,
  dynamic=False, compiled in the run).

Every contender's output is checked once against the task's reference with the task's tolerance
before it is timed; a wrong or failing one is recorded with its error and not timed. Timing is
kerneldojo.graders.timing.time_calls for all (CUDA events, cold L2, device synchronized, RSE stop),
on one input set (seed 0). The JSON is rewritten after every contender, so a run cut short keeps
what it measured.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import sys
import time
import traceback
import warnings
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F

from kerneldojo.baselines import BASELINES_DIR

TASKS = ("flash_attention", "flash_attention_gqa", "paged_decode_attention", "cute_gemm", "fp8_gemm", "mlp_block",
         "transformer_block")
# The issue's attention target: causal, seq 4096, head_dim 128 (batch 2 x 16 heads, as the task's bench set).
FA_TARGET = {"batch": 2, "heads": 16, "seq": 4096, "head_dim": 128}
FA_TARGET_DRY = {"batch": 1, "heads": 2, "seq": 40, "head_dim": 64}
TARGET_FRACTIONS = {"flash_attention": 0.70, "cute_gemm": 0.60, "fp8_gemm": 0.60}
SDPA_BACKENDS = ("FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", help="where to save the results (rewritten after every measurement)")
    parser.add_argument("--only", help="comma-separated task ids (default: all level-3 tasks)")
    parser.add_argument("--budget", type=float, default=0.5, help="time_calls budget per measurement, s")
    parser.add_argument("--quick", action="store_true", help="only the target configurations (and one per task)")
    parser.add_argument("--deadline", type=float, default=500.0,
                        help="wall seconds after which remaining measurements are skipped (recorded as such)")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dry-run", action="store_true",
                        help="CPU: small shapes, fake timings (two plain calls); exercises every code path")
    parser.add_argument("--render", help="print the table of a saved run instead of measuring")
    args = parser.parse_args(argv)
    if args.render:
        print(render(json.loads(Path(args.render).read_text())))
        return 0
    only = [t.strip() for t in args.only.split(",") if t.strip()] if args.only else list(TASKS)
    unknown = [t for t in only if t not in TASKS]
    if unknown:
        parser.error(f"--only: unknown task(s) {unknown}; level-3 tasks are {', '.join(TASKS)}")
    if not 0 < args.budget <= 30:
        parser.error("--budget must be in (0, 30] seconds")
    bench = Bench(args, only)
    bench.run()
    print(render(bench.data))
    return 0


# ---------------------------------------------------------------------------------------------------------------


@dataclass
class Contender:
    name: str
    kind: str  # "ours" or "peer"
    fn: Callable[[], object]  # zero-argument call returning the output(s)
    note: str = ""
    context: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext  # around check and timing
    # Alternatives tried in order when the check of `fn` raises: (note, fn) pairs.
    fallbacks: list[tuple[str, Callable[[], object]]] = field(default_factory=list)


class Bench:
    def __init__(self, args, only: list[str]):
        self.args, self.only = args, only
        self.dry = args.dry_run
        self.started = time.perf_counter()
        self.out_path = Path(args.json) if args.json else None
        self._setup_device()
        self.data = {
            "script": "baselines/bench/bench_level3.py", "argv": sys.argv[1:], "device": self.device.name,
            "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "versions": _versions(), "dry_run": self.dry,
            "quick": args.quick, "budget_s": args.budget, "timing": _timing_note(self.dry),
            "peaks": None, "tasks": {},
        }  # fmt: skip
        self.peaks = None
        self._builds: dict[str, Future] = {}
        self._pool = ThreadPoolExecutor(max_workers=2) if "cute_gemm" in only else None

    # --- set-up ----------------------------------------------------------------------------------------------

    def _setup_device(self) -> None:
        from kerneldojo.sandbox.device import resolve_device

        if self.dry:
            self.device = resolve_device("cpu")
        else:
            if not torch.cuda.is_available():
                raise SystemExit("no CUDA GPU visible; use --dry-run to exercise the script on the CPU")
            self.device = resolve_device(self.args.device)
        self.dev = self.device.torch_device

    def _measure_peaks(self) -> None:
        from kerneldojo.graders.roofline import datasheet_peaks, measured_peaks

        try:
            if self.dry:
                self.peaks = datasheet_peaks("H100")  # stands in, so the rendering is exercised
            else:
                self.peaks = measured_peaks(self.dev)
            self.data["peaks"] = {"source": self.peaks.source, "dram_bytes_per_s": self.peaks.dram_bytes_per_s,
                                  "flops_per_s": dict(self.peaks.flops_per_s)}
        except Exception as e:
            self.data["peaks_error"] = _err(e)
        self.save()

    def _start_native_builds(self) -> None:
        """nvcc for the CuTe baselines runs in the background while the attention tasks are timed."""
        if self._pool is None:
            return
        from kerneldojo.graders.compile import compile_submission, detect_language
        from kerneldojo.tasks import get_task

        task = get_task("cute_gemm")
        for path in baseline_files("cute_gemm"):
            source = path.read_text()
            language = detect_language(source)
            if path.suffix == ".cu" and task.allows(language):
                self._builds[path.name] = self._pool.submit(compile_submission, task, source, language,
                                                            self.device.arch)

    # --- the run ---------------------------------------------------------------------------------------------

    def run(self) -> None:
        self._start_native_builds()
        self._measure_peaks()
        for task_id in self.only:
            record = self.data["tasks"].setdefault(task_id, {"cases": [], "notes": [], "errors": []})
            start = time.perf_counter()
            try:
                getattr(self, f"task_{task_id}")(record)
            except Exception as e:  # one task failing must not lose the others
                record["errors"].append(_err(e))
            record["wall_s"] = round(time.perf_counter() - start, 2)
            self.data["wall_s"] = round(time.perf_counter() - self.started, 2)
            self.save()
            log(f"{task_id}: done in {record['wall_s']:.0f} s ({self.data['wall_s']:.0f} s total)")
            _free()
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)

    def save(self) -> None:
        if self.out_path is None:
            return
        tmp = self.out_path.with_name(self.out_path.name + f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(self.data, indent=1, default=str))
        tmp.replace(self.out_path)

    def past_deadline(self) -> bool:
        return time.perf_counter() - self.started > self.args.deadline

    def timer(self, fn: Callable[[], object]):
        from kerneldojo.graders.timing import summarize, time_calls

        if self.dry:  # two plain calls: no CUDA events on the CPU
            times = []
            for _ in range(2):
                t0 = time.perf_counter()
                fn()
                times.append(1e3 * (time.perf_counter() - t0))
            return summarize(times)
        return time_calls([fn], self.dev, self.device.l2_bytes, budget_s=self.args.budget)

    def sync(self) -> None:
        if self.dev.type == "cuda":
            torch.cuda.synchronize(self.dev)

    # --- cases -----------------------------------------------------------------------------------------------

    def shapes(self, task, quick_pick: Callable[[list[dict]], list[dict]] | None = None) -> list[dict]:
        """The task's bench shapes (small ones in a dry run); with --quick, what quick_pick keeps."""
        shapes = [c.shape for c in task.cases("small" if self.dry else "bench")]
        if self.args.quick:
            shapes = quick_pick(shapes) if quick_pick else shapes[:1]
        return shapes

    def run_case(self, record: dict, task, shape: dict, contenders: Callable[[tuple, tuple], list[Contender]],
                 via: str | None = None, target: float | None = None) -> None:
        from kerneldojo.graders.correctness import check_outputs
        from kerneldojo.graders.roofline import floor_ms
        from kerneldojo.tasks import case_label

        label = case_label(shape)
        case = {"task": task.id, "case": label, "shape": shape, "via": via, "target_fraction": target,
                "contenders": []}
        record["cases"].append(case)
        if self.past_deadline():
            case["error"] = f"skipped: past the --deadline of {self.args.deadline:.0f} s"
            return
        log(f"{task.id}: {label}" + (f" (via {task.id})" if via else ""))
        try:
            ref = task.reference
            case["flops"], case["bytes"] = int(ref.flops(shape)), int(ref.bytes_moved(shape))
            # fp8: the measured int8 rate stands in (Hopper's dense fp8 and int8 tensor-core rates are the same).
            math_dtype = "int8" if shape["dtype"].startswith("float8") else shape["dtype"]
            case["floor_ms"] = floor_ms(case["flops"], case["bytes"], math_dtype, self.peaks)
            inputs = ref.make_inputs(shape, 0, self.dev)
            t0 = time.perf_counter()
            expected = task.expected(*inputs, shape=shape)
            self.sync()
            case["reference_s"] = round(time.perf_counter() - t0, 3)
            tol = task.tolerance(shape["dtype"])
            for c in contenders(inputs, expected):
                entry = {"name": c.name, "kind": c.kind, "note": c.note}
                case["contenders"].append(entry)
                if self.past_deadline():
                    entry["error"] = f"skipped: past the --deadline of {self.args.deadline:.0f} s"
                    continue
                try:
                    with warnings.catch_warnings(), c.context():
                        warnings.simplefilter("ignore")
                        fn = self._checked(c, entry, expected, tol, label, check_outputs)
                        stats = self.timer(fn)
                    entry["stats"] = stats.model_dump()
                    ms = entry["ms"] = stats.median_ms
                    entry["tflops"] = case["flops"] / (ms * 1e9)
                    entry["gbps"] = case["bytes"] / (ms * 1e6)
                    if self.peaks:
                        entry["copy_bw_fraction"] = case["bytes"] / (ms * 1e-3) / self.peaks.dram_bytes_per_s
                    if case["floor_ms"]:
                        entry["roofline_fraction"] = case["floor_ms"] / ms
                    log(f"    {c.name}: {ms:.4g} ms, {entry['tflops']:.1f} TFLOP/s, {entry['gbps']:.0f} GB/s")
                except Exception as e:
                    entry["error"] = _err(e)
                    log(f"    {c.name}: {entry['error'][:200]}")
                self.save()
            summarize_case(case)
        except Exception as e:
            case["error"] = _err(e)
            log(f"    case failed: {case['error'][:300]}")
        finally:
            self.save()
            _free()

    def _checked(self, c: Contender, entry: dict, expected: tuple, tol, label: str, check_outputs) -> Callable:
        """The first of c.fn and its fallbacks whose output passes the check; raises the first error if none."""
        first_error = None
        for note, fn in [(c.note, c.fn), *c.fallbacks]:
            try:
                t0 = time.perf_counter()
                got = fn()
                self.sync()
                entry["first_call_s"] = round(time.perf_counter() - t0, 3)  # compile/autotune included
                got = got if isinstance(got, tuple) else (got,)
                entry["max_abs_err"] = check_outputs(got, expected, tol, label)
                del got
                entry["note"] = note
                return fn
            except Exception as e:
                first_error = first_error or e
                if c.fallbacks:
                    entry.setdefault("tried", []).append(f"{note or 'default'}: {_err(e)[:300]}")
        raise first_error

    # --- our baselines ---------------------------------------------------------------------------------------

    def solutions(self, task) -> list[tuple[str, object]]:
        """(file name, Solution) for every baseline file of the task; build errors as (name, exception)."""
        from kerneldojo.graders.compile import compile_submission, detect_language
        from kerneldojo.sandbox.worker.harness import Solution

        out = []
        for path in baseline_files(task.id):
            source = path.read_text()
            language = detect_language(source)
            if not task.allows(language):
                continue
            try:
                if path.name in self._builds and task.id == "cute_gemm":
                    remaining = max(1.0, self.args.deadline - (time.perf_counter() - self.started))
                    build = self._builds[path.name].result(timeout=remaining)
                else:
                    build = compile_submission(task, source, language, self.device.arch)
                out.append((path.name, Solution(task, build, self.device)))
            except Exception as e:
                out.append((path.name, e))
        return out

    def ours(self, solutions, inputs: tuple, shape: dict, expected: tuple) -> list[Contender]:
        from kerneldojo.graders.correctness import poisoned_like

        result = []
        for name, sol in solutions:
            if isinstance(sol, Exception):
                result.append(Contender(f"ours: {name}", "ours", _raiser(sol)))
                continue
            outputs = poisoned_like(expected)  # written by native entry points; Python ones return their own
            label = f"ours: {name}" + (f" ({sol.build.language})" if sol.build.language != "triton" else "")
            result.append(Contender(label, "ours", functools.partial(sol.run, inputs, shape, outputs, watch=False)))
        return result

    # --- the tasks -------------------------------------------------------------------------------------------

    def task_flash_attention(self, record: dict) -> None:
        from kerneldojo.tasks import get_task

        task = get_task("flash_attention")
        key = causal_key(task)
        dtype = task.spec.dtypes[0]
        target = FA_TARGET_DRY if self.dry else FA_TARGET
        record["notes"].append(
            f"target: causal, batch {target['batch']}, heads {target['heads']}, seq {target['seq']}, "
            f"head_dim {target['head_dim']}: ours at >= {TARGET_FRACTIONS['flash_attention']:.0%} of the best SDPA "
            "backend")
        shapes = [c.shape for c in task.cases("small" if self.dry else "bench")]
        if key:
            base = next((s for s in shapes if s["head_dim"] == target["head_dim"]), shapes[0])
            target_causal = {**base, **target, key: 1}
            target_plain = {**base, **target, key: 0}
            if self.args.quick:
                shapes = [target_causal, target_plain]
            else:
                shapes = [*shapes, *(s for s in (target_causal, target_plain) if s not in shapes)]
            solutions = self.solutions(task)
            for shape in shapes:
                is_target = shape == target_causal
                self.run_case(record, task, shape, self._attention_contenders(task, solutions, shape),
                              target=TARGET_FRACTIONS["flash_attention"] if is_target else None)
            _close(solutions)
            return
        # No causal flag in this task (yet): its own cases are bidirectional; the causal target goes
        # through the causal flash_attention_gqa baseline with kv_heads = heads.
        record["notes"].append("the flash_attention task has no causal flag: the causal target is measured with "
                               "the flash_attention_gqa baseline at kv_heads = heads (plain causal multi-head)")
        if self.args.quick:
            plain = {**target, "dtype": dtype}
            shapes = [s for s in shapes if s == plain] or [plain]
        solutions = self.solutions(task)
        for shape in shapes:
            self.run_case(record, task, shape, self._attention_contenders(task, solutions, shape))
        _close(solutions)
        gqa = get_task("flash_attention_gqa")
        shape = {**target, "kv_heads": target["heads"], "dtype": gqa.spec.dtypes[0]}
        shape = {k: shape[k] for k in ("batch", "heads", "kv_heads", "seq", "head_dim", "dtype")}
        solutions = self.solutions(gqa)
        self.run_case(record, gqa, shape, self._attention_contenders(gqa, solutions, shape),
                      via="flash_attention_gqa baseline, kv_heads = heads", target=TARGET_FRACTIONS["flash_attention"])
        _close(solutions)

    def task_flash_attention_gqa(self, record: dict) -> None:
        from kerneldojo.tasks import get_task

        task = get_task("flash_attention_gqa")
        record["notes"].append("SDPA peers: enable_gqa=True where the backend takes it, else k and v repeated to one "
                               "head per query head outside the timed call (each row's note says which)")

        def pick(shapes):
            return [s for s in shapes if s["seq"] == 4096 and s["head_dim"] == 128][:1] or shapes[:1]

        solutions = self.solutions(task)
        for shape in self.shapes(task, pick):
            self.run_case(record, task, shape, self._attention_contenders(task, solutions, shape))
        _close(solutions)

    def _attention_contenders(self, task, solutions, shape: dict):
        causal = is_causal(task, shape)

        def make(inputs, expected):
            q, k, v = inputs[:3]
            result = self.ours(solutions, inputs, shape, expected)
            group = q.shape[1] // k.shape[1]
            rep = {}

            def repeated():  # k and v with one head per query head, made once, outside any timed call
                if not rep:
                    rep["k"], rep["v"] = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
                return rep["k"], rep["v"]

            for backend in SDPA_BACKENDS:
                ctx = functools.partial(sdpa_backend, backend)
                name = f"SDPA {backend}"
                if group == 1:
                    result.append(Contender(name, "peer", functools.partial(
                        F.scaled_dot_product_attention, q, k, v, is_causal=causal), context=ctx))
                    continue

                def gqa(causal=causal):
                    return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)

                def kv_repeated(causal=causal):
                    kr, vr = repeated()
                    return F.scaled_dot_product_attention(q, kr, vr, is_causal=causal)

                result.append(Contender(name, "peer", gqa, note="enable_gqa=True", context=ctx,
                                        fallbacks=[("k/v repeated outside the timed call", kv_repeated)]))
            return result

        return make

    def task_paged_decode_attention(self, record: dict) -> None:
        from kerneldojo.tasks import get_task

        task = get_task("paged_decode_attention")
        record["notes"].append("GB/s over the task's bytes_moved; % copy BW against the measured device-to-device "
                               "copy (read + write). The gather+SDPA peer gathers the pages inside its timed call.")
        solutions = self.solutions(task)
        for shape in self.shapes(task, lambda s: s[:1]):

            def make(inputs, expected, shape=shape):
                result = self.ours(solutions, inputs, shape, expected)
                result.append(Contender("eager reference", "peer", functools.partial(task.reference.reference,
                                                                                      *inputs)))
                gqa = functools.partial(paged_gather_sdpa, *inputs, enable_gqa=True)
                rep = functools.partial(paged_gather_sdpa, *inputs, enable_gqa=False)
                result.append(Contender("gather + SDPA", "peer", gqa, note="enable_gqa=True, length mask",
                                        fallbacks=[("k/v repeated in the call, length mask", rep)]))
                return result

            self.run_case(record, task, shape, make)
        _close(solutions)

    def task_cute_gemm(self, record: dict) -> None:
        from kerneldojo.tasks import get_task

        task = get_task("cute_gemm")
        record["notes"].append(f"target: each CuTe baseline at >= {TARGET_FRACTIONS['cute_gemm']:.0%} of torch.mm "
                               "(cuBLAS) at 8192^3")
        solutions = self.solutions(task)
        for shape in self.shapes(task, lambda s: s):
            def make(inputs, expected, shape=shape):
                a, b = inputs
                return [*self.ours(solutions, inputs, shape, expected),
                        Contender("torch.mm (cuBLAS)", "peer", functools.partial(torch.mm, a, b.t()))]

            big = not self.dry and shape["m"] >= 8192
            self.run_case(record, task, shape, make, target=TARGET_FRACTIONS["cute_gemm"] if big else None)
        _close(solutions)

    def task_fp8_gemm(self, record: dict) -> None:
        from kerneldojo.tasks import get_task

        task = get_task("fp8_gemm")
        record["notes"].append(f"target: ours at >= {TARGET_FRACTIONS['fp8_gemm']:.0%} of torch._scaled_mm "
                               "(cuBLASLt fp8, out_dtype bf16, b.t() column-major) at 8192^3")
        solutions = self.solutions(task)
        for shape in self.shapes(task, lambda s: s):
            def make(inputs, expected, shape=shape):
                a, b, sa, sb = inputs
                peer = functools.partial(torch._scaled_mm, a, b.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)
                return [*self.ours(solutions, inputs, shape, expected),
                        Contender("torch._scaled_mm (cuBLASLt)", "peer", peer)]

            big = not self.dry and shape["m"] >= 8192
            self.run_case(record, task, shape, make, target=TARGET_FRACTIONS["fp8_gemm"] if big else None)
        _close(solutions)

    def _eager_and_compiled(self, task_id: str, record: dict) -> None:
        from kerneldojo.tasks import get_task

        task = get_task(task_id)
        record["notes"].append("torch.compile: default mode, dynamic=False, one compiled function per case; its "
                               "first_call_s is the compile")
        solutions = self.solutions(task)
        for shape in self.shapes(task, lambda s: s[:1]):
            def make(inputs, expected, shape=shape):
                scalars = task.scalars(shape)
                fn = task.reference.reference
                compiled = torch.compile(fn, dynamic=False)
                return [*self.ours(solutions, inputs, shape, expected),
                        Contender("eager reference", "peer", functools.partial(fn, *inputs, *scalars)),
                        Contender("torch.compile(reference)", "peer", functools.partial(compiled, *inputs, *scalars))]

            self.run_case(record, task, shape, make)
        _close(solutions)

    def task_mlp_block(self, record: dict) -> None:
        self._eager_and_compiled("mlp_block", record)

    def task_transformer_block(self, record: dict) -> None:
        self._eager_and_compiled("transformer_block", record)


# --- helpers --------------------------------------------------------------------------------------------------


def baseline_files(task_id: str) -> list[Path]:
    folder = BASELINES_DIR / task_id
    return sorted(p for p in folder.iterdir() if p.suffix in (".py", ".cu") and not p.name.startswith("_"))


def causal_key(task) -> str | None:
    """The name of the task's causal flag (a scalar or a size in its shapes), or None."""
    names = list(getattr(task.spec, "scalars", None) or [])
    for shape in (*task.spec.shapes.bench, *task.spec.shapes.test):
        names += list(shape)
    return next((n for n in names if "causal" in n.lower()), None)


def is_causal(task, shape: dict) -> bool:
    key = causal_key(task)
    if key is not None:
        return bool(shape.get(key, 0))
    title = task.spec.title.lower()
    return "causal" in title and "bidirectional" not in title


@contextlib.contextmanager
def sdpa_backend(name: str) -> Iterator[None]:
    from torch.nn.attention import SDPBackend, sdpa_kernel

    backend = getattr(SDPBackend, name, None)
    if backend is None:
        raise RuntimeError(f"this torch has no SDPBackend.{name}")
    with sdpa_kernel([backend]):
        yield


def paged_gather_sdpa(q, k_cache, v_cache, block_table, seq_lens, enable_gqa: bool):
    """Decode attention the PyTorch way: gather each sequence's pages into a contiguous bf16 k and v, then
    SDPA with a mask of the context lengths. The gather is part of the call."""
    b, h, d = q.shape
    page, kvh = k_cache.shape[1], k_cache.shape[2]
    length = block_table.shape[1] * page
    pages = block_table.long()
    k = k_cache[pages].reshape(b, length, kvh, d).transpose(1, 2)
    v = v_cache[pages].reshape(b, length, kvh, d).transpose(1, 2)
    mask = (torch.arange(length, device=q.device)[None, :] < seq_lens[:, None])[:, None, None, :]
    if enable_gqa:
        out = F.scaled_dot_product_attention(q[:, :, None], k, v, attn_mask=mask, enable_gqa=kvh != h)
    else:
        if kvh != h:
            k, v = k.repeat_interleave(h // kvh, dim=1), v.repeat_interleave(h // kvh, dim=1)
        out = F.scaled_dot_product_attention(q[:, :, None], k, v, attn_mask=mask)
    return out[:, :, 0]


def summarize_case(case: dict) -> None:
    peers = [c for c in case["contenders"] if c["kind"] == "peer" and "ms" in c]
    if not peers:
        return
    best = min(peers, key=lambda c: c["ms"])
    case["best_peer"], case["best_peer_ms"] = best["name"], best["ms"]
    for c in case["contenders"]:
        if c["kind"] == "ours" and "ms" in c:
            c["fraction_of_best_peer"] = best["ms"] / c["ms"]
            if case.get("target_fraction") is not None:
                c["target_met"] = c["fraction_of_best_peer"] >= case["target_fraction"]


def _raiser(error: Exception) -> Callable[[], object]:
    def fail():
        raise error

    return fail


def _close(solutions) -> None:
    for _, sol in solutions:
        with contextlib.suppress(Exception):
            if not isinstance(sol, Exception):
                sol.close()


def _free() -> None:
    import gc

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def _err(e: BaseException) -> str:
    text = f"{type(e).__name__}: {e}".strip()
    if not str(e).strip():
        text += " | " + "".join(traceback.format_exception(e)[-3:]).strip()
    return text[:4000]


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _versions() -> dict:
    out = {"torch": torch.__version__, "cuda": torch.version.cuda, "python": sys.version.split()[0]}
    try:
        import triton

        out["triton"] = triton.__version__
    except ImportError:
        out["triton"] = None
    with contextlib.suppress(Exception):
        out["cudnn"] = torch.backends.cudnn.version()
    with contextlib.suppress(Exception):
        from kerneldojo.judge import versions

        v = versions()
        out |= {"kerneldojo": v.kerneldojo, "nvcc": v.nvcc, "cuda_driver": v.cuda_driver}
    return out


def _timing_note(dry: bool) -> str:
    if dry:
        return "DRY RUN on the CPU: two plain calls per contender, perf_counter; these are not measurements"
    return ("kerneldojo.graders.timing.time_calls for every contender: CUDA events, L2 flushed (2x its size "
            "written) and the device synchronized around each call, after 3 warm-up calls; repeated until the "
            "RSE of the mean < 0.5% or the budget ends; median reported; one input set (seed 0)")


# --- rendering ------------------------------------------------------------------------------------------------


def render(data: dict) -> str:
    def fmt(x, spec):
        return "-" if x is None else format(x, spec)

    v = data.get("versions", {})
    lines = [f"Device: {data['device']}, {data['date']}, torch {v.get('torch')} (CUDA {v.get('cuda')}, cuDNN "
             f"{v.get('cudnn')}), Triton {v.get('triton')}, nvcc {v.get('nvcc')}, driver {v.get('cuda_driver')}."]
    peaks = data.get("peaks")
    if peaks:
        flops = peaks["flops_per_s"]
        lines.append(f"Peaks ({peaks['source']}): copy {peaks['dram_bytes_per_s'] / 1e12:.2f} TB/s (read + write), "
                     f"bf16 {flops.get('bfloat16', 0) / 1e12:.0f} TFLOP/s.")
    elif data.get("peaks_error"):
        lines.append(f"Peaks not measured: {data['peaks_error'][:200]}")
    lines.append(f"Timing: {data.get('timing')}; budget {data.get('budget_s')} s per measurement"
                 + ("; --quick" if data.get("quick") else "") + (f"; run took {data['wall_s']:.0f} s" if
                                                                 data.get("wall_s") else "") + ".")
    lines += ["", "| task | case | contender | ms | TFLOP/s | GB/s | % copy BW | % roofline | ours: % of best peer "
              "| note |", "|---|---|---|---|---|---|---|---|---|---|"]
    targets = []
    for task_id, record in data["tasks"].items():
        for error in record.get("errors", []):
            lines.append(f"| {task_id} | task failed | | | | | | | | {_cell(error)} |")
        for case in record["cases"]:
            label = case["case"] + (" (via flash_attention_gqa, kv_heads = heads)" if case.get("via") else "")
            if case.get("error"):
                lines.append(f"| {task_id} | {label} | | | | | | | | {_cell(case['error'])} |")
            for c in case["contenders"]:
                if "ms" not in c:
                    lines.append(f"| {task_id} | {label} | {c['name']} | | | | | | | {_cell(c.get('error', ''))} |")
                    continue
                frac = c.get("fraction_of_best_peer")
                lines.append(
                    f"| {task_id} | {label} | {c['name']} | {c['ms']:.4g} | {c['tflops']:.1f} | {c['gbps']:.0f} "
                    f"| {fmt(pct(c.get('copy_bw_fraction')), '.0f')} | {fmt(pct(c.get('roofline_fraction')), '.0f')} "
                    f"| {fmt(pct(frac), '.0f')} | {_cell(c.get('note', ''))} |")
                if case.get("target_fraction") is not None and c["kind"] == "ours":
                    met = "MET" if c.get("target_met") else "NOT MET"
                    targets.append(
                        f"- {task_id} {label}: {c['name']} {c['ms']:.4g} ms, {c['tflops']:.0f} TFLOP/s = "
                        f"{fmt(pct(frac), '.0f')}% of {case.get('best_peer')} ({fmt(case.get('best_peer_ms'), '.4g')} "
                        f"ms); target >= {100 * case['target_fraction']:.0f}%: {met}")
            if case.get("target_fraction") is not None and not any(
                    c["kind"] == "ours" and "ms" in c for c in case["contenders"]):
                targets.append(f"- {task_id} {label}: no timing of ours (see the table); target not evaluated")
    notes = [f"- {t}: {n}" for t, r in data["tasks"].items() for n in r.get("notes", [])]
    if targets:
        lines += ["", "Targets:", *targets]
    if notes:
        lines += ["", "Notes:", *notes]
    return "\n".join(lines)


def pct(x: float | None) -> float | None:
    return None if x is None else 100 * x


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "/")[:160]


if __name__ == "__main__":
    sys.exit(main())
