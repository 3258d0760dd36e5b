"""``contrastext eval``: score a saved model on STS and classification tasks; print a table, write JSON.

Example::

    contrastext eval --model runs/simcse/best --tasks sts12,sts13,sts14,sts15,sts16,stsb,sickr \\
        --data-root ../shared/data --json results.json
"""

from __future__ import annotations

import json
import math
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from contrastext.cli import app
from contrastext.cli.encode_command import (
    TRUST_REMOTE_CODE_HELP,
    check_output_file,
    load_model,
    write_file_atomically,
)
from contrastext.data.root import resolve_data_root
from contrastext.errors import ContrastextError
from contrastext.evaluation.suite import STS_SUITE, check_task_specs, evaluate_tasks


class Aggregation(StrEnum):
    all = "all"
    wmean = "wmean"


TASKS_HELP = "Comma-separated task specs NAME[:SPLIT], e.g. stsb:dev,sts12,sst2 (see above)."


def parse_task_list(tasks: str) -> list[str]:
    """``"stsb:dev, sts12"`` -> ``["stsb:dev", "sts12"]``; an empty item is an error."""
    specs = [spec.strip() for spec in tasks.split(",")]
    if not specs or any(not spec for spec in specs):
        raise ContrastextError(f"--tasks {tasks!r}: give comma-separated task names without empty items")
    return specs


METRIC_COLUMNS = ("spearman", "pearson", "accuracy", "f1", "mcc")


def json_ready(value, where: str = "", undefined: list[str] | None = None):
    """``value`` with every NaN or infinite float replaced by None (JSON ``null``); their keys go to ``undefined``.

    JSON has no NaN: ``json.dumps`` would write a bare ``NaN`` that strict readers reject.
    """
    if isinstance(value, dict):
        return {key: json_ready(item, f"{where}.{key}" if where else str(key), undefined) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [json_ready(item, f"{where}[{index}]", undefined) for index, item in enumerate(value)]
    if isinstance(value, float) and not math.isfinite(value):
        if undefined is not None:
            undefined.append(where)
        return None
    return value


def results_json(results: dict) -> tuple[str, list[str]]:
    """The results as strict JSON text, and the keys whose value was undefined (written as null)."""
    undefined: list[str] = []
    text = json.dumps(json_ready(results, undefined=undefined), indent=2, allow_nan=False) + "\n"
    return text, undefined


def results_table(results: dict) -> Table:
    """One row per task: split, n and the metrics any task reports (Spearman/Pearson, accuracy/F1/MCC)."""
    table = Table(title="contrastext eval (scores x100)")
    metrics = [key for key in METRIC_COLUMNS if any(key in result for result in results["tasks"].values())]
    for column in ("task", "split", "n", *metrics):
        table.add_column(column, justify="left" if column in ("task", "split") else "right")

    def cell(result: dict, key: str) -> str:
        if key in result and (result[key] is None or (isinstance(result[key], float) and math.isnan(result[key]))):
            return "n/a"  # an undefined correlation (constant scores)
        value = result.get(key)
        return "" if value is None else (str(value) if isinstance(value, int) else f"{value:.2f}")

    for name, result in results["tasks"].items():
        table.add_row(name, result["split"], *(cell(result, key) for key in ("n", *metrics)))
    if results["average"]:
        table.add_row("average", "", "", *(cell(results["average"], key) for key in metrics))
    return table


@app.command("eval")
def eval_command(
    model: Annotated[
        str, typer.Option("--model", "-m", help="Folder of a saved model (ours, sentence-transformers or Hugging Face).")
    ],
    tasks: Annotated[str, typer.Option("--tasks", "-t", help=TASKS_HELP)] = ",".join(STS_SUITE),
    data_root: Annotated[
        Path | None,
        typer.Option(
            "--data-root", help="Benchmark data folder (holding stsb/, glue/, senteval/...); default $CONTRASTEXT_DATA."
        ),
    ] = None,
    json_path: Annotated[
        Path | None,
        typer.Option(
            "--json",
            help="Also write the results to this JSON file (shape above).",
        ),
    ] = None,
    batch_size: Annotated[int, typer.Option("--batch-size", min=1, help="Sentences per forward pass.")] = 64,
    aggregation: Annotated[
        Aggregation,
        typer.Option(
            "--aggregation",
            help="STS12-16: 'all' = one correlation over all pairs of the year (SimCSE); "
            "'wmean' = pair-weighted mean of per-subset correlations (SentEval).",
        ),
    ] = Aggregation.all,
    limit: Annotated[
        int | None,
        typer.Option(
            "--limit",
            min=1,
            help="Smoke-test aid: only the first N pairs / examples of each task (of each STS12-16 subset); "
            "not comparable to papers.",
        ),
    ] = None,
    max_train: Annotated[
        int | None,
        typer.Option(
            "--max-train",
            min=10,
            help="Probe: train on a seeded random subset of N training examples (default: all).",
        ),
    ] = None,
    progress: Annotated[
        bool, typer.Option("--progress/--no-progress", help="Show progress (task names, encoding bars) on stderr.")
    ] = True,
    trust_remote_code: Annotated[bool, typer.Option("--trust-remote-code", help=TRUST_REMOTE_CODE_HELP)] = False,
) -> None:
    """Evaluate --model on --tasks; print a table and optionally write JSON. Scores are x100.

    Without a split a task uses its default one (test for the STS suite sts12-16, stsb, sickr). STS tasks are scored by Spearman/Pearson of the cosine of the two embeddings; classification tasks (sst2, mrpc, cola...) by a logistic-regression probe on frozen embeddings (accuracy, F1, MCC; C picked on dev, or by 5-fold CV on train when dev is the evaluated split).

    Results are keyed by task NAME and the split is a field, so give each task once: stsb:dev gives "stsb": {"split": "dev", "spearman", "pearson", "n"}. JSON shape: {"model", "tasks": {NAME: {...}}, "average": {"spearman", "pearson"}}, the average taken over the STS tasks. An undefined correlation (constant gold scores) is written as null, with a warning.
    """
    specs = parse_task_list(tasks)
    check_task_specs(specs)  # bad task names and a missing data root fail before the model is loaded
    resolve_data_root(data_root)
    if json_path is not None:
        check_output_file(json_path, "--json")  # before the evaluation, so results are never lost at the end
    encoder = load_model(model, trust_remote_code=trust_remote_code)
    stderr = Console(stderr=True)
    evaluated = evaluate_tasks(
        encoder,
        specs,
        data_root,
        batch_size=batch_size,
        sts_aggregation=aggregation.value,
        limit=limit,
        max_train=max_train,
        show_progress=progress,
        on_task=(lambda spec: stderr.print(f"evaluating {spec}")) if progress else None,
    )
    results = {"model": str(model), **evaluated}
    stdout = Console()
    stdout.print(f"model: {model}", soft_wrap=True, markup=False)
    stdout.print(results_table(results))
    if json_path is not None:
        text, undefined = results_json(results)
        for key in undefined:
            stderr.print(f"warning: {key} is undefined (constant scores?); written as null", markup=False)
        write_file_atomically(json_path, lambda handle: handle.write(text.encode("utf-8")), "--json")
        stderr.print(f"wrote {json_path}", markup=False)
