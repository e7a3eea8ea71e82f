"""Nsight Compute feedback: the command that profiles a replay of one case, the parser of its CSV, and the
summary an agent reads (speed of light, occupancy and its limiter, warp stalls, DRAM traffic against the
task's minimum).

The figures are feedback, never part of the verdict or the reward: they come from a replay of the
submission, which could disturb its own profile. ncu runs with `--clock-control none` (clocks are never
locked or changed here) and `--cache-control all` (caches flushed before each kernel, as the timed run's
cold L2)."""

from __future__ import annotations

import csv
import math
import re
from collections import defaultdict

from kerneldojo.result import NcuKernel

# Warp stall reasons (ncu's WarpStateStats names) and what each says to do.
STALLS: dict[str, str] = {
    "long_scoreboard": "waiting on global or local memory: coalesce, reuse through shared memory, prefetch",
    "short_scoreboard": "waiting on shared memory or special math (MIO): fewer bank conflicts, fewer sqrt/exp",
    "barrier": "waiting at __syncthreads/tl barriers: less imbalance between warps of a block",
    "membar": "waiting on memory fences",
    "mio_throttle": "the shared-memory/special-math queue is full: fewer, wider shared accesses",
    "lg_throttle": "the global-memory queue is full: fewer, wider (vectorised) loads and stores",
    "math_pipe_throttle": "a math pipe is saturated: the kernel is compute-bound on that pipe",
    "tex_throttle": "the texture/L1 pipe is full",
    "wait": "fixed-latency dependencies: more independent work per thread (ILP)",
    "not_selected": "warps were ready but another was picked: occupancy is not the problem",
    "selected": "issuing: the useful state",
    "no_instruction": "instruction cache misses or branch targets: smaller unrolled code",
    "branch_resolving": "branch targets and divergence",
    "dispatch_stall": "dispatch stalls",
    "drain": "draining stores at exit",
    "imc_miss": "constant cache misses",
    "sleeping": "sleeping warps",
    "misc": "miscellaneous",
}
OCCUPANCY_LIMITS = ("registers", "shared_mem", "warps", "blocks")
METRICS: tuple[str, ...] = (
    "gpu__time_duration.sum",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "dram__bytes.sum",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "sm__maximum_warps_per_active_cycle_pct",
    "launch__registers_per_thread",
    "launch__block_size",
    "launch__grid_size",
    *(f"launch__occupancy_limit_{limit}" for limit in OCCUPANCY_LIMITS),
    *(f"smsp__average_warps_issue_stalled_{reason}_per_issue_active.ratio" for reason in STALLS),
)
# The evidence pass's: durations, and the L2 sectors the SMs moved to or from system memory (pinned, mapped,
# "zero-copy"; not the copy engines'), asked for only where its name was checked against ncu's list on the chip
# (sm_90: H100, H200): a metric ncu does not know fails every replay (red team round 92).
HOST_MEMORY_METRIC, SECTOR_BYTES = "lts__t_sectors_srcunit_tex_aperture_sysmem.sum", 32


def replay_metrics(arch: int | None) -> tuple[str, ...]:
    """What the evidence pass asks ncu for on a GPU of compute capability `arch` (90 for sm_90; None: unknown)."""
    return ("gpu__time_duration.sum", *([HOST_MEMORY_METRIC] if arch == 90 else []))


_STALL = re.compile(r"smsp__average_warps_issue_stalled_(\w+?)_per_issue_active\.ratio")
# ncu scales units for reading unless `--print-units base`; both are read.
_SCALE = {"": 1.0, "%": 1.0, "byte": 1.0, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "Tbyte": 1e12,
          "nsecond": 1e-6, "usecond": 1e-3, "msecond": 1.0, "second": 1e3, "ns": 1e-6, "us": 1e-3, "ms": 1.0,
          "register/thread": 1.0, "block": 1.0, "warp": 1.0, "thread": 1.0, "inst": 1.0, "cycle": 1.0}


def ncu_command(ncu: str, target: list[str], kernel_regex: str | None = None, launch_count: int | None = 64,
                metrics: tuple[str, ...] = METRICS, from_start: bool = True) -> list[str]:
    """Profile every kernel `target` launches (or those matching `kernel_regex`), at most `launch_count` (None:
    all). `from_start=False` waits for the target's cudaProfilerStart (the feedback replay skips its JIT call);
    the evidence pass profiles from the start, since a submission could toggle the range to hide kernels."""
    command = [ncu, "--csv", "--page", "raw", "--print-units", "base", "--clock-control", "none",
               "--cache-control", "all", "--profile-from-start", "on" if from_start else "off",
               "--metrics", ",".join(metrics)]
    if launch_count is not None:
        command += ["--launch-count", str(launch_count)]
    if kernel_regex:
        command += ["--kernel-name", f"regex:{kernel_regex}"]
    return [*command, *target]


