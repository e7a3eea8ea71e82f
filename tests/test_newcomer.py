"""What an agent and a newcomer meet first: errors they can act on, gymnasium's conventions."""

import logging
import os
import re
import subprocess
import sys

import pytest
import submissions as subs

import kerneldojo
from kerneldojo.cli import main
from kerneldojo.graders import compile as compile_mod
from kerneldojo.graders.compile import language_mismatch


def test_language_mismatch_names_both_languages():
    message = language_mismatch(subs.VECTOR_ADD_CUDA, "triton")
    assert message.startswith("this env takes triton; the source looks like cuda")
    assert "looks like triton" in language_mismatch(subs.VECTOR_ADD_TRITON, "cuda")
    assert "looks like python" in language_mismatch(subs.VECTOR_ADD_TORCH, "cute")
    assert "looks like cute" in language_mismatch("#include <cute/tensor.hpp>\n", "cuda")
    for source, language in [(subs.VECTOR_ADD_CUDA, "cuda"), (subs.VECTOR_ADD_CUDA, "cute"),
                             (subs.VECTOR_ADD_TORCH, "triton"), (subs.VECTOR_ADD_TRITON, "python"), ("x", "cuda")]:
        assert language_mismatch(source, language) is None, (source[:30], language)


def test_cuda_sent_to_a_triton_env_says_so(cpu_judge):
    env = kerneldojo.make("vector_add", language="triton", judge=cpu_judge)
    env.reset()
    obs, reward, _, _, info = env.step(subs.VECTOR_ADD_CUDA)
    assert info["status"] == "compile_error" and reward == 0
    assert "this env takes triton; the source looks like cuda" in obs["feedback"]
    assert "SyntaxError" not in obs["feedback"]


