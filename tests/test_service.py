"""The judge as an HTTP service: the routes, tokens, limits, errors, metrics, a short load test, and a kill -9
mid-batch that loses no finished result and evaluates nothing twice."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
import submissions as subs
from served import kill_process, serve_process, served_in_thread, wait_healthy

from kerneldojo.batch.store import ResultStore
from kerneldojo.service import ServiceConfig, load_tokens

TOKENS = {"tokens": {
    "alice": {"secret": "alice-secret"},
    "bob": {"secret": "bob-secret"},
    "capped": {"secret": "capped-secret", "quota": 1},
    "slow": {"secret": "slow-secret", "rate": 0.01, "burst": 2},
}}  # fmt: skip


def auth(name: str) -> dict:
    return {"Authorization": f"Bearer {name}-secret"}


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    state = tmp_path_factory.mktemp("service")
    config = ServiceConfig(state_dir=state, devices="cpu:1", tokens=load_tokens(json.dumps(TOKENS)),
                           max_request_bytes=300_000)  # fmt: skip
    with served_in_thread(config) as url:
        yield url, ResultStore(config.store_path)


def evaluate(url: str, who: str, source: str, **extra) -> httpx.Response:
    return httpx.post(f"{url}/evaluate", json={"task": "vector_add", "source": source, **extra}, headers=auth(who),
                      timeout=300)  # fmt: skip


def test_evaluate_waits_for_the_verdict_and_reuses_it(service):
    url, store = service
    first = evaluate(url, "alice", subs.VECTOR_ADD_TRITON)
    assert first.status_code == 200, first.text
    job = first.json()
    assert job["state"] == "done" and job["result"]["status"] == "ok" and not job["reused"]
    again = evaluate(url, "bob", subs.VECTOR_ADD_TRITON).json()
    assert again["reused"] and again["result"]["status"] == "ok"
    assert sum(r["hash"] == job["hash"] for r in store.records()) == 1  # judged once


def test_bad_requests_get_a_4xx_naming_the_problem(service):
    url, _ = service
    h = auth("alice")
    cases = [
        (httpx.post(f"{url}/evaluate", json={"source": "x"}, headers=h), 422, "task: Field required"),
        (httpx.post(f"{url}/evaluate", content=b"{not json", headers={**h, "Content-Type": "application/json"}), 422,
         "JSON decode error"),
        (httpx.post(f"{url}/evaluate", content=b"task=x", headers=h), 422, "expected a JSON object"),
        (httpx.post(f"{url}/evaluate", json={"task": "softmx", "source": "x"}, headers=h), 422, "did you mean softmax"),
        (httpx.post(f"{url}/evaluate", json={"task": "vector_add", "source": subs.VECTOR_ADD_TRITON,
                                             "language": "fortran"}, headers=h), 422, "fortran"),
        (httpx.get(f"{url}/jobs/nope", headers=h), 404, "no job 'nope'"),
        (httpx.get(f"{url}/tasks/nope", headers=h), 404, "unknown task"),
        (httpx.get(f"{url}/tasks"), 401, "Bearer"),
        (httpx.get(f"{url}/tasks", headers={"Authorization": "Bearer wrong"}), 401, "unknown token"),
        (httpx.post(f"{url}/evaluate", json={"task": "vector_add", "source": "x" * 400_000}, headers=h), 413,
         "request body over 300000 bytes"),
    ]
    for response, code, words in cases:
        assert response.status_code == code, (words, response.text)
        assert words in response.json()["detail"], response.text
        assert "Traceback" not in response.text


def test_an_internal_error_is_a_500_without_a_traceback(service, monkeypatch):
    from kerneldojo.batch import leaderboard

    def broken(records):
        raise RuntimeError("secret internals")

    monkeypatch.setattr(leaderboard, "standings", broken)
    response = httpx.get(f"{service[0]}/leaderboard", headers=auth("alice"))
    assert response.status_code == 500
    assert response.json() == {"detail": "internal error (RuntimeError); the service logged it"}


def test_quota_and_rate_limit(service):
    url = service[0]
    assert evaluate(url, "capped", subs.VECTOR_ADD_SYNTAX_ERROR).status_code == 200
    over = evaluate(url, "capped", subs.VECTOR_ADD_SYNTAX_ERROR)
    assert over.status_code == 429 and "quota of 1 evaluations for 'capped' used up" in over.json()["detail"]
    codes = [httpx.get(f"{url}/tasks", headers=auth("slow")) for _ in range(3)]
    assert [r.status_code for r in codes] == [200, 200, 429]
    assert "rate limit" in codes[2].json()["detail"] and int(codes[2].headers["Retry-After"]) >= 1


def test_sources_are_private_unless_public(service):
    url = service[0]
    private = evaluate(url, "alice", subs.VECTOR_ADD_RAISES).json()
    public = evaluate(url, "alice", subs.VECTOR_ADD_OFF_BY_ONE, public=True).json()
    assert private["source"] == subs.VECTOR_ADD_RAISES  # the owner sees it
    seen_by_bob = [httpx.get(f"{url}/jobs/{j['id']}", headers=auth("bob")).json() for j in (private, public)]
    assert seen_by_bob[0]["source"] is None and seen_by_bob[0]["result"]["status"] == "runtime_error"
    assert seen_by_bob[1]["source"] == subs.VECTOR_ADD_OFF_BY_ONE and seen_by_bob[1]["result"]["status"] == "wrong"


def test_a_job_streams_its_state_as_server_sent_events(service):
    url = service[0]
    job = httpx.post(f"{url}/jobs", json={"task": "vector_add", "source": subs.VECTOR_ADD_TRITON + "\n# sse\n"},
                     headers=auth("alice")).json()  # fmt: skip
    events = []
    with httpx.stream("GET", f"{url}/jobs/{job['id']}/events", headers=auth("alice"), timeout=300) as stream:
        kind = None
        for line in stream.iter_lines():
            if line.startswith("event: "):
                kind = line[7:]
            elif line.startswith("data: "):
                events.append((kind, json.loads(line[6:])))
    assert events[-1][0] == "result" and events[-1][1]["result"]["status"] == "ok"
    assert all(kind == "state" for kind, _ in events[:-1])


def test_batch_tasks_leaderboard_and_metrics(service):
    url, h = service[0], auth("bob")
    sources = [subs.VECTOR_ADD_TRITON, subs.VECTOR_ADD_OFF_BY_ONE, subs.VECTOR_ADD_SYNTAX_ERROR]
    batch = httpx.post(f"{url}/batches", json={"submissions": [{"task": "vector_add", "source": s} for s in sources]},
                       headers=h).json()  # fmt: skip
    deadline = time.monotonic() + 300
    while not (shown := httpx.get(f"{url}/batches/{batch['id']}", headers=h).json())["done"]:
        assert time.monotonic() < deadline
        time.sleep(0.3)
    assert [j["result"]["status"] for j in shown["jobs"]] == ["ok", "wrong", "compile_error"]
    tasks = httpx.get(f"{url}/tasks", headers=h).json()
    assert any(t["id"] == "vector_add" and "triton" in t["languages"] for t in tasks)
    assert "solution" in httpx.get(f"{url}/tasks/vector_add", headers=h).json()["starter"]
    board = httpx.get(f"{url}/leaderboard", headers=h).json()
    assert any(s["task"] == "vector_add" and s["best"]["status"] == "ok" for s in board)
    page = httpx.get(f"{url}/leaderboard.html", headers=h)
    assert page.headers["content-type"].startswith("text/html") and "vector_add" in page.text
    metrics = httpx.get(f"{url}/metrics").text
    for line in ('kerneldojo_evaluations_total{status="ok"}', 'kerneldojo_evaluations_total{status="wrong"}',
                 "kerneldojo_queue_depth 0.0", 'kerneldojo_phase_seconds_bucket{le="0.01",phase="judge"}',
                 'kerneldojo_jobs_total{outcome="reused"}'):  # fmt: skip
        assert line in metrics, line
    assert "/evaluate" in httpx.get(f"{url}/openapi.json").json()["paths"]
    assert httpx.get(f"{url}/docs").status_code == 200


def test_load_forty_requests_from_eight_clients(service):
    """Reused verdicts and bad requests from concurrent clients: every one answered, none a 5xx, judged once."""
    url, store = service
    bad = {"task": "vector_add", "source": subs.VECTOR_ADD_TRITON, "language": "cobol"}
    good = {"task": "vector_add", "source": subs.VECTOR_ADD_TRITON}

    def call(i: int) -> int:
        kind = i % 4
        if kind == 3:
            return httpx.get(f"{url}/health").status_code
        body = bad if kind == 2 else good
        who = auth("alice" if i % 2 else "bob")
        return httpx.post(f"{url}/evaluate", json=body, headers=who, timeout=300).status_code

    with ThreadPoolExecutor(8) as clients:
        codes = list(clients.map(call, range(40)))
    assert len(codes) == 40 and set(codes) <= {200, 422}, codes
    assert codes.count(422) == 10
    hashes = [r["hash"] for r in store.records()]
    assert len(hashes) == len(set(hashes))  # nothing judged twice


def test_service_killed_mid_batch_resumes_without_losing_or_repeating(tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    store = ResultStore(state / "results.jsonl")
    sources = [subs.VECTOR_ADD_TRITON + f"\n# variant {i}\n" for i in range(6)]
    proc, url = serve_process(state, "--devices", "cpu:1")
    try:
        wait_healthy(url, proc=proc)
        batch = httpx.post(f"{url}/batches", json={"submissions": [{"task": "vector_add", "source": s}
                                                                   for s in sources]}).json()  # fmt: skip
        deadline = time.monotonic() + 300
        while not list(store.records()):
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.05)
    finally:
        kill_process(proc)  # SIGKILL, mid-batch
    finished_before = {r["hash"] for r in store.records()}
    assert 1 <= len(finished_before) < len(sources), "the batch was not caught mid-way"
    proc, url = serve_process(state, "--devices", "cpu:1")
    try:
        wait_healthy(url, proc=proc)
        deadline = time.monotonic() + 300
        while not (shown := httpx.get(f"{url}/batches/{batch['id']}").json())["done"]:
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.3)
    finally:
        kill_process(proc)
    assert [j["result"]["status"] for j in shown["jobs"]] == ["ok"] * len(sources)
    records = list(store.records())
    assert len(records) == len(sources)  # each evaluated once: the finished ones were kept, not redone
    assert {r["hash"] for r in records} == {j["hash"] for j in shown["jobs"]} >= finished_before
