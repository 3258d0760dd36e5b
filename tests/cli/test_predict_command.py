"""``contrastext predict`` and ``contrastext eval`` on exported classifier folders, in-process through ``main``.

End to end: ``contrastext train`` (SCL, a few steps on real SST-2 rows) exports ``<run>/seed-1/classifier``;
``contrastext predict`` writes one row per input line (JSONL, CSV, stdout) that agree with the transformers
pipeline; ``contrastext eval`` scores sst2 with the classifier's head and says so.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import pipeline

from contrastext.data.tasks import get_task
from contrastext.methods.classification import FineTuneMethod
from contrastext.models.encoder import TextEncoder
from tests.cli.cli_runs import run

RECIPE = str(Path(__file__).resolve().parents[2] / "recipes" / "scl.yaml")
SHAPE = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64}
LINES = ["a fine, moving film", "dull.", "the worst plot in years", "an utterly charming \u00e9clair of a movie"]


def one_line_error(code: int, stderr: str) -> str:
    assert code == 2, stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    return lines[0]


def export(folder: Path, minilm_path: str, task: str, names: list[str] | None = None) -> Path:
    with torch.random.fork_rng():
        torch.manual_seed(0)
        encoder = TextEncoder.from_config(SHAPE, minilm_path, pooling="cls", max_seq_length=16)
        method = FineTuneMethod(encoder, get_task(task)).eval()
        torch.nn.init.normal_(method.head.linear.weight, std=0.5)
    return method.export_classifier(folder, label_names=names)


@pytest.fixture(scope="module")
def sst2_classifier(tmp_path_factory, minilm_path) -> Path:
    return export(tmp_path_factory.mktemp("sst2") / "classifier", minilm_path, "sst2")


@pytest.fixture(scope="module")
def mrpc_classifier(tmp_path_factory, minilm_path) -> Path:
    return export(tmp_path_factory.mktemp("mrpc") / "classifier", minilm_path, "mrpc")


def write_lines(path: Path, lines: list[str], ending: str = "\n") -> Path:
    path.write_bytes(ending.join(lines).encode("utf-8") + ending.encode())
    return path


def pipeline_rows(folder: Path, inputs) -> list[dict]:
    classify = pipeline("text-classification", model=str(folder), device="cpu")
    return [{entry["label"]: entry["score"] for entry in row} for row in classify(inputs, top_k=None, truncation=True)]


def test_predict_writes_one_jsonl_row_per_line_that_the_pipeline_agrees_with(tmp_path, sst2_classifier, capsys):
    source = write_lines(tmp_path / "in.txt", LINES, ending="\r\n")  # CRLF: the \r is not part of the text
    output = tmp_path / "out" / "predictions.jsonl"
    code, stdout, stderr = run(["predict", "--model", str(sst2_classifier), "--input", str(source),
                                "--output", str(output), "--batch-size", "3"], capsys)
    assert code == 0, stderr
    assert f"wrote {output} (4 rows; labels: negative, positive)" in stderr
    rows = [json.loads(line) for line in output.read_text(encoding="utf-8").splitlines()]
    assert [row["line"] for row in rows] == [1, 2, 3, 4] and [row["text"] for row in rows] == LINES
    expected = pipeline_rows(sst2_classifier, LINES)
    for row, probabilities in zip(rows, expected, strict=True):
        assert set(row["probabilities"]) == {"negative", "positive"}
        assert max(abs(row["probabilities"][name] - p) for name, p in probabilities.items()) < 1e-5
        assert row["label"] == max(probabilities, key=probabilities.get)
        assert row["score"] == pytest.approx(max(probabilities.values()), abs=1e-5)


def test_predict_writes_csv_and_stdout(tmp_path, sst2_classifier, capsys):
    source = write_lines(tmp_path / "in.txt", LINES)
    code, _, stderr = run(["predict", "-m", str(sst2_classifier), "-i", str(source), "-o", str(tmp_path / "p.csv")], capsys)
    assert code == 0, stderr
    with open(tmp_path / "p.csv", newline="", encoding="utf-8") as handle:
        table = list(csv.DictReader(handle))
    assert list(table[0]) == ["line", "text", "label", "score", "p(negative)", "p(positive)"]
    assert [row["text"] for row in table] == LINES
    assert all(abs(float(row["p(negative)"]) + float(row["p(positive)"]) - 1) < 1e-6 for row in table)

    code, stdout, stderr = run(["predict", "-m", str(sst2_classifier), "-i", str(source)], capsys)
    assert code == 0, stderr
    assert [json.loads(line)["line"] for line in stdout.splitlines()] == [1, 2, 3, 4]


def test_a_pair_classifier_reads_tab_separated_lines(tmp_path, mrpc_classifier, capsys):
    pairs = [("a good film", "a fine film"), ("it rains", "the stock fell")]
    source = write_lines(tmp_path / "pairs.tsv", [f"{a}\t{b}" for a, b in pairs])
    code, stdout, stderr = run(["predict", "-m", str(mrpc_classifier), "-i", str(source)], capsys)
    assert code == 0, stderr
    rows = [json.loads(line) for line in stdout.splitlines()]
    assert [(row["text"], row["text_pair"]) for row in rows] == pairs
    expected = pipeline_rows(mrpc_classifier, [{"text": a, "text_pair": b} for a, b in pairs])
    for row, probabilities in zip(rows, expected, strict=True):
        assert max(abs(row["probabilities"][name] - p) for name, p in probabilities.items()) < 1e-5

    bad = write_lines(tmp_path / "bad.tsv", ["a good film\ta fine film", "no tab here"])
    capsys.readouterr()  # the pipeline's own progress bars
    message = one_line_error(*run(["predict", "-m", str(mrpc_classifier), "-i", str(bad)], capsys)[::2])
    assert f"{bad}:2" in message and "TAB" in message


def test_a_regression_classifier_writes_scores(tmp_path, minilm_path, capsys):
    folder = export(tmp_path / "stsb", minilm_path, "stsb")
    source = write_lines(tmp_path / "pairs.tsv", ["a man plays\ta man is playing", "a cat\ta stock market"])
    code, stdout, stderr = run(["predict", "-m", str(folder), "-i", str(source), "-o", str(tmp_path / "s.csv")], capsys)
    assert code == 0, stderr and "scores" in stderr
    with open(tmp_path / "s.csv", newline="", encoding="utf-8") as handle:
        table = list(csv.DictReader(handle))
    assert list(table[0]) == ["line", "text", "text_pair", "score"] and len(table) == 2
    classify = pipeline("text-classification", model=str(folder), device="cpu")
    expected = [row["score"] for row in classify([{"text": "a man plays", "text_pair": "a man is playing"},
                                                  {"text": "a cat", "text_pair": "a stock market"}])]
    assert np.allclose([float(row["score"]) for row in table], expected, atol=1e-5)


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("missing model", "no such folder"),
        ("encoder folder", "not a sequence-classification model"),
        ("run folder", "a run folder; its classifier is"),
        ("missing input", "does not exist"),
        ("blank line", ":2: empty line"),
        ("bad suffix", "unknown suffix '.npy'"),
    ],
)
def test_bad_input_is_one_line_error(tmp_path, sst2_classifier, tiny_bert_path, capsys, case, expected):
    source = write_lines(tmp_path / "in.txt", LINES)
    model, output = str(sst2_classifier), None
    if case == "missing model":
        model = str(tmp_path / "nowhere")
    elif case == "encoder folder":
        model = tiny_bert_path
    elif case == "run folder":
        (tmp_path / "run" / "classifier").mkdir(parents=True)
        (tmp_path / "run" / "classifier" / "config.json").write_text("{}")
        model = str(tmp_path / "run")
    elif case == "missing input":
        source = tmp_path / "absent.txt"
    elif case == "blank line":
        source = write_lines(tmp_path / "blank.txt", ["one", "", "three"])
    elif case == "bad suffix":
        output = tmp_path / "out.npy"
    argv = ["predict", "--model", model, "--input", str(source)] + (["--output", str(output)] if output else [])
    message = one_line_error(*run(argv, capsys)[::2])
    assert expected in message
    if output is not None:
        assert not output.exists()


def test_eval_scores_a_classifier_folder_with_its_head(tmp_path, sst2_classifier, data_root, capsys):
    results = tmp_path / "results.json"
    argv = ["eval", "--model", str(sst2_classifier), "--tasks", "sst2:dev,stsb:dev", "--data-root", str(data_root),
            "--limit", "30", "--no-progress", "--json", str(results)]
    code, stdout, stderr = run(argv, capsys)
    assert code == 0, stderr
    assert "sst2: scored by the classifier head" in stdout
    assert "stsb: scored by the cosine of the encoder's embeddings" in stdout
    payload = json.loads(results.read_text())
    sst2 = payload["tasks"]["sst2"]
    assert sst2["scored_by"] == "classifier head" and sst2["n"] == 30 and "C" not in sst2  # no probe was fitted
    # the head's accuracy is the pipeline's accuracy on the same rows
    from contrastext.data.tasks import load_task

    examples = load_task("sst2:dev", data_root).examples[:30]
    predicted = [max(row, key=row.get) for row in pipeline_rows(sst2_classifier, [e.texts[0] for e in examples])]
    accuracy = 100 * np.mean([name == ("negative", "positive")[e.label] for name, e in zip(predicted, examples, strict=True)])
    assert sst2["accuracy"] == pytest.approx(accuracy)
    assert list(payload["tasks"]) == ["sst2", "stsb"] and payload["average"]["spearman"] == payload["tasks"]["stsb"]["spearman"]
    metrics = payload["metrics"]  # training's keys, the head-scored task's included
    assert metrics["sst2_dev_accuracy"] == metrics["sst2_dev_score"] == metrics["score"] == sst2["accuracy"]
    assert metrics["stsb_dev_score"] == payload["tasks"]["stsb"]["spearman"]


def test_eval_refuses_a_task_whose_labels_the_classifier_does_not_have(tmp_path, minilm_path, data_root, capsys):
    folder = export(tmp_path / "named", minilm_path, "sst2", names=["bad", "good"])
    argv = ["eval", "--model", str(folder), "--tasks", "sst2:dev", "--data-root", str(data_root), "--limit", "10",
            "--no-progress"]
    message = one_line_error(*run(argv, capsys)[::2])
    assert "['bad', 'good']" in message and "sst2" in message


def test_train_then_predict_and_eval_through_the_cli(tmp_path, tiny_bert_path, data_root, capsys):
    """The user's path: train SCL, then use <run>/seed-1/classifier with predict and eval."""
    sets = ["train.max_steps=3", "train.batch_size=8", "train.eval_every=1", "train.save_every=null",
            "train.progress_bar=false", "train.report_to=[]", "train.lr=1e-3", "data.max_length=32",
            "data.limit=300", "data.few_shot=16", "eval.limit=40", "method_args.seeds=[1]", f"model={tiny_bert_path}"]
    argv = ["train", RECIPE, *[item for value in sets for item in ("--set", value)], "--output", str(tmp_path / "run"),
            "--data-root", str(data_root)]
    code, stdout, stderr = run(argv, capsys)
    assert code == 0, stderr
    classifier = tmp_path / "run" / "seed-1" / "classifier"
    assert (classifier / "config.json").is_file() and (classifier / "README.md").is_file()
    metrics = json.loads((tmp_path / "run" / "seed-1" / "metrics.json").read_text())
    assert metrics["classifier_dir"] == str(classifier)

    source = write_lines(tmp_path / "reviews.txt", LINES)
    code, _, stderr = run(["predict", "-m", str(classifier), "-i", str(source), "-o", str(tmp_path / "p.jsonl")], capsys)
    assert code == 0, stderr
    rows = [json.loads(line) for line in (tmp_path / "p.jsonl").read_text().splitlines()]
    assert len(rows) == len(LINES) and {row["label"] for row in rows} <= {"negative", "positive"}

    argv = ["eval", "-m", str(classifier), "-t", "sst2:dev", "--data-root", str(data_root), "--limit", "20",
            "--no-progress"]
    code, stdout, stderr = run(argv, capsys)
    assert code == 0, stderr
    assert "sst2: scored by the classifier head" in stdout