def test_eval_on_a_folder_and_version(tmp_path, capsys):
    assert main(["eval", "vector_add", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "is a folder; eval takes one submission file" in err and "kerneldojo batch" in err
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0 and capsys.readouterr().out.strip() == f"kerneldojo {kerneldojo.__version__}"


def test_gymnasium_module_prefix_make_needs_no_import_first():
    code = ("import sys, gymnasium\nassert 'kerneldojo' not in sys.modules\n"
            "env = gymnasium.make('kerneldojo:kerneldojo/vector_add-v0', device='cpu', reward='kevin', "
            "limits={'run': 5})\nobs, _ = env.reset(seed=1)\n"
            "print(env.unwrapped.task.id, env.unwrapped.judge.reward.formula, env.unwrapped.judge.limits)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["vector_add", "kevin", "{'run':", "5}"]


def test_make_takes_reward_limits_and_isolation():
    env = kerneldojo.make("softmax", device="cpu", reward={"correct": 0.5}, limits={"run": 7}, isolation="none")
    judge = env.unwrapped.judge
    assert judge.reward.correct == 0.5 and judge.limits == {"run": 7} and judge.isolation == "none"
    with pytest.raises(ValueError, match="unknown reward preset 'kevn'"):
        kerneldojo.make("softmax", device="cpu", reward="kevn")
    with pytest.raises(ValueError, match="with judge= set them on that Judge"):
        kerneldojo.make("softmax", judge=judge, limits={"run": 1})


def test_reset_seed_fixes_the_env_not_the_judge(cpu_judge):
    env = kerneldojo.make("vector_add", judge=cpu_judge)
    first, _ = env.reset(seed=1)
    second, _ = env.reset(seed=2)
    assert first == second  # the observation does not depend on the seed
    env.reset(seed=1)
    drawn = env.unwrapped.np_random.integers(1 << 30)
    env.reset(seed=1)
    assert env.unwrapped.np_random.integers(1 << 30) == drawn  # the env's own generator is what it fixes


def _fake_nvcc(tmp_path, body: str) -> str:
    nvcc = tmp_path / "nvcc"
    nvcc.write_text(f"#!/bin/sh\n{body}\n")
    nvcc.chmod(0o755)
    return str(nvcc)


def test_a_long_build_says_what_and_how_long(tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(compile_mod, "PROGRESS_EVERY_S", 0.1)
    nvcc = _fake_nvcc(tmp_path, 'sleep 0.5; for a; do out="$a"; done; touch "$out"')  # -o OUT comes last
    with caplog.at_level(logging.INFO, logger="kerneldojo.build"):
        compile_mod._run_nvcc(nvcc, "src", [], tmp_path / "b" / "submission.so", "matmul (cute, float32)", "")
    assert (tmp_path / "b" / "submission.so").exists()
    assert re.search(r"building matmul \(cute, float32\) with \S*nvcc\S* \(.*\): \d s so far", caplog.text), caplog.text


def test_the_build_limit_is_cpu_time_not_wall_clock(tmp_path, monkeypatch):
    monkeypatch.setattr(compile_mod, "COMPILE_CPU_S", 1)
    nvcc = _fake_nvcc(tmp_path, "sleep 2; while :; do :; done")  # sleeping is free; spinning is not
    # TransientCompileError: a verdict the machine may have caused (a SIGKILL from outside reads the same), never stored
    with pytest.raises(compile_mod.TransientCompileError, match="used more than 1 s of CPU time"):
        compile_mod._run_nvcc(nvcc, "src", [], tmp_path / "b" / "submission.so", "matmul (cute, float32)", "")


def test_a_build_short_of_disk_is_the_machines_failure(tmp_path, monkeypatch):
    """Red team round 67: a full disk made an honest build fail at the link, a compile error stored for good. Round
    118: the same words in a diagnostic (the source's text) while the disk has room are the source's error."""
    nvcc = _fake_nvcc(tmp_path, "echo '/usr/bin/ld: final link failed: No space left on device'; exit 1")
    with pytest.raises(compile_mod.CompileError) as raised:  # this disk has room
        compile_mod._run_nvcc(nvcc, "src", [], tmp_path / "b" / "submission.so", "vector_add (cuda, float32)", "")
    assert not isinstance(raised.value, compile_mod.TransientCompileError)
    monkeypatch.setattr(compile_mod, "DISK_NEARLY_FULL_BYTES", 1 << 62)  # a disk as good as full
    with pytest.raises(compile_mod.TransientCompileError, match="disk is full"):
        compile_mod._run_nvcc(nvcc, "src", [], tmp_path / "b" / "submission.so", "vector_add (cuda, float32)", "")


def test_the_build_cache_evicts_the_least_recently_used_and_keeps_the_builds_in_use(tmp_path, monkeypatch):
    """Red team rounds 67 and 68: distinct sources each linking a library of hundreds of MB filled the host's disk
    through one service request. The cache has a bound: older builds go first, down to the bound; those used within
    a build's time limit (and a margin) stay, since they may still be building or loading; while they fill it, a new
    build waits for a later submission instead."""
    import time

    monkeypatch.setenv("KERNELDOJO_CACHE", str(tmp_path))
    monkeypatch.setattr(compile_mod, "BUILD_CACHE_BYTES", 10_000)
    assert compile_mod.RECENT_BUILD_S > compile_mod.COMPILE_WALL_S  # a build in flight is never old (round 68)
    root = compile_mod.cache_dir()
    old = compile_mod.RECENT_BUILD_S
    for name, age in {"oldest": old + 3000, "old": old + 2000, "building": old - 60}.items():
        (root / name).mkdir()
        (root / name / "submission.so").write_bytes(b"x" * 4000)
        os.utime(root / name, (time.time() - age, time.time() - age))
    compile_mod.make_room()  # 12,000 bytes: the oldest goes, and no more than that
    assert sorted(p.name for p in root.iterdir()) == ["building", "old"]
    (root / "old" / compile_mod.KERNEL_NAMES).write_text("")
    assert compile_mod.missing_builds({"old": root / "old" / "submission.so"}) == []  # reused now: the youngest
    monkeypatch.setattr(compile_mod, "BUILD_CACHE_BYTES", 5_000)
    with pytest.raises(compile_mod.TransientCompileError, match="used in the last 30 minutes"):
        compile_mod.make_room()  # only builds in use are left to remove
    assert sorted(p.name for p in root.iterdir()) == ["building", "old"]


def test_a_full_build_cache_leaves_a_batchs_extension_out_instead_of_failing_the_batch(monkeypatch):
    """Red team round 68: the bound's refusal escaped `build_extensions(strict=False)` (a KernelBench level built
    ahead), so one full cache failed every problem of the level; now that extension is left out, as a failed one."""
    from kerneldojo.graders import extensions

    def full(*args, **kwargs):
        raise compile_mod.TransientCompileError("judge: the build cache ... over its bound")

    monkeypatch.setattr(extensions, "make_room", full)
    monkeypatch.setattr(extensions.runtime, "buildable_here", lambda call: True)
    source = ("from torch.utils.cpp_extension import load_inline\n"
              "ext = load_inline(name='kd_full', cpp_sources='int f() { return 1; }', functions=['f'])\n")
    built, missing = extensions.build_extensions([source], strict=False)
    assert built == {} and len(missing) == 1
    with pytest.raises(compile_mod.TransientCompileError):
        extensions.build_extensions([source])


def test_cuda_in_cpu_mode_says_what_was_verified(cpu_judge):
    header = compile_mod.signature_header(kerneldojo.get_task("vector_add"))
    assert header.endswith('extern "C" void solution(const float* x, const float* y, float* out, int64_t n, '
                           'cudaStream_t stream);\n')
    result = cpu_judge.evaluate("vector_add", subs.VECTOR_ADD_CUDA, "cuda")
    assert result.status == "compiled", result.messages
    assert "Verified: it compiles with the task's declaration" in result.messages[0]
    assert "exports `solution`" in result.messages[0] and "Not verified: that it launches" in result.messages[0]


def test_a_cuda_entry_point_with_other_types_is_a_compile_error(cpu_judge):
    narrower = subs.VECTOR_ADD_CUDA.replace("float* out, int64_t n,", "float* out, int n,")
    assert narrower != subs.VECTOR_ADD_CUDA
    result = cpu_judge.evaluate("vector_add", narrower, "cuda")
    assert result.status == "compile_error" and "submission.cu(" in result.messages[0]
    assert "the task's entry point (kerneldojo show TASK): extern \"C\" void solution(" in result.messages[0]
    # Without extern "C" and with other types, `solution` is a C++ overload: nothing exports the entry point.
    unexported = narrower.replace('extern "C" void solution', "void solution")
    result = cpu_judge.evaluate("vector_add", unexported, "cuda")
    assert result.status == "compile_error" and "does not export `solution`" in result.messages[0], result.messages
