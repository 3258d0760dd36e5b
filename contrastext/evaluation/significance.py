"""Paired comparisons of two training setups over seeds: t-interval, sign-flip permutation p, Holm, TOST and a
two-level bootstrap (seeds × test items).

A comparison pairs a treatment and a baseline by seed (or draw): d_i = treatment_i − baseline_i, i = 1..n, with
mean d̄ and sample standard deviation s (ddof 1), standard error se = s / √n.

* 95 % t-interval d̄ ± t_{0.975, n−1} · se and the two-sided paired t-test p = 2 · P(T_{n−1} ≥ |d̄ / se|)
  (``scipy.stats.ttest_1samp``).
* Sign-flip permutation test, two-sided (``scipy.stats.permutation_test`` with one sample and
  ``permutation_type='samples'``): under H0 each d_i is as likely to be −d_i, so the null distribution of the mean
  is that of (1/n) Σ ε_i d_i over the sign vectors ε ∈ {−1, +1}^n; p = min(1, 2 · min(P(T ≥ d̄), P(T ≤ d̄))).
  Exact (all 2^n vectors) up to n = 16, so its smallest value is 2 / 2^n (0.0625 at n = 5, 0.002 at n = 10);
  above, Monte Carlo with ≥ 10,000 seeded draws and p = (k + 1) / (R + 1).
* Holm (1979), by hand (SciPy has none): order the m p values p_(1) ≤ … ≤ p_(m); the adjusted
  p_(i) = max_{j ≤ i} min(1, (m − j + 1) p_(j)).
* TOST at margin δ > 0 (equivalence: −δ < μ_d < δ): the larger p of the one-sided t-tests of μ_d > −δ and μ_d < δ.
* Two-level bootstrap, for test sets too small to ignore item noise: resample seeds with replacement, then test items
  with replacement (the same items for both arms, so the pairing by item is kept), and take the percentile interval
  of the mean per-item difference (or of the mean difference of Spearman ρ).

    >>> from contrastext.evaluation.significance import paired
    >>> result = paired({1: 80.1, 2: 81.0, 3: 79.5}, {1: 79.0, 2: 80.2, 3: 79.9})
    >>> result.n, round(result.delta, 2), result.permutation_p
    (3, 0.5, 0.5)
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

EXACT_UP_TO = 16  # 2^16 = 65,536 sign vectors
MONTE_CARLO_FLIPS = 10_000


def paired_differences(treatment: Mapping[int, float], baseline: Mapping[int, float]) -> tuple[list[int], np.ndarray]:
    """The seeds both arms have (sorted) and d_i = treatment_i − baseline_i on them."""
    seeds = sorted(set(treatment) & set(baseline))
    return seeds, np.array([float(treatment[s]) - float(baseline[s]) for s in seeds], dtype=float)


def _constant(d: np.ndarray) -> bool:
    return bool(np.all(d == d[0]))


def t_interval(differences: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """d̄ ± t_{(1+confidence)/2, n−1} · s/√n; (nan, nan) below 2 values, (d̄, d̄) when all are equal."""
    d = np.asarray(differences, dtype=float)
    if d.size < 2:
        return math.nan, math.nan
    if _constant(d):
        return float(d[0]), float(d[0])
    found = stats.ttest_1samp(d, 0.0).confidence_interval(confidence)
    return float(found.low), float(found.high)


def t_test_p(differences: Sequence[float]) -> float:
    """Two-sided paired t-test p; nan below 2 values; with no spread 1 when every d_i is 0, else 0."""
    d = np.asarray(differences, dtype=float)
    if d.size < 2:
        return math.nan
    if _constant(d):
        return 1.0 if d[0] == 0 else 0.0
    return float(stats.ttest_1samp(d, 0.0).pvalue)


def sign_flip_p(differences: Sequence[float], resamples: int = MONTE_CARLO_FLIPS, seed: int = 0) -> float:
    """Two-sided sign-flip permutation p of the mean difference: exact up to n = 16, else ``resamples`` seeded
    Monte Carlo draws (at least 10,000); nan for no difference, 1 for one (both of its signs are as extreme; SciPy
    refuses a single observation)."""
    d = np.asarray(differences, dtype=float)
    if resamples < MONTE_CARLO_FLIPS:
        raise ValueError(f"resamples must be at least {MONTE_CARLO_FLIPS} (got {resamples})")
    if d.size < 2:
        return 1.0 if d.size else math.nan
    draws = 2**d.size if d.size <= EXACT_UP_TO else resamples  # 2^n draws or more: scipy enumerates them all
    found = stats.permutation_test((d,), lambda x, axis: np.mean(x, axis=axis), permutation_type="samples",
                                   vectorized=True, n_resamples=draws, rng=np.random.default_rng(seed))
    return float(found.pvalue)


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p values, in the input order (nan stays nan and is not counted in m)."""
    p = np.asarray(pvalues, dtype=float)
    adjusted = np.full(p.shape, math.nan)
    present = np.flatnonzero(~np.isnan(p))
    running = 0.0
    for rank, index in enumerate(present[np.argsort(p[present], kind="stable")]):
        running = max(running, min(1.0, (present.size - rank) * float(p[index])))
        adjusted[index] = running
    return adjusted.tolist()


