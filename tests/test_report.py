"""The HTML leaderboard as a person sees it: rendered by headless Chromium (Debian's, driven by playwright; no
browser is downloaded), with no console errors, every Plotly plot drawn as SVG, and a screenshot that is not
blank."""

from __future__ import annotations

import io
import shutil

import pytest
from test_store import record

from kerneldojo.batch.report import render_html

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]  # fmt: skip


def board_records() -> list[dict]:
    records = []
    for day, (ms, speedup) in enumerate([(2.0, 1.1), (1.2, 1.8), (0.9, 2.4)], 1):
        when = {"recorded_at": f"2026-01-0{day}T12:00:00+00:00", "task_hash": "v1", "protocol": 1}
        records.append(record(label=f"softmax-{day}", task="softmax", ms=ms, speedup=speedup, **when))
    records.append(record(label="gelu", task="gelu", ms=0.5, speedup=0.8, submitter="ann", **when))
    records.append(record(label="relu", task="relu", status="wrong", **when))
    for r in records:
        r["roofline_fraction"] = r["speedup"] and r["speedup"] / 4
    return records


def test_the_page_renders_in_chromium(tmp_path):
    if CHROMIUM is None:
        pytest.skip("no chromium binary (Debian: apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (the dev extra) is not installed")
    image = pytest.importorskip("PIL.Image", reason="pillow (the dev extra) is not installed")
    page_file = tmp_path / "board.html"
    page_file.write_text(render_html(board_records()))
    errors: list[str] = []
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch_persistent_context(
            str(tmp_path / "profile"), executable_path=CHROMIUM, headless=True, args=FLAGS,
            viewport={"width": 1280, "height": 2400})  # fmt: skip
        try:
            page = browser.new_page()
            page.on("console", lambda m: m.type == "error" and errors.append(m.text))
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(page_file.as_uri())
            page.wait_for_function("document.querySelectorAll('.js-plotly-plot .main-svg').length >= 3", timeout=30000)
            plots = page.eval_on_selector_all(".plotly-graph-div", "els => els.map(e => e.querySelectorAll("
                                              "'svg .trace, svg .point, svg .bars path').length)")  # fmt: skip
            cells = page.eval_on_selector_all("table td", "els => els.map(e => e.textContent)")
            png = page.screenshot(full_page=True)
        finally:
            browser.close()
    assert errors == []
    assert len(plots) == 3 and all(n > 0 for n in plots), plots  # each plot drew its data
    assert "softmax-3" in cells and "gelu (ann)" in cells and "0/1" in cells
    pixels = image.open(io.BytesIO(png)).convert("L")
    histogram = pixels.histogram()
    total = sum(histogram)
    mean = sum(i * n for i, n in enumerate(histogram)) / total
    variance = sum(n * (i - mean) ** 2 for i, n in enumerate(histogram)) / total
    assert variance > 100, f"the screenshot looks blank (grey-level variance {variance:.1f})"
