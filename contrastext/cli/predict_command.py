"""``contrastext predict``: label every line of a text file with an exported classifier; labels and probabilities.

Example::

    contrastext predict --model runs/scl/seed-1/classifier --input reviews.txt --output predictions.jsonl

``--model`` is a Hugging Face sequence-classification folder: the ``classifier/`` a fine-tuning run exports
(SCL, RECLAIM, CAPT's fine-tuning; :mod:`contrastext.models.hf_export`), or any other local one. The input is
read as ``contrastext encode`` reads it (UTF-8, one text a line, only ``\\n`` ends a line, a blank line is an
error); for a classifier of text pairs each line holds the two texts separated by one TAB (``--pairs``; our
exports say whether they read pairs). Row i of the output is line i:

- JSONL (``--output x.jsonl``, or stdout without ``--output``): ``{"line", "text", ["text_pair",] "label",
  "score", "probabilities": {label: p}}``; a regression model writes ``{"line", "text", ..., "score"}``;
- CSV (``--output x.csv``): columns ``line, text, [text_pair,] label, score`` and one ``p(<label>)`` column
  per label.

Probabilities are those of ``transformers.pipeline("text-classification")``: softmax over the labels (sigmoid
for a one-logit or multi-label model; the raw score for regression). Inputs longer than the model's maximum
length are truncated, as the model was trained.

Also home of the ``eval`` command's head scoring (:func:`score_with_head`): on a classifier folder,
classification tasks are scored with the classifier's own head instead of a probe on frozen embeddings.
"""

from __future__ import annotations

import csv
import io
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer

from contrastext.cli import app
from contrastext.cli.encode_command import (
    TRUST_REMOTE_CODE_HELP,
    check_output_file,
    read_texts,
    write_file_atomically,
)
from contrastext.errors import ContrastextError, DataFormatError, NonFiniteError
from contrastext.runtime.paths import check_apart

OUTPUT_FORMATS = {".jsonl": "jsonl", ".json": "jsonl", ".ndjson": "jsonl", ".csv": "csv"}
HEAD = "classifier head"
PROBE = "logistic probe on frozen embeddings"
COSINE = "cosine of the encoder's embeddings"


def output_format(path: Path | None) -> str:
    """``jsonl`` or ``csv`` from ``--output``'s suffix (stdout: jsonl); ContrastextError for another suffix."""
    if path is None:
        return "jsonl"
    fmt = OUTPUT_FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise ContrastextError(
            f"--output {path}: unknown suffix {path.suffix or '(none)'!r}; give .jsonl (one JSON object a line) or .csv"
        )
    return fmt


def load_classifier_folder(model: str, trust_remote_code: bool = False):
    """``--model`` as a :class:`~contrastext.models.hf_export.SequenceClassifier`; one-line error otherwise."""
    from contrastext.models.hf_export import load_classifier

    path = Path(model).expanduser()
    if not path.exists():
        raise ContrastextError(f"--model {model}: no such folder (give an exported classifier folder, e.g. <run>/classifier)")
    if not path.is_dir():
        raise ContrastextError(f"--model {model}: not a folder (give an exported classifier folder, e.g. <run>/classifier)")
    if not (path / "config.json").is_file() and (path / "classifier" / "config.json").is_file():
        raise ContrastextError(f"--model {model}: a run folder; its classifier is {path / 'classifier'}")
    return load_classifier(path, trust_remote_code=trust_remote_code)


def split_pairs(texts: list[str], source: Path) -> tuple[list[str], list[str]]:
    """Each line ``text<TAB>text_pair``; DataFormatError naming the line otherwise."""
    firsts, seconds = [], []
    for number, line in enumerate(texts, start=1):
        parts = line.split("\t")
        if len(parts) != 2 or not parts[0].strip() or not parts[1].strip():
            raise DataFormatError(
                source, number, f"expected two non-empty texts separated by one TAB (the classifier reads pairs), "
                f"found {len(parts)} field(s)"
            )
        firsts.append(parts[0])
        seconds.append(parts[1])
    return firsts, seconds


