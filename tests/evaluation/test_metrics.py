"""The metric wrappers agree with scipy / scikit-learn and reject malformed input."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats
from sklearn import metrics as sk

from contrastext.evaluation import metrics

RNG = np.random.default_rng(0)
SCORES = RNG.normal(size=50)
GOLD = SCORES + RNG.normal(scale=0.5, size=50)
BINARY_PRED = RNG.integers(0, 2, size=40)
BINARY_GOLD = RNG.integers(0, 2, size=40)
MULTI_PRED = RNG.integers(0, 5, size=60)
MULTI_GOLD = RNG.integers(0, 5, size=60)


def test_correlations_match_scipy():
    assert metrics.spearman(SCORES, GOLD) == pytest.approx(stats.spearmanr(SCORES, GOLD)[0])
    assert metrics.pearson(SCORES, GOLD) == pytest.approx(stats.pearsonr(SCORES, GOLD)[0])
    assert metrics.spearman(SCORES, GOLD, percent=True) == pytest.approx(100 * stats.spearmanr(SCORES, GOLD)[0])


def test_classification_metrics_match_sklearn():
    assert metrics.accuracy(BINARY_PRED, BINARY_GOLD) == pytest.approx(sk.accuracy_score(BINARY_GOLD, BINARY_PRED))
    assert metrics.f1(BINARY_PRED, BINARY_GOLD) == pytest.approx(sk.f1_score(BINARY_GOLD, BINARY_PRED))
    assert metrics.f1(MULTI_PRED, MULTI_GOLD) == pytest.approx(
        sk.f1_score(MULTI_GOLD, MULTI_PRED, average="macro")
    )
    assert metrics.macro_f1(BINARY_PRED, BINARY_GOLD) == pytest.approx(
        sk.f1_score(BINARY_GOLD, BINARY_PRED, average="macro")
    )
    assert metrics.matthews(MULTI_PRED, MULTI_GOLD) == pytest.approx(sk.matthews_corrcoef(MULTI_GOLD, MULTI_PRED))


def test_docstring_examples():
    assert metrics.spearman([1.0, 2.0, 3.0], [0.1, 0.5, 0.4]) == pytest.approx(0.5)
    assert metrics.accuracy([0, 1, 1], [0, 1, 0], percent=True) == pytest.approx(200 / 3)


def test_length_mismatch_is_named():
    with pytest.raises(ValueError, match="3 predictions, 2 labels"):
        metrics.accuracy([0, 1, 1], [0, 1])


def test_nan_is_rejected_with_its_position():
    with pytest.raises(ValueError, match="labels contains NaN.*index 1"):
        metrics.spearman([0.1, 0.2, 0.3], [1.0, math.nan, 2.0])


def test_empty_and_2d_are_rejected():
    with pytest.raises(ValueError, match="empty"):
        metrics.pearson([], [])
    with pytest.raises(ValueError, match="one-dimensional"):
        metrics.accuracy(np.zeros((2, 2)), np.zeros((2, 2)))


def test_metric_lookup():
    assert metrics.get_metric("matthews_corrcoef") is metrics.matthews
    assert metrics.canonical_metric_name("acc") == "accuracy"
    with pytest.raises(ValueError, match="valid metrics"):
        metrics.get_metric("bleu")
