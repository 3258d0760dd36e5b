"""The one producer of metric keys: ``metric_key``, ``task_metrics``, and ``make_evaluator`` over registry tasks and
the user's files (sts, pairs, classification), with the keys of ``contrastext eval``'s ``metrics``."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from sklearn.feature_extraction.text import HashingVectorizer

from contrastext.data.tasks import get_task, load_task, task_names
from contrastext.errors import ConfigError
from contrastext.evaluation.evaluators import (
    METRIC_NAMES,
    EvalSet,
    headline_metric,
    make_evaluator,
    metric_key,
    task_metrics,
)
from contrastext.evaluation.suite import evaluate_tasks
from contrastext.evaluation.task_specs import load_eval_data, parse_eval_spec

VECTORIZER = HashingVectorizer(n_features=256, alternate_sign=False)


def bag_of_words(texts, batch_size=64, **_):
    return VECTORIZER.transform(texts).toarray()


MODEL = SimpleNamespace(encoder=SimpleNamespace(encode=bag_of_words))


def test_metric_key_and_task_metrics():
    assert metric_key("stsb", "dev", "spearman") == "stsb_dev_spearman"
    scores = {"accuracy": 80.0, "f1": 70, "mcc": 41.0, "n": 1043, "metric": "mcc", "C": 0.5}
    assert task_metrics("cola", "dev", scores, "mcc") == {
        "cola_dev_accuracy": 80.0, "cola_dev_f1": 70.0, "cola_dev_mcc": 41.0, "cola_dev_score": 41.0
    }
    assert task_metrics("stsb", "dev", {"spearman": None, "pearson": 1.0}, "spearman")["stsb_dev_score"] is None
    with pytest.raises(KeyError, match="mcc"):
        task_metrics("cola", "dev", {"accuracy": 80.0}, "mcc")


def test_every_registry_metric_is_the_name_of_a_key():
    """``Task.metric`` names equal the keys' ``<metric>`` (CoLA's is ``mcc``, not ``matthews``)."""
    metrics = {get_task(name).metric for name in task_names()} - {None}
    assert metrics <= set(METRIC_NAMES)
    assert headline_metric(get_task("cola")) == "mcc"


def write_files(folder):
    sts = folder / "my_sts.csv"
    sts.write_text("s1,s2,score\n" + "".join(f"a cat {i},a cat {i} sleeps,{i % 5}\n" for i in range(10)))
    pairs = folder / "para.jsonl"
    pairs.write_text("".join(json.dumps({"anchor": f"q {i} {i}", "positive": f"p {i} {i}"}) + "\n" for i in range(6)))
    reviews = folder / "reviews.tsv"
    words = {"pos": "great lovely", "neg": "awful bad"}
    reviews.write_text("text\tlabel\n" + "".join(f"{words[k]} {i}\t{k}\n" for i in range(25) for k in words))
    return [f"sts:{sts}", f"pairs:{pairs}", f"classification:{reviews}"]


def test_files_and_registry_tasks_get_the_keys_of_the_eval_command(tmp_path, data_root):
    specs = ["stsb:dev", *write_files(tmp_path)]
    sets = []
    for spec in specs:
        parsed = parse_eval_spec(spec)
        examples = load_eval_data(parsed, data_root).examples
        sets.append(EvalSet(parsed.task, parsed.split, examples[:60] if spec == "stsb:dev" else examples))
    metrics = make_evaluator(sets, "embeddings", batch_size=16)(MODEL)
    assert {"stsb_dev_spearman", "my_sts_file_pearson", "para_file_mrr_at_10", "reviews_file_mcc"} <= set(metrics)
    assert metrics["para_file_score"] == metrics["para_file_mrr_at_10"]
    assert metrics["reviews_file_score"] == metrics["reviews_file_accuracy"]
    assert metrics["score"] == metrics["stsb_dev_score"] == metrics["stsb_dev_spearman"]
    report = evaluate_tasks(bag_of_words, specs, data_root, limit=60)
    # The eval command's keys are training's; the classification file is probed on the same 80/20 split.
    assert set(report["metrics"]) == set(metrics)
    for key in ("stsb_dev_spearman", "my_sts_file_spearman", "para_file_mrr_at_10", "reviews_file_accuracy"):
        assert report["metrics"][key] == pytest.approx(metrics[key])


def test_a_registry_task_that_is_not_scored_pairs_is_refused_for_embeddings(data_root):
    sst2 = EvalSet(get_task("sst2"), "dev", load_task("sst2:dev", data_root).examples[:5])
    with pytest.raises(ConfigError, match="sst2 is not an STS task"):
        make_evaluator([sst2], "embeddings")
    with pytest.raises(ConfigError, match="given twice"):
        make_evaluator([sst2, sst2], "head")


def test_head_predictions_are_scored_with_the_task_metric(data_root):
    examples = load_task("cola:dev", data_root).examples[:40]
    model = SimpleNamespace(predict=lambda rows, batch_size, task: [example.label for example in rows])
    metrics = make_evaluator([EvalSet(get_task("cola"), "dev", examples, name="mine")], "head")(model)
    assert metrics == {"mine_dev_accuracy": 100.0, "mine_dev_f1": 100.0, "mine_dev_mcc": 100.0,
                       "mine_dev_score": 100.0, "score": 100.0}