def test_eval_scores_the_head_on_your_own_labelled_file(tmp_path, minilm_path, capsys):
    """A classifier trained on string labels, evaluated on a CSV with those labels: the head scores it (no probe,
    no --data-root); a label the classifier never saw is a one-line error naming it."""
    folder = export(tmp_path / "named", minilm_path, "sst2", names=["bad", "good"])
    rows = [("a fine film", "good"), ("dull.", "bad"), ("the worst plot in years", "bad"), ("lovely", "good")]
    source = tmp_path / "reviews.csv"
    source.write_text("text,label\n" + "".join(f"{text},{label}\n" for text, label in rows), encoding="utf-8")
    code, stdout, stderr = run(["eval", "-m", str(folder), "-t", f"classification:{source}", "--no-progress",
                                "--json", str(tmp_path / "r.json")], capsys)
    assert code == 0, stderr
    assert "reviews: scored by the classifier head" in stdout
    result = json.loads((tmp_path / "r.json").read_text())["tasks"]["reviews"]
    predicted = [max(row, key=row.get) for row in pipeline_rows(folder, [text for text, _ in rows])]
    capsys.readouterr()  # the pipeline's own progress bars
    expected = 100 * np.mean([name == label for name, (_, label) in zip(predicted, rows, strict=True)])
    assert result["accuracy"] == pytest.approx(expected) and result["n"] == 4

    source.write_text("text,label\na fine film,good\nso-so,meh\n", encoding="utf-8")
    message = one_line_error(*run(["eval", "-m", str(folder), "-t", f"classification:{source}", "--no-progress"],
                                  capsys)[::2])
    assert "['meh']" in message and "['bad', 'good']" in message
