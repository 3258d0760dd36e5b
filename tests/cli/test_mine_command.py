"""``contrastext mine``: mined rows in every output kind, read by ``train mnrl`` as they are; one-line errors."""

from __future__ import annotations

import csv
import json

import pytest

from tests.cli.cli_runs import run

pytestmark = pytest.mark.usefixtures("single_torch_thread")

TOPICS = ["cats", "pizza", "rome", "guitars", "rain", "trains", "coffee", "chess", "gardens", "rivers", "bikes", "tea"]


def write_pairs(tmp_path):
    path = tmp_path / "pairs.csv"
    rows = [f"what about {t}?,a short text on {t}\n" for t in TOPICS]
    path.write_text("query,answer\n" + "".join(rows))
    return path


def write_corpus(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text("".join(f"a long story about {t} and more\n" for t in TOPICS))
    return path


def mine(argv, capsys):
    return run(["mine", "--no-progress", *argv], capsys)


def test_mine_writes_triplets_that_train_mnrl_reads(tmp_path, capsys, minilm_path):
    pairs, corpus = write_pairs(tmp_path), write_corpus(tmp_path)
    output = tmp_path / "out" / "triplets.csv"
    code, out, err = mine(["-m", minilm_path, "-i", str(pairs), "--corpus", str(corpus), "-o", str(output),
                           "--num-negatives", "2", "--relative-margin", "0.05"], capsys)  # fmt: skip
    assert code == 0, err
    assert "Metric" in out and "Positive" in out and "Difference" in out  # ST's statistics table
    with open(output, encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert list(rows[0]) == ["query", "answer", "negative"]
    assert len(rows) == 2 * len(TOPICS)
    assert all(row["negative"] != row["answer"] for row in rows)
    held_out = tmp_path / "held_out.csv"
    held_out.write_text("anchor,positive\nabout cats,cats are pets\nabout rain,rain is water\n")
    run_dir = tmp_path / "run"
    sets = [f"model={minilm_path}", f"data.path={output}", f"output_dir={run_dir}", "train.max_steps=2",
            "train.epochs=null", "train.batch_size=4", "train.eval_every=2", "train.save_every=null",
            "train.progress_bar=false", f"eval.tasks=[pairs:{held_out}]"]  # fmt: skip
    code, out, err = run(["train", "mnrl", *[part for item in sets for part in ("--set", item)]], capsys)
    assert code == 0, err
    assert (run_dir / "final" / "encoder").is_dir()


@pytest.mark.parametrize(("name", "extra"), [("mined.jsonl", ["--output-format", "n-tuple"]),
                                             ("mined_dataset", ["--output-format", "labeled-pair"])])  # fmt: skip
def test_mine_writes_jsonl_and_datasets(tmp_path, capsys, minilm_path, name, extra):
    pairs = write_pairs(tmp_path)
    output = tmp_path / name
    code, _, err = mine(["-m", minilm_path, "-i", str(pairs), "-o", str(output), "--num-negatives", "2",
                         "--search", "faiss", *extra], capsys)  # fmt: skip
    assert code == 0, err
    if name.endswith(".jsonl"):
        first = json.loads(output.read_text().splitlines()[0])
        assert list(first) == ["query", "answer", "negative_1", "negative_2"]
    else:
        datasets = pytest.importorskip("datasets")
        loaded = datasets.load_from_disk(str(output))
        assert loaded.column_names == ["query", "answer", "label"]
        assert sorted(set(loaded["label"])) == [0, 1]


def test_bad_input_is_one_error_line(tmp_path, capsys, minilm_path):
    pairs = write_pairs(tmp_path)
    code, _, err = mine(["-m", minilm_path, "-i", str(pairs), "-o", str(pairs)], capsys)
    assert code == 2 and err.count("\n") == 1 and "input" in err and pairs.read_text().startswith("query,answer")
    code, _, err = mine(["-m", minilm_path, "-i", str(pairs), "-o", str(tmp_path / "x.csv"), "--sampling-strategy",
                         "best"], capsys)  # fmt: skip
    assert code == 2 and "--sampling-strategy" in err and not (tmp_path / "x.csv").exists()
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"query": "q", "answer": "a"}\n{"query": "q2"\n')
    code, _, err = mine(["-m", minilm_path, "-i", str(bad), "-o", str(tmp_path / "y.csv")], capsys)
    assert code == 2 and "bad.jsonl:2" in err and err.count("\n") == 1
    (tmp_path / "exists").mkdir()
    code, _, err = mine(["-m", minilm_path, "-i", str(pairs), "-o", str(tmp_path / "exists")], capsys)
    assert code == 2 and "already exists" in err


def test_a_datasets_folder_and_a_table_corpus_are_read(tmp_path, capsys, minilm_path):
    datasets = pytest.importorskip("datasets")
    folder = tmp_path / "pairs_dataset"
    datasets.Dataset.from_dict({"question": [f"what about {t}?" for t in TOPICS],
                                "answer": [f"a short text on {t}" for t in TOPICS]}).save_to_disk(str(folder))  # fmt: skip
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"id": i, "body": f"a story about {t}"}) + "\n" for i, t in enumerate(TOPICS)))
    output = tmp_path / "mined.tsv"
    code, out, err = mine(["-m", minilm_path, "-i", str(folder), "--corpus", str(corpus), "--corpus-column", "body",
                           "-o", str(output), "--num-negatives", "1", "--search", "ivf"], capsys)  # fmt: skip
    assert code == 0, err
    lines = output.read_text().splitlines()
    assert lines[0] == "question\tanswer\tnegative" and len(lines) == 1 + len(TOPICS)
    assert any("a story about" in line for line in lines[1:])  # the corpus texts are candidates
