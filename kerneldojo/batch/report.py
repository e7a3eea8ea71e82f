"""The leaderboard as one static HTML page: the standings and per-GPU summary as tables, and interactive Plotly
plots (speedup per task, the roofline share against the speedup, the history of the best time). plotly.js is
inlined, so the page works offline and the service can serve the same string (`render_html`)."""

from __future__ import annotations

import html
from collections.abc import Iterable
from datetime import datetime, timezone

from .leaderboard import FAST_P, Board, build_board, fmt, shown_ms, time_ms, who

PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1200px; color: #222; }}
table {{ border-collapse: collapse; margin: 1em 0; font-size: 14px; }}
th, td {{ padding: 4px 10px; border-bottom: 1px solid #ddd; text-align: left; }}
th {{ background: #f3f3f3; }} td.num {{ text-align: right; font-variant-numeric: tabular-nums; }}
.note {{ color: #666; font-size: 13px; }}
</style></head><body>
<h1>{title}</h1>
<p class="note">Generated {generated}. Only correct results (status ok, no anti-cheat check fired) rank; per task,
only results of the newest task version and judge protocol are compared{versions_note}. fast_p is the share of tasks
whose best result is correct and more than p times as fast as eager PyTorch (KernelBench, Ouyang et al., 2025).</p>
<h2>Summary per GPU</h2>
{summary}
<h2>Best result per task and GPU</h2>
{standings}
{notes}
<h2>Speedup per task</h2>
{speedup_plot}
<h2>Roofline</h2>
{roofline_plot}
<h2>Best time over time</h2>
{history_plot}
</body></html>
"""


def _table(header: tuple[str, ...], rows: list[tuple], numeric: set[int]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(f"<td{' class=num' if i in numeric else ''}>{html.escape(str(c))}</td>"
                         for i, c in enumerate(row)) + "</tr>"
        for row in rows)  # fmt: skip
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _figures(board: Board) -> list:
    import plotly.graph_objects as go

    layout = {"template": "plotly_white", "height": 420, "margin": {"t": 30}}
    best = [s for s in board.standings if s.best and time_ms(s.best) is not None]
    devices = sorted({s.device for s in best})

    speedup = go.Figure(layout=layout)
    for device in devices:
        rows = [s for s in best if s.device == device]
        for key, name in (("speedup", "eager"), ("speedup_vs_compile", "torch.compile")):
            speedup.add_bar(x=[s.task for s in rows], y=[s.best.get(key) for s in rows], name=f"{device}: x {name}",
                            customdata=[who(s.best) for s in rows],
                            hovertemplate="%{x}: %{y:.2f}x<br>%{customdata}<extra></extra>")  # fmt: skip
    speedup.add_hline(y=1.0, line_dash="dot", line_color="gray")
    speedup.update_layout(barmode="group", yaxis_title="speedup (x)", yaxis_type="log")

    roofline = go.Figure(layout=layout)
    for device in devices:
        rows = [s for s in best if s.device == device and s.best.get("roofline_fraction") is not None]
        roofline.add_scatter(
            x=[s.best.get("speedup") for s in rows], y=[100 * s.best["roofline_fraction"] for s in rows],
            text=[s.task for s in rows], mode="markers+text", textposition="top center", name=device,
            hovertemplate="%{text}: %{x:.2f}x eager, %{y:.0f}% of the roofline<extra></extra>")
    roofline.update_layout(xaxis_title="speedup over eager (x)", xaxis_type="log", yaxis_title="% of the roofline",
                           yaxis_range=[0, 105])  # fmt: skip

    history = go.Figure(layout=layout)
    for s in board.standings:
        points = [r for r in s.history if r.get("recorded_at")]
        if points:
            history.add_scatter(x=[r["recorded_at"] for r in points], y=[time_ms(r) for r in points],
                                mode="lines+markers", line_shape="hv", name=f"{s.task} ({s.device})",
                                customdata=[who(r) for r in points],
                                hovertemplate="%{y:.4g} ms<br>%{customdata}<extra></extra>")  # fmt: skip
    history.update_layout(xaxis_title="recorded", yaxis_title="best time, ms (geomean over bench sizes)",
                          yaxis_type="log")  # fmt: skip
    for fig in (speedup, roofline, history):
        if not fig.data:  # an empty plot says why rather than showing bare axes
            fig.add_annotation(text="nothing timed yet (CPU mode runs no timing)", showarrow=False,
                               xref="paper", yref="paper", x=0.5, y=0.5)  # fmt: skip
    return [speedup, roofline, history]


def render_html(records: Iterable[dict], title: str = "kerneldojo leaderboard", all_versions: bool = False) -> str:
    """The whole page as a string (plotly.js inlined: about 4.5 MB)."""
    board = build_board(records, all_versions)
    summary = _table(
        ("gpu", "tasks solved", "timed", "geomean x eager", *(f"fast_{p:.1f}" for p in FAST_P)),
        [(d.device, f"{d.solved}/{d.tasks}", d.timed, fmt(d.geomean_speedup, ".2f"),
          *(fmt(d.fast_p[p], ".2f") for p in FAST_P)) for d in board.summaries],
        numeric={2, 3, 4, 5, 6})  # fmt: skip
    rows = []
    for s in board.standings:
        b = s.best or {}
        roofline = b.get("roofline_fraction")
        rows.append((s.task, s.device, (s.version[0] or "unknown")[:8], who(b) if b else "-", b.get("language") or "-",
                     shown_ms(b) if b else "-", fmt(b.get("speedup"), ".2f"), fmt(b.get("speedup_vs_compile"), ".2f"),
                     fmt(None if roofline is None else 100 * roofline, ".0f"), (b.get("recorded_at") or "-")[:16],
                     f"{s.correct}/{s.submitted - s.not_run}", s.not_run))  # fmt: skip
    standings = _table(("task", "gpu", "task version", "best", "lang", "ms (largest bench) [CI]", "x eager",
                        "x compile", "% roofline", "when (UTC)", "correct", "compiled, not run"), rows,
                       numeric={5, 6, 7, 8, 10, 11})  # fmt: skip
    notes = []
    if board.other_versions:
        notes.append(f"{board.other_versions} result(s) of older task versions or judge protocols are not compared.")
    figures = _figures(board)
    plots = [fig.to_html(full_html=False, include_plotlyjs=(i == 0), config={"displaylogo": False})
             for i, fig in enumerate(figures)]  # fmt: skip
    return PAGE.format(
        title=html.escape(title), generated=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        versions_note=" (here: every version, apart)" if all_versions else "", summary=summary, standings=standings,
        notes="".join(f'<p class="note">{html.escape(n)}</p>' for n in notes),
        speedup_plot=plots[0], roofline_plot=plots[1], history_plot=plots[2])  # fmt: skip
