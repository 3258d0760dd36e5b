"""experiments/significance.py against scipy (t-interval, t-test, permutation test, TOST) and hand-worked cases."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "experiments"))
import harness  # noqa: E402
import significance as sig  # noqa: E402

DIFFERENCES = [1.2, -0.4, 2.5, 0.9, 1.7, -0.1, 3.0, 0.6]


def test_t_interval_and_p_equal_scipy_ttest():
    result = stats.ttest_1samp(DIFFERENCES, 0.0)
    low, high = sig.t_interval(DIFFERENCES)
    interval = result.confidence_interval(0.95)
    assert (low, high) == pytest.approx((interval.low, interval.high), rel=1e-12)
    assert sig.t_test_p(DIFFERENCES) == pytest.approx(result.pvalue, rel=1e-12)


def test_t_statistics_of_one_value_or_equal_values():
    assert all(math.isnan(v) for v in sig.t_interval([1.0]))
    assert math.isnan(sig.t_test_p([1.0]))
    assert sig.t_interval([2.0, 2.0, 2.0]) == (2.0, 2.0)
    assert sig.t_test_p([0.0, 0.0]) == 1.0


def _scipy_sign_flip(d, resamples=np.inf, seed=0):
    d = np.asarray(d, dtype=float)
    result = stats.permutation_test(
        (d, np.zeros_like(d)), lambda x, y: np.mean(x - y), permutation_type="samples",
        alternative="two-sided", n_resamples=resamples, rng=np.random.default_rng(seed),
    )
    return result.pvalue


@pytest.mark.parametrize("d", [
    DIFFERENCES,
    [1.0, 2.0, 3.0, 4.0, 5.0],  # every sign the same: the smallest p at n = 5, 2/32
    [0.5, -0.5, 0.25, -0.25],  # mean 0: p = 1
    [-0.82, -1.1, -0.3, -0.7, -1.4, 0.2, -0.9, -0.5, -1.3, -0.6, 0.1, -0.4, -1.0, -0.2, -0.8, -0.35],  # n = 16
])
def test_sign_flip_p_is_scipy_permutation_test_exact(d):
    assert sig.sign_flip_p(d) == pytest.approx(_scipy_sign_flip(d), rel=1e-12)


@pytest.mark.parametrize(("name", "treatment", "baseline", "key"), [
    ("reclaim", "sst2/semi1/k10", "sst2/semi1/lam0", "metric"),
    ("multitask", "round_robin", "proportional", "quora_accuracy"),
])
def test_sign_flip_p_counts_rounding_ties_as_scipy_does(name, treatment, baseline, key):
    """Accuracy differences are multiples of one row's share: flipped sums tie up to rounding in the records."""
    store = harness.RecordStore(name)
    _, d = sig.paired_differences(store.values(treatment, key), store.values(baseline, key))
    assert sig.sign_flip_p(d) == pytest.approx(_scipy_sign_flip(d), rel=1e-12)


def test_sign_flip_p_floor_at_n_5_is_0_0625():
    assert sig.sign_flip_p([1, 2, 3, 4, 5]) == pytest.approx(2 / 32)


def test_sign_flip_p_monte_carlo_above_16_is_close_to_scipy_and_seeded():
    rng = np.random.default_rng(3)
    d = rng.normal(0.3, 1.0, size=20)
    ours = sig.sign_flip_p(d, seed=1)
    assert ours == sig.sign_flip_p(d, seed=1)
    assert ours == pytest.approx(_scipy_sign_flip(d, resamples=200_000, seed=2), abs=0.02)


def test_sign_flip_p_refuses_fewer_than_10000_flips():
    with pytest.raises(ValueError, match="error: resamples"):
        sig.sign_flip_p([1.0] * 20, resamples=999)


def test_holm_hand_worked_example():
    # m = 4, sorted p: 0.01, 0.02, 0.03, 0.04 -> 4*0.01 = 0.04, 3*0.02 = 0.06, 2*0.03 = 0.06, 1*0.04 = 0.04 -> 0.06
    # (monotone: the running maximum). Holm (1979): reject H_(1) at 0.05 (0.04 < 0.05), stop at H_(2).
    assert sig.holm([0.03, 0.01, 0.04, 0.02]) == pytest.approx([0.06, 0.04, 0.06, 0.06])


