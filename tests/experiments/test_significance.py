"""experiments/significance.py against scipy (t-interval, t-test, permutation test, TOST) and hand-worked cases."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from tests.experiments._scripts import harness, load_experiment

sig = load_experiment("significance")
D = [1.2, -0.4, 2.5, 0.9, 1.7, -0.1, 3.0, 0.6]


def _scipy_sign_flip(d, resamples=np.inf, seed=0):
    d = np.asarray(d, dtype=float)
    return stats.permutation_test((d, np.zeros_like(d)), lambda x, y: np.mean(x - y), permutation_type="samples",
                                  n_resamples=resamples, rng=np.random.default_rng(seed)).pvalue


def test_t_interval_p_and_tost_equal_scipy_and_degenerate_inputs():
    result, interval = stats.ttest_1samp(D, 0.0), stats.ttest_1samp(D, 0.0).confidence_interval(0.95)
    assert sig.t_interval(D) == pytest.approx((interval.low, interval.high), rel=1e-12)
    assert sig.t_test_p(D) == pytest.approx(result.pvalue, rel=1e-12)
    assert all(math.isnan(v) for v in (*sig.t_interval([1.0]), sig.t_test_p([1.0])))
    assert sig.t_interval([2.0, 2.0, 2.0]) == (2.0, 2.0) and sig.t_test_p([0.0, 0.0]) == 1.0
    d = [0.2, -0.3, 0.1, 0.4, -0.1, 0.0, 0.3]  # TOST: the larger of the one-sided tests at ± the margin
    lower, upper = (stats.ttest_1samp(d, m, alternative=side).pvalue for m, side in ((-1.0, "greater"), (1.0, "less")))
    assert sig.tost_p(d, 1.0) == pytest.approx(max(lower, upper), rel=1e-12) and sig.tost_p(d, 1.0) < 0.05
    assert sig.tost_p([3.0, 2.5, 3.5], 1.0) > 0.5
    with pytest.raises(ValueError, match="margin"):
        sig.tost_p(d, 0.0)


@pytest.mark.parametrize("d", [
    D, [1.0, 2.0, 3.0, 4.0, 5.0],  # every sign the same: the smallest p at n = 5, 2/32
    [0.5, -0.5, 0.25, -0.25],  # mean 0: p = 1
    [-0.82, -1.1, -0.3, -0.7, -1.4, 0.2, -0.9, -0.5, -1.3, -0.6, 0.1, -0.4, -1.0, -0.2, -0.8, -0.35],  # n = 16
    ("reclaim", "sst2/semi1/k10", "sst2/semi1/lam0", "metric"),  # records: differences are multiples of one
    ("multitask", "round_robin", "proportional", "quora_accuracy"),  # row's share, whose flips tie up to rounding
])
def test_sign_flip_p_is_scipy_permutation_test_exact(d):
    if isinstance(d[0], str):
        store = harness.RecordStore(d[0])
        _, d = sig.paired_differences(store.values(d[1], d[3]), store.values(d[2], d[3]))
    assert sig.sign_flip_p(d) == pytest.approx(_scipy_sign_flip(d), rel=1e-12)


def test_sign_flip_p_floor_at_5_and_monte_carlo_above_16_close_to_scipy_seeded_with_10000_flips():
    assert sig.sign_flip_p([1, 2, 3, 4, 5]) == pytest.approx(2 / 32)
    d = np.random.default_rng(3).normal(0.3, 1.0, size=20)
    assert sig.sign_flip_p(d, seed=1) == sig.sign_flip_p(d, seed=1)
    assert sig.sign_flip_p(d, seed=1) == pytest.approx(_scipy_sign_flip(d, resamples=200_000, seed=2), abs=0.02)
    with pytest.raises(ValueError, match="error: resamples"):
        sig.sign_flip_p([1.0] * 20, resamples=999)


def test_holm_hand_worked_caps_at_1_and_skips_nan():
    # m = 4, sorted p: 0.01, 0.02, 0.03, 0.04 -> 4*0.01 = 0.04, 3*0.02 = 0.06, 2*0.03 = 0.06, 1*0.04 = 0.04 -> 0.06
    # (monotone: the running maximum). Holm (1979): reject H_(1) at 0.05 (0.04 < 0.05), stop at H_(2).
    assert sig.holm([0.03, 0.01, 0.04, 0.02]) == pytest.approx([0.06, 0.04, 0.06, 0.06])
    adjusted = sig.holm([0.6, math.nan, 0.001, 0.7])  # m = 3: 3 * 0.001, min(1, 2 * 0.6), max(1, 0.7)
    assert math.isnan(adjusted[1]) and [adjusted[0], *adjusted[2:]] == pytest.approx([1.0, 0.003, 1.0])


def test_paired_uses_common_seeds_and_the_larger_p_and_the_floor_rule():
    result = sig.paired({1: 3.0, 2: 4.0, 3: 6.0, 4: 5.0}, {1: 1.0, 2: 1.5, 3: 2.0, 5: 9.0})
    assert result.n == 3 and result.delta == pytest.approx((2 + 2.5 + 4) / 3)
    assert result.permutation_p == pytest.approx(0.25) and result.p == max(result.t_p, result.permutation_p)  # 2 of 8
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


def test_two_level_bootstrap_covers_the_item_mean_and_widens_with_item_noise():
    rng = np.random.default_rng(0)
    base = rng.integers(0, 2, (10, 300)).astype(float)
    shifted = np.where(rng.random((10, 300)) < 0.1, 1.0, base)  # about +5 points of correctness, item-level noise
    low, high = sig.two_level_bootstrap(shifted, base, resamples=2000)
    assert low < (shifted - base).mean() < high and low > 0
    with pytest.raises(ValueError, match="one shape"):
        sig.two_level_bootstrap(shifted[:, :5], base)


def test_two_level_spearman_is_scipys_rho_on_one_resample_of_seeds_and_items():
    rng = np.random.default_rng(3)
    gold = rng.integers(0, 5, 40).astype(float)  # tied gold scores, as STS has
    t, b = gold + rng.normal(0, 1, (4, 40)), gold + rng.normal(0, 2, (4, 40))
    low, high = sig.two_level_spearman(t, b, gold, resamples=1, seed=5)
    draw = np.random.default_rng(5)
    rows, columns = draw.integers(0, 4, 4), draw.integers(0, 40, 40)

    def rho(x):
        return stats.spearmanr(x[columns], gold[columns]).statistic

    assert low == high == pytest.approx(100 * np.mean([rho(t[r]) - rho(b[r]) for r in rows]))
