"""A recipe's ``eval`` section as evaluation sets and an evaluator (:mod:`contrastext.evaluation.evaluators`).

Example::

    >>> evaluate = sentence_evaluator(config, data_root)        # eval.tasks: [stsb:dev]
    >>> evaluate(method)["stsb_dev_spearman"]
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from contrastext.data.tasks import load_task, parse_task_spec
from contrastext.evaluation.evaluators import EvalSet, Evaluator, make_evaluator
from contrastext.training.config import TrainConfig


def eval_sets(specs: Sequence[str], data_root: Path | None, limit: int | None = None) -> list[EvalSet]:
    """Each ``task:split`` spec read now (missing data fails before training starts), first ``limit`` rows.

    ``limit`` is a smoke-test aid: numbers on a slice are not comparable with the literature.
    """
    sets = []
    for spec in specs:
        task, split = parse_task_spec(spec)
        examples = load_task(spec, data_root).examples
        sets.append(EvalSet(task, split, examples[:limit] if limit is not None else examples))
    return sets


def sentence_evaluator(
    config: TrainConfig, data_root: Path | None, extras: Sequence[Evaluator] = ()
) -> Evaluator | None:
    """The STS evaluator of ``config.eval`` for a sentence encoder (None when it names no task and no extra)."""
    if not config.eval.tasks and not extras:
        return None
    sets = eval_sets(config.eval.tasks, data_root, config.eval.limit)
    return make_evaluator(sets, "embeddings", batch_size=config.eval.batch_size, extras=extras)
