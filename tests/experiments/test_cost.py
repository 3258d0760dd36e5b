"""experiments/cost.py and harness.Calibration: the one cost model and the one calibrated estimator (every spec's
recorded runs against their cost expressions: tests/experiments/test_run.py)."""

from __future__ import annotations

import pytest

from tests.experiments._scripts import load_experiment

cost, h = load_experiment("cost"), load_experiment("harness")


def test_calibration_scales_the_reference_by_the_median_ratio():
    calibration = h.Calibration()
    assert calibration.estimate(20.0) == 20.0  # no run yet
    for reference, wall in ((10.0, 30.0), (10.0, 20.0), (10.0, 200.0), (0.0, 5.0)):  # 0 s: a reused result
        calibration.observe(reference, wall)
    assert calibration.ratios == [3.0, 2.0, 20.0] and calibration.estimate(20.0) == pytest.approx(60.0)


def test_the_tables_name_an_unknown_key():
    assert cost.tokens("mrpc", 32) == 32
    with pytest.raises(KeyError, match="error: no token count for 'qnli'"):
        cost.tokens("qnli")
    with pytest.raises(KeyError, match="error: no evaluation rows for 'wiki1m'"):
        cost.dev_seconds("wiki1m")
