"""``contrastext plot``: PNGs from a JSONL log, and clear errors for a missing or broken log."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from typer.main import get_group

from contrastext.errors import DataFormatError, MissingDataError
from contrastext.evaluation.plots import plot_run


def _write_log(folder, records):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "train_log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))


def _records():
    return [
        {
            "step": s,
            "loss": 1 / s,
            "loss/infonce": 1 / s,
            "lr": 0.1,
            "eval/stsb/spearman": 0.5 + s / 100,
            "eval/align": 0.3,
            "eval/uniform": -2.0,
            "eval/grad_alignment": 1.0,
            "eval/grad_uniformity": 0.5,
        }
        for s in range(1, 6)
    ]


def test_plots_every_kind_of_curve(tmp_path):
    _write_log(tmp_path, _records())
    paths = plot_run(tmp_path)
    assert [p.name for p in paths] == [
        "losses.png",
        "eval.png",
        "alignment_uniformity.png",
        "gradient_norms.png",
    ]
    for path in paths:
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_only_losses_when_nothing_else_was_logged(tmp_path):
    _write_log(tmp_path, [{"step": 1, "loss": 1.0}, {"step": 2, "loss": 0.5}])
    assert [p.name for p in plot_run(tmp_path, tmp_path / "out")] == ["losses.png"]


def test_missing_and_broken_logs(tmp_path):
    with pytest.raises(MissingDataError, match="no training log"):
        plot_run(tmp_path)
    (tmp_path / "train_log.jsonl").write_text('{"step": 1}\nnot json\n')
    with pytest.raises(DataFormatError, match="train_log.jsonl:2: not valid JSON"):
        plot_run(tmp_path)


def test_command_prints_the_paths(tmp_path):
    from contrastext.cli import (
        app,
        plot_command,  # noqa: F401  (registers the command)
    )

    _write_log(tmp_path, _records())
    result = CliRunner().invoke(get_group(app), ["plot", str(tmp_path)])  # a group even if alone
    assert result.exit_code == 0, result.output
    assert str(tmp_path / "plots" / "losses.png") in result.output


# ---------------------------------------------------------------------------------------------------------
# Multi-seed folders and comparisons


def _write_config(folder, metric="stsb_dev_spearman", greater_is_better=True):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.yaml").write_text(
        f"train:\n  metric_for_best: {metric}\n  greater_is_better: {str(greater_is_better).lower()}\n"
    )


def _eval_log(folder, values, start=None):
    """Evaluations at steps 10, 20, ... with the given values (and an optional step-0 evaluation)."""
    records = [{"step": 0, "eval/stsb_dev_spearman": start}] if start is not None else []
    records += [
        {"step": 10 * (i + 1), "loss": 1.0 / (i + 1), "eval/stsb_dev_spearman": v, "eval/score": v}
        for i, v in enumerate(values)
    ]
    _write_log(folder, records)


def test_a_multi_seed_folder_is_plotted_as_mean_and_band(tmp_path):
    from contrastext.evaluation.plots import load_run_group, mean_band

    _eval_log(tmp_path / "seed-2", [60.0, 70.0])
    _eval_log(tmp_path / "seed-10", [62.0, 74.0, 80.0])  # a longer run: the last step has one seed
    _eval_log(tmp_path / "seed-1", [58.0, 66.0])
    group = load_run_group(tmp_path)
    assert group.seeds == ["seed-1", "seed-2", "seed-10"]
    steps, means, stds = mean_band(group, "eval/stsb_dev_spearman")
    assert steps == [10, 20, 30]
    assert means == pytest.approx([60.0, 70.0, 80.0])
    assert stds == pytest.approx([2.0, 4.0, 0.0])
    paths = plot_run(tmp_path)
    assert [p.name for p in paths] == ["losses.png", "eval.png"]
    assert all(p.parent == tmp_path / "plots" for p in paths)


def test_a_folder_without_a_log_names_the_runs_below_it(tmp_path):
    _write_log(tmp_path / "finetune-sst2" / "seed-1", [{"step": 1, "loss": 1.0}])
    with pytest.raises(MissingDataError, match=r"no training log at .*runs below it: .*finetune-sst2"):
        plot_run(tmp_path)


def test_best_is_the_step_the_trainer_selects():
    from contrastext.evaluation.plots import best_step

    records = [{"step": 0, "eval/m": 99.0}, {"step": 5, "eval/m": 3.0}, {"step": 10, "eval/m": 5.0},
               {"step": 15, "eval/m": 5.0}]  # fmt: skip
    assert best_step(records, "m") == 10  # step 0 never counts; a tie keeps the first
    assert best_step(records, "m", greater_is_better=False) == 5
    assert best_step(records, None) is None and best_step(records, "other") is None


def test_compare_runs_draws_one_panel_per_metric_and_summarises(tmp_path):
    from contrastext.evaluation.plots import compare_runs

    _eval_log(tmp_path / "a", [70.0, 75.0, 72.0], start=50.0)
    _write_config(tmp_path / "a")
    _eval_log(tmp_path / "b", [60.0, 65.0])  # no config.yaml: no selection
    for seed, values in ((1, [80.0, 84.0]), (2, [82.0, 81.0])):
        _eval_log(tmp_path / "c" / f"seed-{seed}", values)
        _write_config(tmp_path / "c" / f"seed-{seed}")
    out = tmp_path / "out" / "compare.png"
    path, groups, table = compare_runs([tmp_path / "a", tmp_path / "b", tmp_path / "c"], out)
    assert path == out and out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [g.name for g in groups] == ["a", "b", "c"]
    assert list(table) == ["stsb_dev_spearman"]  # the score alias is left out
    a, b, c = (table["stsb_dev_spearman"][name] for name in "abc")
    assert (a.last, a.best) == (72.0, 75.0)
    assert (b.last, b.best) == (65.0, None)
    assert c.seeds == 2 and c.last == pytest.approx(82.5) and c.best == pytest.approx(83.0)
    assert c.best_std == pytest.approx(1.41421356)


def test_compare_runs_refuses_a_metric_no_run_logged(tmp_path):
    from contrastext.errors import ConfigError
    from contrastext.evaluation.plots import compare_runs

    _eval_log(tmp_path / "a", [70.0])
    with pytest.raises(ConfigError, match=r"--metric nope: not logged .*logged: score, stsb_dev_spearman"):
        compare_runs([tmp_path / "a"], tmp_path / "c.png", ["nope"])
    _, _, table = compare_runs([tmp_path / "a"], tmp_path / "c.png", ["eval/score"])
    assert list(table) == ["score"]


def test_plot_command_on_a_multi_seed_folder(tmp_path):
    from contrastext.cli import (
        app,
        plot_command,  # noqa: F401  (registers the command)
    )

    _eval_log(tmp_path / "seed-1", [1.0, 2.0])
    _eval_log(tmp_path / "seed-2", [2.0, 3.0])
    result = CliRunner().invoke(get_group(app), ["plot", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "2 seeds (seed-1, seed-2): mean ± std" in result.output
    assert str(tmp_path / "plots" / "eval.png") in result.output


def _drawn_labels(monkeypatch, tmp_path) -> dict[str, list[str]]:
    """{PNG name: the legend's labels} of plot_run(tmp_path), read from the figures before they are closed."""
    from contrastext.evaluation import plots

    figures = []
    monkeypatch.setattr(plots.plt, "close", figures.append)
    paths = plot_run(tmp_path)
    return {path.name: figure.axes[0].get_legend_handles_labels()[1] for path, figure in zip(paths, figures, strict=True)}


def test_one_curve_per_metric_no_alias_repeated_and_the_best_step_marked(tmp_path, monkeypatch):
    """Issue 22: score, <task>_score and <task>_spearman were three identical curves, a one-part loss was drawn
    twice (loss and loss/<part>) and no best step was marked."""
    spearman = [0.5, 0.7, 0.6, 0.65]
    records = [
        {
            "step": step,
            "loss": 1 / step,
            "loss/infonce": 1 / step,
            "eval/score": value,
            "eval/stsb_dev_score": value,
            "eval/stsb_dev_spearman": value,
            "eval/stsb_dev_pearson": value - 0.1 + step / 1000,
        }
        for step, value in zip((2, 4, 6, 8), spearman, strict=True)
    ]
    _write_log(tmp_path, records)
    (tmp_path / "config.yaml").write_text("train:\n  metric_for_best: score\n  greater_is_better: true\n")
    labels = _drawn_labels(monkeypatch, tmp_path)
    assert labels["losses.png"] == ["loss (= loss/infonce)"]
    assert labels["eval.png"] == [
        "eval/stsb_dev_pearson",
        "eval/stsb_dev_spearman (= eval/score, eval/stsb_dev_score)",
        "best: step 4 (score)",
    ]


def test_distinct_loss_parts_are_all_drawn_and_no_mark_without_selection(tmp_path, monkeypatch):
    _write_log(tmp_path, [{"step": s, "loss": 3 / s, "loss/a": 1 / s, "loss/b": 2 / s, "eval/acc": s / 10}
                          for s in (1, 2)])
    labels = _drawn_labels(monkeypatch, tmp_path)  # no config.yaml: no metric_for_best, nothing to mark
    assert labels == {"losses.png": ["loss", "loss/a", "loss/b"], "eval.png": ["eval/acc"]}
