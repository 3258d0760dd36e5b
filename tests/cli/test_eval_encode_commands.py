"""The ``eval`` and ``encode`` commands end to end (in-process through ``main``), on MiniLM and real data."""

from __future__ import annotations

import json

import numpy as np

from tests.cli.cli_runs import run


def test_eval_writes_json_of_the_documented_shape(minilm_path, data_root, tmp_path, capsys):
    out = tmp_path / "results.json"
    argv = ["eval", "--model", minilm_path, "--tasks", "stsb:dev", "--data-root", str(data_root)]
    code, stdout, stderr = run([*argv, "--json", str(out), "--limit", "40", "--no-progress"], capsys)
    assert code == 0, stderr
    results = json.loads(out.read_text())
    assert set(results) == {"model", "tasks", "average"}
    assert results["model"] == minilm_path
    assert set(results["tasks"]) == {"stsb"}
    stsb = results["tasks"]["stsb"]
    assert set(stsb) == {"split", "spearman", "pearson", "n"}
    assert stsb["split"] == "dev" and stsb["n"] == 40
    assert -100.0 <= stsb["spearman"] <= 100.0 and isinstance(stsb["pearson"], float)
    assert results["average"] == {"spearman": stsb["spearman"], "pearson": stsb["pearson"]}
    assert "stsb" in stdout and "average" in stdout  # the table


def test_encode_writes_one_row_per_line(minilm_path, tmp_path, capsys):
    texts = tmp_path / "texts.txt"
    texts.write_text("A man is playing a guitar.\nA woman slices an onion.\nThe cat sleeps.\n", encoding="utf-8")
    out = tmp_path / "emb.npy"
    argv = ["encode", "--model", minilm_path, "--input", str(texts), "--output", str(out), "--no-progress"]
    code, _, stderr = run(argv, capsys)
    assert code == 0, stderr
    embeddings = np.load(out)
    assert embeddings.shape == (3, 384) and embeddings.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(embeddings, axis=1), 1.0, atol=1e-5)


def one_line_error(code: int, stderr: str) -> str:
    assert code == 2
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("error: ")
    return lines[0]


def test_empty_line_is_an_error_naming_it(minilm_path, tmp_path, capsys):
    texts = tmp_path / "texts.txt"
    texts.write_text("one\n\nthree\n", encoding="utf-8")
    argv = ["encode", "--model", minilm_path, "--input", str(texts), "--output", str(tmp_path / "e.npy")]
    message = one_line_error(*run(argv, capsys)[::2])
    assert f"{texts}:2" in message and "empty line" in message


def test_unknown_task_is_a_one_line_error(minilm_path, data_root, capsys):
    argv = ["eval", "--model", minilm_path, "--tasks", "stsb,nosuchtask", "--data-root", str(data_root)]
    message = one_line_error(*run(argv, capsys)[::2])
    assert "nosuchtask" in message


def test_missing_data_root_is_a_one_line_error(minilm_path, tmp_path, capsys):
    missing = tmp_path / "no-data"
    argv = ["eval", "--model", minilm_path, "--tasks", "stsb:dev", "--data-root", str(missing)]
    message = one_line_error(*run(argv, capsys)[::2])
    assert str(missing) in message


def test_missing_model_is_a_one_line_error(data_root, tmp_path, capsys):
    missing = tmp_path / "no-model"
    argv = ["eval", "--model", str(missing), "--tasks", "stsb:dev", "--data-root", str(data_root)]
    message = one_line_error(*run(argv, capsys)[::2])
    assert str(missing) in message


def test_every_option_is_explained_in_help(capsys):
    for command, options in {
        "eval": ["--model", "--tasks", "--data-root", "--json", "--batch-size", "--aggregation", "--limit"],
        "encode": ["--model", "--input", "--output", "--batch-size", "--normalize"],
    }.items():
        code, stdout, _ = run([command, "--help"], capsys)
        assert code == 0
        for option in options:
            assert option in stdout, f"{command} --help does not mention {option}"