def prediction_rows(classifier, texts: list[str], pairs: list[str] | None, logits: np.ndarray) -> list[dict[str, Any]]:
    """One dict per input row (see the module docstring)."""
    scores = classifier.scores_from_logits(logits)
    rows = []
    for index, text in enumerate(texts):
        row: dict[str, Any] = {"line": index + 1, "text": text}
        if pairs is not None:
            row["text_pair"] = pairs[index]
        if classifier.regression:
            row["score"] = float(scores[index, 0])
        else:
            best = int(np.argmax(scores[index]))
            row["label"] = classifier.label_names[best]
            row["score"] = float(scores[index, best])
            row["probabilities"] = {
                name: float(value) for name, value in zip(classifier.label_names, scores[index], strict=True)
            }
        rows.append(row)
    return rows


def jsonl_text(rows: list[dict]) -> str:
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


def csv_text(rows: list[dict], label_names: Sequence[str]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    pair = bool(rows) and "text_pair" in rows[0]
    regression = bool(rows) and "label" not in rows[0]
    header = ["line", "text", *(["text_pair"] if pair else [])]
    header += ["score"] if regression else ["label", "score", *(f"p({name})" for name in label_names)]
    writer.writerow(header)
    for row in rows:
        cells = [row["line"], row["text"], *([row["text_pair"]] if pair else [])]
        if regression:
            cells.append(repr(row["score"]))
        else:
            cells += [row["label"], repr(row["score"]), *(repr(row["probabilities"][name]) for name in label_names)]
        writer.writerow(cells)
    return buffer.getvalue()


@app.command("predict")
def predict_command(
    model: Annotated[
        str,
        typer.Option(
            "--model", "-m", help="An exported classifier folder (<run>/classifier) or any Hugging Face "
            "sequence-classification folder."
        ),
    ],
    input: Annotated[
        Path,
        typer.Option(
            "--input",
            "-i",
            help="UTF-8 text file, one text a line (only \\n ends a line; blank lines are an error); for a pair "
            "classifier the two texts of a line are separated by a TAB.",
        ),
    ],
    output: Annotated[
        Path | None,
        typer.Option(
            "--output", "-o", help="Where to write: .jsonl (one JSON object a line) or .csv; default: JSONL on stdout."
        ),
    ] = None,
    batch_size: Annotated[int, typer.Option("--batch-size", min=1, help="Texts per forward pass.")] = 32,
    pairs: Annotated[
        bool | None,
        typer.Option(
            "--pairs/--no-pairs",
            help="Read each line as text<TAB>text_pair. Default: what the exported classifier says (single texts "
            "for a folder that does not say).",
        ),
    ] = None,
    trust_remote_code: Annotated[bool, typer.Option("--trust-remote-code", help=TRUST_REMOTE_CODE_HELP)] = False,
) -> None:
    """Label every line of --input with the classifier --model; write labels and probabilities (row i = line i)."""
    fmt = output_format(output)
    if output is not None:
        check_output_file(output, "--output")
        check_apart(output, "--output", [("--input", input), ("--model", model)])  # never over an input
    texts = read_texts(input)
    classifier = load_classifier_folder(model, trust_remote_code=trust_remote_code)
    read_pairs = classifier.text_pair if pairs is None else pairs
    second = None
    if read_pairs:
        texts, second = split_pairs(texts, input)
    logits = classifier.logits(texts, second, batch_size=batch_size)
    bad = np.flatnonzero(~np.isfinite(logits).all(axis=1))
    if bad.size:
        raise NonFiniteError(
            f"the classifier produced NaN or infinite logits for {bad.size} of {len(texts)} lines (first: "
            f"{input}:{int(bad[0]) + 1}); its weights are probably diverged: nothing was written"
        )
    rows = prediction_rows(classifier, texts, second, logits)
    text = csv_text(rows, classifier.label_names) if fmt == "csv" else jsonl_text(rows)
    if output is None:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    write_file_atomically(output, lambda handle: handle.write(text.encode("utf-8")), "--output")
    what = "scores" if classifier.regression else f"labels: {', '.join(classifier.label_names)}"
    typer.echo(f"wrote {output} ({len(rows)} rows; {what})", err=True)


# ----------------------------------------------------------------------------------------------- eval's head


def _default_names(names: Sequence[str]) -> bool:
    return all(name in (str(index), f"LABEL_{index}") for index, name in enumerate(names))


def gold_model_ids(classifier, task, label_names: Sequence[str] | None, labels: Sequence[int]) -> list[int]:
    """The gold class ids of a task (registry or file) in the classifier's label ids, matched by label name
    (exactly, else ignoring case); a classifier whose labels are unnamed (``0``, ``1`` / ``LABEL_0``, …) with
    the task's number of classes keeps the ids. A gold label the classifier does not have is an error."""
    model_names = list(classifier.label_names)
    names = list(label_names or [])
    gold = [names[int(label)] if names else str(int(label)) for label in labels]
    exact = {name: index for index, name in enumerate(model_names)}
    folded = {name.lower(): index for index, name in enumerate(model_names)}
    if all(name in exact for name in gold):
        return [exact[name] for name in gold]
    if all(name.lower() in folded for name in gold):
        return [folded[name.lower()] for name in gold]
    classes = getattr(task, "num_labels", None) or len(names)
    if _default_names(model_names) and len(model_names) == classes:
        return [int(label) for label in labels]
    unseen = sorted({name for name in gold if name.lower() not in folded})
    raise ContrastextError(
        f"task {task.name}: label(s) {unseen} are not among the classifier's labels {model_names}; evaluate it on "
        "data with the labels it was trained on"
    )


def head_spec(classifier, spec: str):
    """The parsed spec (:func:`contrastext.evaluation.task_specs.parse_eval_spec`) when the classifier's head
    can score it, else None: a class task (a registry ``single`` / ``pair`` task, or a ``classification:`` file)
    for a classification head, a scored-pair task (registry ``sts`` / ``regression``, an ``sts:`` file) for a
    regression head. A spec that does not parse is left to the other evaluations (they report it)."""
    from contrastext.data.task_kinds import CLASSIFICATION_KINDS, SCORED_PAIR_KINDS
    from contrastext.evaluation.task_specs import parse_eval_spec

    try:
        parsed = parse_eval_spec(spec)
    except (ContrastextError, ValueError, KeyError):
        return None
    kind = parsed.task.kind
    if classifier.regression:
        return parsed if kind in SCORED_PAIR_KINDS and classifier.text_pair is not False else None
    return parsed if kind in CLASSIFICATION_KINDS else None


def score_with_head(classifier, spec: str, data_root, batch_size: int = 64, limit: int | None = None) -> dict:
    """One task scored with the classifier's own predictions: the task's metrics, ``split``, ``scored_by``."""
    from contrastext.evaluation.classification import evaluate_predictions
    from contrastext.evaluation.task_specs import load_eval_data

    parsed = head_spec(classifier, spec)
    task = parsed.task
    data = load_eval_data(parsed, data_root)
    examples = list(data.examples)[:limit]
    pair = task.kind != "single"
    if classifier.text_pair is not None and classifier.text_pair != pair:
        reads = "text pairs" if classifier.text_pair else "single texts"
        raise ContrastextError(f"task {task.name} has {'pairs' if pair else 'single texts'} but the classifier reads {reads}")
    if not examples:
        raise ContrastextError(f"task {spec}: no examples to score")
    labels = [example.label for example in examples]
    if not classifier.regression:
        names = data.label_names or getattr(task, "label_names", None)
        labels = gold_model_ids(classifier, task, names, labels)
    result = evaluate_predictions(task, classifier.predict(examples, batch_size=batch_size), labels)
    result = {key: value for key, value in result.items() if key not in ("metric", "score")}
    return {"split": parsed.split, **result, "scored_by": HEAD}


def evaluate_with_head(
    classifier,
    specs: list[str],
    data_root,
    evaluate_rest: Callable[[list[str]], dict],
    batch_size: int = 64,
    limit: int | None = None,
    on_task: Callable[[str], None] | None = None,
) -> dict:
    """``eval`` on a classifier folder: the tasks its head can score by the head, the rest by ``evaluate_rest``
    (the usual evaluation of the encoder inside); results in the order of ``specs``, each with ``scored_by``."""
    from contrastext.evaluation.suite import average_similarity

    parsed = {spec: head_spec(classifier, spec) for spec in specs}
    rest = [spec for spec in specs if parsed[spec] is None]
    others = evaluate_rest(rest) if rest else {"tasks": {}}
    for result in others["tasks"].values():
        result.setdefault("scored_by", COSINE if "spearman" in result else PROBE)
    tasks: dict[str, dict] = {}
    remaining = dict(others["tasks"])
    for spec in specs:
        if parsed[spec] is not None:
            if on_task is not None:
                on_task(spec)
            tasks[parsed[spec].task.name] = score_with_head(classifier, spec, data_root, batch_size, limit)
        elif remaining:
            name = next(iter(remaining))  # evaluate_rest keeps the order of its specs
            tasks[name] = remaining.pop(name)
    tasks.update(remaining)
    return {**others, "tasks": tasks, "average": average_similarity(tasks)}
