"""experiments/scl_few_shot.py and experiments/scl_noise.py without training: the plans, every run's overrides
(valid config keys and method_args), the reports, plots and summaries from fabricated records."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXPERIMENTS = REPO / "experiments"


def _load(name: str):
    if str(EXPERIMENTS) not in sys.path:
        sys.path.insert(0, str(EXPERIMENTS))  # as `python experiments/<name>.py` has it
    spec = importlib.util.spec_from_file_location(f"_test_{name}", EXPERIMENTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


fs = _load("scl_few_shot")
noise = _load("scl_noise")
h = fs.harness


def _check_overrides(sets: list[str]):
    from contrastext.methods.scl import SCLArgs
    from contrastext.runs.recipes import recipe_path
    from contrastext.training.config import load_config

    config = load_config(recipe_path("scl"), sets)
    return config, config.method_args_as(SCLArgs)


# ------------------------------------------------------------------------------------------- few-shot


def test_few_shot_plan_at_defaults_is_3_sizes_x_2_losses_x_10_draws():
    args = fs.parse_args([])
    plan = fs.plan(args)
    assert len(plan) == 60 and len(set(plan)) == 60
    assert {s for s, _ in plan} == {f"n{n}/{loss}" for n in (20, 100, 1000) for loss in ("ce", "ce+scl")}
    assert sorted({seed for _, seed in plan}) == list(range(1, 11))
    assert args.steps_per_size == {20: 200, 100: 150, 1000: 125}
    assert fs.estimate_minutes(args) <= 40


def test_few_shot_overrides_load_and_set_the_paper_protocol(tmp_path):
    args = fs.parse_args(["--runs", str(tmp_path)])
    for setting in ("n20/ce", "n20/ce+scl", "n1000/ce+scl"):
        config, method_args = _check_overrides(fs.overrides(args, setting, 7))
        n, loss = fs.parse_setting(setting)
        assert config.data.few_shot == n
        assert method_args.seeds == [7]
        assert method_args.lam == (0.0 if loss == "ce" else 0.9)
        assert method_args.temperature == 0.3
        assert method_args.protocol == "validation_test" and method_args.split_seed == 0
        assert config.eval.limit is None  # the recipe's validation / test split of the whole dev set
        assert config.train.max_steps == args.steps_per_size[n]
        assert config.train.batch_size == 16 and config.train.lr == 1e-5
        assert config.train.progress_bar is False and config.train.overwrite is True
        assert Path(config.output_dir).is_relative_to(tmp_path)


def test_few_shot_per_size_options():
    args = fs.parse_args(["--sizes", "20", "100", "--steps", "4", "--eval-every", "2", "3"])
    assert args.steps_per_size == {20: 4, 100: 4}
    assert args.eval_every_per_size == {20: 2, 100: 3}
    with pytest.raises(SystemExit):
        fs.parse_args(["--sizes", "20", "100", "1000", "--steps", "4", "5"])
    with pytest.raises(SystemExit):
        fs.parse_args(["--sizes", "50"])  # no default length for N = 50


def _fabricate(store, settings_values: dict[str, dict[int, tuple[float, float]]]):
    timing = h.RunTiming(load_before=[0.5, 0.5, 0.5], load_after=[0.6, 0.6, 0.6], wall_s=30.0)
    for setting, draws in settings_values.items():
        for seed, (validation, test) in draws.items():
            store.add(setting, seed, {"recipe": "scl", "overrides": []},
                      {"validation_accuracy": validation, "test_accuracy": test, "best_step": 60}, timing)


def _few_shot_store(tmp_path, draws=range(1, 11), sizes=(20, 100, 1000)):
    store = h.RecordStore(fs.NAME, tmp_path)
    values = {}
    for n in sizes:
        gain = {20: 3.0, 100: 1.0, 1000: -0.1}[n]
        values[f"n{n}/ce"] = {s: (70.0 + s, 68.0 + s * 0.5) for s in draws}
        values[f"n{n}/ce+scl"] = {s: (71.0 + s, 68.0 + s * 0.5 + gain + 0.1 * (s % 3)) for s in draws}
    _fabricate(store, values)
    return store


def test_few_shot_report_plot_and_summary_from_full_records(tmp_path):
    args = fs.parse_args(["--results", str(tmp_path)])
    store = _few_shot_store(tmp_path)
    text = fs.report(store, args)
    assert text.startswith("## SCL (Gunel et al., ICLR 2021)")
    assert "85.9 ± 2.1" in text and "88.1 ± 3.3" in text and "94.1 ± 0.5" in text
    assert text.count("**Verdict:**") == 4
    assert "N = 20: n20/ce+scl" in text and "→ reproduced" in text
    assert "not reproduced at this scale" in text  # N = 1000: no gain
    assert "![" in text and "scl_few_shot.png" in text and "python experiments/scl_few_shot.py" in text
    # the top-3 figure: draws 10, 9, 8 by validation; CE test 68 + 0.5·s
    top = fs.top_k(store, "n20/ce")
    assert top["draws"] == [10, 9, 8] and top["mean"] == pytest.approx(68.0 + 4.5)
    assert "72.5 ± 0.5 (top 3)" in text
    png = fs.plot(store, args, tmp_path / "scl_few_shot.png")
    assert png.stat().st_size > 1000
    result = fs.summary(store, args)
    assert set(result) == {"paper", "claim", "verdict", "numbers"}
    assert result["verdict"].startswith("partly")  # N = 20, 100 reproduced, 1000 not
    assert "N=20: Δ +3.1" in result["numbers"]
    assert fs.gain_trend(fs.comparisons(store, args.sizes))[0] == "reproduced"


def test_few_shot_partial_records_render(tmp_path):
    args = fs.parse_args(["--results", str(tmp_path)])
    store = h.RecordStore(fs.NAME, tmp_path)
    _fabricate(store, {"n20/ce": {1: (70.0, 69.0), 2: (71.0, 70.0)}, "n20/ce+scl": {1: (72.0, 71.0)}})
    text = fs.report(store, args)
    assert "not enough seeds" in text and "–" in text
    assert "nan" not in text
    assert fs.summary(store, args)["verdict"] == "partial: 3/60 runs"
    fs.plot(store, args, tmp_path / "partial.png")
    path = h.write_report(store, text)
    assert path.read_text().startswith("## SCL")
    empty = h.RecordStore("empty", tmp_path)
    assert "not enough seeds" in fs.report(empty, args)
    fs.plot(empty, args, tmp_path / "empty.png")


def test_few_shot_draw_record_reads_the_recipes_result(tmp_path):
    log = tmp_path / "train_log.jsonl"
    log.write_text(
        json.dumps({"step": 10, "loss": 1.0, "loss/ce": 0.6, "loss/supcon": 40.0}) + "\n"
        + json.dumps({"step": 20, "loss": 0.5, "loss/ce": 0.4, "loss/supcon": 38.0,
                      "eval/sst2_validation_accuracy": 75.0}) + "\n"
    )
    summary = {"runs": {"3": {
        "metrics": {"sst2_validation_accuracy": 75.0, "score": 75.0}, "best_step": 20, "last_step": 20,
        "log_path": str(log),
        "report": {"n_train": 20, "train_label_counts": {0: 9, 1: 11}, "n_validation": 436, "n_test": 436,
                   "test_metrics": {"sst2_test_accuracy": 73.5, "sst2_test_f1": float("nan")}},
    }}}
    metrics = fs.draw_record(summary, 3)
    assert metrics["validation_accuracy"] == 75.0 and metrics["test_accuracy"] == 73.5
    assert metrics["validation_curve"] == [[20, 75.0]] and metrics["last_loss_supcon"] == 38.0
    assert metrics["test_f1"] is None and metrics["train_label_counts"] == {"0": 9, "1": 11}
    json.dumps(metrics, allow_nan=False)
    summary["runs"]["3"]["report"]["test_metrics"] = {}
    with pytest.raises(RuntimeError, match="sst2_test_accuracy"):
        fs.draw_record(summary, 3)


def test_few_shot_main_report_only_writes_md_and_png(tmp_path):
    _few_shot_store(tmp_path, draws=range(1, 4), sizes=(20,))
    assert fs.main(["--report-only", "--results", str(tmp_path), "--sizes", "20"]) == 0
    assert (tmp_path / "scl_few_shot.md").read_text().startswith("## SCL")
    assert (tmp_path / "scl_few_shot.png").stat().st_size > 1000


def test_few_shot_estimate_scales_with_observed_durations():
    budget = h.Budget(60)
    estimate = fs.CalibratedEstimate(budget, lambda setting: 10.0 if setting == "a" else 20.0)
    wrapped = estimate.wrap(lambda setting, seed: ({}, {}))
    assert estimate("b", 1) == 20.0
    wrapped("a", 1)
    budget.durations.append(30.0)  # the run took 3× its estimate
    assert estimate("b", 1) == pytest.approx(60.0)


# ---------------------------------------------------------------------------------------------- noise


def test_noise_plan_at_defaults_is_3_rates_x_2_losses_x_5_seeds():
    args = noise.parse_args([])
    plan = noise.plan(args)
    assert len(plan) == 30 and len(set(plan)) == 30
    assert {s for s, _ in plan} == {f"p{p}/{loss}" for p in (0, 20, 40) for loss in ("ce", "ce+scl")}
    assert sorted({seed for _, seed in plan}) == [1, 2, 3, 4, 5]
    assert noise.estimate_minutes(args) <= 30


def test_noise_overrides_load(tmp_path):
    args = noise.parse_args(["--runs", str(tmp_path)])
    for setting in ("p0/ce", "p20/ce+scl", "p40/ce"):
        config, method_args = _check_overrides(noise.overrides(args, setting, 4))
        p, loss = noise.parse_setting(setting)
        assert config.data.few_shot == 2000 and config.data.label_noise == pytest.approx(p / 100)
        assert method_args.seeds == [4] and method_args.lam == (0.0 if loss == "ce" else 0.9)
        assert config.train.max_steps == 125 and config.train.eval_every == 25
        assert config.eval.limit is None


def _noise_store(tmp_path, seeds=range(1, 6)):
    store = h.RecordStore(noise.NAME, tmp_path)
    values = {}
    for p in (0, 20, 40):
        values[f"p{p}/ce"] = {s: (80.0 + s, 80.0 - p / 10 + s) for s in seeds}
        values[f"p{p}/ce+scl"] = {s: (80.5 + s, 79.9 - p / 20 + s + 0.2 * (s % 2)) for s in seeds}
    _fabricate(store, values)
    return store


def test_noise_report_plot_and_summary(tmp_path):
    args = noise.parse_args(["--results", str(tmp_path)])
    store = _noise_store(tmp_path)
    text = noise.report(store, args)
    assert text.startswith("## SCL (Gunel et al., ICLR 2021): robustness")
    assert "label flips" in text and "91.2±0.6" in text
    assert text.count("**Verdict:**") == 4
    assert "0 % flipped: p0/ce+scl" in text and "the gap grows with noise (0 % → 40 %)" in text
    growth = noise.gap_growth(store, 0, 40)
    assert growth.mean_difference == pytest.approx(2.0) and growth.verdict == "reproduced"
    noise.plot(store, args, tmp_path / "scl_noise.png")
    result = noise.summary(store, args)
    assert set(result) == {"paper", "claim", "verdict", "numbers"}
    assert result["verdict"].startswith("partly")  # 0 %: Δ = ±0.1 around 0


def test_noise_partial_records_render(tmp_path):
    args = noise.parse_args(["--results", str(tmp_path)])
    store = h.RecordStore(noise.NAME, tmp_path)
    _fabricate(store, {"p0/ce": {1: (80.0, 79.0)}, "p0/ce+scl": {1: (81.0, 80.0)}})
    text = noise.report(store, args)
    assert "not enough seeds" in text and "nan" not in text
    assert noise.summary(store, args)["verdict"] == "partial: 2/30 runs"
    noise.plot(store, args, tmp_path / "partial.png")
    assert noise.main(["--report-only", "--results", str(tmp_path)]) == 0
    assert (tmp_path / "scl_noise.png").exists()
