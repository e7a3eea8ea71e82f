"""kerneldojo inside the RL frameworks (kerneldojo/integrations), in CPU mode against the real judge, with a
scripted model in place of an LLM. Each framework is an optional extra of some hundreds of MB (`make test` installs
both): without it these tests skip (`pip install -e ".[verifiers,openenv]"` runs them)."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BASELINE = (ROOT / "baselines/vector_add/triton.py").read_text()
WRONG = BASELINE.replace("x + y", "x - y")  # compiles and runs: wrong output
BROKEN = BASELINE.replace("def solution(", "def solution(:")  # a syntax error
assert WRONG != BASELINE and BROKEN != BASELINE


def reply(source: str) -> str:
    return f"Here is my kernel.\n```python\n{source}```\nIt adds the vectors."


# --- verifiers ----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def vf():
    return pytest.importorskip("verifiers.v1", reason="the verifiers extra is not installed: "
                               "pip install -e '.[verifiers]'")  # fmt: skip


def load(vf, max_turns: int = 1):
    return vf.load_environment(vf.resolve_env_config({
        "taskset": {"id": "kerneldojo-verifiers", "tasks": ["vector_add"], "task": {"device": "cpu"}},
        "max_turns": max_turns,
    }))  # fmt: skip


class ScriptedAgent:
    """The model's side of an episode, scripted: `interaction()` replies with `replies` in turn and records
    the conversation on a real verifiers Trace, which leaving the interaction scores (as verifiers does)."""

    def __init__(self, vf, replies: list[str]):
        self.vf, self.replies, self.heard = vf, list(replies), []

    @contextlib.asynccontextmanager
    async def interaction(self, task):
        vf = self.vf
        from verifiers.v1.agent import Segment
        from verifiers.v1.trace import AgentInfo, TraceTask

        trace = vf.Trace(task=TraceTask(type=type(task).__name__, data=task.data),
                         agent=AgentInfo(config=vf.AgentConfig()))  # fmt: skip
        trace.nodes.append(vf.MessageNode(message=vf.UserMessage(content=task.data.prompt)))
        agent = self

        class Interaction:
            def __init__(self):
                self.trace = trace

            async def turn(self, message=None):
                if message is not None:
                    agent.heard.append(message)
                    trace.nodes.append(vf.MessageNode(parent=len(trace.nodes) - 1,
                                                      message=vf.UserMessage(content=message)))  # fmt: skip
                if not agent.replies:
                    return Segment(messages=[], terminated=True)
                answer = vf.AssistantMessage(content=agent.replies.pop(0))
                trace.nodes.append(vf.MessageNode(parent=len(trace.nodes) - 1, message=answer, sampled=True))
                return Segment(messages=[answer])

        yield Interaction()
        await task.score(trace)
        self.trace = trace


def test_verifiers_loads_the_taskset_by_id(vf):
    from kerneldojo.integrations.verifiers_env import KernelDojoEnv, KernelTask

    env = load(vf)
    assert isinstance(env, KernelDojoEnv)
    (task,) = list(env.taskset)
    assert isinstance(task, KernelTask) and task.data.kernel == "vector_add"
    assert "solution(x, y)" in task.data.prompt and "```" in task.data.prompt


def test_verifiers_single_turn_rewards_the_baseline_not_a_wrong_kernel(vf):
    env = load(vf)
    (task,) = list(env.taskset)
    rewards = {}
    for name, source in (("baseline", BASELINE), ("wrong", WRONG)):
        agent = ScriptedAgent(vf, [reply(source)])
        asyncio.run(env.run(task, type("Agents", (), {"agent": agent})()))
        rewards[name] = agent.trace.reward
        assert agent.heard == []  # single-turn: no feedback turn
    assert rewards == {"baseline": 1.0, "wrong": 0.0}
    assert agent.trace.info["kerneldojo"]["status"] == "wrong"


def test_verifiers_multi_turn_feeds_the_verdict_back_until_correct(vf):
    env = load(vf, max_turns=3)
    (task,) = list(env.taskset)
    agent = ScriptedAgent(vf, [reply(BROKEN), reply(WRONG), reply(BASELINE), reply(BASELINE)])
    asyncio.run(env.run(task, type("Agents", (), {"agent": agent})()))
    assert len(agent.heard) == 2 and len(agent.replies) == 1  # stopped at the correct third answer
    assert agent.heard[0].startswith("Status: compile_error") and agent.heard[1].startswith("Status: wrong")
    assert agent.trace.reward == 1.0


def test_verifiers_scores_a_trace_without_the_env(vf):
    """A trace judged by the task's reward alone (as verifiers re-scores saved traces)."""
    (task,) = list(load(vf).taskset)
    agent = ScriptedAgent(vf, [reply(BASELINE)])

    async def one_turn():
        async with agent.interaction(task) as interaction:
            await interaction.turn()

    asyncio.run(one_turn())
    assert agent.trace.rewards["judge"].score == 1.0


