"""What an agent and a newcomer meet first: errors they can act on, gymnasium's conventions."""

import pytest
import submissions as subs

import kerneldojo
from kerneldojo.cli import main
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
