"""``evaluate_tasks`` on real data with a cheap bag-of-words encoder: result shape, averaging, errors."""

from __future__ import annotations

import pytest
from sklearn.feature_extraction.text import HashingVectorizer

from contrastext.errors import ContrastextError, MissingDataError, UnknownNameError
from contrastext.evaluation.suite import STS_SUITE, evaluate_tasks

VECTORIZER = HashingVectorizer(n_features=256, alternate_sign=False)


def bag_of_words(texts, batch_size=64):
    return VECTORIZER.transform(texts).toarray()


def test_mixed_tasks_give_the_documented_shape(data_root):
    result = evaluate_tasks(bag_of_words, ["stsb:dev", "sts12", "mrpc"], data_root, limit=40, max_train=200)
    assert set(result) == {"tasks", "average", "metrics"}
    assert list(result["tasks"]) == ["stsb", "sts12", "mrpc"]
    stsb, sts12, mrpc = (result["tasks"][name] for name in ("stsb", "sts12", "mrpc"))
    assert stsb["split"] == "dev" and stsb["n"] == 40 and set(stsb) == {"split", "spearman", "pearson", "n"}
    assert sts12["split"] == "test" and sts12["aggregation"] == "all"
    assert len(sts12["subsets"]) == 5 and all(subset["n"] == 40 for subset in sts12["subsets"].values())
    assert sts12["n"] == 200
    assert mrpc["split"] == "dev" and mrpc["metric"] == "f1" and mrpc["n"] == 40 and mrpc["n_train"] == 200
    assert {"accuracy", "f1", "mcc", "C", "c_selection"} <= set(mrpc)
    expected = (stsb["spearman"] + sts12["spearman"]) / 2  # classification tasks are not averaged in
    assert result["average"]["spearman"] == pytest.approx(expected)
    metrics = result["metrics"]  # the flat keys a training run logs, from the same producer
    assert metrics["stsb_dev_spearman"] == stsb["spearman"] and metrics["stsb_dev_score"] == stsb["spearman"]
    assert metrics["sts12_test_pearson"] == sts12["pearson"] and metrics["mrpc_dev_mcc"] == mrpc["mcc"]
    assert metrics["mrpc_dev_score"] == mrpc["f1"] and metrics["score"] == stsb["spearman"]
    assert not [key for key in metrics if key.endswith(("_n", "_split", "_subsets", "_C"))]


def test_wmean_aggregation_is_the_weighted_subset_mean(data_root):
    sts12 = evaluate_tasks(bag_of_words, ["sts12"], data_root, sts_aggregation="wmean", limit=30)["tasks"]["sts12"]
    subsets = sts12["subsets"].values()
    weighted = sum(subset["spearman"] * subset["n"] for subset in subsets) / sum(s["n"] for s in subsets)
    assert sts12["aggregation"] == "wmean" and sts12["spearman"] == pytest.approx(weighted)


def test_missing_split_raises_missing_data(data_root):
    assert "stsb" in STS_SUITE
    with pytest.raises(MissingDataError, match="sts-test.csv"):  # the shared copy has no STS-B test split
        evaluate_tasks(bag_of_words, ["stsb"], data_root)


def test_bad_specs_fail_before_any_work(data_root):
    with pytest.raises(UnknownNameError, match="nosuch"):
        evaluate_tasks(bag_of_words, ["stsb:dev", "nosuch"], data_root)
    with pytest.raises(ContrastextError, match="more than once"):
        evaluate_tasks(bag_of_words, ["stsb:dev", "stsb:train"], data_root)
    with pytest.raises(ContrastextError, match="no evaluation"):
        evaluate_tasks(bag_of_words, ["wiki1m"], data_root)


def test_task_without_train_file_holds_out_part_of_its_split(data_root):
    qnli = evaluate_tasks(bag_of_words, ["qnli"], data_root, max_train=150, limit=50)["tasks"]["qnli"]
    assert qnli["split"] == "dev" and qnli["n"] == 50 and qnli["n_train"] == 150
    assert "held out" in qnli["held_out"]


def test_an_undefined_task_correlation_makes_the_average_none(caplog):
    from contrastext.evaluation.suite import average_similarity

    tasks = {"stsb": {"spearman": 80.0, "pearson": 81.0}, "sickr": {"spearman": None, "pearson": 70.0}}
    assert average_similarity(tasks) == {"spearman": None, "pearson": 75.5}
    assert "sickr" in caplog.text
