"""Attacks on reuse (red team rounds 31 and 33): a verdict is served again only under the judge's own result-cache key
and rules. Round 33: the service kept a second store of verdicts, keyed by the source alone, which served a timed
`ok` the sampled evidence pass never checked (every later submission of the string, any token) and a CPU-mode `ok`
to a GPU job."""

from __future__ import annotations

from served import ScriptedExecutor

from kerneldojo.batch import record_of, submission
from kerneldojo.batch.store import ResultStore
from kerneldojo.judge import versions
from kerneldojo.result import EvalResult, Evidence
from kerneldojo.service.jobs import JobQueue
from kerneldojo.tasks import get_task

SOURCE = get_task("vector_add").starter("triton") + "\n# forges its timing; the evidence pass catches it when drawn\n"


def gpu_result(status: str, checked: bool) -> EvalResult:
    ok = status == "ok"
    result = EvalResult(task="vector_add", language="triton", device="NVIDIA H100 80GB HBM3", mode="gpu",
                        status=status, versions=versions(), timed=ok, speedup=2.6 if ok else None)
    if checked:
        result.evidence = Evidence(case="n=16777216 float32", claimed_ms=0.01)
    return result


def sampled_pool() -> ScriptedExecutor:
    """A GPU pool with evidence="sampled" over this cheat: its first step not drawn (`ok`, unchecked), every later
    one drawn (`flagged`)."""
    return ScriptedExecutor(lambda n, task, language: gpu_result("ok", False) if n == 0 else
                            gpu_result("flagged", True), slots=["cuda:0"])


def test_an_unchecked_ok_and_a_cpu_mode_ok_are_not_served_again(tmp_path):
    store = ResultStore(tmp_path / "results.jsonl")
    cpu_ok = EvalResult(task="vector_add", language="triton", device="cpu", mode="cpu", status="ok",
                        versions=versions())
    with store.writer() as append:  # a CPU batch's record of the same string, in the service's store
        append(record_of(submission("vector_add", SOURCE, "triton", "batch"), cpu_ok, "cpu"))
    pool = sampled_pool()
    queue = JobQueue(tmp_path / "state", store, pool, in_flight=1)
    try:
        verdicts = []
        for who in ("mallory", "mallory", "eve"):
            job = queue.submit(submission("vector_add", SOURCE, "triton", who), who)
            assert queue.wait(job, 30)
            verdicts.append((job.record["status"], job.reused))
    finally:
        queue.close()
    assert verdicts == [("ok", False), ("flagged", False), ("flagged", False)]  # each judged: the pass drawn after
    assert pool.calls == 3


def test_a_stored_ok_is_checked_again_on_fresh_inputs_before_it_is_served(tmp_path):
    """Red team round 61: `ok` was stored as if the source alone decided it, but the inputs it was checked on are a
    random draw: a kernel wrong on one input in six, resubmitted byte for byte once a variant's draw passed, was paid
    `ok` from then on. Here the lucky draw is planted in the cache; the resubmission is checked again and is `wrong`,
    while an honest kernel's stored `ok` is served (`reused`)."""
    from kerneldojo.judge import Judge

    judge = Judge("cpu", seeds=1, result_cache=tmp_path / "results")
    task = get_task("vector_add")
    honest = task.starter("triton")
    wrong = honest.replace("x + y", "x + y + (x > 1.0)")
    assert wrong != honest
    lucky = judge.evaluate(task, honest)
    assert lucky.status == "ok" and not lucky.reused
    judge.result_cache.put(judge._result_key(task, "triton", wrong), lucky)
    again = judge.evaluate(task, wrong)
    assert again.status == "wrong" and not again.reused, again.messages
    assert "did not hold on fresh inputs" in again.messages[-1]
    served = judge.evaluate(task, honest)
    assert served.status == "ok" and served.reused
