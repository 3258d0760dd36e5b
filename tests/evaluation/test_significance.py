"""contrastext.evaluation.significance against the equations: the t-interval and t-test from Student's t, the
sign-flip p by enumerating every sign vector, Holm and TOST by hand, the two-level bootstraps."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from contrastext.evaluation import significance as sig

D = [1.2, -0.4, 2.5, 0.9, 1.7, -0.1, 3.0, 0.6]


def _enumerated_sign_flip(d) -> float:
    """p = min(1, 2 · min(P(T ≥ d̄), P(T ≤ d̄))) over all 2^n sign vectors (ties within 1e-12 count)."""
    d = np.asarray(d, dtype=float)
    signs = 1 - 2 * ((np.arange(2**d.size)[:, None] >> np.arange(d.size)) & 1)
    means, observed = signs @ d / d.size, d.mean()
    return min(1.0, 2 * min(np.mean(means >= observed - 1e-12), np.mean(means <= observed + 1e-12)))


def test_t_interval_and_t_test_from_students_t_and_degenerate_inputs():
    d = np.asarray(D)
    mean, se = d.mean(), d.std(ddof=1) / math.sqrt(d.size)
    half = stats.t.ppf(0.975, d.size - 1) * se
    assert sig.t_interval(D) == pytest.approx((mean - half, mean + half), rel=1e-12)
    assert sig.t_test_p(D) == pytest.approx(2 * stats.t.sf(abs(mean / se), d.size - 1), rel=1e-10)
    assert all(math.isnan(v) for v in (*sig.t_interval([1.0]), sig.t_test_p([1.0])))
    assert sig.t_interval([2.0, 2.0, 2.0]) == (2.0, 2.0) and sig.t_test_p([0.0, 0.0]) == 1.0
    assert sig.t_test_p([0.5, 0.5]) == 0.0


def test_tost_is_the_larger_one_sided_p_at_plus_minus_the_margin():
    d = np.asarray([0.2, -0.3, 0.1, 0.4, -0.1, 0.0, 0.3])
    mean, se = d.mean(), d.std(ddof=1) / math.sqrt(d.size)
    expected = max(stats.t.sf((mean + 1.0) / se, d.size - 1), stats.t.cdf((mean - 1.0) / se, d.size - 1))
    assert sig.tost_p(d, 1.0) == pytest.approx(expected, rel=1e-10) and expected < 0.05
    assert sig.tost_p([3.0, 2.5, 3.5], 1.0) > 0.5 and math.isnan(sig.tost_p([0.1], 1.0))
    with pytest.raises(ValueError, match="margin"):
        sig.tost_p(d, 0.0)


@pytest.mark.parametrize("d", [
    D, [1.0, 2.0, 3.0, 4.0, 5.0],  # every sign the same: the smallest p at n = 5, 2/32
    [0.5, -0.5, 0.25, -0.25],  # mean 0: p = 1
    [1.7], [-0.3],  # one pair: both signs as extreme, p = 1 (SciPy refuses one observation)
    [1.0, 1.0, -1.0, 2.0, 2.0, 1.0],  # ties among the flipped means
    [-0.82, -1.1, -0.3, -0.7, -1.4, 0.2, -0.9, -0.5, -1.3, -0.6, 0.1, -0.4, -1.0, -0.2, -0.8, -0.35],  # n = 16
])
def test_sign_flip_p_is_exact_up_to_16(d):
    assert sig.sign_flip_p(d) == pytest.approx(_enumerated_sign_flip(d), rel=1e-12)


def test_sign_flip_p_floors_and_monte_carlo_above_16():
    assert sig.sign_flip_p([1, 2, 3, 4, 5]) == pytest.approx(2 / 32) and sig.sign_flip_p([1.0] * 10) == pytest.approx(2 / 1024)
    d = np.random.default_rng(3).normal(0.3, 1.0, size=20)
    assert sig.sign_flip_p(d, seed=1) == sig.sign_flip_p(d, seed=1)
    assert sig.sign_flip_p(d, seed=1) == pytest.approx(_enumerated_sign_flip(d), abs=0.02)
    assert math.isnan(sig.sign_flip_p([]))
    with pytest.raises(ValueError, match="resamples"):
        sig.sign_flip_p([1.0] * 20, resamples=999)


def test_holm_hand_worked_caps_at_1_and_skips_nan():
    # m = 4, sorted p: 0.01, 0.02, 0.03, 0.04 -> 4*0.01 = 0.04, 3*0.02 = 0.06, 2*0.03 = 0.06, 1*0.04 = 0.04 -> 0.06
    # (monotone: the running maximum). Holm (1979): reject H_(1) at 0.05 (0.04 < 0.05), stop at H_(2).
    assert sig.holm([0.03, 0.01, 0.04, 0.02]) == pytest.approx([0.06, 0.04, 0.06, 0.06])
    adjusted = sig.holm([0.6, math.nan, 0.001, 0.7])  # m = 3: 3 * 0.001, min(1, 2 * 0.6), max(1, 0.7)
    assert math.isnan(adjusted[1]) and [adjusted[0], *adjusted[2:]] == pytest.approx([1.0, 0.003, 1.0])


def test_paired_uses_common_seeds_and_the_larger_p():
    result = sig.paired({1: 3.0, 2: 4.0, 3: 6.0, 4: 5.0}, {1: 1.0, 2: 1.5, 3: 2.0, 5: 9.0})
    assert result.n == 3 and result.delta == pytest.approx((2 + 2.5 + 4) / 3)
    assert result.permutation_p == pytest.approx(0.25) and result.p == max(result.t_p, result.permutation_p)  # 2 of 8
    assert math.isnan(sig.paired({1: 1.0}, {2: 1.0}).delta)


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
