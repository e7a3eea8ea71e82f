"""kerneldojo as an OpenEnv environment (openenv-core 0.3; `pip install kerneldojo[openenv]`): a server and
its typed client over the same `KernelEnv` (env/kernel_env.py) as the gymnasium env.

    # server (any ASGI server; loopback unless the judge's sandbox is what you trust):
    app = create_server(device="auto")                  # or remote="http://judge:8000" to judge on a service
    uvicorn.run(app, host="127.0.0.1", port=8010)

    # client: one WebSocket session per episode
    with KernelDojoClient(base_url="http://127.0.0.1:8010").sync() as env:
        result = env.reset(task="softmax")              # result.observation.prompt / .reference / .starter
        result = env.step(KernelAction(source=my_kernel))
        result.reward, result.done, result.observation.feedback

An episode ends (`done`) at the first correct kernel or after `max_turns` submissions. The stateless HTTP
routes (`POST /reset`, `POST /step`) make a fresh env per request: `/step` alone judges one submission of the
server's default `task`.
"""

from __future__ import annotations

from typing import Any

from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient
from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field

from kerneldojo.integrations import kernel_env
from kerneldojo.tasks import get_task

__all__ = ["KernelAction", "KernelDojoClient", "KernelDojoEnvironment", "KernelObservation", "KernelState",
           "create_server"]


class KernelAction(Action):
    source: str = Field(description="The submission: Triton/Python, CUDA C++ or CuTe source")


class KernelObservation(Observation):
    task: str = ""
    prompt: str = Field("", description="Instructions and the submission contract")
    reference: str = Field("", description="The task's PyTorch reference.py")
    starter: str = Field("", description="A correct naive solution")
    feedback: str = Field("", description="The last verdict rendered for the agent; empty after reset")
    status: str | None = Field(None, description="The last verdict's status (ok, wrong, compile_error, ...)")
    episode_reward: float | None = Field(None, description="What to pay the episode if it is paid one figure: "
                                         "the step's reward capped by its lowest flagged step's (KernelEnv, Rewards)")
    turn: int = 0


class KernelState(State):
    task: str | None = None
    language: str | None = None
    status: str | None = None


class KernelDojoEnvironment(Environment[KernelAction, KernelObservation, KernelState]):
    """One session's episodes: `reset(task=..., language=...)`, then `step(KernelAction(source=...))`."""

    SUPPORTS_CONCURRENT_SESSIONS = True  # each session steps its own KernelEnv; the judge is per process

    def __init__(self, task: str | None = None, device: str = "auto", remote: str | None = None,
                 token: str | None = None, max_turns: int = 4):  # fmt: skip
        super().__init__()
        self.default_task, self.max_turns = task, max_turns
        self.judging = {"device": device, "remote": remote, "token": token}
        self.env, self._done = None, False
        self._state = KernelState()

    def reset(self, seed: int | None = None, episode_id: str | None = None, task: str | None = None,
              language: str | None = None, **_: Any) -> KernelObservation:  # fmt: skip
        task = task or self.default_task
        if task is None:
            raise ValueError("reset needs a task: reset(task='softmax'); `kerneldojo tasks` lists them")
        get_task(task)  # an unknown id gets the nearest names
        self.env = kernel_env(task, language=language, max_turns=self.max_turns, **self.judging)
        observation, info = self.env.reset(seed=seed)
        self._state = KernelState(episode_id=episode_id, task=task, language=info["language"])
        self._done = False
        return self._observation(observation)

    def step(self, action: KernelAction, timeout_s: float | None = None, **_: Any) -> KernelObservation:
        if self.env is None and self.default_task is not None:
            self.reset()  # a stateless HTTP /step: one submission of the server's task
        if self.env is None:
            raise RuntimeError("no episode in progress: call reset(task=...) first")
        if self._done:
            raise RuntimeError("the episode is over (done); call reset() for another")
        observation, reward, terminated, truncated, info = self.env.step(action.source)
        self._state.step_count += 1
        self._state.status = info["status"]
        self._done = terminated or truncated
        return self._observation(observation, reward=reward, done=self._done, status=info["status"],
                                 episode_reward=info["episode_reward"])

    @property
    def state(self) -> KernelState:
        return self._state

    def _observation(self, observation: dict, **verdict: Any) -> KernelObservation:
        return KernelObservation(task=self.env.task.id, prompt=observation["prompt"],
                                 reference=observation["reference"], starter=observation["starter"],
                                 feedback=observation["feedback"], turn=observation["turn"], **verdict)  # fmt: skip


def create_server(task: str | None = None, device: str = "auto", remote: str | None = None,
                  token: str | None = None, max_turns: int = 4, max_concurrent_envs: int = 8):  # fmt: skip
    """The OpenEnv FastAPI app: `/ws` sessions (KernelDojoClient), `/reset`, `/step`, `/state`, `/schema`."""
    if task is not None:
        get_task(task)

    def factory() -> KernelDojoEnvironment:
        return KernelDojoEnvironment(task, device, remote, token, max_turns)

    return create_app(factory, KernelAction, KernelObservation, env_name="kerneldojo",
                      max_concurrent_envs=max_concurrent_envs)  # fmt: skip


class KernelDojoClient(EnvClient[KernelAction, KernelObservation, KernelState]):
    """A session with a kerneldojo OpenEnv server (async; `.sync()` for blocking calls)."""

    def _step_payload(self, action: KernelAction) -> dict[str, Any]:
        return action.model_dump()

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[KernelObservation]:
        observation = KernelObservation(**payload.get("observation", {}), reward=payload.get("reward"),
                                        done=payload.get("done", False))  # fmt: skip
        return StepResult(observation=observation, reward=payload.get("reward"), done=payload.get("done", False))

    def _parse_state(self, payload: dict[str, Any]) -> KernelState:
        return KernelState(**payload)
