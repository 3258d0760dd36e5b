"""The probe and prediction scoring on synthetic embeddings (no model, no data files)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from sklearn.metrics import accuracy_score, matthews_corrcoef

from contrastext.data.examples import Example
from contrastext.evaluation.classification import evaluate_predictions, evaluate_probe, probe_features

RNG = np.random.default_rng(0)
# Sentence "pos-i" lies near +mu, "neg-i" near -mu: linearly separable up to noise.
MU = RNG.normal(size=16)
VECTORS = {f"pos-{i}": MU + RNG.normal(scale=1.5, size=16) for i in range(120)}
VECTORS |= {f"neg-{i}": -MU + RNG.normal(scale=1.5, size=16) for i in range(120)}


def encode(texts, batch_size=64):
    return np.stack([VECTORS[text] for text in texts])


def examples(indices):
    return [Example((f"{kind}-{i}",), label=int(kind == "pos")) for i in indices for kind in ("pos", "neg")]


def test_probe_separates_the_classes_with_cv():
    result = evaluate_probe(encode, examples(range(80)), examples(range(80, 120)), kind="single")
    assert result["n"] == 80 and result["n_train"] == 160
    assert result["accuracy"] > 90.0  # the two clouds barely overlap
    assert result["c_selection"] == "5-fold CV on train"
    assert result["metric"] == "accuracy"


def test_probe_chooses_c_on_dev_when_given():
    result = evaluate_probe(
        encode, examples(range(60)), examples(range(90, 120)), dev=examples(range(60, 90)), metric="mcc"
    )
    assert result["c_selection"] == "dev"
    assert result["metric"] == "mcc"
    assert result["mcc"] > 80.0


def test_pair_features_follow_senteval():
    pair = [Example(("pos-0", "neg-0"), label=1)]
    features = probe_features(pair, VECTORS, "pair")
    u, v = VECTORS["pos-0"], VECTORS["neg-0"]
    np.testing.assert_allclose(features[0], np.concatenate([u, v, np.abs(u - v), u * v]))


def test_predictions_scored_with_the_task_metric():
    cola = SimpleNamespace(name="cola", kind="single", metric="mcc")
    predictions, labels = [1, 0, 1, 1, 0, 0], [1, 0, 0, 1, 0, 1]
    result = evaluate_predictions(cola, predictions, labels)
    assert result["metric"] == "mcc"
    assert result["score"] == pytest.approx(100 * matthews_corrcoef(labels, predictions))
    assert result["accuracy"] == pytest.approx(100 * accuracy_score(labels, predictions))
    stsb = SimpleNamespace(name="stsb", kind="sts", metric="spearman")
    assert evaluate_predictions(stsb, [0.1, 0.4, 0.3], [1.0, 3.0, 2.0])["score"] == pytest.approx(100.0)


def test_unlabelled_examples_are_named():
    train = examples(range(10)) + [Example(("pos-11",), label=None, source="t.tsv:7")]
    with pytest.raises(ValueError, match="t.tsv:7: the probe needs a class label"):
        evaluate_probe(encode, train, examples(range(20, 25)))
