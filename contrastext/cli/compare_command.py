"""``contrastext compare RUN_DIR...``: several runs' evaluation curves on one plot, and a table of their metrics.

Each RUN_DIR is a training output folder (or its ``train_log.jsonl``) or a folder of ``seed-<s>/`` runs
(drawn and tabulated as mean ± std over the seeds). The table gives, per metric and run, the last
evaluation and the value at the best checkpoint (the step the run's ``train.metric_for_best`` selected).
When two or more RUN_DIRs are seed folders, a second table pairs each of them with the first by seed
(contrastext.evaluation.significance): n, Δ, 95 % t-interval, t-test p, sign-flip permutation p, and the p
Holm-adjusted over the table's rows.

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


def print_paired(groups, metrics: list[str]) -> None:
    """Every seed folder after the first against the first, paired by seed, on each metric's best values."""
    from rich.console import Console
    from rich.table import Table

    from contrastext.evaluation.plots import EVAL_PREFIX, seed_values
    from contrastext.evaluation.significance import holm, paired

    folders = [group for group in groups if group.multi_seed]
    if len(folders) < 2:
        return
    baseline, rows = folders[0], []
    for metric in metrics:
        reference = seed_values(baseline, EVAL_PREFIX + metric)
        for group in folders[1:]:
            rows.append((metric, group.name, paired(seed_values(group, EVAL_PREFIX + metric), reference)))
    adjusted = holm([found.p for _, _, found in rows])
    shown = Table(title=f"paired by seed against {baseline.name} (best checkpoint's value; last without one)",
                  caption="Δ = mean(run − baseline) over the seeds both have; t-interval 95 %; permutation: exact "
                  "sign-flip (Monte Carlo above 16 seeds); Holm over the rows of this table, on the larger p")
    for column in ("metric", "run", "n", "Δ", "95 % t-interval", "t p", "permutation p", "Holm p"):
        shown.add_column(column, justify="left" if column in ("metric", "run") else "right")
    for (metric, name, found), p in zip(rows, adjusted, strict=True):
        interval = "-" if found.n < 2 else f"[{found.low:+.4f}, {found.high:+.4f}]"
        shown.add_row(metric, name, str(found.n), "-" if found.n < 1 else f"{found.delta:+.4f}", interval,
                      *(_p(value) for value in (found.t_p, found.permutation_p, p)))
    Console(width=140, soft_wrap=False).print(shown)


def _p(value: float) -> str:
    return "-" if value != value else f"{value:.3g}"  # nan: fewer than 2 pairs


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
    best values. A folder of seed-N/ runs counts as one run: mean ± std over its seeds; two or more such
    folders are also compared with the first, paired by seed (Δ, t-interval, permutation p, Holm)."""
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
    print_paired(groups, list(table))
    typer.echo(f"plot written to {path}")