def test_holm_caps_at_1_and_skips_nan():
    adjusted = sig.holm([0.6, math.nan, 0.001, 0.7])  # m = 3: 3 * 0.001, min(1, 2 * 0.6), max(1, 0.7)
    assert math.isnan(adjusted[1])
    assert [adjusted[0], adjusted[2], adjusted[3]] == pytest.approx([1.0, 0.003, 1.0])


def test_tost_is_the_larger_of_scipy_one_sided_tests():
    margin = 1.0
    d = [0.2, -0.3, 0.1, 0.4, -0.1, 0.0, 0.3]
    lower = stats.ttest_1samp(d, -margin, alternative="greater").pvalue
    upper = stats.ttest_1samp(d, margin, alternative="less").pvalue
    assert sig.tost_p(d, margin) == pytest.approx(max(lower, upper), rel=1e-12)
    assert sig.tost_p(d, margin) < 0.05
    assert sig.tost_p([3.0, 2.5, 3.5], margin) > 0.5
    with pytest.raises(ValueError, match="margin"):
        sig.tost_p(d, 0.0)


def test_two_level_bootstrap_covers_the_mean_and_widens_with_seed_noise():
    rng = np.random.default_rng(0)
    base = rng.integers(0, 2, size=(5, 300))
    better = np.where(rng.random((5, 300)) < 0.1, 1, base)
    low, high = sig.two_level_bootstrap(better, base, resamples=2000)
    assert low <= (better - base).mean() <= high and low > 0
    shifted = better.astype(float) + np.array([[0.2], [-0.2], [0.1], [-0.1], [0.0]])
    wide_low, wide_high = sig.two_level_bootstrap(shifted, base, resamples=2000)
    assert wide_high - wide_low > high - low
    with pytest.raises(ValueError, match="error:"):
        sig.two_level_bootstrap(base[:, :10], base, resamples=10)


def test_paired_uses_common_seeds_and_the_larger_p():
    result = sig.paired({1: 3.0, 2: 4.0, 3: 6.0, 4: 5.0}, {1: 1.0, 2: 1.5, 3: 2.0, 5: 9.0})
    assert result.n == 3 and result.delta == pytest.approx((2 + 2.5 + 4) / 3)
    assert result.permutation_p == pytest.approx(0.25)  # n = 3: 2 of 8 sign vectors as extreme
    assert result.p == max(result.t_p, result.permutation_p)


def test_floor_reason_majority_and_all_positive_f1():
    floor = sig.Floor(majority=52.7, all_positive_f1=81.2)
    assert sig.floor_reason({"a": 60.0, "b": 55.6}, floor, "accuracy") == "b 55.6 < majority 52.7 + 3"
    assert sig.floor_reason({"a": 60.0}, floor, "accuracy") is None
    assert "< all-positive 81.2" in sig.floor_reason({"a": 71.0}, floor, "f1")
    assert sig.floor_reason({"a": 82.0}, floor, "f1") is None


@pytest.mark.parametrize(("p", "delta", "direction", "floored", "equivalence", "expected"), [
    (0.01, 1.0, 1, False, False, "reproduced"),
    (0.01, -1.0, 1, False, False, "opposite"),
    (0.01, -1.0, -1, False, False, "reproduced"),
    (0.2, 1.0, 1, False, False, "inconclusive"),
    (math.nan, 1.0, 1, False, False, "inconclusive"),
    (0.001, 1.0, 1, True, False, "no evidence (floor)"),
    (0.01, 0.1, 1, False, True, "reproduced"),
    (0.3, 0.1, 1, False, True, "inconclusive"),
])
def test_verdict_has_four_values(p, delta, direction, floored, equivalence, expected):
    word = sig.verdict(p, delta, direction, floored, equivalence)
    assert word == expected and word in sig.VERDICTS
