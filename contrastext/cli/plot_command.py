"""``contrastext plot RUN_DIR``: draw a run's training curves (losses, evaluation, geometry, gradients) as PNGs."""

from __future__ import annotations

from pathlib import Path

import typer

from contrastext.cli import app
from contrastext.errors import MissingDataError


@app.command("plot")
def plot(
    run_dir: Path = typer.Argument(..., help="a training output folder (or its train_log.jsonl)"),
    out: Path | None = typer.Option(None, "--out", help="where to write the PNGs (default RUN_DIR/plots)"),
) -> None:
    """Draw the curves of a training run from its JSONL log and print the paths of the PNG files."""
    from contrastext.evaluation.plots import plot_run

    paths = plot_run(run_dir, out)
    if not paths:
        raise MissingDataError(f"{run_dir}: the log holds no numeric series to plot")
    for path in paths:
        typer.echo(str(path))
