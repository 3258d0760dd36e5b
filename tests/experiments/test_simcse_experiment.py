"""experiments/simcse.py without training: its overrides, plan, report, plot and summary."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from tests.experiments._scripts import load_experiment

simcse = load_experiment("simcse")
harness = simcse.harness


@pytest.fixture
def args(tmp_path):
    return simcse.build_parser().parse_args(["--results", str(tmp_path / "results"), "--runs", str(tmp_path / "runs")])


def test_plan_at_defaults(args):
    plan = simcse.plan(args)
    assert plan[:2] == [("before/cls", 0), ("before/mean", 0)]
    trained = plan[2:]
    assert sorted(trained) == sorted(
        (f"{kind}/{pooling}", seed) for kind in ("unsup", "sup") for pooling in ("cls", "mean") for seed in (1, 2, 3)
    )
    assert len(set(plan)) == len(plan) == 14


def test_every_run_loads_with_valid_keys(args):
    from contrastext.runs.simcse import SimCSESupArgs, SimCSEUnsupArgs

    for setting, seed in simcse.plan(args):
        config = simcse.load_run_config(args, setting, seed)
        kind, pooling = simcse.parse_setting(setting)
        model = SimCSESupArgs if kind == "sup" else SimCSEUnsupArgs
        method_args = config.method_args_as(model)
        assert method_args.pooling == pooling
        assert config.eval.tasks == ["stsb:dev", "sickr:dev", "sts12"]
        assert str(args.runs) in str(config.output_dir)
        if kind == "before":
            assert method_args.mlp == "none"
            continue
        assert method_args.mlp == ("train" if kind == "unsup" else "always")
        assert config.seed == seed
        steps = config.train.max_steps
        assert steps == (args.unsup_steps if kind == "unsup" else args.sup_steps)
        assert config.train.eval_every == steps and config.train.save_every == steps  # one evaluation, at the end
        assert config.train.metric_for_best == "stsb_dev_spearman"
        assert config.train.progress_bar is False
        assert config.eval.limit is None and config.data.limit is None
    folders = {str(simcse.load_run_config(args, s, seed).output_dir) for s, seed in simcse.plan(args)}
    assert len(folders) == 14 - 1  # the two before-evaluations share a folder they never write


def _metrics(rng, base, shift):
    values = {
        "stsb_dev_spearman": base + shift + rng.uniform(-0.3, 0.3),
        "sickr_dev_spearman": base - 5 + shift + rng.uniform(-0.3, 0.3),
        "sts12_test_spearman": base - 10 + shift + rng.uniform(-0.3, 0.3),
    }
    metrics = {**values, **{k.replace("spearman", "pearson"): v - 1 for k, v in values.items()}}
    metrics[simcse.AVERAGE] = sum(values.values()) / 3
    return metrics


def _fabricate(store, args, runs):
    rng = random.Random(0)
    base = {"cls": 79.6, "mean": 86.7}
    shift = {"before": 0.0, "unsup": 3.0, "sup": 1.0}
    for setting, seed in runs:
        kind, pooling = simcse.parse_setting(setting)
        config = {"recipe": simcse.recipe_of(setting), "overrides": simcse.overrides(args, setting, seed)}
        timing = harness.RunTiming(load_before=[1.0, 1.0, 1.0], load_after=[1.2, 1.0, 1.0], wall_s=100.0)
        metrics = _metrics(rng, base[pooling], shift[kind] if pooling == "cls" else -shift[kind])
        store.add(setting, seed, config, metrics, timing)


def test_report_plot_summary_full(args, tmp_path):
    store = harness.RecordStore(simcse.NAME, args.results)
    _fabricate(store, args, simcse.plan(args))
    text = simcse.report(store, args)
    assert text.startswith("## SimCSE: ")
    order = ["**Claim", "76.25", "### Protocol", "### Results", "**Verdict:**", "](simcse.png)", "Command: `"]
    positions = [text.index(marker) for marker in order]
    assert positions == sorted(positions)
    assert "14/14 runs" in text
    assert "`unsup/cls` after > before" in text and "→ reproduced" in text
    assert "not reproduced at this scale" in text  # mean pooling goes down in the fabricated records
    assert "python experiments/simcse.py --data-root" in text and "--unsup-steps" not in text  # defaults
    path = simcse.plot(store, tmp_path / "simcse.png")
    assert path.stat().st_size > 10_000
    summary = simcse.summary(store, args)
    assert set(summary) == {"paper", "claim", "verdict", "numbers"}
    assert not summary["verdict"].startswith("partial")
    assert "STS-B dev" in summary["numbers"]
    json.dumps(store.records)  # JSON-safe


def test_report_plot_summary_partial(args, tmp_path):
    store = harness.RecordStore(simcse.NAME, args.results)
    _fabricate(store, args, [("before/cls", 0), ("unsup/cls", 1), ("sup/cls", 1)])
    text = simcse.report(store, args)
    assert "3/14 runs" in text
    assert "not enough seeds" in text
    assert "| `unsup/mean` | – |" in text
    assert "no runs yet" in text
    simcse.plot(store, tmp_path / "partial.png")
    assert simcse.summary(store, args)["verdict"].startswith("partial: 3/14 runs")
    empty = harness.RecordStore("empty", tmp_path / "empty")
    assert "0/14 runs" in simcse.report(empty, args)
    simcse.plot(empty, tmp_path / "empty.png")
    assert simcse.summary(empty)["verdict"].startswith("partial: 0/14")


def test_before_stands_for_every_seed(args):
    store = harness.RecordStore(simcse.NAME, args.results)
    _fabricate(store, args, [("before/cls", 0), ("unsup/cls", 1), ("unsup/cls", 2), ("unsup/cls", 3)])
    comparison = simcse.after_vs_before(store, "unsup/cls", "stsb_dev_spearman")
    assert comparison.seeds == [1, 2, 3]
    assert len(set(comparison.baseline_values)) == 1
    assert comparison.verdict == "reproduced"


def test_records_of_other_sizes_are_refused(args, tmp_path):
    store = harness.RecordStore(simcse.NAME, args.results)
    _fabricate(store, args, [("unsup/cls", 1)])
    assert simcse.check_records(store, args) == []
    other = simcse.build_parser().parse_args(["--results", str(args.results), "--unsup-steps", "7"])
    assert simcse.check_records(store, other) == ["unsup/cls seed 1"]
    with pytest.raises(SystemExit, match="other sizes"):
        simcse.main(["--results", str(args.results), "--runs", str(tmp_path / "r"), "--unsup-steps", "7"])
    simcse.main(["--results", str(args.results), "--runs", str(tmp_path / "r"), "--report-only"])
    assert (Path(args.results) / "simcse.md").exists() and (Path(args.results) / "simcse.png").exists()
