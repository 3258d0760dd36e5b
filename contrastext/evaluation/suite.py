"""Evaluate one encoder on several registry tasks and collect the results in one JSON-ready dict.

Similarity tasks (kinds ``sts`` and ``regression``: STS12–16, STS-B, SICK-R) are scored by the cosine of
the two embeddings (:func:`contrastext.evaluation.sts.evaluate_sts`); classification tasks (kinds
``single`` and ``pair``: SST-2, MRPC, ...) by the frozen-embedding probe
(:func:`contrastext.evaluation.classification.evaluate_classification`).

Result shape (the ``contrastext eval`` command adds ``"model"``)::

    {"tasks": {"stsb": {"split": "test", "spearman": 82.0, "pearson": 83.1, "n": 1379},
               "sts12": {"split": "test", "spearman": ..., "pearson": ..., "n": 3108,
                         "aggregation": "all", "subsets": {"MSRpar": {...}, ...}},
               "sst2": {"split": "dev", "accuracy": ..., "f1": ..., "mcc": ..., "n": 872, ...}},
     "average": {"spearman": ..., "pearson": ...}}

Each task's key is its registry name; the split evaluated is in ``"split"`` (``"stsb:dev"`` → key
``"stsb"``, ``"split": "dev"``), so one task may appear once per call. ``"average"`` is the plain mean
over the similarity tasks (empty when there are none); classification tasks are not averaged in.

Example::

    >>> evaluate_tasks(encoder, STS_SUITE, data_root="../shared/data")["average"]["spearman"]
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from functools import partial

import numpy as np

from contrastext.errors import ContrastextError
from contrastext.evaluation.classification import (
    CLASSIFICATION_KINDS,
    SIMILARITY_KINDS,
    evaluate_classification,
)
from contrastext.evaluation.sts import AGGREGATIONS, evaluate_sts

logger = logging.getLogger("contrastext.evaluation")

# The seven STS tasks of SimCSE's Table 1, scored on their test splits.
STS_SUITE: tuple[str, ...] = ("sts12", "sts13", "sts14", "sts15", "sts16", "stsb", "sickr")


def _encode_function(encoder, show_progress: bool) -> Callable:
    """``encoder.encode`` with progress bars on, or ``encoder`` itself when it is a plain callable."""
    encode = getattr(encoder, "encode", encoder)
    if not callable(encode):
        raise TypeError(f"expected an encoder with .encode(texts, batch_size=...) or a callable, got {encoder!r}")
    return partial(encode, show_progress=True) if show_progress and encode is not encoder else encode


def _limited_subsets(subsets: dict, limit: int | None) -> dict:
    return {name: list(pairs)[:limit] for name, pairs in subsets.items()}


def evaluate_task(
    encoder,
    spec: str,
    data_root: str | os.PathLike | None = None,
    batch_size: int = 64,
    sts_aggregation: str = "all",
    limit: int | None = None,
    max_train: int | None = None,
    show_progress: bool = False,
) -> tuple[str, dict]:
    """Evaluate one task spec; return ``(task name, result)``. See :func:`evaluate_tasks`."""
    from contrastext.data.tasks import load_task, parse_task_spec

    task, split = parse_task_spec(spec)
    encode = _encode_function(encoder, show_progress)
    if task.kind in SIMILARITY_KINDS:
        data = load_task(spec, data_root)
        subsets = _limited_subsets(data.subsets, limit) if data.subsets else None
        result = evaluate_sts(
            encode,
            list(data.examples)[:limit],
            batch_size=batch_size,
            subsets=subsets,
            aggregation=sts_aggregation,
        )
        return task.name, {"split": data.split, **result}
    if task.kind in CLASSIFICATION_KINDS:
        result = evaluate_classification(
            encode, spec, data_root, batch_size=batch_size, max_train=max_train, limit=limit
        )
        return task.name, result
    raise ContrastextError(
        f"task {task.name} has kind {task.kind!r}, which has no evaluation; evaluable kinds: "
        f"{', '.join(SIMILARITY_KINDS + CLASSIFICATION_KINDS)}"
    )


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
        specs: task specs ``name[:split]``; the default split is the task's own (test for the STS suite).
        data_root: the benchmark folder; ``None`` reads ``$CONTRASTEXT_DATA``.
        batch_size: sentences per forward pass.
        sts_aggregation: ``"all"`` (SimCSE) or ``"wmean"`` (SentEval) for STS12–16.
        limit: keep only the first ``limit`` pairs of every task (of every subset for STS12–16) and the
            first ``limit`` evaluation examples of classification tasks: a smoke-test aid, not a benchmark.
        max_train: a seeded random subset of this many training examples for the classification probe.
        show_progress: progress bars (on stderr) while encoding.
        on_task: called with each spec before it is evaluated (to report progress).

    Raises:
        MissingDataError (from the registry) when a task's files are missing; UnknownNameError for an
        unknown task; ContrastextError when a task is given twice or cannot be evaluated.
    """
    if sts_aggregation not in AGGREGATIONS:
        raise ContrastextError(
            f"unknown STS aggregation {sts_aggregation!r}; valid: {', '.join(AGGREGATIONS)}"
        )
    if not specs:
        raise ContrastextError("no task to evaluate: give at least one task spec such as stsb:dev")
    check_task_specs(specs)
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
    return {"tasks": tasks, "average": average_similarity(tasks)}


def check_task_specs(specs: Sequence[str]) -> None:
    """Fail fast (before any model is loaded) on an unknown task or split, or a task given twice."""
    from contrastext.data.tasks import parse_task_spec

    names = [parse_task_spec(spec)[0].name for spec in specs]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ContrastextError(
            f"task(s) {', '.join(repeated)} given more than once; results are keyed by task name, "
            "so evaluate one split of a task per run"
        )


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


def evaluate_sts_suite(encoder, data_root: str | os.PathLike | None = None, **options) -> dict:
    """The seven STS tasks of SimCSE (STS12–16, STS-B, SICK-R, test splits) and their average."""
    return evaluate_tasks(encoder, list(STS_SUITE), data_root, **options)
