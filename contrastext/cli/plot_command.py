"""``contrastext plot RUN_DIR``: draw a run's training curves (losses, evaluation, geometry, gradients) as PNGs.

A folder of ``seed-<s>/`` runs (SCL's seeds, CAPT's fine-tuning seeds) is drawn as the mean over the seeds
with a ± std band.
"""

from __future__ import annotations

from pathlib import Path

import typer

from contrastext.cli import app
from contrastext.cli.encode_command import check_output_folder
from contrastext.errors import ContrastextError, MissingDataError


@app.command("plot")
def plot(
    run_dir: Path = typer.Argument(
        ..., help="a training output folder (or its train_log.jsonl), or a folder of seed-N/ runs"
    ),
    out: Path | None = typer.Option(None, "--out", help="where to write the PNGs (default RUN_DIR/plots)"),
) -> None:
    """Draw the curves of a training run from its JSONL log and print the paths of the PNG files.

    A folder of seed-N/ runs gives the mean over the seeds with a ± std band. A torn last line of a log (a
    run killed while writing it) is dropped with a warning. Several runs on one plot: `contrastext compare`.
    """
    from contrastext.evaluation.plots import find_log, load_run_group, plot_run

    group = load_run_group(run_dir)  # fails (naming the log expected) before any folder is created
    default = find_log(run_dir).parent if not group.multi_seed else run_dir
    check_output_folder(out if out is not None else default / "plots", "--out")
    try:
        paths = plot_run(run_dir, out)
    except OSError as error:
        raise ContrastextError(f"--out {out}: cannot write the plots ({error.strerror or error})") from None
    if not paths:
        raise MissingDataError(f"{run_dir}: the log holds no numeric series to plot")
    if group.multi_seed:
        typer.echo(f"{len(group.seeds)} seeds ({', '.join(group.seeds)}): mean ± std")
    for path in paths:
        typer.echo(str(path))
