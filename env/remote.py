"""Clients of a kerneldojo service (`kerneldojo serve`): the evaluator a remote env steps through, and an
async one for trainers with many requests in flight.

    env = kerneldojo.make("softmax", remote="http://judge:8000", token="...")   # steps judged by the service
    judge = RemoteJudge("http://judge:8000", token="...")
    judge.evaluate("softmax", source)                                         # an EvalResult

    async with AsyncRemoteJudge("http://judge:8000", token="...") as judge:
        results = await asyncio.gather(*(judge.evaluate("gelu", s) for s in sources))

The reward is the caller's: each verdict gets `reward(status, speedup, coverage)` from this side's
RewardConfig, so envs with different reward presets can share one service.
"""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass

import httpx

from kerneldojo.graders.compile import LanguageError
from kerneldojo.graders.reward import RewardConfig
from kerneldojo.result import EvalResult

RETRIES = 5  # for 429 (rate limit) and 503 (starting), honouring Retry-After
RETRY_AFTER_CAP_S = 60.0
POLL_S = 0.5


class RemoteError(RuntimeError):
    """The service refused the request (token, quota, rate) or could not evaluate it."""


class Refused(LanguageError):
    """The service refused the submission itself (422: its source or its language; 413: its size): the agent's
    mistake, which an env reports as a compile error, as it does a language the task does not take (red team round
    51: a NUL byte or a source over the size limit, a compile error locally, raised out of a remote env's `step`)."""


@dataclass(frozen=True)
class RemoteDevice:
    name: str
    mode: str


def _body(task, source: str, language: str | None, label: str | None, public: bool) -> dict:
    return {"task": getattr(task, "id", task), "source": source, "language": language, "label": label,
            "public": public}  # fmt: skip


def _detail(response: httpx.Response) -> str:
    try:
        return str(response.json().get("detail"))
    except ValueError:
        return response.text[:500]


def _retry_after(response: httpx.Response) -> float | None:
    """Seconds to wait before retrying, or None when retrying will not help. A service's word, bounded: a trainer
    never waits on it for ever (red team round 84)."""
    if response.status_code == 503 or (response.status_code == 429 and "Retry-After" in response.headers):
        try:
            seconds = float(response.headers.get("Retry-After", 1))
        except ValueError:  # an HTTP date, or nothing a number
            seconds = 1.0
        return min(seconds, RETRY_AFTER_CAP_S) if math.isfinite(seconds) and seconds >= 0 else 1.0
    return None


def _client_timeout(timeout: float) -> httpx.Timeout:
    """A read waits for `/evaluate`'s own wait (`timeout`) and a minute more, not for ever."""
    return httpx.Timeout(30.0, read=timeout + 60.0)


def _raise_for(response: httpx.Response) -> None:
    if response.status_code == 413 or (response.status_code == 422 and "unknown task" not in _detail(response)):
        raise Refused(_detail(response))
    if response.status_code == 422:  # a task this service does not have: the caller's set-up, not the agent's
        raise ValueError(_detail(response))
    if response.status_code >= 400:
        raise RemoteError(f"{response.request.method} {response.request.url.path}: {response.status_code} "
                          f"{_detail(response)}")  # fmt: skip


class _Base:
    def __init__(self, url: str, token: str | None, reward: RewardConfig | None, timeout: float):
        self.url, self.timeout = url.rstrip("/"), timeout
        self.reward = reward or RewardConfig()
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._device: RemoteDevice | None = None

    def _verdict(self, job: dict) -> EvalResult | None:
        """The EvalResult of a finished job view, None while it runs."""
        if job["state"] == "failed":
            raise RemoteError(f"the service's judge failed on job {job['id']}: {job.get('error')}")
        if job["state"] != "done":
            return None
        result = EvalResult.model_validate(job["result"])
        try:
            result.reward = self.reward.of(result)
        except ValueError as e:  # the service samples its evidence pass; this reward has no maximum to fine it by
            raise RemoteError(f"job {job['id']}: {e} (the service runs the evidence pass on some steps only: give "
                              "the env a reward with a maximum, e.g. speedup_max)") from None
        return result


