"""``contrastext eval``: score a saved model on STS and classification tasks; print a table, write JSON.

Example::

    contrastext eval --model runs/simcse/best --tasks sts12,sts13,sts14,sts15,sts16,stsb,sickr \\
        --data-root ../shared/data --json results.json
    contrastext eval --model bundled:all-MiniLM-L6-v2 --tasks sts:my_sts.csv,pairs:held_out.jsonl
    contrastext eval --model runs/mnrl/best/encoder --tasks ir:my_beir_folder@dev --json ir.json
    contrastext eval --model runs/mnrl/best/encoder --tasks stsb:dev --dim 128      # a Matryoshka model's prefix
    contrastext eval --model bundled:all-MiniLM-L6-v2 --tasks 'sts[text=text_a,pair=text_b,score=similarity]:my.csv'

Task specs (registry names and the user's files) are parsed by :mod:`contrastext.evaluation.task_specs`.
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
    DEVICE_HELP,
    DIM_HELP,
    MODEL_HELP,
    PROMPT_HELP,
    PROMPT_NAME_HELP,
    TRUST_REMOTE_CODE_HELP,
    check_output_file,
    load_model,
    prompted_encoder,
    resolve_device,
    truncated_encoder,
    write_file_atomically,
)
from contrastext.cli.predict_command import evaluate_with_head, load_classifier_folder
from contrastext.data.root import resolve_data_root
from contrastext.errors import ContrastextError
from contrastext.evaluation.evaluators import METRIC_NAMES
from contrastext.evaluation.ir_keys import IR_METRIC_NAMES
from contrastext.evaluation.suite import check_task_specs, default_tasks, evaluate_tasks, report_metrics
from contrastext.models.hf_export import is_classifier_folder
from contrastext.runtime.paths import check_apart


class Aggregation(StrEnum):
    all = "all"
    wmean = "wmean"


TASKS_HELP = (
    "Comma-separated task specs: NAME[:SPLIT] for a registry task (stsb:dev, sts12, sst2), KIND:PATH\\[@SPLIT] for "
    "your own CSV/TSV/JSONL file, KIND one of sts, classification, pairs (sts:my_sts.csv), ir:FOLDER\\[@SPLIT] for a "
    "BEIR retrieval folder, KIND[ROLE=COLUMN,...]:PATH to name the columns, or a bare PATH whose kind follows "
    "from its columns (see above). Default: the STS suite sts12-16, stsb, sickr, as far as the data root holds it."
)


def parse_task_list(tasks: str) -> list[str]:
    """``"stsb:dev, sts12"`` -> ``["stsb:dev", "sts12"]``; commas inside ``[...]`` (a spec's column roles,
    ``sts[text=a,pair=b,score=s]:f.csv``) separate nothing; an empty item or an unclosed ``[`` is an error."""
    specs, current, depth = [], [], 0
    for character in tasks:
        depth += {"[": 1, "]": -1}.get(character, 0)
        if character == "," and depth == 0:
            specs.append("".join(current).strip())
            current = []
        else:
            current.append(character)
    specs.append("".join(current).strip())
    if depth != 0:
        raise ContrastextError(f"--tasks {tasks!r}: a '[' without its ']' (or the reverse)")
    if any(not spec for spec in specs):
        raise ContrastextError(f"--tasks {tasks!r}: give comma-separated task names without empty items")
    return specs


IR_TABLE_METRICS: tuple[str, ...] = ("cosine_ndcg@10", "cosine_recall@100", "cosine_map@100")
"""The IR metrics the table shows (the JSON has all of them)."""
METRIC_COLUMNS = tuple(name for name in METRIC_NAMES if name not in IR_METRIC_NAMES) + IR_TABLE_METRICS
"""The table's metric columns: every metric a task may report (``accuracy_at_1`` printed as ``acc@1``...), of an ir
set's only :data:`IR_TABLE_METRICS`."""


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
    headers = {"accuracy_at_1": "acc@1", "accuracy_at_10": "acc@10", "mrr_at_10": "mrr@10",
               "cosine_ndcg@10": "ndcg@10", "cosine_recall@100": "recall@100", "cosine_map@100": "map@100"}
    for column in ("task", "split", "n", *metrics):
        table.add_column(headers.get(column, column), justify="left" if column in ("task", "split") else "right")

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
        str, typer.Option("--model", "-m", help=MODEL_HELP)
    ],
    tasks: Annotated[str | None, typer.Option("--tasks", "-t", help=TASKS_HELP)] = None,
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
    device: Annotated[str | None, typer.Option("--device", help=DEVICE_HELP)] = None,
    dim: Annotated[int | None, typer.Option("--dim", min=1, help=DIM_HELP)] = None,
    prompt: Annotated[str | None, typer.Option("--prompt", help=PROMPT_HELP)] = None,
    prompt_name: Annotated[str | None, typer.Option("--prompt-name", help=PROMPT_NAME_HELP)] = None,
) -> None:
    """Evaluate --model on --tasks; print a table and optionally write JSON. Scores are x100.

    Without --tasks: the STS suite (sts12-16, stsb, sickr on their test splits) as far as the data root holds it; a task without its test file is evaluated on its dev split, one with neither is skipped, and a note says so (the shipped data has STS12 and the STS-B / SICK dev files only).

    Your own files: sts:FILE (two text columns, then a score column), classification:FILE (one or two text columns, then a label column, string labels welcome; a probe trained on 80% of the file, scored on the other 20%), pairs:FILE (anchor, positive[, hard_negative]; each anchor retrieves its positive among all positives: accuracy@1/@10, MRR@10), ir:FOLDER\\[@SPLIT] (BEIR's layout: corpus.jsonl, queries.jsonl, qrels/SPLIT.tsv, SPLIT test by default, or the same as CSV/TSV; each query searches the whole corpus, scored as sentence-transformers' InformationRetrievalEvaluator: cosine_ and dot_ accuracy, precision, recall, ndcg, mrr, map @1/3/5/10/100, headline cosine_ndcg@10; the table shows three, the JSON all). CSV and TSV need a header row (the score column named score or label); JSONL one object a line. A file is reported under its stem (an ir folder under its name, split test or SPLIT), split "file" (or FILE@SPLIT), and needs no --data-root.

    Other column names: KIND[ROLE=COLUMN,...]:PATH, the roles of training's data.columns: text, pair, negative (the texts, in that order), score (sts), label (classification): 'sts\\[text=text_a,pair=text_b,score=similarity]:my.csv', 'pairs\\[text=question,pair=answer]:qa.jsonl'; texts not named are the other columns in file order. ir takes id, text, title (corpus and queries) and query_id, corpus_id, score (qrels header): 'ir\\[id=doc_id,text=body]:my_folder'. Quote the spec in the shell; commas inside [...] do not separate specs.

    Without a split a task uses its default one (test for the STS suite sts12-16, stsb, sickr). STS tasks are scored by Spearman/Pearson of the cosine of the two embeddings; classification tasks (sst2, mrpc, cola...) by a logistic-regression probe on frozen embeddings (accuracy, F1, MCC; C picked on dev, or by 5-fold CV on train when dev is the evaluated split). When --model is an exported classifier folder (<run>/classifier), classification tasks are scored by its own head instead (and STS tasks by a regression head); each result's "scored_by" says which.

    Results are keyed by task NAME and the split is a field, so give each task once: stsb:dev gives "stsb": {"split": "dev", "spearman", "pearson", "n"}. JSON shape: {"model", "tasks": {NAME: {...}}, "average": {"spearman", "pearson"}, "metrics": {KEY: value}}, the average taken over the STS tasks, "metrics" the flat keys a training run logs (stsb_dev_spearman, stsb_dev_score, ..., and "score", the first task's headline metric), and "notes" when the default tasks were changed to fit the data root. An undefined correlation (constant gold scores) is written as null, with a warning.
    """
    notes: list[str] = []
    if tasks is None:  # the STS suite, as far as the data root holds it (each change is a printed note)
        specs, notes = default_tasks(data_root)
    else:
        specs = parse_task_list(tasks)
    parsed = check_task_specs(specs)  # bad task names, missing files and data root fail before the model loads
    if any(not spec.is_file for spec in parsed):
        resolve_data_root(data_root)
    if json_path is not None:
        check_output_file(json_path, "--json")  # before the evaluation, so results are never lost at the end
        inputs = [("--model", model), *(("--tasks", spec.task.path) for spec in parsed if spec.is_file)]
        check_apart(json_path, "--json", inputs)  # never over the model folder or a task file
    chosen_device = resolve_device(device)
    stderr = Console(stderr=True)
    for note in notes:
        stderr.print(f"note: {note}", soft_wrap=True, markup=False)

    def evaluate_encoder(task_specs: list[str]) -> dict:
        return evaluate_tasks(
            prompted_encoder(
                truncated_encoder(load_model(model, trust_remote_code=trust_remote_code, device=chosen_device), dim),
                prompt, prompt_name,
            ),
            task_specs,
            data_root,
            batch_size=batch_size,
            sts_aggregation=aggregation.value,
            limit=limit,
            max_train=max_train,
            show_progress=progress,
            on_task=(lambda spec: stderr.print(f"evaluating {spec}")) if progress else None,
        )

    # An exported classifier folder: classification tasks are scored by its own head, not by a probe.
    classifier = load_classifier_folder(model, trust_remote_code) if is_classifier_folder(model) else None
    if classifier is None:
        evaluated = evaluate_encoder(specs)
    else:
        evaluated = evaluate_with_head(
            classifier, specs, data_root, evaluate_encoder, batch_size=batch_size, limit=limit,
            on_task=(lambda spec: stderr.print(f"evaluating {spec} with the classifier's head")) if progress else None,
        )
    metrics = report_metrics(parsed, evaluated["tasks"])  # training's keys, whichever way each task was scored
    results = {"model": str(model), **evaluated, "metrics": metrics, **({"notes": notes} if notes else {})}
    stdout = Console()
    stdout.print(f"model: {model}", soft_wrap=True, markup=False)
    if classifier is not None:
        for name, result in results["tasks"].items():
            stdout.print(f"{name}: scored by the {result.get('scored_by')}", soft_wrap=True, markup=False)
    stdout.print(results_table(results))
    if json_path is not None:
        text, undefined = results_json(results)
        for key in undefined:
            stderr.print(f"warning: {key} is undefined (constant scores?); written as null", markup=False)
        write_file_atomically(json_path, lambda handle: handle.write(text.encode("utf-8")), "--json")
        stderr.print(f"wrote {json_path}", markup=False)