def find_ncu() -> str | None:
    """ncu's path: on PATH, in the CUDA toolkit, or under /opt/nvidia/nsight-compute; None where there is none."""
    from pathlib import Path

    from kerneldojo.sandbox.device import cuda_tool

    found = cuda_tool("ncu") or next(iter(sorted(Path("/opt/nvidia/nsight-compute").glob("*/ncu"))), None)
    return str(found) if found else None


class NcuError(Exception):
    """ncu refused or failed; the message is its own (`==ERROR==` lines), e.g. no permission for the counters."""


class NcuReportAltered(NcuError):
    """`strict` parsing found table rows that ncu did not write: a second table, rows before the real one,
    or a launch ID twice (the profiled program wrote into ncu's output)."""


def parse_ncu_csv(text: str, strict: bool = False) -> list[dict[str, float | str]]:
    """One dict per profiled launch, in launch order, from ncu's `--csv --page raw` output: "Kernel Name", "ID",
    "Stream" (where ncu writes it) and every metric as a float in the base unit (ms for durations, bytes, %). Lines
    that are not the table (`==PROF==` messages, the program's own output) are skipped; `==ERROR==` lines raise.

    `strict` (the evidence pass, whose program's own output goes elsewhere): ncu prints one table, last;
    any table-like line before its header, or a launch ID seen twice, raises NcuReportAltered."""
    csv.field_size_limit(max(csv.field_size_limit(), len(text) + 1))  # a kernel's demangled name can be long
    errors = [line for line in text.splitlines() if line.startswith("==ERROR==")]
    lines = [line for line in text.splitlines() if line.startswith('"')]
    headers = [i for i, line in enumerate(lines) if '"Kernel Name"' in line]
    if not headers:
        if errors:
            raise NcuError("\n".join(errors[:5]))
        if strict and lines:
            raise NcuReportAltered(f"{len(lines)} table-like line(s) and no header")
        return []
    header_at = headers[-1] if strict else headers[0]
    if strict and header_at:
        raise NcuReportAltered(f"{header_at} table-like line(s) before the last table's header")
    try:
        rows = list(csv.reader(lines[header_at:]))
    except csv.Error as e:  # not a table ncu prints (red team round 37: a field past the csv module's limit)
        raise NcuReportAltered(f"the table does not parse: {e}") from None
    header, body = rows[0], rows[1:]
    units = dict.fromkeys(header, "")
    if body and not body[0][header.index("ID")].strip().isdigit():  # the units row under the header
        units, body = dict(zip(header, body[0])), body[1:]
    launches = []
    for row in body:
        launch: dict[str, float | str] = {"Kernel Name": row[header.index("Kernel Name")],
                                          "ID": float(row[header.index("ID")])}
        if "Stream" in header:  # kernels of one stream run one after another; of two, possibly at once
            launch["Stream"] = row[header.index("Stream")].strip()
        for name, cell in zip(header, row):
            if "__" in name:  # a metric column (ncu's names are unit__counter.rollup)
                value = _number(cell)
                if value is not None:
                    launch[name] = value * _SCALE.get(units.get(name, "").strip(), 1.0)
        launches.append(launch)
    if strict:
        _check_as_ncu_prints_it(header, body, launches)
    return sorted(launches, key=lambda launch: launch["ID"])


def _check_as_ncu_prints_it(header: list[str], body: list[list[str]], launches: list[dict]) -> None:
    """ncu's table as ncu prints it: every row as wide as the header, each launch ID once, every
    figure a finite number at or above zero. Rows written after ncu's own with higher IDs and plausible figures
    still pass this (fresh IDs): the residual of docs/threat-model.md (a replay that writes into ncu's stdout)."""
    if any(len(row) != len(header) for row in body):
        raise NcuReportAltered("a row is not as wide as the table's header")
    if len({launch["ID"] for launch in launches}) != len(launches):
        raise NcuReportAltered("a launch ID appears twice")
    for launch in launches:
        figures = [v for k, v in launch.items() if k not in ("Kernel Name", "ID", "Stream")]
        if not all(isinstance(v, float) and math.isfinite(v) and v >= 0 for v in figures):
            raise NcuReportAltered(f"launch {launch['ID']:.0f} has a figure that is not a finite number >= 0")


def _number(cell: str) -> float | None:
    try:
        return float(cell.replace(",", ""))
    except ValueError:  # "n/a", ""
        return None


