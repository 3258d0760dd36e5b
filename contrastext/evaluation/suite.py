"""Evaluate one encoder on several tasks (registry tasks or the user's files) and collect the results in one
JSON-ready dict.

Similarity tasks (kinds ``sts`` and ``regression``: STS12–16, STS-B, SICK-R) are scored by the cosine of
the two embeddings (:func:`contrastext.evaluation.sts.evaluate_sts`); classification tasks (kinds
``single`` and ``pair``: SST-2, MRPC, ...) by the frozen-embedding probe
(:func:`contrastext.evaluation.classification.evaluate_classification`). A file of the user's
(``sts:my_sts.csv``, ``classification:reviews.tsv``, ``pairs:para.jsonl``, ``ir:my_beir_folder``; syntax and
columns in :mod:`contrastext.evaluation.task_specs`) is scored the same way by its kind, pairs by retrieval
(:mod:`contrastext.evaluation.retrieval`), an ir folder by sentence-transformers' IR metrics
(:mod:`contrastext.evaluation.information_retrieval`: ``cosine_ndcg@10`` ... ×100, ``n`` queries scored and
``corpus`` documents searched); its result also names its ``kind`` and ``path``.

:func:`default_tasks` picks, from the STS suite, what a data root holds (the dev split where the test file is
missing; the shipped data has STS12 and the STS-B / SICK dev files only) and says what it changed.

Result shape (the ``contrastext eval`` command adds ``"model"``)::

    {"tasks": {"stsb": {"split": "test", "spearman": 82.0, "pearson": 83.1, "n": 1379},
               "sts12": {"split": "test", "spearman": ..., "pearson": ..., "n": 3108,
                         "aggregation": "all", "subsets": {"MSRpar": {...}, ...}},
               "sst2": {"split": "dev", "accuracy": ..., "f1": ..., "mcc": ..., "n": 872, ...}},
     "average": {"spearman": ..., "pearson": ...},
     "metrics": {"stsb_test_spearman": 82.0, "stsb_test_pearson": 83.1, "stsb_test_score": 82.0, ...,
                 "sst2_dev_accuracy": ..., "sst2_dev_score": ..., "score": 82.0}}

``"metrics"`` is the flat ``{key: value}`` dict that training logs, with the same keys
(:func:`~contrastext.evaluation.evaluators.task_metrics`: ``<task>_<split>_<metric>``, ``<task>_<split>_score``
and ``score``, the first task's headline), so a saved model's numbers compare key by key with its run's
``metrics.json``. ``"tasks"`` is the report behind them: each task's key is its registry name (a file's: its stem)
and the split evaluated is in ``"split"`` (``"stsb:dev"`` → key ``"stsb"``, ``"split": "dev"``), so one task may
appear once per call; besides the metrics it holds ``n`` and what the task kind adds (STS12–16's subsets, the
probe's C). ``"average"`` is the plain mean over the similarity tasks (empty when there are none);
classification tasks are not averaged in.

Example::

    >>> evaluate_tasks(encoder, STS_SUITE, data_root="../shared/data")["average"]["spearman"]
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping, Sequence
from functools import partial

import numpy as np

from contrastext.data.task_kinds import CLASSIFICATION_KINDS, EVAL_FILE_KINDS, SCORED_PAIR_KINDS
from contrastext.data.tasks import holdout_split
from contrastext.errors import ContrastextError, EmptyDataError, MissingDataError
from contrastext.evaluation.classification import (
    HOLDOUT_FRACTION,
    _subsample,
    check_probe_training,
    evaluate_classification,
    evaluate_probe,
)
from contrastext.evaluation.evaluators import SCORE, headline_metric, metric_key, task_metrics
from contrastext.evaluation.retrieval import evaluate_pairs
from contrastext.evaluation.sts import AGGREGATIONS, evaluate_sts
from contrastext.evaluation.task_specs import (
    EvalSpec,
    check_eval_specs,
    load_eval_data,
    parse_eval_spec,
)

logger = logging.getLogger("contrastext.evaluation")

# The seven STS tasks of SimCSE's Table 1, scored on their test splits.
STS_SUITE: tuple[str, ...] = ("sts12", "sts13", "sts14", "sts15", "sts16", "stsb", "sickr")


def _encode_function(encoder, show_progress: bool) -> Callable:
    """``encoder.encode`` with progress bars on, or ``encoder`` itself when it is a plain callable."""
    encode = getattr(encoder, "encode", encoder)
    if not callable(encode):
        raise TypeError(
            f"expected an encoder with .encode(texts, batch_size=...) or a callable, got {encoder!r}"
        )
    return partial(encode, show_progress=True) if show_progress and encode is not encoder else encode


def _limited_subsets(subsets: dict, limit: int | None) -> dict:
    return {name: list(pairs)[:limit] for name, pairs in subsets.items()}


def evaluate_task(
    encoder,
    spec: str | EvalSpec,
    data_root: str | os.PathLike | None = None,
    batch_size: int = 64,
    sts_aggregation: str = "all",
    limit: int | None = None,
    max_train: int | None = None,
    show_progress: bool = False,
) -> tuple[str, dict]:
    """Evaluate one task spec (a registry task or a file, see :mod:`~contrastext.evaluation.task_specs`);
    return ``(task name, result)``. See :func:`evaluate_tasks`."""
    spec = parse_eval_spec(spec) if isinstance(spec, str) else spec
    task = spec.task
    encode = _encode_function(encoder, show_progress)
    if spec.is_file:
        return task.name, {"split": spec.split, **evaluate_file(encode, spec, batch_size, limit, max_train)}
    if task.kind in SCORED_PAIR_KINDS:
        data = load_eval_data(spec, data_root)
        subsets = _limited_subsets(data.subsets, limit) if data.subsets else None
        result = evaluate_sts(
            encode,
            list(data.examples)[:limit],
            batch_size=batch_size,
            subsets=subsets,
            aggregation=sts_aggregation,
        )
        return task.name, {"split": spec.split, **result}
    if task.kind in CLASSIFICATION_KINDS:
        result = evaluate_classification(
            encode, spec.text, data_root, batch_size=batch_size, max_train=max_train, limit=limit
        )
        return task.name, result
    raise ContrastextError(
        f"task {task.name} has kind {task.kind!r}, which has no evaluation; evaluable kinds: "
        f"{', '.join(SCORED_PAIR_KINDS + CLASSIFICATION_KINDS)}, and files of kind {', '.join(EVAL_FILE_KINDS)}"
    )


def evaluate_file(
    encode: Callable,
    spec: EvalSpec,
    batch_size: int = 64,
    limit: int | None = None,
    max_train: int | None = None,
    seed: int = 0,
) -> dict:
    """A file spec's numbers (without ``split``): sts correlations, the probe on a seeded 80/20 split of a
    classification file, pair retrieval, or an ir folder's metrics (``--limit``: its first queries, the whole
    corpus searched); ``kind`` and ``path`` say what was read."""
    data = load_eval_data(spec)
    task = spec.task
    about = {"kind": task.eval_kind, "path": str(task.path)}
    if task.eval_kind == "sts":
        return {**evaluate_sts(encode, data.examples[:limit], batch_size=batch_size), **about}
    if task.eval_kind == "pairs":
        return {**evaluate_pairs(encode, data.examples[:limit], batch_size=batch_size), **about}
    if task.eval_kind == "ir":
        from contrastext.evaluation.information_retrieval import evaluate_retrieval_set

        scores = evaluate_retrieval_set(encode, data.retrieval, batch_size=batch_size, limit=limit)
        return {**scores, **about}
    train, evaluated = holdout_split(data.examples, HOLDOUT_FRACTION, seed=seed)
    subsampled = max_train is not None and max_train < len(train)
    train = _subsample(train, max_train, seed)
    check_probe_training(train, task.path, cross_validated=True, subsampled=subsampled)
    if not evaluated:
        raise EmptyDataError(
            f"{task.path}: too few rows ({len(data.examples)}) to hold out an evaluation part"
        )
    result = evaluate_probe(
        encode, train, evaluated[:limit], kind=task.kind, metric=task.metric, batch_size=batch_size, seed=seed
    )
    held_out = f"{HOLDOUT_FRACTION:.0%} of the file held out (seed {seed}); the probe trains on the rest"
    labels = {"labels": list(data.label_names)} if data.label_names else {}
    return {**result, "held_out": held_out, **labels, **about}


def evaluate_tasks(
    encoder,
    specs: Sequence[str],
    data_root: str | os.PathLike | None = None,
    batch_size: int = 64,
    sts_aggregation: str = "all",
    limit: int | None = None,
    max_train: int | None = None,
    show_progress: bool = False,
    on_task: Callable[[str], None] | None = None,
) -> dict:
    """Evaluate ``encoder`` on every task spec (``"stsb"``, ``"stsb:dev"``, ``"sst2"``...).

    Args:
        encoder: a ``TextEncoder`` (or anything with ``encode(texts, batch_size=...)``), or such a callable.
        specs: task specs ``name[:split]`` (the default split is the task's own: test for the STS suite) or
            files ``kind:path[@split]`` (see :mod:`contrastext.evaluation.task_specs`).
        data_root: the benchmark folder; ``None`` reads ``$CONTRASTEXT_DATA``.
        batch_size: sentences per forward pass.
        sts_aggregation: ``"all"`` (SimCSE) or ``"wmean"`` (SentEval) for STS12–16.
        limit: keep only the first ``limit`` pairs of every task (of every subset for STS12–16) and the
            first ``limit`` evaluation examples of classification tasks: a smoke-test aid, not a benchmark.
        max_train: a seeded random subset of this many training examples for the classification probe.
        show_progress: progress bars (on stderr) while encoding.
        on_task: called with each spec before it is evaluated (to report progress).

    Raises:
        MissingDataError (from the registry) when a task's files are missing, or a file is; UnknownNameError
        for an unknown task; ContrastextError when a task is given twice or cannot be evaluated.
    """
    if sts_aggregation not in AGGREGATIONS:
        raise ContrastextError(
            f"unknown STS aggregation {sts_aggregation!r}; valid: {', '.join(AGGREGATIONS)}"
        )
    if not specs:
        raise ContrastextError("no task to evaluate: give at least one task spec such as stsb:dev")
    parsed = check_task_specs(specs)
    tasks: dict[str, dict] = {}
    for spec in specs:
        if on_task is not None:
            on_task(spec)
        name, result = evaluate_task(
            encoder,
            spec,
            data_root,
            batch_size=batch_size,
            sts_aggregation=sts_aggregation,
            limit=limit,
            max_train=max_train,
            show_progress=show_progress,
        )
        tasks[name] = result
    return {"tasks": tasks, "average": average_similarity(tasks), "metrics": report_metrics(parsed, tasks)}


def report_metrics(specs: Sequence[EvalSpec], tasks: Mapping[str, Mapping]) -> dict[str, float | None]:
    """The flat metrics of a report's ``tasks`` (keyed by task name, each with its ``split``), made by the producer of
    training's keys (:func:`~contrastext.evaluation.evaluators.task_metrics`), ``score`` being the first task's
    headline. ``specs`` (the parsed specs evaluated) give each task's headline metric.

    Example::

        >>> report_metrics([parse_eval_spec("stsb:dev")], {"stsb": {"split": "dev", "spearman": 80.0, "n": 1500}})
        {'stsb_dev_spearman': 80.0, 'stsb_dev_score': 80.0, 'score': 80.0}
    """
    headlines = {spec.task.name: headline_metric(spec.task) for spec in specs}
    metrics: dict[str, float | None] = {}
    for name, result in tasks.items():
        metrics.update(task_metrics(name, result["split"], result, headlines[name]))
    if tasks:
        first = next(iter(tasks))
        metrics[SCORE] = metrics[metric_key(first, tasks[first]["split"], SCORE)]
    return metrics


def check_task_specs(specs: Sequence[str]) -> list[EvalSpec]:
    """Fail fast (before any model is loaded) on an unknown task or split, a missing or ill-formed file, or a
    task given twice; returns the parsed specs."""
    return check_eval_specs(specs)


def default_tasks(
    data_root: str | os.PathLike | None = None, tasks: Sequence[str] = STS_SUITE
) -> tuple[list[str], list[str]]:
    """The specs of ``tasks`` that the data root holds, and a note for each one changed or left out.

    A task whose default (test) file is missing is evaluated on its dev split when that file is there
    (the shipped data has no STS-B or SICK test file); a task with neither is skipped. MissingDataError when
    nothing is left.
    """
    from contrastext.data.root import resolve_data_root
    from contrastext.data.tasks import get_task

    root = resolve_data_root(data_root)
    specs: list[str] = []
    notes: list[str] = []
    for name in tasks:
        task = get_task(name)
        if _split_file(task, task.default_split, root) is not None:
            specs.append(name)
        elif task.default_split != "dev" and _split_file(task, "dev", root) is not None:
            specs.append(f"{name}:dev")
            notes.append(
                f"{name}: no {task.default_split} file under {root}; its dev split is evaluated instead"
            )
        else:
            expected = root / task.splits[task.default_split][0]
            notes.append(f"{name}: skipped, no file under {root} (expected {expected})")
    if not specs:
        raise MissingDataError(
            f"none of the default tasks ({', '.join(tasks)}) has a file under the data root {root}: "
            "give --tasks (a registry task such as stsb:dev, or your own file such as sts:my_sts.csv)"
        )
    if notes:
        notes.append(
            f"the average is over the {len(specs)} task(s) evaluated, not the {len(tasks)} of the full suite: "
            "not comparable with published numbers"
        )
    return specs, notes


def _split_file(task, split: str, root) -> object | None:
    for relative in task.splits.get(split, ()):
        if (root / relative).exists():
            return root / relative
    return None


def average_similarity(tasks: dict[str, dict]) -> dict[str, float | None]:
    """Plain mean of Spearman and Pearson over the tasks that report them (empty dict when none do).

    A task whose correlation is undefined (None: constant gold scores) makes that average None, with a
    warning: an average over fewer tasks would not be comparable.
    """
    similarity = {name: result for name, result in tasks.items() if "spearman" in result}
    if not similarity:
        return {}
    average: dict[str, float | None] = {}
    for key in ("spearman", "pearson"):
        undefined = [name for name, result in similarity.items() if result.get(key) is None]
        if undefined:
            logger.warning("average %s undefined: %s has none; reported as null", key, ", ".join(undefined))
            average[key] = None
        else:
            average[key] = float(np.mean([result[key] for result in similarity.values()]))
    return average
