"""Smoke tests of the experiment scripts' reporting (no training): overrides, table and plot."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from contrastext.training.config import load_config

REPO = Path(__file__).resolve().parents[2]


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, REPO / "experiments" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_gd_overrides_are_valid_for_every_loss(tmp_path):
    gd = _load("gd_losses")
    args = gd.parse_args(["--runs", str(tmp_path), "--eval-limit", "50"])
    for loss in gd.LOSSES:
        config = load_config(REPO / "recipes" / "gd.yaml", gd.overrides(args, loss))
        assert config.method_args["loss"] == loss
        assert config.train.eval_at_start and config.eval.limit == 50


def test_gd_table_and_plot_from_a_log(tmp_path):
    gd = _load("gd_losses")
    evals = [
        {"step": s, "stsb_dev_spearman": 80.0 + s, "align": 0.1, "uniform": -2.0, "grad_alignment": g,
         "grad_uniformity": 2 * g, "grad_total": g}
        for s, g in [(0, 1.0), (10, 0.0)]
    ]
    curves = {"margin_product": {"evals": evals, "train_loss": [{"step": 5, "loss": 0.1}, {"step": 10, "loss": 0.0}]}}
    text = gd.table(curves, {"margin_product": 12.0})
    assert "| margin_product | 80.00 | 90.00 | 90.00 (10) |" in text
    assert "1.000 → 0.000" in text  # the gradient's alignment part went to zero
    png = gd.plot(curves, tmp_path / "plot.png")
    assert png.stat().st_size > 0


def test_scl_settings_and_overrides(tmp_path):
    scl = _load("scl_few_shot")
    args = scl.parse_args(["--runs", str(tmp_path), "--seeds", "1", "2", "--label-noise", "0.2"])
    chosen = scl.settings(args.label_noise)
    assert list(chosen) == ["ce", "ce+scl", "ce, noise 0.2", "ce+scl, noise 0.2"]
    for name, own in chosen.items():
        config = load_config(REPO / "recipes" / "scl.yaml", scl.overrides(args, name, own))
        assert config.method_args["seeds"] == [1, 2]
        assert config.data.few_shot == 10 and config.eval.limit == 400
    assert scl.mean_std([70.0, 72.0]) == (71.0, 2.0**0.5)
