import json

import submissions as subs

from kerneldojo.cli import main


def test_tasks_table(capsys):
    assert main(["tasks"]) == 0
    out = capsys.readouterr().out
    for task_id in ("vector_add", "softmax", "matmul", "gelu"):
        assert task_id in out


def test_show(capsys):
    assert main(["show", "matmul", "--language", "cute"]) == 0
    out = capsys.readouterr().out
    assert "# matmul" in out and "def reference" in out and "cute" in out


def test_eval_json(tmp_path, capsys):
    path = tmp_path / "add.py"
    path.write_text(subs.VECTOR_ADD_OFF_BY_ONE)
    assert main(["eval", "vector_add", str(path), "--device", "cpu", "--json"]) == 1
    result = json.loads(capsys.readouterr().out)
    assert result["status"] == "wrong" and result["mismatch"]["index"]


def test_one_line_errors(tmp_path, capsys):
    path = tmp_path / "add.py"
    path.write_text(subs.VECTOR_ADD_TRITON)
    cases = [
        (["eval", "vectoradd", str(path)], "unknown task 'vectoradd'; did you mean vector_add"),
        (["eval", "vector_add", str(tmp_path / "missing.py")], "no such file"),
        (["eval", "vector_add", str(path), "--language", "rust"], "'rust' is not one of"),
        (["eval", "vector_add", str(path), "--language", "cute"], "accepts triton, cuda, not 'cute'"),
        (["show", "vector_add", "--language", "cute"], "not 'cute'"),
    ]
    for argv, message in cases:
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_demo_prints_the_table(capsys):
    assert main(["demo", "--device", "cpu", "--task", "vector_add", "--task", "gelu"]) == 0
    out = capsys.readouterr().out
    rows = [line.split() for line in out.splitlines() if line.startswith(("vector_add", "gelu"))]
    assert [r[:4] for r in rows] == [["gelu", "cpu", "gelu/triton.py", "triton"],
                                     ["vector_add", "cpu", "vector_add/triton.py", "triton"]], out
    assert "nothing was timed" in out.lower()


def test_batch_then_leaderboard(tmp_path, capsys):
    folder = tmp_path / "subs" / "vector_add"
    folder.mkdir(parents=True)
    (folder / "good.py").write_text(subs.VECTOR_ADD_TRITON)
    (folder / "wrong.py").write_text(subs.VECTOR_ADD_OFF_BY_ONE)
    out = tmp_path / "results.jsonl"
    argv = ["batch", str(tmp_path / "subs"), "--devices", "cpu:2", "--out", str(out)]
    assert main(argv) == 0
    captured = capsys.readouterr()
    records = [json.loads(line) for line in out.read_text().splitlines()]
    want = [("subs/vector_add/good.py", "ok"), ("subs/vector_add/wrong.py", "wrong")]
    assert sorted((r["label"], r["status"]) for r in records) == want, [r["messages"] for r in records]
    assert "subs/vector_add/good.py" in captured.out and "1/2" in captured.out
    assert main(argv) == 0  # a rerun has nothing left to do
    assert "0 evaluated (0 reused from the result cache), 2 already in" in capsys.readouterr().err
    assert len(out.read_text().splitlines()) == 2
    assert main(["leaderboard", str(out)]) == 0
    board = capsys.readouterr().out
    assert board.splitlines()[2].split()[:3] == ["vector_add", "cpu", "subs/vector_add/good.py"]


def test_batch_one_line_errors(tmp_path, capsys):
    manifest = tmp_path / "m.jsonl"
    manifest.write_text('{"task": "vectoradd", "source": "x"}\n')
    cases = [
        (["batch", str(tmp_path / "missing")], "no such folder or manifest"),
        (["batch", str(manifest)], "m.jsonl:1: unknown task 'vectoradd'"),
        (["batch", str(tmp_path), "--devices", "tpu"], "'tpu' is not"),
        (["leaderboard", str(tmp_path / "none.jsonl")], "no such results file"),
    ]
    for argv, message in cases:
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1 and "Traceback" not in err
