"""experiments/hooks/retrieval.py on the shared SNLI triplets and the retrieval page, without training: the split
leaks no evaluation text into training, the folder is one `ir:` reads, bad input is one line, the arms pair by seed."""

from __future__ import annotations

import json

import pytest

from contrastext.data.readers.beir import read_beir
from tests.experiments._scripts import load_experiment

run, specs, harness = load_experiment("run"), load_experiment("spec"), load_experiment("harness")
hook = run.load_hook("retrieval")


@pytest.fixture(scope="module")
def built(data_root):
    return hook.build(data_root, **hook.SPLIT)


def test_the_split_keeps_every_evaluation_text_out_of_training(built):
    queries = set(built["queries"].values())
    relevant = {built["corpus"][document] for judged in built["qrels"].values() for _, document in judged}
    assert not {anchor for anchor, _ in built["pairs"]} & queries and not {p for _, p in built["pairs"]} & relevant
    assert built["manifest"]["corpus"] == len(built["corpus"]) >= 10_000  # issue 23's corpus of >= 10k texts
    assert built["manifest"]["queries"] == {"test": 1000, "dev": 500}
    assert len(built["pairs"]) == built["manifest"]["train_pairs"] > 4000
    assert len(built["triplets"]) == built["manifest"]["train_triplets"] > 4000
    assert not {anchor for anchor, _, _ in built["triplets"]} & queries
    assert not {text for _, positive, negative in built["triplets"] for text in (positive, negative)} & relevant


def test_the_folder_is_a_beir_folder_that_ir_reads_and_prepare_builds_it_once(built, data_root, tmp_path):
    args = run.build_parser(specs.load_spec("retrieval")).parse_args(["--runs", str(tmp_path), "--data-root",
                                                                       str(data_root)])
    assert hook.prepare(args) is args
    folder = hook.folder(args)
    data = read_beir(folder, split="test")
    assert len(data.corpus) == len(built["corpus"]) and len(data.relevant_docs) == 1000
    assert sum(len(docs) for docs in data.relevant_docs.values()) == len(built["qrels"]["test"])
    assert (folder / "corpus.txt").read_text(encoding="utf-8").splitlines() == list(built["corpus"].values())
    assert json.loads((folder / "manifest.json").read_text(encoding="utf-8")) == built["manifest"]
    hook.prepare(args)  # found: kept
    with pytest.raises(SystemExit, match="exists and is not empty"):
        hook.write(built, folder)


def test_a_row_with_an_empty_text_is_one_error_naming_the_line(tmp_path):
    (tmp_path / "nli").mkdir()
    (tmp_path / "nli" / "snli_devtest_for_simcse.csv").write_text("sent0,sent1,hard_neg\na,b,c\nd,,f\n", encoding="utf-8")
    with pytest.raises(SystemExit, match=r"snli_devtest_for_simcse.csv:3: an empty text"):
        hook.build(tmp_path, seed=0, test_queries=1, dev_queries=1)


def test_the_page_pairs_the_arms_by_seed(tmp_path):
    store, timing = harness.RecordStore("retrieval", tmp_path), harness.RunTiming([0.1] * 3, [0.2] * 3, 10.0)
    store.add("data", 0, {}, {"corpus": 11380, "queries": {"test": 1000}, "train_pairs": 4258}, timing)
    store.add("before", 0, {}, {key: 50.0 for key in hook.METRICS}, timing)
    for seed, (in_batch, mined) in enumerate([(60.0, 61.0), (59.0, 61.5), (60.5, 61.0)], start=1):
        store.add("in-batch", seed, {}, {key: in_batch for key in hook.METRICS}, timing)
        store.add("mined", seed, {}, {key: mined for key in hook.METRICS}, timing)
    experiment = specs.load_spec("retrieval")
    text = run.report(experiment, store, run.build_parser(experiment).parse_args(["--results", str(tmp_path)]))
    assert "11380 documents" in text and "in-batch − before, nDCG@10: +9.83" in text
    assert "mined − in-batch, nDCG@10, paired by seed (n = 3): Δ +1.33" in text
    assert "sign-flip permutation p = 0.25" in text  # 3 seeds: 2 of the 8 sign vectors are as extreme
    assert "bank − in-batch" not in text  # no bank runs recorded: no line


def test_training_cost_reads_the_median_throughput_and_the_negatives_report(tmp_path):
    log = [{"step": 10, "samples_per_s": 32.0}, {"step": 20, "samples_per_s": 64.0}, {"step": 30, "samples_per_s": 16.0}]
    (tmp_path / "train_log.jsonl").write_text("".join(json.dumps(record) + "\n" for record in log))
    (tmp_path / "config.yaml").write_text("train:\n  batch_size: 64\n")
    (tmp_path / "metrics.json").write_text(json.dumps({"report": {"negatives": {"fill_s": 12.5}}}))
    assert hook.training_cost(tmp_path) == {"steps": 30, "s_per_step": 2.0, "negatives_report": {"fill_s": 12.5}}
