"""The judges as Ray actors, on a local Ray cluster in CPU mode: the same verdicts as the local pool, stored the
same way, and an actor killed mid-batch loses nothing (Ray restarts it and retries its evaluation)."""

from __future__ import annotations

import uuid

import pytest
import submissions as subs

from kerneldojo.batch import Submission, run_batch
from kerneldojo.batch.pool import GPUPool
from kerneldojo.batch.store import ResultStore

ray = pytest.importorskip("ray", reason="the ray extra is not installed: pip install -e '.[ray]'")

SOURCES = [subs.VECTOR_ADD_TRITON, subs.VECTOR_ADD_OFF_BY_ONE, subs.VECTOR_ADD_SYNTAX_ERROR]


@pytest.fixture(scope="module")
def pool():
    from kerneldojo.batch.ray_pool import RayPool

    try:
        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    except Exception as e:
        pytest.skip(f"cannot start a local Ray cluster: {e}")
    try:
        with RayPool("cpu:1") as pool:
            yield pool
    finally:
        ray.shutdown()


def test_same_statuses_as_the_local_pool_and_the_same_store(pool, tmp_path):
    jobs = [("vector_add", s, None) for s in SOURCES]
    with GPUPool("cpu:1") as local:
        expected = [r.status for r in local.evaluate_many(jobs)]
    assert expected == ["ok", "wrong", "compile_error"]
    batch = [Submission("vector_add", s, "triton", f"sub-{i}") for i, s in enumerate(SOURCES)]
    summary = run_batch(batch, tmp_path / "ray.jsonl", pool)
    assert (summary.evaluated, summary.failed) == (3, 0)
    records = sorted(ResultStore(tmp_path / "ray.jsonl").records(), key=lambda r: r["label"])
    assert [r["status"] for r in records] == expected
    assert all(r["hash"] == s.hash and r["slot"].endswith("/cpu") for r, s in zip(records, batch))

def test_an_actor_killed_mid_batch_is_restarted_and_its_work_redone(pool):
    nonce = uuid.uuid4().hex  # sources no judge has cached
    futures = [pool.submit("vector_add", subs.VECTOR_ADD_TRITON + f"\n# {nonce} {i}\n") for i in range(3)]
    (actor,) = pool.actors
    pid = ray.get(actor.pid.remote())
    futures[0].result(timeout=300)
    ray.kill(actor, no_restart=False)  # as a lost node would: the evaluation in flight dies with it
    assert [f.result(timeout=300).status for f in futures] == ["ok"] * 3
    assert ray.get(actor.pid.remote()) != pid  # a new process took over
