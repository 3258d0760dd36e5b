"""``contrastext compare RUN_DIR...``: several runs' evaluation curves on one plot, and a table of their metrics.

Each RUN_DIR is a training output folder (or its ``train_log.jsonl``) or a folder of ``seed-<s>/`` runs
(drawn and tabulated as mean ± std over the seeds). The table gives, per metric and run, the last
evaluation and the value at the best checkpoint (the step the run's ``train.metric_for_best`` selected).

Example::

    contrastext compare runs/simcse-a runs/simcse-b runs/scl --out compare.png --metric stsb_dev_spearman
"""

from __future__ import annotations

from pathlib import Path

import typer

from contrastext.cli import app
from contrastext.errors import ContrastextError

DEFAULT_OUT = Path("compare.png")


def _cell(value: float | None, std: float | None, seeds: int) -> str:
    if value is None:
        return "-"
    return f"{value:.4f}" + (f" ± {std:.4f}" if seeds > 1 and std is not None else "")


def print_table(groups, table: dict) -> None:
    """One row per metric; per run a "last" and a "best" column (mean ± std for seeds)."""
    from rich.console import Console
    from rich.table import Table

    shown = Table(
        title="evaluation metrics",
        caption="last: the last evaluation; best: at the checkpoint the run's train.metric_for_best selected "
        "(- when it selects none); seeds: mean ± sample std",
    )
    shown.add_column("metric", style="bold")
    for group in groups:
        seeds = f" ({len(group.seeds)} seeds)" if group.multi_seed else ""
        shown.add_column(f"{group.name}{seeds}\nlast", justify="right")
        shown.add_column(f"{group.name}{seeds}\nbest", justify="right")
    for metric, by_run in table.items():
        cells = []
        for group in groups:
            summary = by_run[group.name]
            cells += [
                _cell(summary.last, summary.last_std, summary.seeds),
                _cell(summary.best, summary.best_std, summary.seeds),
            ]
        shown.add_row(metric, *cells)
    Console(width=max(120, 24 + 30 * len(groups)), soft_wrap=False).print(shown)


@app.command("compare")
def compare(
    run_dirs: list[Path] = typer.Argument(
        ..., help="training output folders (or their train_log.jsonl), or folders of seed-N/ runs"
    ),
    out: Path = typer.Option(DEFAULT_OUT, "--out", help="the PNG to write (one panel per metric)"),
    metrics: list[str] | None = typer.Option(
        None,
        "--metric",
        help="a metric to compare (e.g. stsb_dev_spearman); repeat for several. Default: every evaluation "
        "metric the runs logged (the score aliases left out).",
    ),
) -> None:
    """Draw the evaluation metrics of several runs on one plot (PNG) and print a table of their last and
    best values. A folder of seed-N/ runs counts as one run: mean ± std over its seeds."""
    from contrastext.cli.encode_command import check_output_folder
    from contrastext.evaluation.plots import compare_runs

    if out.exists() and out.is_dir():
        raise ContrastextError(f"--out {out}: is a folder; give a .png file")
    if out.suffix.lower() != ".png":
        raise ContrastextError(f"--out {out}: give a .png file name")
    check_output_folder(out.parent if str(out.parent) else Path("."), "--out")
    try:
        path, groups, table = compare_runs(run_dirs, out, metrics or ())
    except OSError as error:
        if isinstance(error, ContrastextError):
            raise
        raise ContrastextError(f"--out {out}: cannot write the plot ({error.strerror or error})") from None
    print_table(groups, table)
    typer.echo(f"plot written to {path}")
