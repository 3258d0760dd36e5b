"""The experiments' shared harness: resumable records, the budget, the bootstrap verdict rule."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from tests.experiments._scripts import load_experiment

h = load_experiment("harness")


def _metrics(setting: str, seed: int) -> tuple[dict, dict]:
    return {"setting": setting}, {"acc": (0.80 if setting == "t" else 0.70) + 0.01 * seed}


def test_records_are_written_after_every_run_and_skipped_when_read_back(tmp_path):
    store = h.RecordStore("demo", tmp_path)
    calls = []

    def run_one(setting, seed):
        calls.append((setting, seed))
        return _metrics(setting, seed)

    plan = [(s, seed) for seed in (1, 2, 3) for s in ("t", "b")]
    assert h.run_plan(store, plan, run_one, h.Budget(10), 0.0) == 0
    records = json.loads((tmp_path / "demo.json").read_text())
    assert [(r["setting"], r["seed"]) for r in records] == plan
    for record in records:
        assert {"seed", "setting", "config", "metrics", "wall_s", "load_before", "load_after"} <= set(record)
        assert len(record["load_before"]) == 3 and isinstance(record["seed"], int)

    calls.clear()
    again = h.RecordStore("demo", tmp_path)
    assert h.run_plan(again, plan + [("t", 4)], run_one, h.Budget(10), 0.0) == 0
    assert calls == [("t", 4)]  # only the new run


def test_the_budget_stops_before_a_run_that_would_not_fit(tmp_path):
    store = h.RecordStore("demo", tmp_path)
    left = h.run_plan(store, [("t", 1), ("t", 2)], _metrics, h.Budget(1), 120.0)
    assert left == 2 and store.records == []
    left = h.run_plan(store, [("t", 1), ("t", 2)], _metrics, h.Budget(1), lambda setting: 1.0)
    assert left == 0 and len(store.records) == 2


def test_a_failed_run_raises_and_keeps_the_runs_before_it(tmp_path):
    store = h.RecordStore("demo", tmp_path)

    def run_one(setting, seed):
        if seed == 2:
            raise RuntimeError("diverged")
        return _metrics(setting, seed)

    with pytest.raises(RuntimeError, match="diverged"):
        h.run_plan(store, [("t", 1), ("t", 2)], run_one, h.Budget(10), 0.0)
    assert [r["seed"] for r in h.RecordStore("demo", tmp_path).records] == [1]


def test_an_older_format_is_refused_by_name(tmp_path):
    (tmp_path / "demo.json").write_text(json.dumps({"curves": {}}))
    with pytest.raises(ValueError, match="demo.json.*list of run records"):
        h.RecordStore("demo", tmp_path)


def test_bootstrap_interval_brackets_the_mean_and_narrows_with_more_seeds():
    rng = np.random.default_rng(0)
    few = rng.normal(1.0, 1.0, size=5)
    many = rng.normal(1.0, 1.0, size=200)
    low, high = h.bootstrap_interval(few)
    assert low <= few.mean() <= high
    low_many, high_many = h.bootstrap_interval(many)
    assert high_many - low_many < high - low
    assert 0.6 < low_many < 1.0 < high_many < 1.4
    assert all(math.isnan(v) for v in h.bootstrap_interval([0.3]))
    assert h.bootstrap_interval([0.2, 0.2, 0.2]) == (0.2, 0.2)


def test_verdict_needs_the_interval_to_exclude_zero_in_the_papers_direction(tmp_path):
    store = h.RecordStore("demo", tmp_path)
    h.run_plan(store, [(s, seed) for seed in range(1, 6) for s in ("t", "b")], _metrics, h.Budget(10), 0.0)
    better = h.compare(store, "t", "b", "acc", direction=+1)
    assert better.reproduced and better.verdict == "reproduced"
    assert better.mean_difference == pytest.approx(0.10)
    worse = h.compare(store, "t", "b", "acc", direction=-1)
    assert not worse.reproduced and worse.verdict == "not reproduced at this scale"
    assert "Δ = +10.00" in better.text(scale=100)
    lonely = h.compare(store, "t", "missing", "acc")
    assert lonely.seeds == [] and lonely.verdict == "not enough seeds"


def test_noisy_differences_around_zero_are_not_reproduced(tmp_path):
    store = h.RecordStore("demo", tmp_path)
    for seed, (t, b) in enumerate([(0.71, 0.70), (0.69, 0.70), (0.72, 0.71), (0.68, 0.70), (0.70, 0.70)], 1):
        timing = h.RunTiming([0.1, 0.1, 0.1], [0.1, 0.1, 0.1], 1.0)
        store.add("t", seed, {}, {"acc": t}, timing)
        store.add("b", seed, {}, {"acc": b}, timing)
    comparison = h.compare(store, "t", "b", "acc")
    assert comparison.low < 0 < comparison.high
    assert comparison.verdict == "not reproduced at this scale"


def test_report_helpers(tmp_path):
    store = h.RecordStore("demo", tmp_path)
    store.add("t", 1, {}, {"acc": 0.5}, h.RunTiming([0.5, 0.4, 0.3], [1.5, 0.9, 0.4], 60.0))
    table = h.markdown_table(["a", "b"], [[1, "x"], [2, "y"]])
    assert table.splitlines()[1] == "|---|---|" and "| 2 | y |" in table
    assert h.fmt_mean_std([0.5, 0.7], scale=100) == "60.00 ± 14.14 (2)"
    assert h.fmt_mean_std([]) == "–"
    path = h.write_report(store, "## demo")
    text = path.read_text()
    assert text.startswith("## demo") and "load average 0.50–1.50" in text and "1 runs, 1.0 min" in text
