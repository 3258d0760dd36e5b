"""experiments/retrieval_data.py on the shared SNLI triplets, and experiments/retrieval.py's report, without
training: the split leaks no evaluation text into training, the folder is one `ir:` reads, bad input is one line."""

from __future__ import annotations

import json

import pytest

from contrastext.data.readers.beir import read_beir
from tests.experiments._scripts import load_experiment

retrieval_data = load_experiment("retrieval_data")
retrieval = load_experiment("retrieval")


@pytest.fixture(scope="module")
def built(data_root):
    return retrieval_data.build(data_root, seed=0, test_queries=1000, dev_queries=500)


def test_the_split_keeps_every_evaluation_text_out_of_training(built):
    queries = set(built["queries"].values())
    relevant = {built["corpus"][document] for judged in built["qrels"].values() for _, document in judged}
    anchors = {anchor for anchor, _ in built["pairs"]}
    positives = {positive for _, positive in built["pairs"]}
    assert not anchors & queries
    assert not positives & relevant
    assert built["manifest"]["corpus"] == len(built["corpus"]) >= 10_000  # issue 23's corpus of >= 10k texts
    assert built["manifest"]["queries"] == {"test": 1000, "dev": 500}
    assert len(built["pairs"]) == built["manifest"]["train_pairs"] > 4000
    assert len(built["triplets"]) == built["manifest"]["train_triplets"] > 4000
    assert not {anchor for anchor, _, _ in built["triplets"]} & queries
    assert not {text for _, positive, negative in built["triplets"] for text in (positive, negative)} & relevant


def test_the_folder_is_a_beir_folder_that_ir_reads(built, tmp_path):
    retrieval_data.write(built, tmp_path / "folder")
    data = read_beir(tmp_path / "folder", split="test")
    assert len(data.corpus) == len(built["corpus"])
    assert len(data.relevant_docs) == 1000  # the judged test queries (queries.jsonl holds dev's too)
    assert sum(len(docs) for docs in data.relevant_docs.values()) == len(built["qrels"]["test"])
    lines = (tmp_path / "folder" / "corpus.txt").read_text(encoding="utf-8").splitlines()
    assert lines == list(built["corpus"].values())
    with pytest.raises(SystemExit, match="exists and is not empty"):
        retrieval_data.write(built, tmp_path / "folder")


def test_a_row_with_an_empty_text_is_one_error_naming_the_line(tmp_path, data_root):
    root = tmp_path / "root"
    (root / "nli").mkdir(parents=True)
    (root / "nli" / "snli_devtest_for_simcse.csv").write_text("sent0,sent1,hard_neg\na,b,c\nd,,f\n", encoding="utf-8")
    with pytest.raises(SystemExit, match=r"snli_devtest_for_simcse.csv:3: an empty text"):
        retrieval_data.build(root, seed=0, test_queries=1, dev_queries=1)


def test_the_report_pairs_the_arms_by_seed(tmp_path):
    store = retrieval.harness.RecordStore("retrieval", tmp_path)
    timing = retrieval.harness.RunTiming([0.1, 0.1, 0.1], [0.2, 0.2, 0.2], 10.0)
    store.add("data", 0, {}, {"corpus": 11380, "queries": {"test": 1000}, "train_pairs": 4258}, timing)
    store.add("before", 0, {}, {key: 50.0 for key in retrieval.METRICS}, timing)
    for seed, (in_batch, mined) in enumerate([(60.0, 61.0), (59.0, 61.5), (60.5, 61.0)], start=1):
        store.add("in-batch", seed, {}, {key: in_batch for key in retrieval.METRICS}, timing)
        store.add("mined", seed, {}, {key: mined for key in retrieval.METRICS}, timing)
    text = retrieval.report(store, retrieval.harness.parser("x").parse_args([]))
    assert "in-batch − before, nDCG@10: +9.83" in text
    assert "mined − in-batch, nDCG@10, paired by seed (n = 3): Δ +1.33" in text
    assert "sign-flip permutation p = 0.25" in text  # 3 seeds: 2 of the 8 sign vectors are as extreme
    assert "bank − in-batch" not in text  # no bank runs recorded: no line
    assert json.loads((tmp_path / "retrieval.json").read_text())[0]["setting"] == "data"


def test_training_cost_reads_the_median_throughput_and_the_negatives_report(tmp_path):
    log = [{"step": 10, "samples_per_s": 32.0}, {"step": 20, "samples_per_s": 64.0}, {"step": 30, "samples_per_s": 16.0}]
    (tmp_path / "train_log.jsonl").write_text("".join(json.dumps(record) + "\n" for record in log))
    (tmp_path / "config.yaml").write_text("train:\n  batch_size: 64\n")
    (tmp_path / "metrics.json").write_text(json.dumps({"report": {"negatives": {"fill_s": 12.5}}}))
    assert retrieval.training_cost(tmp_path) == {"steps": 30, "s_per_step": 2.0, "negatives_report": {"fill_s": 12.5}}
