"""Where the evidence pass's time goes (issue 14): the replay program of `sandbox.worker.evidence_replay` run by
hand, bare and under Nsight Compute with the judge's flags and with variants, beside the pass as the judge runs it
(`evidence_in_worker`: a fresh confined worker that starts ncu) and a bare `import torch` + CUDA context, bare and
under ncu. Medians of --repeat runs each, per task and language.

    python baselines/bench/bench_evidence_cost.py OUT_DIR [--repeat 3] [--rows vector_add:triton,vector_add:cuda]

Writes OUT_DIR/evidence_cost.json and .md (`report.write`). Needs a GPU and ncu.
"""

from __future__ import annotations

import argparse
import json
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import report

BASELINES = Path(__file__).resolve().parents[1]
SOURCE_FILE = {"triton": "triton.py", "cuda": "cuda.cu"}
CUDA_INIT = "import torch; torch.empty(1, device='cuda'); torch.cuda.synchronize()"


def timed(command: list[str], cwd: Path) -> tuple[float, subprocess.CompletedProcess]:
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, cwd=cwd, timeout=300)
    return time.perf_counter() - started, done


def variants(ncu: str, target: list[str]) -> dict[str, list[str]]:
    from kerneldojo.graders.ncu import ncu_command

    judges = ncu_command(ncu, target, launch_count=None, metrics=("gpu__time_duration.sum",))
    flags, program = judges[:-len(target)], target

    def replaced(flag: str, value: str) -> list[str]:
        at = flags.index(flag)
        return [*flags[:at + 1], value, *flags[at + 2:], *program]

    return {"bare": program, "ncu (the judge's flags)": judges,
            "ncu, application-only": [*flags, "--target-processes", "application-only", *program],
            "ncu, cache-control none": replaced("--cache-control", "none"),
            "ncu, no metric but the duration section": [*flags[:flags.index("--metrics")],
                                                        *flags[flags.index("--metrics") + 2:], *program]}


def row(task_id: str, language: str, repeat: int, device) -> dict:
    from kerneldojo.graders.compile import compile_submission
    from kerneldojo.graders.ncu import find_ncu, parse_ncu_csv
    from kerneldojo.sandbox.process import evidence_in_worker
    from kerneldojo.tasks import get_task

    task = get_task(task_id)
    source = (BASELINES / task_id / SOURCE_FILE[language]).read_text()
    build = compile_submission(task, source, language, device.arch)
    case = task.cases("bench")[0]
    seeds = [secrets.randbits(31) for _ in range(2)]
    expected = task.expected(*task.reference.make_inputs(case.shape, seeds[0], device.torch_device), shape=case.shape)
    specs = [(tuple(t.shape), t.dtype) for t in expected]
    folder = Path(tempfile.mkdtemp(prefix="evidence-cost-"))
    spec = {"task": task_id, "device": str(device.torch_device), "language": build.language,
            "source_path": str(build.source_path), "libraries": {d: str(p) for d, p in build.libraries.items()},
            "shape": case.shape, "seeds": seeds,
            "outputs": [[list(s), str(d).removeprefix("torch.")] for s, d in specs]}
    (folder / "spec.json").write_text(json.dumps(spec))
    ncu = find_ncu()
    target = [sys.executable, "-m", "kerneldojo.sandbox.worker.evidence_replay", str(folder / "spec.json")]
    out: dict = {"task": task_id, "language": language, "case": str(case), "seconds": {}, "launches": {}}
    commands = variants(ncu, target)
    commands["CUDA context only, bare"] = [sys.executable, "-c", CUDA_INIT]
    commands["CUDA context only, under ncu"] = [*commands["ncu (the judge's flags)"][:-len(target)],
                                                sys.executable, "-c", CUDA_INIT]
    for name, command in commands.items():
        runs = []
        for _ in range(repeat):
            seconds, done = timed(command, folder)
            runs.append(seconds)
        out["seconds"][name] = runs
        if name.startswith("ncu"):
            try:
                launches = parse_ncu_csv(done.stdout.decode(errors="replace"))
                out["launches"][name] = [len(launches), sorted({str(x["Kernel Name"])[:60] for x in launches})[:8]]
            except Exception as e:  # a variant ncu refuses is a finding, not a crash
                out["launches"][name] = f"{type(e).__name__}: {e}"[:300]
        if done.returncode:
            out.setdefault("errors", {})[name] = (done.stderr.decode(errors="replace")[-800:]
                                                  or done.stdout.decode(errors="replace")[-800:])
    runs = []
    for _ in range(repeat):
        started = time.perf_counter()
        reply = evidence_in_worker(device, task, build, case.shape, seeds, specs)
        runs.append(time.perf_counter() - started)
    out["seconds"]["the judge's pass (fresh worker + ncu)"] = runs
    out["judge_pass_problems"] = reply.get("problems") or reply.get("timeout") or reply.get("unavailable")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--rows", default="vector_add:triton,vector_add:cuda")
    args = parser.parse_args()
    from kerneldojo.sandbox.device import resolve_device

    device = resolve_device("cuda")
    args.out.mkdir(parents=True, exist_ok=True)
    rows = [row(*r.split(":"), args.repeat, device) for r in args.rows.split(",")]
    table = [f"median of {args.repeat} runs", "", "| task | language | variant | median s | launches |",
             "|---|---|---|---:|---|"]
    for r in rows:
        for name, runs in r["seconds"].items():
            found = r["launches"].get(name)
            count = found[0] if isinstance(found, list) else (found or "")
            table.append(f"| {r['task']} | {r['language']} | {name} | {statistics.median(runs):.2f} | {count} |")
    report.write(args.out, "evidence_cost", {"rows": rows}, table)

if __name__ == "__main__":
    main()
