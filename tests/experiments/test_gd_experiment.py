"""experiments/gd_losses.py (gradient dissipation): plan, overrides, report, plot and summary without training."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from tests.experiments._scripts import load_experiment

gd = load_experiment("gd_losses")
harness = gd.harness


def _args(*argv: str):
    return gd.build_parser().parse_args(list(argv))


def _curves(start: float, end: float, unif_start: float, unif_end: float, steps=(0, 50, 100)) -> dict:
    n = len(steps)
    align = [start + (end - start) * i / (n - 1) for i in range(n)]
    unif = [unif_start + (unif_end - unif_start) * i / (n - 1) for i in range(n)]
    return {
        "steps": list(steps),
        "grad_alignment": align,
        "grad_uniformity": unif,
        "grad_total": [a + u for a, u in zip(align, unif, strict=True)],
        "stsb_subset_spearman": [80.0] * n,
        "loss_steps": [10, 20],
        "train_loss": [1.0, 0.5],
    }


def _record(loss: str, seed: int, args) -> tuple[dict, dict]:
    """Fabricated metrics shaped like run_loss's: fading losses lose 90 % of their gradient, others 10 %."""
    fades = loss in gd.FADING or loss == "hinged_dcl"
    end_factor = 0.1 if fades else 0.9
    if loss == "margin_product":
        end_factor = 0.0  # every margin met: a zero gradient must not break the ratios or the log plot
    curves = _curves(1.0 + 0.01 * seed, (1.0 + 0.01 * seed) * end_factor, 0.8, 0.8 * end_factor)
    metrics = {
        "stsb_dev_spearman": 80.0 + (1.0 if loss in gd.MARGINS else 0.0) - (2.0 if loss in gd.DECOUPLED else 0.0)
        + 0.1 * seed,
        "sickr_dev_spearman": 70.0 + 0.2 * seed,
        "stsb_dev_n": 1500,
        "sickr_dev_n": 500,
        **gd.gradient_summary(curves),
        "curves": curves,
    }
    config = {"recipe": gd.RECIPE, "overrides": gd.overrides(args, loss, seed), "sizes": gd.sizes(args)}
    return config, metrics


def _store(tmp_path, args, losses=gd.LOSSES, seeds=(1, 2, 3), start=True):
    store = harness.RecordStore(gd.NAME, tmp_path)
    timing = harness.RunTiming(load_before=[0.5, 0.5, 0.5], load_after=[0.6, 0.5, 0.5], wall_s=200.0)
    if start:
        store.add(gd.START, gd.START_SEED, {"recipe": gd.RECIPE}, {
            "stsb_dev_spearman": 79.0, "sickr_dev_spearman": 69.0, "stsb_dev_n": 1500, "sickr_dev_n": 500,
            "shipped_stsb_dev_spearman": 82.0, "shipped_sickr_dev_spearman": 72.0,
        }, timing)
    for seed in seeds:
        for loss in losses:
            store.add(loss, seed, *_record(loss, seed, args), timing)
    return store


def test_plan_at_defaults_is_start_then_seven_losses_by_three_seeds_seed_major():
    args = _args()
    plan = gd.plan(args)
    assert plan[0] == (gd.START, gd.START_SEED)
    assert plan[1:] == [(loss, seed) for seed in (1, 2, 3) for loss in gd.LOSSES]
    assert len(plan) == 1 + 21
    assert (args.steps, args.batch_size, args.max_length, args.lr) == (500, 16, 32, 1e-5)
    assert args.budget_minutes == 90
    assert args.final_limit is None  # the final evaluation is on the full dev sets


def test_every_run_override_list_loads_with_the_recipe():
    from contrastext.runs.recipes import recipe_path
    from contrastext.training.config import load_config

    args = _args()
    for setting, seed in gd.plan(args):
        loss = gd.BASELINE if setting == gd.START else setting
        config = load_config(recipe_path(gd.RECIPE), gd.overrides(args, loss, seed))
        assert config.method == "gd"
        assert config.method_args["loss"] == loss
        assert config.seed == seed
        assert config.train.max_steps == 500 and config.train.batch_size == 16 and config.train.lr == 1e-5
        assert config.train.eval_at_start and config.train.metric_for_best is None
        assert config.eval.tasks == ["stsb:dev"] and config.eval.limit == 200
        assert config.method_args["diagnostic_batch_size"] == 16
        assert Path(config.output_dir).parts[-2:] == (gd.NAME, f"{loss}-s{seed}")


