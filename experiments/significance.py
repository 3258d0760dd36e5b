"""The statistics of issue 25: paired differences, t-intervals, sign-flip permutation p values, Holm's
correction, TOST for "similar" claims, a two-level bootstrap, the floor check and the one verdict rule.

Every comparison pairs a treatment and a baseline by seed (or draw): d_i = treatment_i − baseline_i, i = 1..n,
with mean d̄ and sample standard deviation s (ddof 1), standard error se = s / √n.

* 95 % t-interval: d̄ ± t_{0.975, n−1} · se (scipy.stats.t).
* Paired t-test, two-sided: t = d̄ / se, p = 2 · P(T_{n−1} ≥ |t|).
* Sign-flip permutation test, two-sided: under H0 each d_i is as likely to be −d_i, so the null distribution of
  the mean is that of (1/n) Σ ε_i d_i over all 2^n sign vectors ε ∈ {−1, +1}^n. p = 2 · min(P(T ≥ d̄), P(T ≤ d̄)),
  capped at 1 (scipy.stats.permutation_test's two-sided rule, equal to P(|T| ≥ |d̄|) for this symmetric null).
  Exact up to n = 16 (65,536 sign vectors); above, Monte Carlo with ≥ 10,000 seeded draws and
  p = (k + 1) / (R + 1), k the draws at least as extreme (scipy's rule for random resamples).
* Holm (1979): order the m p values p_(1) ≤ … ≤ p_(m); the adjusted p_(i) = max_{j ≤ i} min(1, (m − j + 1) p_(j)).
* TOST at margin δ > 0 (equivalence: −δ < μ_d < δ): p_lower = P(T_{n−1} ≥ (d̄ + δ) / se),
  p_upper = P(T_{n−1} ≤ (d̄ − δ) / se), p = max(p_lower, p_upper).
* Two-level bootstrap (seeds × test items), for test sets below 1,000 rows: resample seeds with replacement, then
  test items with replacement (the same items for both arms, so the pairing by item is kept), and take the
  percentile interval of the mean per-item difference.

The verdict (:func:`verdict`) takes exactly one of :data:`VERDICTS`. Only a declared primary gets one; every
other comparison is :data:`EXPLORATORY`: intervals and p values, no verdict word.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import stats as _stats

REPRODUCED, OPPOSITE, INCONCLUSIVE, FLOOR = "reproduced", "opposite", "inconclusive", "no evidence (floor)"
VERDICTS = (REPRODUCED, OPPOSITE, INCONCLUSIVE, FLOOR)
EXPLORATORY = "exploratory"
ALPHA = 0.05
EXACT_UP_TO = 16  # 2^16 = 65,536 sign vectors
MONTE_CARLO_FLIPS = 10_000
FLOOR_POINTS = 3.0  # an arm within this many points of the majority accuracy is on the floor
FLOORS = Path(__file__).resolve().parent / "floors.yaml"


def paired_differences(treatment: Mapping[int, float], baseline: Mapping[int, float]) -> tuple[list[int], np.ndarray]:
    """The seeds both arms have (sorted) and d_i = treatment_i − baseline_i on them."""
    seeds = sorted(set(treatment) & set(baseline))
    return seeds, np.array([float(treatment[s]) - float(baseline[s]) for s in seeds], dtype=float)


def _se(differences: np.ndarray) -> float:
    return float(np.std(differences, ddof=1) / math.sqrt(differences.size))


def t_interval(differences: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """d̄ ± t_{(1+confidence)/2, n−1} · s/√n; (nan, nan) below 2 values, (d̄, d̄) when all are equal."""
    d = np.asarray(differences, dtype=float)
    if d.size < 2:
        return math.nan, math.nan
    mean, se = float(d.mean()), _se(d)
    half = float(_stats.t.ppf((1 + confidence) / 2, d.size - 1)) * se
    return mean - half, mean + half


def t_test_p(differences: Sequence[float]) -> float:
    """Two-sided paired t-test p = 2 · P(T_{n−1} ≥ |d̄ / se|); nan below 2 values, 1 or 0 with se = 0."""
    d = np.asarray(differences, dtype=float)
    if d.size < 2:
        return math.nan
    mean, se = float(d.mean()), _se(d)
    if se == 0:
        return 1.0 if mean == 0 else 0.0
    return float(2 * _stats.t.sf(abs(mean / se), d.size - 1))


def _flip_means(d: np.ndarray, exact: bool, resamples: int, seed: int) -> np.ndarray:
    n = d.size
    if exact:
        bits = (np.arange(2**n)[:, None] >> np.arange(n)) & 1
    else:
        bits = np.random.default_rng(seed).integers(0, 2, size=(resamples, n))
    return (1 - 2 * bits) @ d / n


def sign_flip_p(differences: Sequence[float], resamples: int = MONTE_CARLO_FLIPS, seed: int = 0) -> float:
    """Two-sided sign-flip permutation p of the mean difference (exact up to n = 16, else Monte Carlo).

    As ``scipy.stats.permutation_test((t, b), lambda x, y: mean(x − y), permutation_type='samples')``: ties within a
    relative 100 machine epsilons count as at least as extreme (scipy's tolerance); the Monte Carlo p is (k + 1) / (R + 1).
    """
    d = np.asarray(differences, dtype=float)
    if d.size < 1:
        return math.nan
    if resamples < MONTE_CARLO_FLIPS:
        raise ValueError(f"error: resamples must be at least {MONTE_CARLO_FLIPS} (got {resamples})")
    exact = d.size <= EXACT_UP_TO
    means = _flip_means(d, exact, resamples, seed)
    observed = float(d.mean())
    tolerance = abs(observed) * np.finfo(float).eps * 100  # scipy.stats.permutation_test's tie tolerance
    greater = np.count_nonzero(means >= observed - tolerance)
    less = np.count_nonzero(means <= observed + tolerance)
    if exact:
        p_greater, p_less = greater / means.size, less / means.size
    else:
        p_greater, p_less = (greater + 1) / (means.size + 1), (less + 1) / (means.size + 1)
    return float(min(1.0, 2 * min(p_greater, p_less)))


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p values, in the input order (nan stays nan and is not counted in m)."""
    p = np.asarray(pvalues, dtype=float)
    adjusted = np.full(p.shape, math.nan)
    present = np.flatnonzero(~np.isnan(p))
    m = present.size
    running = 0.0
    for rank, index in enumerate(present[np.argsort(p[present], kind="stable")]):
        running = max(running, min(1.0, (m - rank) * float(p[index])))
        adjusted[index] = running
    return adjusted.tolist()


def tost_p(differences: Sequence[float], margin: float) -> float:
    """Two one-sided t-tests of −margin < μ_d < margin: p = max of the two one-sided p values (nan below n = 2)."""
    if not margin > 0:
        raise ValueError(f"error: the equivalence margin must be > 0 (got {margin})")
    d = np.asarray(differences, dtype=float)
    if d.size < 2:
        return math.nan
    mean, se = float(d.mean()), _se(d)
    if se == 0:
        return 0.0 if -margin < mean < margin else 1.0
    p_lower = _stats.t.sf((mean + margin) / se, d.size - 1)
    p_upper = _stats.t.cdf((mean - margin) / se, d.size - 1)
    return float(max(p_lower, p_upper))


def two_level_bootstrap(
    treatment: np.ndarray, baseline: np.ndarray, confidence: float = 0.95, resamples: int = 10_000, seed: int = 0
) -> tuple[float, float]:
    """Percentile interval of the mean per-item difference, resampling seeds and then test items.

    ``treatment`` and ``baseline``: arrays of shape (seeds, items) of per-item scores (e.g. 0/1 correctness),
    row i of both from the same seed. Each resample draws seeds with replacement and one set of items with
    replacement, used for both arms.
    """
    t, b = np.asarray(treatment, dtype=float), np.asarray(baseline, dtype=float)
    if t.shape != b.shape or t.ndim != 2:
        raise ValueError(f"error: treatment and baseline must be (seeds, items) arrays of one shape ({t.shape}, {b.shape})")
    difference = t - b
    n_seeds, n_items = difference.shape
    rng = np.random.default_rng(seed)
    means = np.empty(resamples)
    for r in range(resamples):
        rows = rng.integers(0, n_seeds, n_seeds)
        columns = rng.integers(0, n_items, n_items)
        means[r] = difference[np.ix_(rows, columns)].mean()
    alpha = (1 - confidence) / 2
    return float(np.quantile(means, alpha)), float(np.quantile(means, 1 - alpha))


def two_level_spearman(treatment: np.ndarray, baseline: np.ndarray, labels: np.ndarray, confidence: float = 0.95,
                       resamples: int = 10_000, seed: int = 0) -> tuple[float, float]:
    """Percentile interval of the mean paired difference of Spearman ρ ×100, resampling seeds and then items.

    ``treatment`` and ``baseline``: (seeds, items) arrays of per-item scores, row i of both from the same seed;
    ``labels``: the items' gold scores. Each resample draws seeds with replacement and one set of items with
    replacement, used for every seed and both arms; ρ is the Pearson correlation of average ranks (scipy's).
    """
    from scipy.stats import rankdata

    t, b, gold = np.asarray(treatment, dtype=float), np.asarray(baseline, dtype=float), np.asarray(labels, dtype=float)
    n_seeds, n_items = t.shape
    rng = np.random.default_rng(seed)
    means = np.empty(resamples)
    for r in range(resamples):
        rows, columns = rng.integers(0, n_seeds, n_seeds), rng.integers(0, n_items, n_items)
        ranks = rankdata(np.concatenate([t[np.ix_(rows, columns)], b[np.ix_(rows, columns)]]), axis=1)
        ranks -= ranks.mean(axis=1, keepdims=True)
        reference = rankdata(gold[columns])
        reference -= reference.mean()
        rho = ranks @ reference / np.sqrt((ranks**2).sum(axis=1) * (reference**2).sum())
        means[r] = 100.0 * (rho[:n_seeds] - rho[n_seeds:]).mean()
    alpha = (1 - confidence) / 2
    return float(np.quantile(means, alpha)), float(np.quantile(means, 1 - alpha))


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
        """The p that goes into Holm: the larger of the t-test's and the permutation test's (both must agree)."""
        return max(self.t_p, self.permutation_p) if self.n >= 2 else math.nan


def paired(treatment: Mapping[int, float], baseline: Mapping[int, float]) -> Paired:
    """:class:`Paired` statistics of treatment − baseline on the seeds both have."""
    _, d = paired_differences(treatment, baseline)
    low, high = t_interval(d)
    return Paired(
        n=int(d.size), delta=float(d.mean()) if d.size else math.nan, low=low, high=high,
        t_p=t_test_p(d), permutation_p=sign_flip_p(d) if d.size else math.nan,
    )


@dataclass(frozen=True)
class Floor:
    """A task's floor: the majority-class accuracy and, for F1 metrics, the all-positive F1 (points ×100)."""

    majority: float | None = None
    all_positive_f1: float | None = None


def load_floors(path: Path = FLOORS) -> dict[str, Floor]:
    """The tasks' floors (experiments/floors.yaml)."""
    import yaml

    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    try:
        return {task: Floor(**values) for task, values in data.items()}
    except TypeError as error:
        raise ValueError(f"error: {path.name}: {error}") from None


def floor_reason(arm_means: Mapping[str, float], floor: Floor, metric: str) -> str | None:
    """Why an arm is on the floor, or None: an accuracy within 3 points of the majority (or below it), or an F1
    below the all-positive F1. ``arm_means``: arm name → mean of the metric over seeds (points ×100)."""
    reasons = []
    for arm, value in arm_means.items():
        if value is None or math.isnan(value):
            continue
        if "f1" in metric and floor.all_positive_f1 is not None and value < floor.all_positive_f1:
            reasons.append(f"{arm} F1 {value:.1f} < all-positive {floor.all_positive_f1:.1f}")
        elif "f1" not in metric and floor.majority is not None and value < floor.majority + FLOOR_POINTS:
            reasons.append(f"{arm} {value:.1f} < majority {floor.majority:.1f} + {FLOOR_POINTS:g}")
    return "; ".join(reasons) or None


def verdict(adjusted_p: float, delta: float, direction: int, floored: bool, equivalence: bool = False) -> str:
    """The one verdict rule: a floor gives "no evidence (floor)"; else Holm-adjusted p < 0.05 gives "reproduced"
    when Δ has the paper's sign (``direction`` +1 / −1) and "opposite" when not; else "inconclusive".

    ``equivalence``: a "similar / match" claim, ``adjusted_p`` from TOST: p < 0.05 → reproduced, else inconclusive
    (a TOST cannot show the opposite; the paired interval beside it does).
    """
    if floored:
        return FLOOR
    if adjusted_p is None or math.isnan(adjusted_p) or adjusted_p >= ALPHA:
        return INCONCLUSIVE
    if equivalence:
        return REPRODUCED
    return REPRODUCED if delta * direction > 0 else OPPOSITE


def signed(value: float | None, digits: int = 2, sign: bool = True) -> str:
    """``+1.23`` (or ``–`` for a missing value)."""
    if value is None or math.isnan(value):
        return "–"
    return f"{value:+.{digits}f}" if sign else f"{value:.{digits}f}"


def pvalue(value: float | None) -> str:
    """A p value as the pages write it: 3 decimals, or ``1.2e-04`` below 0.001 (``–`` when missing)."""
    if value is None or math.isnan(value):
        return "–"
    return f"{value:.1e}" if value < 0.001 else f"{value:.3f}"


def interval(stats: Paired) -> str:
    """``[low, high]`` of the t-interval (``–`` below two pairs)."""
    return "–" if math.isnan(stats.low) else f"[{signed(stats.low)}, {signed(stats.high)}]"
