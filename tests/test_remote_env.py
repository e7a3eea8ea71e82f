"""A remote env: the same KernelEnv with its steps judged by a kerneldojo service on 127.0.0.1."""

from __future__ import annotations

import asyncio

import gymnasium
import pytest
import submissions as subs
from gymnasium.utils.env_checker import check_env
from served import served_in_thread

import kerneldojo
from kerneldojo.env.remote import AsyncRemoteJudge, RemoteError, RemoteJudge
from kerneldojo.service import ServiceConfig, load_tokens


@pytest.fixture(scope="module")
def url(tmp_path_factory):
    tokens = load_tokens('{"tokens": {"trainer": {"secret": "s3cret"}}}')
    with served_in_thread(ServiceConfig(state_dir=tmp_path_factory.mktemp("remote"), devices="cpu:1",
                                        tokens=tokens)) as url:  # fmt: skip
        yield url


def test_check_env_and_an_episode(url):
    env = kerneldojo.make("vector_add", remote=url, token="s3cret", max_turns=4)
    assert isinstance(env.unwrapped.judge, RemoteJudge)
    check_env(env.unwrapped, skip_render_check=True)
    obs, info = env.reset(seed=0)
    steps = [subs.VECTOR_ADD_TRITON, subs.VECTOR_ADD_OFF_BY_ONE, subs.VECTOR_ADD_SYNTAX_ERROR, obs["starter"]]
    statuses, rewards = [], []
    for n, source in enumerate(steps, 1):
        obs, reward, terminated, truncated, info = env.step(source)
        statuses.append(info["status"])
        rewards.append(reward)
        assert obs["turn"] == n and obs["feedback"] and terminated is False and truncated is (n == 4)
    assert statuses == ["ok", "wrong", "compile_error", "ok"]
    assert rewards == [1.0, 0.0, 0.0, 1.0]


def test_the_reward_is_the_callers(url):
    env = kerneldojo.make("vector_add", remote=url, token="s3cret", reward={"correct": 0.25})
    env.reset()
    assert env.step(subs.VECTOR_ADD_TRITON)[1] == 0.25


def test_a_wrong_token_is_a_clear_error(url):
    env = kerneldojo.make("vector_add", remote=url, token="wrong")
    env.reset()
    with pytest.raises(RemoteError, match="401 missing or unknown token"):
        env.step(subs.VECTOR_ADD_TRITON)


@pytest.mark.parametrize("action", ["NUL byte", "over the size limit"])
def test_a_submission_the_service_refuses_is_a_compile_error_as_locally(url, action):
    """Red team round 51: a source the local env scores `compile_error` (a NUL byte, more than MAX_SOURCE_CHARS), which
    the service answers with a 422, raised out of the remote env's `step`: a rollout that crashed, which a trainer
    may drop, dodged the failure's reward."""
    source = {"NUL byte": subs.VECTOR_ADD_TRITON + "# \0\n", "over the size limit": "#" * 200_001 + "\n"}[action]
    for env in (kerneldojo.make("vector_add", remote=url, token="s3cret"), kerneldojo.make("vector_add", device="cpu")):
        env.reset()
        _, reward, _, _, info = env.step(source)
        assert info["status"] == "compile_error" and reward == env.unwrapped.judge.reward("compile_error", None), info


def test_a_body_over_the_services_limit_is_refused_as_the_submissions():
    """A 413 (a service whose body limit is under what a source of MAX_SOURCE_CHARS can take) is the submission's
    too: `Refused`, which the env scores as a compile error; a task the service lacks stays the caller's error."""
    import httpx

    from kerneldojo.env.remote import Refused, _raise_for

    request = httpx.Request("POST", "http://judge/evaluate")
    with pytest.raises(Refused, match="request body over"):
        _raise_for(httpx.Response(413, json={"detail": "request body over 1048576 bytes"}, request=request))
    with pytest.raises(ValueError, match="unknown task") as raised:
        _raise_for(httpx.Response(422, json={"detail": "unknown task 'softmx'"}, request=request))
    assert not isinstance(raised.value, Refused)


def test_async_vector_env_over_remote_envs(url):
    envs = gymnasium.vector.AsyncVectorEnv(
        [lambda: gymnasium.make("kerneldojo/vector_add-v0", remote=url, token="s3cret", max_turns=2)] * 2,
        shared_memory=False)  # fmt: skip
    try:
        envs.reset(seed=0)
        _, rewards, _, _, infos = envs.step([subs.VECTOR_ADD_TRITON, subs.VECTOR_ADD_OFF_BY_ONE])
    finally:
        envs.close()
    assert list(infos["status"]) == ["ok", "wrong"] and list(rewards) == [1.0, 0.0]


def test_async_client_with_many_requests_in_flight(url):
    async def run():
        async with AsyncRemoteJudge(url, token="s3cret") as judge:
            sources = [subs.VECTOR_ADD_TRITON, subs.VECTOR_ADD_SYNTAX_ERROR] * 8
            return await asyncio.gather(*(judge.evaluate("vector_add", s) for s in sources))

    results = asyncio.run(run())
    assert [r.status for r in results] == ["ok", "compile_error"] * 8


def test_a_sampled_services_flag_cannot_be_scored_by_an_unbounded_reward():
    """Red team round 36: a remote env with kevin's reward (no maximum) against a service whose evidence pass is
    sampled got a ValueError from the fine, which the env took for a language error and scored as a compile error
    (0, not even the flag's -1). The pairing is a clear error now."""
    from kerneldojo.graders.reward import RewardConfig
    from kerneldojo.judge import versions
    from kerneldojo.result import EvalResult, Evidence

    flagged = EvalResult(task="vector_add", language="triton", device="gpu", mode="gpu", status="flagged",
                         versions=versions(), evidence=Evidence(one_in=8))
    job = {"id": "j1", "state": "done", "result": flagged.model_dump(mode="json")}
    with pytest.raises(RemoteError, match="speedup_max"):
        RemoteJudge("http://127.0.0.1:9", reward=RewardConfig.preset("kevin"))._verdict(job)
    assert RemoteJudge("http://127.0.0.1:9")._verdict(job).reward == RewardConfig().audited(8)


def test_a_services_retry_after_and_reads_are_bounded():
    """Red team round 84: the client trusted Retry-After (a huge, negative or non-numeric one) and read with no
    timeout, so a service could hold a trainer for ever or crash its step."""
    import httpx

    from kerneldojo.env import remote

    def wait(status: int, value: str | None) -> float | None:
        headers = {} if value is None else {"Retry-After": value}
        return remote._retry_after(httpx.Response(status, headers=headers))

    assert wait(503, "1e12") == remote.RETRY_AFTER_CAP_S
    assert wait(503, "Wed, 21 Oct 2026 07:28:00 GMT") == wait(503, "-5") == wait(503, "nan") == 1.0
    assert wait(503, None) == 1.0 and wait(429, "2") == 2.0 and wait(429, None) is None and wait(500, "9") is None
    assert remote._client_timeout(600.0).read == 660.0
