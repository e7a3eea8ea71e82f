"""A pytest plugin for device runs (`-p failures_plugin`, with baselines/bench on PYTHONPATH): each failed test's
report is appended to $KERNELDOJO_FAILURES as it happens, so a run cut at its time limit (no summary, no junit
file, and xdist prints failures only at the end) still says why each failure failed."""

import os


def pytest_runtest_logreport(report):
    path = os.environ.get("KERNELDOJO_FAILURES")
    if path and report.failed:
        with open(path, "a") as out:
            out.write(f"===== {report.nodeid} ({report.when})\n{str(report.longrepr)[-6000:]}\n")