# --- OpenEnv ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def openenv_url():
    """A kerneldojo OpenEnv server on loopback, on a free port, for the module's tests."""
    pytest.importorskip("openenv.core", reason="the openenv extra is not installed: pip install -e '.[openenv]'")
    import socket
    import threading
    import time

    import uvicorn

    from kerneldojo.integrations.openenv_env import create_server

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_server(device="cpu", max_turns=3), host="127.0.0.1", port=port,
                                           log_level="warning"))  # fmt: skip
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            pytest.skip("the OpenEnv server did not start on 127.0.0.1 within 30 s")
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(10)


def test_openenv_episode_rewards_the_baseline_and_ends(openenv_url):
    from kerneldojo.integrations.openenv_env import KernelAction, KernelDojoClient

    with KernelDojoClient(base_url=openenv_url).sync() as env:
        result = env.reset(task="vector_add")
        assert not result.done and result.observation.task == "vector_add"
        assert "solution(x, y)" in result.observation.prompt and result.observation.feedback == ""
        result = env.step(KernelAction(source=WRONG))
        assert (result.observation.status, result.reward, result.done) == ("wrong", 0.0, False)
        result = env.step(KernelAction(source=BASELINE))
        assert result.observation.status == "ok" and result.reward > 0 and result.done
        assert result.observation.feedback.startswith("Status: ok") and result.observation.turn == 2
        assert env.state().step_count == 2


def test_openenv_feedback_names_a_broken_kernels_error(openenv_url):
    from kerneldojo.integrations.openenv_env import KernelAction, KernelDojoClient

    with KernelDojoClient(base_url=openenv_url).sync() as env:
        env.reset(task="vector_add")
        result = env.step(KernelAction(source=BROKEN))
    assert result.observation.status == "compile_error" and result.reward == 0.0 and not result.done
    assert "SyntaxError" in result.observation.feedback, result.observation.feedback


def test_openenv_environment_in_process_default_task_and_bad_input():
    pytest.importorskip("openenv.core", reason="the openenv extra is not installed: pip install -e '.[openenv]'")
    from kerneldojo.integrations.openenv_env import KernelAction, KernelDojoEnvironment

    stateless = KernelDojoEnvironment(task="vector_add", device="cpu")  # as a stateless HTTP POST /step makes it
    observation = stateless.step(KernelAction(source=BASELINE))
    assert observation.status == "ok" and observation.done and observation.reward == 1.0
    with pytest.raises(RuntimeError, match="episode is over"):
        stateless.step(KernelAction(source=BASELINE))
    with pytest.raises(RuntimeError, match="reset"):
        KernelDojoEnvironment(device="cpu").step(KernelAction(source=BASELINE))
    with pytest.raises(ValueError, match="vector_add"):
        KernelDojoEnvironment(device="cpu").reset(task="vector_ad")


def test_openenv_reset_with_a_tasks_files_runs_none_of_them(openenv_url, tmp_path):
    """Red team round 83: openenv-core passes a JSON object to reset(task=...) unchecked, and `get_task` made a task
    of any files it was given (for the judge's workers), so a client's reference.py ran in the server's process at
    reset, and an id of `../` wrote files anywhere. A task is now named by its id only; a ref is the judge's own."""
    import json
    import urllib.error
    import urllib.request

    from kerneldojo.tasks import TASKS_DIR

    marker = tmp_path / "ran-in-the-server"
    files = {p.name: p.read_text() for p in (TASKS_DIR / "vector_add").iterdir() if p.is_file()}
    files["task.toml"] = files["task.toml"].replace('id = "vector_add"', 'id = "kd_client_task"')
    files["reference.py"] = f"open({str(marker)!r}, 'w').write('pwned')\n" + files["reference.py"]
    for task in ({"id": "kd_client_task", "files": files}, {"id": str(tmp_path / "traversal"), "files": files}):
        request = urllib.request.Request(f"{openenv_url}/reset", data=json.dumps({"task": task}).encode(),
                                         headers={"Content-Type": "application/json"})
        with contextlib.suppress(urllib.error.HTTPError):
            urllib.request.urlopen(request, timeout=60).read()
    assert not marker.exists() and not (tmp_path / "traversal").exists()


def test_a_task_ref_of_files_is_checked_before_anything_is_written(tmp_path):
    from kerneldojo.tasks import TaskError, get_task, task_from_ref

    files = {"task.toml": 'id = "x"\n', "reference.py": ""}
    with pytest.raises(TaskError, match="named by its id"):
        get_task({"id": "x", "files": files})
    for ref, problem in (({"id": str(tmp_path / "out"), "files": files}, "task id"),
                         ({"id": "../out", "files": files}, "task id"),
                         ({"id": "ok_id", "files": {"../escape.py": ""}}, "not a file name")):
        with pytest.raises(TaskError, match=problem):
            task_from_ref(ref)
    assert not (tmp_path / "out").exists()
