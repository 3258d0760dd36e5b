"""experiments/significance.py: the floor check and the one verdict rule (the statistics it reads are
contrastext.evaluation.significance's, tested in tests/evaluation/test_significance.py)."""

from __future__ import annotations

import math

import pytest

from tests.experiments._scripts import load_experiment

sig = load_experiment("significance")


def test_floor_reason_majority_plus_3_and_all_positive_f1():
    floor = sig.Floor(majority=52.7, all_positive_f1=81.2)
    assert sig.floor_reason({"a": 60.0, "b": 55.6}, floor, "accuracy") == "b 55.6 < majority 52.7 + 3"
    assert sig.floor_reason({"a": 60.0}, floor, "accuracy") is None and sig.floor_reason({"a": 82.0}, floor, "f1") is None
    assert "< all-positive 81.2" in sig.floor_reason({"a": 71.0}, floor, "f1")


@pytest.mark.parametrize(("p", "delta", "direction", "floored", "equivalence", "expected"), [
    (0.01, 1.0, 1, False, False, "reproduced"), (0.01, -1.0, 1, False, False, "opposite"),
    (0.01, -1.0, -1, False, False, "reproduced"), (0.2, 1.0, 1, False, False, "inconclusive"),
    (math.nan, 1.0, 1, False, False, "inconclusive"), (0.001, 1.0, 1, True, False, "no evidence (floor)"),
    (0.01, 0.1, 1, False, True, "reproduced"), (0.3, 0.1, 1, False, True, "inconclusive"),
])
def test_verdict_has_four_values(p, delta, direction, floored, equivalence, expected):
    assert sig.verdict(p, delta, direction, floored, equivalence) == expected and expected in sig.VERDICTS
