import os
import tempfile

import pytest
import torch

# Builds go to a fresh cache so tests see cold compiles and never reuse a developer's cache.
os.environ.setdefault("KERNELDOJO_CACHE", tempfile.mkdtemp(prefix="kerneldojo-test-cache-"))
# Every test's evaluation runs the judge: no verdict is reused from another test (test_speed turns it on).
os.environ.setdefault("KERNELDOJO_RESULT_CACHE", "off")

HAS_GPU = torch.cuda.is_available()


def pytest_collection_modifyitems(config, items):
    skip = pytest.mark.skip(reason="needs a CUDA GPU; run on the device with `pytest -m gpu`")
    for item in items:
        if "gpu" in item.keywords and not HAS_GPU:
            item.add_marker(skip)
    # KERNELDOJO_SHARD=i/n keeps every n-th test from the i-th: n pytest processes share one machine.
    if shard := os.environ.get("KERNELDOJO_SHARD"):
        index, count = (int(x) for x in shard.split("/"))
        kept = [item for i, item in enumerate(items) if i % count == index]
        config.hook.pytest_deselected(items=[item for item in items if item not in kept])
        items[:] = kept


@pytest.fixture(scope="session")
def cpu_judge():
    from kerneldojo.judge import Judge

    return Judge("cpu")


@pytest.fixture(scope="session")
def gpu_judge():
    from kerneldojo.judge import Judge

    return Judge("cuda", timing_budget_s=0.5, time_compiled_reference=False)


@pytest.fixture(scope="session")
def gpu_checker():
    """Correctness only: timing every solution belongs to baselines/bench/bench_baselines.py."""
    from kerneldojo.judge import Judge

    return Judge("cuda", timed=False)