def tost_p(differences: Sequence[float], margin: float) -> float:
    """Two one-sided t-tests of −margin < μ_d < margin: the larger of their p values (nan below n = 2)."""
    if not margin > 0:
        raise ValueError(f"the equivalence margin must be > 0 (got {margin})")
    d = np.asarray(differences, dtype=float)
    if d.size < 2:
        return math.nan
    if _constant(d):
        return 0.0 if -margin < d[0] < margin else 1.0
    lower = stats.ttest_1samp(d, -margin, alternative="greater").pvalue
    upper = stats.ttest_1samp(d, margin, alternative="less").pvalue
    return float(max(lower, upper))


def _percentile(means: np.ndarray, confidence: float) -> tuple[float, float]:
    alpha = (1 - confidence) / 2
    return float(np.quantile(means, alpha)), float(np.quantile(means, 1 - alpha))


def two_level_bootstrap(treatment: np.ndarray, baseline: np.ndarray, confidence: float = 0.95,
                        resamples: int = 10_000, seed: int = 0) -> tuple[float, float]:  # fmt: skip
    """Percentile interval of the mean per-item difference, resampling seeds and then test items.

    ``treatment`` and ``baseline``: (seeds, items) arrays of per-item scores (e.g. 0/1 correctness), row i of both
    from the same seed. Each resample draws seeds with replacement and one set of items with replacement, used for
    both arms.
    """
    t, b = np.asarray(treatment, dtype=float), np.asarray(baseline, dtype=float)
    if t.shape != b.shape or t.ndim != 2:
        raise ValueError(f"treatment and baseline must be (seeds, items) arrays of one shape ({t.shape}, {b.shape})")
    difference, (n_seeds, n_items) = t - b, t.shape
    rng = np.random.default_rng(seed)
    means = np.empty(resamples)
    for r in range(resamples):
        means[r] = difference[np.ix_(rng.integers(0, n_seeds, n_seeds), rng.integers(0, n_items, n_items))].mean()
    return _percentile(means, confidence)


def two_level_spearman(treatment: np.ndarray, baseline: np.ndarray, labels: np.ndarray, confidence: float = 0.95,
                       resamples: int = 10_000, seed: int = 0) -> tuple[float, float]:  # fmt: skip
    """Percentile interval of the mean paired difference of Spearman ρ ×100, resampling seeds and then items.

    ``treatment`` and ``baseline``: (seeds, items) arrays of per-item scores, row i of both from the same seed;
    ``labels``: the items' gold scores. Each resample draws seeds with replacement and one set of items with
    replacement, used for every seed and both arms; ρ is the Pearson correlation of average ranks (scipy's).
    """
    t, b, gold = np.asarray(treatment, dtype=float), np.asarray(baseline, dtype=float), np.asarray(labels, dtype=float)
    n_seeds, n_items = t.shape
    rng = np.random.default_rng(seed)
    means = np.empty(resamples)
    for r in range(resamples):
        rows, columns = rng.integers(0, n_seeds, n_seeds), rng.integers(0, n_items, n_items)
        ranks = stats.rankdata(np.concatenate([t[np.ix_(rows, columns)], b[np.ix_(rows, columns)]]), axis=1)
        ranks -= ranks.mean(axis=1, keepdims=True)
        reference = stats.rankdata(gold[columns])
        reference -= reference.mean()
        rho = ranks @ reference / np.sqrt((ranks**2).sum(axis=1) * (reference**2).sum())
        means[r] = 100.0 * (rho[:n_seeds] - rho[n_seeds:]).mean()
    return _percentile(means, confidence)


@dataclass(frozen=True)
class Paired:
    """One paired comparison: n, Δ = d̄, the t-interval, the t-test p and the sign-flip permutation p."""

    n: int
    delta: float
    low: float
    high: float
    t_p: float
    permutation_p: float

    @property
    def p(self) -> float:
        """The larger of the t-test's and the permutation test's p (both must agree); nan below 2 pairs."""
        return max(self.t_p, self.permutation_p) if self.n >= 2 else math.nan


def paired(treatment: Mapping[int, float], baseline: Mapping[int, float]) -> Paired:
    """:class:`Paired` statistics of treatment − baseline on the seeds both have."""
    _, d = paired_differences(treatment, baseline)
    low, high = t_interval(d)
    return Paired(n=int(d.size), delta=float(d.mean()) if d.size else math.nan, low=low, high=high,
                  t_p=t_test_p(d), permutation_p=sign_flip_p(d))


__all__ = ["Paired", "holm", "paired", "paired_differences", "sign_flip_p", "t_interval", "t_test_p", "tost_p",
           "two_level_bootstrap", "two_level_spearman"]