def test_gradient_summary_ratios_and_zero_gradients():
    metrics = gd.gradient_summary(_curves(2.0, 0.5, 1.0, 0.0))
    assert metrics["grad_alignment_start"] == 2.0 and metrics["grad_alignment_end"] == 0.5
    assert math.isclose(metrics["log_ratio_alignment"], math.log(0.25))
    assert math.isclose(metrics["log_ratio_uniformity"], math.log(gd.GRAD_FLOOR))  # 0 counts as the floor
    assert metrics["first_eval_step"] == 50
    assert gd.log_ratio(1.0, 0.0) is None
    with pytest.raises(RuntimeError, match="not 0"):
        gd.gradient_summary(_curves(1.0, 1.0, 1.0, 1.0, steps=(50, 100, 150)))


def test_report_plot_and_summary_from_a_full_set_of_records(tmp_path):
    args = _args("--results", str(tmp_path))
    store = _store(tmp_path, args)
    text = gd.report(store, args)
    assert text.startswith("## Nie, Zhang & Mao (ICLR 2023)")
    order = ["### The claim", "### The paper's numbers", "### Protocol", "### Gradient norms", "### Final STS",
             "**Verdict:**", "![", "### Command"]
    positions = [text.index(marker) for marker in order]
    assert positions == sorted(positions)
    assert "quickly drops and vanishes" in text and "Partial results" not in text
    assert "python experiments/gd_losses.py --data-root" in text
    verdicts = gd.verdicts(store)
    assert verdicts["dissipation"] == "reproduced"  # fabricated: fading losses ×0.1, decoupled ×0.9
    assert verdicts["dissipation_strict"] == "reproduced"  # ×0.1 is below the halving threshold
    assert verdicts["sts_match"] == "reproduced" and verdicts["sts_beat"] == "reproduced"
    summary = gd.summary(store)
    assert set(summary) == {"paper", "claim", "verdict", "numbers"}
    assert "partial" not in summary["verdict"]
    json.dumps(summary)
    png = gd.plot(store, tmp_path / "gd_losses.png")
    assert png.stat().st_size > 10_000
    harness.write_report(store, text)
    assert (tmp_path / "gd_losses.md").is_file()


def test_a_slight_fade_passes_the_rule_but_not_the_strict_reading(tmp_path):
    args = _args("--results", str(tmp_path))
    store = harness.RecordStore(gd.NAME, tmp_path)
    timing = harness.RunTiming(wall_s=1.0)
    for seed in (1, 2, 3):
        for loss in gd.LOSSES:
            factor = 0.9 + 0.01 * seed if loss in gd.FADING else 1.0 + 0.01 * seed
            curves = _curves(1.0, factor, 1.0, factor)
            metrics = {"stsb_dev_spearman": 80.0 + 0.1 * seed, "sickr_dev_spearman": 70.0,
                       **gd.gradient_summary(curves), "curves": curves}
            store.add(loss, seed, {"sizes": gd.sizes(args)}, metrics, timing)
    verdicts = gd.verdicts(store)
    assert verdicts["dissipation"] == "reproduced"
    assert verdicts["dissipation_strict"].startswith("partly")  # the decoupled checks still pass
    assert "(falls by less than half)" in gd.report(store, args)


def test_partial_records_render_with_dashes_and_not_enough_seeds(tmp_path):
    args = _args("--results", str(tmp_path))
    store = _store(tmp_path, args, losses=("infonce", "margin_euclidean", "align_uniform"), seeds=(1,), start=False)
    text = gd.report(store, args)
    assert "Partial results: 3/21" in text
    assert "not enough seeds" in text
    assert "| dcl | does not fade | – → – | – |" in text
    summary = gd.summary(store)
    assert summary["verdict"].startswith("partial: 3/21 runs")
    gd.plot(store, tmp_path / "partial.png")
    empty = harness.RecordStore("empty", tmp_path / "empty")
    gd.report(empty, args)
    gd.plot(empty, tmp_path / "empty.png")
    assert gd.summary(empty)["verdict"].startswith("partial: 0/21")


def test_report_only_writes_md_and_png_without_training(tmp_path, monkeypatch):
    args = _args("--results", str(tmp_path))
    _store(tmp_path, args, losses=("infonce", "dcl"), seeds=(1, 2))
    monkeypatch.setattr(gd, "run_loss", lambda *a: pytest.fail("--report-only must not train"))
    assert gd.main(["--report-only", "--results", str(tmp_path)]) == 0
    assert (tmp_path / "gd_losses.md").read_text().startswith("## Nie")
    assert (tmp_path / "gd_losses.png").is_file()