class RemoteJudge(_Base):
    """The evaluator of a remote KernelEnv: `evaluate(task, source, language)` over HTTP, blocking."""

    def __init__(self, url: str, token: str | None = None, reward: RewardConfig | None = None,
                 timeout: float = 600.0, label: str | None = None, public: bool = False):  # fmt: skip
        super().__init__(url, token, reward, timeout)
        self.label, self.public = label, public
        self._client = httpx.Client(base_url=self.url, headers=self._headers, timeout=_client_timeout(self.timeout))

    @property
    def device(self) -> RemoteDevice:
        """What the service judges on (its first slot)."""
        if self._device is None:
            self._device = RemoteDevice(**self._request("GET", "/health").json()["device"])
        return self._device

    def evaluate(self, task, source: str, language: str | None = None, **_) -> EvalResult:
        response = self._request("POST", "/evaluate", params={"timeout": self.timeout},
                                 json=_body(task, source, language, self.label, self.public))  # fmt: skip
        job = response.json()
        deadline = time.monotonic() + self.timeout
        while (result := self._verdict(job)) is None:
            if time.monotonic() > deadline:
                raise RemoteError(f"job {job['id']} not finished after {self.timeout:g} s")
            time.sleep(POLL_S)
            job = self._request("GET", f"/jobs/{job['id']}").json()
        return result

    def _request(self, method: str, path: str, **kwargs) -> httpx.Response:
        for _ in range(RETRIES):
            try:
                response = self._client.request(method, path, **kwargs)
            except httpx.TransportError as e:
                raise RemoteError(f"cannot reach the kerneldojo service at {self.url}: {e}") from None
            wait = _retry_after(response)
            if wait is None:
                break
            time.sleep(wait)
        _raise_for(response)
        return response

    def close(self) -> None:
        self._client.close()

    def __getstate__(self):  # an env crosses to AsyncVectorEnv's workers pickled: each makes its own client
        state = self.__dict__.copy()
        state.pop("_client")
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._client = httpx.Client(base_url=self.url, headers=self._headers, timeout=_client_timeout(self.timeout))


class AsyncRemoteJudge(_Base):
    """`await evaluate(task, source, language)` over one httpx.AsyncClient: many requests in flight."""

    def __init__(self, url: str, token: str | None = None, reward: RewardConfig | None = None,
                 timeout: float = 600.0, max_connections: int = 64):  # fmt: skip
        super().__init__(url, token, reward, timeout)
        self._client = httpx.AsyncClient(base_url=self.url, headers=self._headers,
                                         timeout=_client_timeout(timeout),
                                         limits=httpx.Limits(max_connections=max_connections))  # fmt: skip

    async def __aenter__(self) -> AsyncRemoteJudge:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._client.aclose()

    async def evaluate(self, task, source: str, language: str | None = None, label: str | None = None,
                       public: bool = False) -> EvalResult:  # fmt: skip
        response = await self._request("POST", "/evaluate", params={"timeout": self.timeout},
                                       json=_body(task, source, language, label, public))  # fmt: skip
        job = response.json()
        deadline = time.monotonic() + self.timeout
        while (result := self._verdict(job)) is None:
            if time.monotonic() > deadline:
                raise RemoteError(f"job {job['id']} not finished after {self.timeout:g} s")
            await asyncio.sleep(POLL_S)
            job = (await self._request("GET", f"/jobs/{job['id']}")).json()
        return result

    async def _request(self, method: str, path: str, **kwargs) -> httpx.Response:
        for _ in range(RETRIES):
            try:
                response = await self._client.request(method, path, **kwargs)
            except httpx.TransportError as e:
                raise RemoteError(f"cannot reach the kerneldojo service at {self.url}: {e}") from None
            wait = _retry_after(response)
            if wait is None:
                break
            await asyncio.sleep(wait)
        _raise_for(response)
        return response
