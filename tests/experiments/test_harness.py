"""experiments/harness.py and cost.py: resumable, atomic records, the budget and its calibration, the cost tables,
and the report helpers."""

from __future__ import annotations

import json
import re

import pytest

from tests.experiments._scripts import harness as h
from tests.experiments._scripts import load_experiment

cost, TIMING = load_experiment("cost"), h.RunTiming([0.1] * 3, [0.1] * 3, 1.0)


@pytest.fixture
def store(tmp_path):
    return h.RecordStore("demo", tmp_path)


def _metrics(setting: str, seed: int) -> tuple[dict, dict]:
    if seed == 99:
        raise RuntimeError("diverged")
    return {"setting": setting}, {"acc": (0.80 if setting == "t" else 0.70) + 0.01 * seed}


def test_records_are_written_atomically_after_every_run_and_skipped_when_read_back(store, tmp_path):
    calls, plan = [], [(s, seed) for seed in (1, 2, 3) for s in ("t", "b")]

    def run_one(setting, seed):
        calls.append((setting, seed))
        return _metrics(setting, seed)

    assert h.run_plan(store, plan, run_one, h.Budget(10), 0.0) == 0
    records = json.loads((tmp_path / "demo.json").read_text())
    assert [(r["setting"], r["seed"]) for r in records] == plan == calls
    assert all({"config", "metrics", "wall_s", "load_after"} <= set(r) and len(r["load_before"]) == 3 for r in records)
    assert list(tmp_path.iterdir()) == [tmp_path / "demo.json"]  # written by a rename: no temporary left
    report = h.write_report(store, "## demo").read_text()  # the provenance and machine lines appended
    assert re.match(r"## demo\n\nLatest run: .*load average [\d.]+–[\d.]+ over the runs; 6 runs, 0.0 min", report, re.S)
    calls.clear()
    assert h.run_plan(h.RecordStore("demo", tmp_path), [*plan, ("t", 4)], run_one, h.Budget(10), 0.0) == 0
    assert calls == [("t", 4)]  # only the new run
    with pytest.raises(RuntimeError, match="diverged"):  # a failed run raises and keeps the runs before it
        h.run_plan(h.RecordStore("demo", tmp_path), [("t", 5), ("t", 99)], run_one, h.Budget(10), 0.0)
    assert [r["seed"] for r in h.RecordStore("demo", tmp_path).records] == [1, 1, 2, 2, 3, 3, 4, 5]
    (tmp_path / "demo.json").write_text(json.dumps({"curves": {}}))
    with pytest.raises(ValueError, match="demo.json.*list of run records"):  # an older format, refused by name
        h.RecordStore("demo", tmp_path)


def test_the_budget_stops_before_a_run_that_would_not_fit_by_the_calibrated_estimate(store):
    assert h.run_plan(store, [("t", 1), ("t", 2)], _metrics, h.Budget(1), 120.0) == 2 and store.records == []
    assert h.run_plan(store, [("t", 1), ("t", 2)], _metrics, h.Budget(1), lambda _: 1.0) == 0 and len(store.records) == 2
    calibration = h.Calibration()
    assert calibration.estimate(20.0) == 20.0  # no run yet
    for reference, wall in ((10.0, 30.0), (10.0, 20.0), (10.0, 200.0), (0.0, 5.0)):  # 0 s: a reused result
        calibration.observe(reference, wall)
    assert calibration.ratios == [3.0, 2.0, 20.0] and calibration.estimate(20.0) == pytest.approx(60.0)
    assert cost.tokens("mrpc", 32) == 32  # the cost tables name an unknown key
    with pytest.raises(KeyError, match="error: no token count for 'qnli'"):
        cost.tokens("qnli")
    with pytest.raises(KeyError, match="error: no evaluation rows for 'wiki1m'"):
        cost.dev_seconds("wiki1m")