def summarise(launches: list[dict], calls: int) -> list[NcuKernel]:
    """Per kernel name (launches of `calls` calls pooled): averages of the percentages, totals per call."""
    by_name: dict[str, list[dict]] = defaultdict(list)
    for launch in launches:
        by_name[str(launch["Kernel Name"])].append(launch)
    kernels = []
    for name, group in by_name.items():
        def mean(metric: str, group=group) -> float | None:
            values = [float(g[metric]) for g in group if metric in g]
            return sum(values) / len(values) if values else None

        def per_call(metric: str, group=group) -> float | None:
            values = [float(g[metric]) for g in group if metric in g]
            return sum(values) / calls if values else None

        limits = {limit: mean(f"launch__occupancy_limit_{limit}") for limit in OCCUPANCY_LIMITS}
        known = {k: v for k, v in limits.items() if v is not None}
        stalls = {m.group(1): mean(key) for key in group[0] if (m := _STALL.fullmatch(key))}
        total = sum(v for v in stalls.values() if v) or None
        # "selected" is issuing, not a stall: it counts in the whole, not among the reasons to act on.
        top = sorted(((r, v / total) for r, v in stalls.items() if v and total and r != "selected"),
                     key=lambda x: -x[1])[:3]
        kernels.append(NcuKernel(
            name=name, launches_per_call=len(group) / calls, ms_per_call=per_call("gpu__time_duration.sum") or 0.0,
            compute_pct=mean("sm__throughput.avg.pct_of_peak_sustained_elapsed"),
            memory_pct=mean("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"),
            dram_pct=mean("dram__throughput.avg.pct_of_peak_sustained_elapsed"),
            dram_bytes_per_call=per_call("dram__bytes.sum"),
            achieved_occupancy_pct=mean("sm__warps_active.avg.pct_of_peak_sustained_active"),
            theoretical_occupancy_pct=mean("sm__maximum_warps_per_active_cycle_pct"),
            occupancy_limiter=min(known, key=known.get) if known else None,
            registers_per_thread=mean("launch__registers_per_thread"),
            block_size=mean("launch__block_size"), grid_size=mean("launch__grid_size"),
            top_stalls=[(reason, round(share, 3)) for reason, share in top],
        ))  # fmt: skip
    return sorted(kernels, key=lambda k: -k.ms_per_call)


def feedback_lines(kernels: list[NcuKernel], min_bytes: int | None, case: str) -> list[str]:
    """What an engineer would read off the profile, per kernel, in words an agent can act on."""
    lines = [f"Nsight Compute profile ({case}; a replay, not the timed run; clocks as they were, caches flushed):"]
    total_dram = sum(k.dram_bytes_per_call or 0 for k in kernels)
    if min_bytes and total_dram:
        ratio = total_dram / min_bytes
        verdict = ("at the minimum" if ratio < 1.15 else
                   "more than the minimum: data read or written more than once, or in partly used sectors "
                   "(uncoalesced or strided access)")
        lines.append(f"  DRAM traffic {total_dram / 1e6:.3g} MB per call against the task's minimum "
                     f"{min_bytes / 1e6:.3g} MB ({ratio:.2f}x): {verdict}")
    for k in kernels:
        lines.append(f"  kernel {k.name[:80]}: {k.ms_per_call * 1e3:.1f} µs per call, "
                     f"{k.launches_per_call:g} launch(es), grid {_int(k.grid_size)} x block {_int(k.block_size)}")
        if k.memory_pct is not None and k.compute_pct is not None:
            if k.memory_pct >= 60 and k.memory_pct >= k.compute_pct:
                # The memory figure is the busiest of DRAM, L2 and L1: busy caches over idle DRAM means many
                # transactions for each useful byte, which is what uncoalesced or strided access costs.
                bound = ("memory-bound in the caches, not DRAM: many transactions per useful byte, as uncoalesced "
                         "or strided access makes; have neighbouring threads touch neighbouring addresses"
                         if k.dram_pct is not None and k.dram_pct < 0.6 * k.memory_pct
                         else "memory-bound: near the DRAM bandwidth roof")
            else:
                bound = ("compute-bound" if k.compute_pct >= 60
                         else "neither roof reached: latency-bound (too little parallelism, or the stalls below)")
            lines.append(f"    speed of light: memory {k.memory_pct:.0f}% of peak, compute {k.compute_pct:.0f}% "
                         f"(DRAM {_pct(k.dram_pct)}): {bound}")
        if k.achieved_occupancy_pct is not None:
            limiter = f", limited by {k.occupancy_limiter.replace('_', ' ')}" if k.occupancy_limiter else ""
            registers = (f" ({_int(k.registers_per_thread)} registers/thread)"
                         if k.occupancy_limiter == "registers" else "")
            lines.append(f"    occupancy: {k.achieved_occupancy_pct:.0f}% achieved of "
                         f"{_pct(k.theoretical_occupancy_pct)} theoretical{limiter}{registers}")
        if k.top_stalls:
            lines.append("    top warp stalls: " + "; ".join(
                f"{reason} {share:.0%} ({STALLS.get(reason, reason)})" for reason, share in k.top_stalls))
    return lines


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}%"


def _int(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"
