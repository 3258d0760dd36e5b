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
