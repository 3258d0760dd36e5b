"""``encode --dim`` / ``eval --dim`` (truncate_dim) and ``--prompt`` / ``--prompt-name``, against sentence-transformers."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.cli.cli_runs import run

pytestmark = pytest.mark.usefixtures("single_torch_thread")

TEXTS = ["a cat sleeps on the sofa", "the stock market fell", "kids play chess", "it rains in rome"]
STS_ROWS = [
    ("a cat sleeps", "a cat is sleeping", 4.8), ("a man cooks", "the stock market fell", 0.2),
    ("kids play chess", "children play a board game", 3.9), ("it rains", "the sun is out", 1.0),
    ("a dog barks", "a dog is barking loudly", 4.5), ("she reads a book", "he drives a truck", 0.5),
]  # fmt: skip


def one_line_error(code: int, stderr: str) -> str:
    assert code == 2
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    return lines[0]


def texts_file(tmp_path):
    path = tmp_path / "texts.txt"
    path.write_text("".join(text + "\n" for text in TEXTS), encoding="utf-8")
    return path


def sts_file(tmp_path):
    path = tmp_path / "my_sts.csv"
    path.write_text("s1,s2,score\n" + "".join(f"{a},{b},{s}\n" for a, b, s in STS_ROWS), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def st_minilm(minilm_path):
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(minilm_path, device="cpu")


@pytest.mark.parametrize("dim", [64, 384])
def test_encode_dim_equals_sentence_transformers_truncate_dim(minilm_path, st_minilm, tmp_path, capsys, dim):
    output = tmp_path / "e.npy"
    argv = ["encode", "-m", minilm_path, "-i", str(texts_file(tmp_path)), "-o", str(output), "--dim", str(dim),
            "--no-progress"]  # fmt: skip
    code, _, err = run(argv, capsys)
    assert code == 0, err
    ours = np.load(output)
    theirs = st_minilm.encode(TEXTS, truncate_dim=dim, normalize_embeddings=True)
    assert ours.shape == (len(TEXTS), dim)
    np.testing.assert_allclose(ours, theirs, atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)  # cut, then normalised


def test_encode_dim_above_the_model_is_one_error_line_and_nothing_written(minilm_path, tmp_path, capsys):
    output = tmp_path / "e.npy"
    argv = ["encode", "-m", minilm_path, "-i", str(texts_file(tmp_path)), "-o", str(output), "--dim", "385"]
    message = one_line_error(*run(argv, capsys)[::2])
    assert "--dim 385: the model's embeddings have 384 dimensions" in message
    assert not output.exists()


def test_eval_dim_scores_the_truncated_embeddings_as_sentence_transformers(minilm_path, st_minilm, tmp_path,
                                                                            capsys):  # fmt: skip
    from sentence_transformers.sentence_transformer.evaluation import EmbeddingSimilarityEvaluator

    sts = sts_file(tmp_path)
    results = {}
    for dim in (None, 32):
        out = tmp_path / f"eval-{dim}.json"
        argv = ["eval", "-m", minilm_path, "--tasks", f"sts:{sts}", "--no-progress", "--json", str(out),
                *(["--dim", str(dim)] if dim else [])]  # fmt: skip
        code, _, err = run(argv, capsys)
        assert code == 0, err
        results[dim] = json.loads(out.read_text())["metrics"]["my_sts_file_spearman"]
        evaluator = EmbeddingSimilarityEvaluator(
            [a for a, _, _ in STS_ROWS], [b for _, b, _ in STS_ROWS], [s for _, _, s in STS_ROWS], truncate_dim=dim,
        )
        expected = evaluator(st_minilm)[evaluator.primary_metric]
        assert results[dim] == pytest.approx(100 * expected, abs=1e-6)


def test_eval_dim_above_the_model_is_one_error_line(minilm_path, tmp_path, capsys):
    out = tmp_path / "eval.json"
    argv = ["eval", "-m", minilm_path, "--tasks", f"sts:{sts_file(tmp_path)}", "--no-progress", "--json", str(out),
            "--dim", "1000"]  # fmt: skip
    message = one_line_error(*run(argv, capsys)[::2])
    assert "--dim 1000: the model's embeddings have 384 dimensions" in message
    assert not out.exists()


def test_encode_prompt_equals_sentence_transformers_prompt(minilm_path, st_minilm, tmp_path, capsys):
    output = tmp_path / "e.npy"
    argv = ["encode", "-m", minilm_path, "-i", str(texts_file(tmp_path)), "-o", str(output), "--prompt", "query: ",
            "--dim", "128", "--no-progress"]  # fmt: skip
    code, _, err = run(argv, capsys)
    assert code == 0, err
    theirs = st_minilm.encode(TEXTS, prompt="query: ", truncate_dim=128, normalize_embeddings=True)
    np.testing.assert_allclose(np.load(output), theirs, atol=1e-5)
    assert not np.allclose(np.load(output), st_minilm.encode(TEXTS, truncate_dim=128, normalize_embeddings=True))


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        (["--prompt-name", "query"], "--prompt-name 'query': the model has no such prompt; its prompts: none"),
        (["--prompt", "q: ", "--prompt-name", "query"], "--prompt and --prompt-name together"),
    ],
)
@pytest.mark.parametrize("command", ["encode", "eval"])
def test_bad_prompt_options_are_one_error_line(minilm_path, tmp_path, capsys, options, expected, command):
    output = tmp_path / "out"
    if command == "encode":
        argv = ["encode", "-m", minilm_path, "-i", str(texts_file(tmp_path)), "-o", str(output)]
    else:
        argv = ["eval", "-m", minilm_path, "--tasks", f"sts:{sts_file(tmp_path)}", "--json", str(output)]
    message = one_line_error(*run([*argv, *options], capsys)[::2])
    assert expected in message
    assert not output.exists()


def test_eval_prompt_scores_the_prompted_texts(minilm_path, tmp_path, capsys):
    prompted = tmp_path / "prompted" / "my_sts.csv"
    prompted.parent.mkdir()
    prompted.write_text("s1,s2,score\n" + "".join(f"query: {a},query: {b},{s}\n" for a, b, s in STS_ROWS))
    scores = []
    for spec, options in ((f"sts:{sts_file(tmp_path)}", ["--prompt", "query: "]), (f"sts:{prompted}", [])):
        out = tmp_path / f"eval{len(scores)}.json"
        code, _, err = run(["eval", "-m", minilm_path, "--tasks", spec, "--no-progress", "--json", str(out),
                            *options], capsys)  # fmt: skip
        assert code == 0, err
        scores.append(json.loads(out.read_text())["metrics"]["my_sts_file_spearman"])
    assert scores[0] == pytest.approx(scores[1], abs=1e-9)
