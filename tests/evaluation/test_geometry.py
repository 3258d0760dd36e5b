"""Alignment and uniformity on hand-made embeddings (formulas of Wang & Isola 2020)."""

from __future__ import annotations

import numpy as np
import pytest

from contrastext.evaluation.geometry import alignment, uniformity


def test_identical_embeddings_are_perfectly_aligned():
    x = np.random.default_rng(0).normal(size=(10, 8))
    assert alignment(x, x) == pytest.approx(0.0)


def test_alignment_is_nonnegative_and_scale_free():
    rng = np.random.default_rng(1)
    x, y = rng.normal(size=(20, 8)), rng.normal(size=(20, 8))
    value = alignment(x, y)
    assert value >= 0.0
    assert alignment(3 * x, 0.5 * y) == pytest.approx(value)  # computed on normalised rows
    opposite = alignment(np.eye(4), -np.eye(4))
    assert opposite == pytest.approx(4.0)  # ‖u − (−u)‖² = 4 on the unit sphere


def test_uniformity_matches_a_naive_loop():
    x = np.random.default_rng(2).normal(size=(12, 5))
    unit = x / np.linalg.norm(x, axis=1, keepdims=True)
    values = [
        np.exp(-2 * np.sum((unit[i] - unit[j]) ** 2)) for i in range(len(unit)) for j in range(i + 1, len(unit))
    ]
    assert uniformity(x) == pytest.approx(np.log(np.mean(values)))
    assert uniformity(x) <= 0.0


def test_collapsed_embeddings_have_uniformity_zero():
    assert uniformity(np.ones((5, 3))) == pytest.approx(0.0)


def test_bad_shapes_are_errors():
    with pytest.raises(ValueError, match="same shape"):
        alignment(np.ones((3, 2)), np.ones((4, 2)))
    with pytest.raises(ValueError, match="at least 2"):
        uniformity(np.ones((1, 3)))
    with pytest.raises(ValueError, match="2-D"):
        uniformity(np.ones(3))
