"""A recipe's ``eval`` section as evaluation sets and an evaluator (:mod:`contrastext.evaluation.evaluators`).

``eval.tasks`` takes the specs of ``contrastext eval --tasks`` (:mod:`contrastext.evaluation.task_specs`): registry
STS tasks (``stsb:dev``) and the user's files (``sts:my_sts.csv``, ``pairs:held_out_pairs.jsonl``,
``classification:reviews.csv``, ``ir:my_beir_folder@dev``: keys ``my_beir_folder_dev_cosine_ndcg@10`` ...). Keys follow ``<task>_<split>_<metric>``, a file being named after its stem with
the split ``file`` (or its ``@split``): ``my_sts_file_spearman``, ``held_out_pairs_file_mrr_at_10``,
``reviews_file_accuracy``; ``score`` is the first spec's headline metric. The keys are made by the one producer
of metric keys, :func:`contrastext.evaluation.evaluators.make_evaluator`.

Example::

    >>> evaluate = sentence_evaluator(config, data_root)        # eval.tasks: [stsb:dev, sts:my_sts.csv]
    >>> evaluate(method)["stsb_dev_spearman"], evaluate(method)["my_sts_file_spearman"]
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from contrastext.errors import ConfigError
from contrastext.evaluation.evaluators import EvalSet, Evaluator, make_evaluator
from contrastext.evaluation.task_specs import check_eval_specs, load_eval_data
from contrastext.training.config import TrainConfig


def eval_sets(specs: Sequence[str], data_root: Path | None, limit: int | None = None) -> list[EvalSet]:
    """Each spec read now (missing data fails before training starts), first ``limit`` rows.

    ``limit`` is a smoke-test aid: numbers on a slice are not comparable with the literature (an ir set: its
    first ``limit`` judged queries, the whole corpus searched).
    """
    sets = []
    for spec in _checked(specs):
        data = load_eval_data(spec, data_root)
        examples = data.examples[:limit] if limit is not None else data.examples
        retrieval = data.retrieval.first_queries(limit) if data.retrieval is not None else None
        sets.append(EvalSet(spec.task, spec.split, examples, retrieval=retrieval))
    return sets


def _checked(specs: Sequence[str]):
    try:
        return check_eval_specs(specs)
    except ConfigError as error:
        raise ConfigError(f"eval.tasks: {error}") from None


def sentence_evaluator(
    config: TrainConfig, data_root: Path | None, extras: Sequence[Evaluator] = ()
) -> Evaluator | None:
    """The evaluator of ``config.eval`` for a sentence encoder (None when it names no task and no extra).

    Registry tasks must be scored pairs (STS); files may be of any kind (sts, pairs, classification).
    """
    if not config.eval.tasks and not extras:
        return None
    sets = eval_sets(config.eval.tasks, data_root, config.eval.limit)
    return make_evaluator(sets, "embeddings", batch_size=config.eval.batch_size, extras=extras)
