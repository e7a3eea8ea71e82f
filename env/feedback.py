"""The text an agent reads after a step: what happened, where it went wrong, how fast it ran."""

from __future__ import annotations

from kerneldojo.graders.ncu import feedback_lines
from kerneldojo.result import STATUS_MEANING, EvalResult, printable


def render_feedback(result: EvalResult, clocks: bool = False) -> str:
    """With `clocks`, also where the judge's time went (phases) or that the result was reused. The env's
    observation leaves them out: gymnasium expects the same observation for the same action and seed."""
    lines = [f"Status: {result.status} ({STATUS_MEANING[result.status]})."]
    lines += [printable(m) for m in result.messages]  # stored results of older judges may hold raw ones
    if result.status == "ok" and result.max_abs_error is not None:
        lines.append(f"Max abs error over {result.cases_checked} checked input sets: {result.max_abs_error:.3g}")
    if result.timed:
        lines.append(f"Timed on {result.device} (median of repeated runs, CUDA events, cold L2):")
        for t in result.timings:
            row = f"  {t.case}: {t.submission.median_ms:.4g} ms"
            if t.eager:
                row += f", eager {t.eager.median_ms:.4g} ms ({t.speedup:.2f}x)"
            if t.compiled:
                row += f", torch.compile {t.compiled.median_ms:.4g} ms ({t.speedup_vs_compile:.2f}x)"
            if t.roofline_fraction:
                row += f", {100 * t.roofline_fraction:.0f}% of roofline"
            lines.append(row)
        if result.speedup is not None:
            lines.append(f"Speedup over eager PyTorch (geometric mean): {result.speedup:.2f}x")
    if clocks and result.reused:
        lines.append("Reused: an identical submission was evaluated before on this device and software; "
                     "this is its result (pass retime=True to measure again).")
    elif clocks and result.phases:
        spent = ", ".join(f"{name.replace('_', ' ')} {s:.2f}" for name, s in result.phases.items() if s >= 0.005)
        lines.append(f"Judged in {result.wall_s:.2f} s" + (f" ({spent})" if spent else "") + ".")
    if result.ncu:  # asked for with feedback="profile"
        lines += [result.ncu.note] if result.ncu.note else feedback_lines(
            result.ncu.kernels, result.ncu.min_bytes, result.ncu.case or "")
    lines.append(f"Reward: {result.reward:.3f}")
    return "\n".join(lines)
