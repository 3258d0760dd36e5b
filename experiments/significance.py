"""Issue 25's verdict over the library's paired statistics (contrastext.evaluation.significance: Δ, t-interval,
t-test and sign-flip permutation p, Holm, TOST, the two-level bootstrap): the floors, the one verdict rule and the
pages' number formats.

The verdict (:func:`verdict`) takes exactly one of :data:`VERDICTS`. Only a declared primary gets one; every
other comparison is :data:`EXPLORATORY`: intervals and p values, no verdict word.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from contrastext.evaluation.significance import (  # noqa: F401  (the pages and hooks read them as sig.*)
    Paired,
    holm,
    paired,
    paired_differences,
    t_interval,
    tost_p,
    two_level_bootstrap,
    two_level_spearman,
)

REPRODUCED, OPPOSITE, INCONCLUSIVE, FLOOR = "reproduced", "opposite", "inconclusive", "no evidence (floor)"
VERDICTS = (REPRODUCED, OPPOSITE, INCONCLUSIVE, FLOOR)
EXPLORATORY = "exploratory"
ALPHA = 0.05
FLOOR_POINTS = 3.0  # an arm within this many points of the majority accuracy is on the floor
FLOORS = Path(__file__).resolve().parent / "floors.yaml"


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
