"""``contrastext plot RUN_DIR``: draw a run's training curves (losses, evaluation, geometry, gradients) as PNGs."""

from __future__ import annotations

from pathlib import Path

import typer

from contrastext.cli import app
from contrastext.cli.encode_command import check_output_folder
from contrastext.errors import ContrastextError, MissingDataError


@app.command("plot")
def plot(
    run_dir: Path = typer.Argument(..., help="a training output folder (or its train_log.jsonl)"),
    out: Path | None = typer.Option(None, "--out", help="where to write the PNGs (default RUN_DIR/plots)"),
) -> None:
    """Draw the curves of a training run from its JSONL log and print the paths of the PNG files.

    A torn last line of the log (a run killed while writing it) is dropped with a warning.
    """
    from contrastext.evaluation.plots import find_log, plot_run

    log = find_log(run_dir)
    if not log.is_file():  # fails before any folder is created
        raise MissingDataError(f"no training log at {log}")
    check_output_folder(out if out is not None else log.parent / "plots", "--out")
    try:
        paths = plot_run(run_dir, out)
    except OSError as error:
        raise ContrastextError(f"--out {out}: cannot write the plots ({error.strerror or error})") from None
    if not paths:
        raise MissingDataError(f"{run_dir}: the log holds no numeric series to plot")
    for path in paths:
        typer.echo(str(path))
