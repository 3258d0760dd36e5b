"""``contrastext eval`` on the user's own files and datasets, and with its default tasks (issue 9).

Specs: ``sts:FILE``, ``classification:FILE``, ``pairs:FILE``, a bare ``FILE`` (kind from its columns),
``FILE@SPLIT``, a Hugging Face dataset folder; plain ``contrastext eval`` on the shipped data root.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from contrastext.data.examples import Example
from contrastext.evaluation.retrieval import evaluate_pairs
from contrastext.evaluation.sts import evaluate_sts
from contrastext.evaluation.task_specs import load_eval_data, parse_eval_spec
from contrastext.models.encoder import TextEncoder
from tests.cli.cli_runs import run

pytestmark = pytest.mark.usefixtures("single_torch_thread")

STS_ROWS = [
    ("A man plays a guitar.", "A man plays music.", 4.2),
    ("A cat sleeps on the sofa.", "A dog runs in the park.", 0.6),
    ("The sky is blue today.", "Today the sky is clear and blue.", 4.6),
    ("Kids play football outside.", "Stock markets fell sharply.", 0.0),
    ("A woman slices onions.", "Someone is cutting an onion.", 4.0),
    ("The train was late.", "A bird sings in a tree.", 0.4),
]


def write_sts(path: Path, header: str = "sentence1,sentence2,score") -> Path:
    path.write_text(header + "\n" + "".join(f'"{a}","{b}",{score}\n' for a, b, score in STS_ROWS))
    return path


def write_reviews(path: Path) -> Path:
    """A TSV of one text and a string label, 3 classes."""
    words = {"pos": "wonderful great lovely", "neg": "awful terrible bad", "meh": "average plain okay"}
    rows = [f"{label} review {i}: {words[label]}\t{label}\n" for i in range(12) for label in ("pos", "neg", "meh")]
    path.write_text("text\tlabel\n" + "".join(rows))
    return path


def write_pairs(path: Path) -> Path:
    rows = [
        ("how do I reset my password", "steps to change a forgotten password"),
        ("best pizza in town", "where to eat great pizza nearby"),
        ("weather tomorrow", "forecast for the next day"),
        ("cheap flights to rome", "low cost airline tickets to rome"),
    ]
    path.write_text("".join(json.dumps({"anchor": a, "positive": p}) + "\n" for a, p in rows))
    return path


def eval_json(argv: list[str], tmp_path: Path, capsys) -> tuple[dict, str, str]:
    out = tmp_path / "results.json"
    code, stdout, stderr = run([*argv, "--no-progress", "--json", str(out)], capsys)
    assert code == 0, stderr
    return json.loads(out.read_text()), stdout, stderr


def one_error_line(argv: list[str], capsys) -> str:
    code, _, err = run([*argv, "--no-progress"], capsys)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


@pytest.fixture
def no_data_root(monkeypatch):
    """Own files need no data root: $CONTRASTEXT_DATA unset."""
    monkeypatch.delenv("CONTRASTEXT_DATA", raising=False)


def test_an_sts_file_is_scored_like_an_sts_task(tmp_path, capsys, tiny_bert_path, no_data_root):
    sts = write_sts(tmp_path / "my_sts.csv")
    results, stdout, _ = eval_json(["eval", "-m", tiny_bert_path, "--tasks", f"sts:{sts}"], tmp_path, capsys)
    result = results["tasks"]["my_sts"]
    assert (result["split"], result["kind"], result["path"], result["n"]) == ("file", "sts", str(sts), 6)
    pairs = [Example((a, b), label=score) for a, b, score in STS_ROWS]
    expected = evaluate_sts(TextEncoder.load(tiny_bert_path).encode, pairs)
    assert result["spearman"] == pytest.approx(expected["spearman"])
    assert results["average"]["spearman"] == pytest.approx(expected["spearman"])
    assert "my_sts" in stdout


def test_the_kind_is_inferred_from_the_columns_and_a_split_can_be_named(tmp_path, capsys, tiny_bert_path):
    sts = write_sts(tmp_path / "my_sts.tsv", "s1\ts2\tscore")
    sts.write_text(sts.read_text().replace('","', "\t").replace('",', "\t").replace('"', ""))
    pairs = write_pairs(tmp_path / "para.jsonl")
    reviews = write_reviews(tmp_path / "reviews.tsv")
    results, _, _ = eval_json(
        ["eval", "-m", tiny_bert_path, "--tasks", f"{sts}@dev,{pairs},{reviews}"], tmp_path, capsys
    )
    tasks = results["tasks"]
    assert (tasks["my_sts"]["kind"], tasks["my_sts"]["split"]) == ("sts", "dev")
    assert (tasks["para"]["kind"], tasks["reviews"]["kind"]) == ("pairs", "classification")


def test_a_classification_file_with_string_labels_is_probed(tmp_path, capsys, tiny_bert_path, no_data_root):
    reviews = write_reviews(tmp_path / "reviews.tsv")
    results, _, _ = eval_json(
        ["eval", "-m", tiny_bert_path, "--tasks", f"classification:{reviews}"], tmp_path, capsys
    )
    result = results["tasks"]["reviews"]
    assert result["labels"] == ["meh", "neg", "pos"]
    assert result["n"] + result["n_train"] == 36 and result["n"] == round(0.2 * 36)
    assert 0 <= result["accuracy"] <= 100 and {"f1", "mcc", "held_out"} <= set(result)


def test_a_pairs_file_is_scored_by_retrieval(tmp_path, capsys, minilm_path, no_data_root):
    pairs = write_pairs(tmp_path / "para.jsonl")
    results, stdout, _ = eval_json(["eval", "-m", minilm_path, "--tasks", f"pairs:{pairs}"], tmp_path, capsys)
    result = results["tasks"]["para"]
    assert (result["n"], result["candidates"]) == (4, 4)
    assert result["accuracy_at_1"] == result["mrr_at_10"] == 100.0  # all-MiniLM-L6-v2 gets these right
    assert "mrr@10" in stdout


def test_retrieval_counts_ties_against_the_anchor():
    """A model mapping every text to one vector must score 0, not 100."""
    pairs = [Example((f"q{i}", f"p{i}")) for i in range(5)]
    constant = evaluate_pairs(lambda texts, batch_size=64: np.ones((len(texts), 4)), pairs)
    assert constant["accuracy_at_1"] == 0.0 and constant["accuracy_at_10"] == 100.0


def test_a_local_datasets_folder_is_read(tmp_path, capsys, tiny_bert_path, no_data_root):
    datasets = pytest.importorskip("datasets")
    rows = {"sentence1": [a for a, _, _ in STS_ROWS], "sentence2": [b for _, b, _ in STS_ROWS],
            "score": [s for _, _, s in STS_ROWS]}  # fmt: skip
    folder = tmp_path / "my_sts_dataset"
    datasets.DatasetDict({"train": datasets.Dataset.from_dict(rows), "validation": datasets.Dataset.from_dict(rows)}
                         ).save_to_disk(str(folder))  # fmt: skip
    results, _, _ = eval_json(
        ["eval", "-m", tiny_bert_path, "--tasks", f"sts:{folder}@validation"], tmp_path, capsys
    )
    result = results["tasks"]["my_sts_dataset"]
    assert (result["split"], result["n"]) == ("validation", 6)
    assert "nope" in one_error_line(["eval", "-m", tiny_bert_path, "--tasks", f"sts:{folder}@nope"], capsys)


def test_registry_tasks_and_files_mix(tmp_path, capsys, tiny_bert_path, data_root):
    sts = write_sts(tmp_path / "my_sts.csv")
    results, _, _ = eval_json(
        ["eval", "-m", tiny_bert_path, "--tasks", f"stsb:dev,sts:{sts}", "--data-root", str(data_root),
         "--limit", "20"],
        tmp_path, capsys,
    )  # fmt: skip
    assert list(results["tasks"]) == ["stsb", "my_sts"]


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("sts:{tmp}/missing.csv", ["missing.csv", "no such file"]),
        ("classification:{tmp}/my_sts.csv", ["my_sts.csv", "'label'", "found columns sentence1, sentence2, score"]),
        ("pairs:{tmp}/my_sts.csv", ["my_sts.csv", "pairs needs"]),
        ("sts:{tmp}/notes.txt", ["notes.txt", "suffix"]),
        ("{tmp}/three_texts.csv", ["three_texts.csv", "cannot tell what to evaluate", "sts:"]),
        ("{tmp}/float_labels.csv", ["float_labels.csv", "sts:"]),
        ("nosuchtask", ["nosuchtask", "KIND:PATH"]),
        ("sts:{tmp}/my_sts.csv,{tmp}/my_sts.csv@dev", ["my_sts", "more than once"]),
    ],
)
def test_bad_specs_are_one_line_errors_naming_the_file(spec, expected, tmp_path, capsys, tiny_bert_path):
    write_sts(tmp_path / "my_sts.csv")
    (tmp_path / "notes.txt").write_text("hello\n")
    (tmp_path / "three_texts.csv").write_text("a,b,c,d\nw,x,y,z\n")
    (tmp_path / "float_labels.csv").write_text("s1,s2,label\na,b,4.5\nc,d,1.5\n")
    line = one_error_line(["eval", "-m", tiny_bert_path, "--tasks", spec.format(tmp=tmp_path)], capsys)
    for part in expected:
        assert part in line, line


def test_plain_eval_uses_what_the_shipped_data_root_holds(tmp_path, capsys, tiny_bert_path, data_root):
    """Default tasks on ../shared/data: STS12 (test), STS-B and SICK on dev (no test files), STS13-16 skipped."""
    results, _, stderr = eval_json(
        ["eval", "-m", tiny_bert_path, "--data-root", str(data_root), "--limit", "10"], tmp_path, capsys
    )
    if not (data_root / "stsb/original/sts-test.csv").exists():
        assert results["tasks"]["stsb"]["split"] == "dev"
        assert "note: stsb: no test file" in stderr
    if not (data_root / "senteval/downstream/STS/STS13-en-test").exists():
        assert "sts13" not in results["tasks"] and "note: sts13: skipped" in stderr
    assert results["tasks"]["sts12"]["split"] == "test"
    assert results["notes"] and results["average"]["spearman"] is not None


def test_plain_eval_on_an_empty_data_root_is_one_line(tmp_path, capsys, tiny_bert_path):
    (tmp_path / "empty").mkdir()
    line = one_error_line(["eval", "-m", tiny_bert_path, "--data-root", str(tmp_path / "empty")], capsys)
    assert "none of the default tasks" in line and "--tasks" in line


def test_the_spec_api_reads_the_same_rows(tmp_path):
    reviews = write_reviews(tmp_path / "reviews.tsv")
    spec = parse_eval_spec(f"classification:{reviews}")
    data = load_eval_data(spec)
    assert (spec.task.name, spec.split, spec.kind, spec.task.kind) == ("reviews", "file", "classification", "single")
    assert data.label_names == ("meh", "neg", "pos") and {e.label for e in data.examples} == {0, 1, 2}
    assert data.examples[0].source == f"{reviews}:2"
