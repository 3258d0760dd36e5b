"""The evaluator factory: ``model -> {"<task>_<split>_<metric>": value, ..., "score": value}`` for any task.

Every training run is evaluated by one function built here, whatever the task kind, so metric names follow
one scheme: ``<task>_<split>_<metric>`` (e.g. ``stsb_dev_spearman``, ``sst2_dev_accuracy``,
``minbert-sts_dev_pearson``), plus ``<task>_<split>_score`` for the task's own headline metric (Spearman for
STS, accuracy, F1 or Matthews correlation for classification, as the task registry says) and ``score``, the
headline metric of the FIRST evaluation set. ``train.metric_for_best: score`` therefore fits every recipe.
All values are ×100.

Two ways to get predictions:

- ``predictions="embeddings"`` (sentence encoders): the cosine of the two sentences' embeddings,
  ``model.encoder.encode`` (:func:`contrastext.evaluation.sts.evaluate_sts`); for scored pairs only.
- ``predictions="head"`` (fine-tuned classifiers and regressors): ``model.predict(examples, batch_size=...,
  task=<task name>)`` returns class ids or scores, scored with the task's metric
  (:func:`contrastext.evaluation.classification.evaluate_predictions`).

``extras`` are further functions ``model -> {name: value}`` whose metrics are added as they are (geometry
and gradient diagnostics); ``overall`` computes keys from the metrics already there (multi-task means).

Example::

    >>> dev = EvalSet(get_task("stsb"), "dev", load_task("stsb:dev", root).examples)
    >>> evaluate = make_evaluator([dev])
    >>> evaluate(method)["stsb_dev_spearman"] == evaluate(method)["score"]
    True
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from contrastext.data.examples import Example
from contrastext.errors import ConfigError
from contrastext.evaluation.metrics import canonical_metric_name

Predictions = Literal["embeddings", "head"]
Evaluator = Callable[[Any], dict[str, float]]
SCORED_PAIR_KINDS = ("sts", "regression")


@dataclass(frozen=True)
class EvalSet:
    """One task's evaluation examples and the split they came from (``split`` names the keys).

    ``name`` replaces the task's name in the keys when the rows come from a file of their own (a user's
    ``data.eval_path``: its keys are named after that file, not after the training file the task is named after).
    """

    task: Any  # contrastext.data.tasks.Task
    split: str
    examples: Sequence[Example]
    name: str | None = None

    @property
    def prefix(self) -> str:
        """``"<name>_<split>"`` (``name``: the task's, unless given): the start of every key this set produces."""
        return f"{self.name or self.task.name}_{self.split}"

    @property
    def headline(self) -> str:
        """The task's own metric (``spearman``, ``pearson``, ``accuracy``, ``f1``, ``mcc``)."""
        return canonical_metric_name(self.task.metric or "spearman")


def _scores_from_embeddings(model, eval_set: EvalSet, batch_size: int) -> dict[str, float]:
    from contrastext.evaluation.sts import evaluate_sts

    result = evaluate_sts(model.encoder.encode, eval_set.examples, batch_size=batch_size)
    return {"spearman": float(result["spearman"]), "pearson": float(result["pearson"])}


def _scores_from_head(model, eval_set: EvalSet, batch_size: int) -> dict[str, float]:
    from contrastext.evaluation.classification import evaluate_predictions

    predictions = model.predict(eval_set.examples, batch_size=batch_size, task=eval_set.task.name)
    labels = [example.label for example in eval_set.examples]
    result = evaluate_predictions(eval_set.task, predictions, labels)
    return {key: float(value) for key, value in result.items() if key not in ("metric", "n", "score")}


SCORERS: dict[str, Callable[[Any, EvalSet, int], dict[str, float]]] = {
    "embeddings": _scores_from_embeddings,
    "head": _scores_from_head,
}


def make_evaluator(
    sets: Sequence[EvalSet],
    predictions: Predictions = "embeddings",
    batch_size: int = 64,
    extras: Sequence[Evaluator] = (),
    overall: Callable[[Mapping[str, float]], dict[str, float]] | None = None,
) -> Evaluator:
    """``model -> metrics`` over ``sets`` (see the module docstring for the keys)."""
    if predictions not in SCORERS:
        raise ConfigError(f"unknown predictions {predictions!r}; known: {', '.join(SCORERS)}")
    if predictions == "embeddings":
        for eval_set in sets:
            if eval_set.task.kind not in SCORED_PAIR_KINDS:
                raise ConfigError(
                    f"eval.tasks: {eval_set.task.name} is not an STS task (kind {eval_set.task.kind!r}); "
                    "a sentence encoder is evaluated on scored pairs (stsb, sts12-16, sickr)"
                )
    prefixes = [eval_set.prefix for eval_set in sets]
    if len(set(prefixes)) != len(prefixes):
        raise ConfigError(f"eval.tasks: a task and split is given twice in {prefixes}")
    scorer = SCORERS[predictions]

    def evaluate(model) -> dict[str, float]:
        metrics: dict[str, float] = {}
        for position, eval_set in enumerate(sets):
            scores = scorer(model, eval_set, batch_size)
            metrics.update({f"{eval_set.prefix}_{name}": value for name, value in scores.items()})
            metrics[f"{eval_set.prefix}_score"] = scores[eval_set.headline]
            if position == 0:
                metrics["score"] = scores[eval_set.headline]
        for extra in extras:
            metrics.update({name: float(value) for name, value in extra(model).items()})
        if overall is not None:
            metrics.update(overall(metrics))
        return metrics

    return evaluate
