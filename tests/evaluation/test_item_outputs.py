"""contrastext.evaluation.item_outputs: the per-item predictions of the evaluations made inside a recording, the
ones the corpus metrics were computed from (for a two-level bootstrap over seeds × test items)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from scipy.stats import spearmanr
from sklearn.feature_extraction.text import HashingVectorizer

from contrastext.data.tasks import get_task, load_task
from contrastext.evaluation import item_outputs
from contrastext.evaluation.evaluators import EvalSet, make_evaluator

VECTORIZER = HashingVectorizer(n_features=256, alternate_sign=False)
ENCODER = SimpleNamespace(encoder=SimpleNamespace(encode=lambda texts, batch_size=64, **_: VECTORIZER.transform(texts).toarray()))


def test_scored_pairs_record_each_pairs_cosine_and_reproduce_the_reported_spearman(data_root):
    examples = load_task("stsb:dev", data_root).examples[:60]
    evaluate = make_evaluator([EvalSet(get_task("stsb"), "dev", examples)])
    assert not item_outputs.active()
    with item_outputs.recording() as found:
        assert item_outputs.active()
        metrics = evaluate(ENCODER)
    items = found["stsb_dev"]
    assert len(items["prediction"]) == len(items["label"]) == 60
    assert items["label"] == [float(example.label) for example in examples]
    assert 100 * spearmanr(items["prediction"], items["label"]).statistic == pytest.approx(
        metrics["stsb_dev_spearman"], abs=1e-9)
    assert not item_outputs.active() and evaluate(ENCODER) == metrics  # outside: nothing kept, same metrics


def test_head_predictions_are_recorded_the_last_evaluation_of_a_set_wins_and_every_recording_gets_them(data_root):
    examples = load_task("cola:dev", data_root).examples[:40]
    evaluate = make_evaluator([EvalSet(get_task("cola"), "dev", examples, name="mine")], "head")
    flipped = SimpleNamespace(predict=lambda rows, batch_size, task: np.array([1 - e.label for e in rows]))
    right = SimpleNamespace(predict=lambda rows, batch_size, task: [e.label for e in rows])
    with item_outputs.recording() as outer, item_outputs.recording() as inner:
        evaluate(flipped)
        metrics = evaluate(right)
    assert outer == inner and set(outer) == {"mine_dev"}
    items = outer["mine_dev"]
    correct = np.mean(np.array(items["prediction"]) == np.array(items["label"]))
    assert 100 * correct == metrics["mine_dev_accuracy"] == 100.0
    with item_outputs.recording(), pytest.raises(ValueError, match="mine_dev: 2 predictions for 3 labels"):
        item_outputs.record("mine_dev", [1, 0], [1, 0, 1])
    with item_outputs.recording() as found:
        item_outputs.record("multi_dev", [[1, 0], [0, 1]], [0, 1])  # not one number an item: not kept
    assert found == {}
