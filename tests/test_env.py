import warnings

import gymnasium as gym
import pytest
import submissions as subs
from gymnasium.utils.env_checker import check_env

import kerneldojo
from kerneldojo.tasks import TaskError


@pytest.mark.parametrize("task_id", kerneldojo.list_tasks())
def test_check_env_passes(task_id, cpu_judge):
    language = "triton" if "triton" in kerneldojo.tasks.get_task(task_id).spec.languages else None
    env = gym.make(f"kerneldojo/{task_id}-v0", language=language, max_turns=3, judge=cpu_judge)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # gymnasium warns that Text spaces are not flattenable
        check_env(env.unwrapped, skip_render_check=True)


def test_reset_gives_prompt_reference_and_starter(cpu_judge):
    env = kerneldojo.make("softmax", language="cuda", judge=cpu_judge)
    obs, info = env.reset(seed=1)
    assert "softmax" in obs["prompt"] and "def reference" in obs["reference"]
    assert 'extern "C"' in obs["starter"] and obs["feedback"] == "" and obs["turn"] == 0
    assert info == {"task": "softmax", "language": "cuda"}


def test_episode_feedback_and_truncation(cpu_judge):
    env = kerneldojo.make("vector_add", language="triton", max_turns=2, judge=cpu_judge)
    env.reset()
    obs, reward, terminated, truncated, info = env.step(subs.VECTOR_ADD_OFF_BY_ONE)
    assert (reward, terminated, truncated, info["status"], obs["turn"]) == (0.0, False, False, "wrong", 1)
    assert "at index (0,)" in obs["feedback"]  # n=1 comes first, and its only element is skipped
    obs, reward, terminated, truncated, info = env.step(subs.VECTOR_ADD_TRITON)
    assert info["result"].ok and reward == 1.0 and truncated and not terminated
    assert "Status: ok" in obs["feedback"]
    with pytest.raises(RuntimeError, match="reset"):
        env.step(subs.VECTOR_ADD_TRITON)
    obs, _ = env.reset()
    assert obs["turn"] == 0 and obs["feedback"] == ""


def test_stop_on_success_terminates(cpu_judge):
    env = kerneldojo.make("vector_add", max_turns=5, stop_on_success=True, judge=cpu_judge)
    env.reset()
    _, _, terminated, truncated, _ = env.step(subs.VECTOR_ADD_TRITON)
    assert terminated and not truncated
    with pytest.raises(RuntimeError, match="episode is over"):  # red team round 31: it went on paying rewards
        env.step(subs.VECTOR_ADD_TRITON)


def test_detected_language_the_task_refuses_is_a_failed_step(cpu_judge):
    env = kerneldojo.make("vector_add", judge=cpu_judge)  # language detected per step
    env.reset()
    _, reward, _, _, info = env.step("#include <cute/tensor.hpp>\n")
    assert info["status"] == "compile_error" and "not 'cute'" in info["result"].messages[0] and reward == 0


def test_make_errors_are_clear():
    with pytest.raises(TaskError, match="did you mean matmul"):
        kerneldojo.make("matmull")
    with pytest.raises(ValueError, match="not 'cute'"):
        kerneldojo.make("softmax", language="cute", device="cpu")
    with pytest.raises(ValueError, match="max_turns"):
        kerneldojo.make("softmax", max_turns=0, device="cpu")


def test_every_task_is_registered():
    for task_id in kerneldojo.list_tasks():
        assert f"kerneldojo/{task_id}-v0" in gym.registry


def test_top_level_evaluate():
    result = kerneldojo.evaluate("vector_add", subs.VECTOR_ADD_TRITON, device="cpu")
    assert result.ok and result.language == "triton" and result.device == "cpu"


def test_prompt_states_the_submission_contract(cpu_judge):
    obs, _ = kerneldojo.make("softmax", language="cuda", judge=cpu_judge).reset()
    assert 'extern "C" void solution(const scalar_t* x, scalar_t* out' in obs["prompt"]
    assert "filled with NaN" in obs["prompt"] and "KD_DTYPE_BFLOAT16" in obs["prompt"]
    obs, _ = kerneldojo.make("softmax", language="triton", judge=cpu_judge).reset()
    assert "defines `solution(x)`" in obs["prompt"] and "any other torch operator flags" in obs["prompt"]


def test_a_non_string_action_is_a_clear_error(cpu_judge):
    env = kerneldojo.make("vector_add", judge=cpu_judge)
    env.reset()
    with pytest.raises(TypeError, match="kernel source as a str"):
        env.step(b"bytes")


class _ScriptedJudge:
    """Verdicts in order, as the judge would give them on a GPU (a drawn pass's fine, then an undrawn `ok`)."""

    def __init__(self, *verdicts: tuple[str, float]):
        from kerneldojo.sandbox.device import resolve_device

        self.device, self.verdicts = resolve_device("cpu"), list(verdicts)

    def evaluate(self, task, source, language=None, retime=False):
        from kerneldojo.judge import versions
        from kerneldojo.result import EvalResult

        status, reward = self.verdicts.pop(0)
        return EvalResult(task=task.id, language="triton", device="cpu", mode="cpu", status=status,
                          reward=reward, versions=versions())


def test_a_flagged_step_caps_what_the_episode_is_paid():
    """Red team round 42: the sampled pass's fine is an expectation over summed steps; an integration that paid the
    episode its last step's reward let a cheat resubmit after a drawn step (fined) until a step was not drawn."""
    env = kerneldojo.make("vector_add", max_turns=4, stop_on_success=True,
                          judge=_ScriptedJudge(("flagged", -29.0), ("ok", 3.0), ("ok", 3.0)))
    env.reset()
    _, reward, terminated, _, info = env.step("a cheat, drawn")
    assert (reward, terminated, info["episode_reward"]) == (-29.0, False, -29.0)
    _, reward, terminated, _, info = env.step("the same cheat, not drawn")
    assert (reward, terminated, info["episode_reward"]) == (3.0, True, -29.0)
    env.reset()  # a new episode starts with no flag
    assert env.step("an honest kernel")[4]["episode_reward"] == 3.0


def test_the_verifiers_episode_is_paid_its_episode_reward():
    pytest.importorskip("verifiers")
    import asyncio

    from kerneldojo.integrations.verifiers_env import judged

    env = kerneldojo.make("vector_add", max_turns=4, stop_on_success=True,
                          judge=_ScriptedJudge(("flagged", -29.0), ("ok", 3.0)))
    env.reset()
    assert asyncio.run(judged(env, "drawn"))["reward"] == -29.0
    assert asyncio.run(judged(env, "not drawn"))["reward"] == -29.0
