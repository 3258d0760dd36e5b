"""A recipe's ``eval`` section as evaluation sets and an evaluator (:mod:`contrastext.evaluation.evaluators`).

``eval.tasks`` takes the specs of ``contrastext eval --tasks`` (:mod:`contrastext.evaluation.task_specs`): registry
STS tasks (``stsb:dev``) and the user's files (``sts:my_sts.csv``, ``pairs:held_out_pairs.jsonl``,
``classification:reviews.csv``). Keys follow ``<task>_<split>_<metric>``, a file being named after its stem with
the split ``file`` (or its ``@split``): ``my_sts_file_spearman``, ``held_out_pairs_file_mrr_at_10``,
``reviews_file_accuracy``; ``score`` is the first spec's headline metric.

Example::

    >>> evaluate = sentence_evaluator(config, data_root)        # eval.tasks: [stsb:dev, sts:my_sts.csv]
    >>> evaluate(method)["stsb_dev_spearman"], evaluate(method)["my_sts_file_spearman"]
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from contrastext.errors import ConfigError
from contrastext.evaluation.evaluators import SCORED_PAIR_KINDS, EvalSet, Evaluator, make_evaluator
from contrastext.evaluation.task_specs import FileTask, check_eval_specs, load_eval_data
from contrastext.training.config import TrainConfig

HEADLINES = {"sts": "spearman", "classification": "accuracy", "pairs": "mrr_at_10"}
"""The ``<task>_<split>_score`` metric of each file kind."""


def eval_sets(specs: Sequence[str], data_root: Path | None, limit: int | None = None) -> list[EvalSet]:
    """Each spec read now (missing data fails before training starts), first ``limit`` rows.

    ``limit`` is a smoke-test aid: numbers on a slice are not comparable with the literature.
    """
    sets = []
    for spec in _checked(specs):
        examples = load_eval_data(spec, data_root).examples
        sets.append(EvalSet(spec.task, spec.split, examples[:limit] if limit is not None else examples))
    return sets


def _checked(specs: Sequence[str]):
    try:
        return check_eval_specs(specs)
    except ConfigError as error:
        raise ConfigError(f"eval.tasks: {error}") from None


def _file_scores(encode, eval_set: EvalSet, batch_size: int) -> dict[str, float]:
    """The numbers of a pairs or classification file (the kinds the STS scorer does not cover)."""
    from contrastext.data.tasks import holdout_split
    from contrastext.evaluation.classification import HOLDOUT_FRACTION, check_probe_training, evaluate_probe
    from contrastext.evaluation.retrieval import PAIR_METRICS, evaluate_pairs

    task: FileTask = eval_set.task
    if task.eval_kind == "pairs":
        result = evaluate_pairs(encode, eval_set.examples, batch_size=batch_size)
        return {name: result[name] for name in PAIR_METRICS}
    train, evaluated = holdout_split(list(eval_set.examples), HOLDOUT_FRACTION, seed=0)
    check_probe_training(train, task.path, cross_validated=True, subsampled=False)
    result = evaluate_probe(
        encode, train, evaluated, kind=task.kind, metric=task.metric, batch_size=batch_size
    )
    return {name: float(result[name]) for name in ("accuracy", "f1", "mcc")}


def sentence_evaluator(
    config: TrainConfig, data_root: Path | None, extras: Sequence[Evaluator] = ()
) -> Evaluator | None:
    """The evaluator of ``config.eval`` for a sentence encoder (None when it names no task and no extra).

    Registry tasks must be scored pairs (STS); files may be of any kind (sts, pairs, classification).
    """
    if not config.eval.tasks and not extras:
        return None
    sets = eval_sets(config.eval.tasks, data_root, config.eval.limit)
    is_file_of_other_kind = [
        isinstance(s.task, FileTask) and s.task.kind not in SCORED_PAIR_KINDS for s in sets
    ]
    scored = [s for s, other in zip(sets, is_file_of_other_kind, strict=True) if not other]
    others = [s for s, other in zip(sets, is_file_of_other_kind, strict=True) if other]
    base = make_evaluator(scored, "embeddings", batch_size=config.eval.batch_size, extras=extras)
    if not others:
        return base
    batch_size = config.eval.batch_size

    def evaluate(model) -> dict[str, float]:
        metrics = base(model)
        for eval_set in others:
            scores = _file_scores(model.encoder.encode, eval_set, batch_size)
            metrics.update({f"{eval_set.prefix}_{name}": value for name, value in scores.items()})
            metrics[f"{eval_set.prefix}_score"] = scores[HEADLINES[eval_set.task.eval_kind]]
        if is_file_of_other_kind[0]:
            metrics["score"] = metrics[f"{sets[0].prefix}_score"]
        return metrics

    return evaluate
