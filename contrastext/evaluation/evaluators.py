"""The metric keys, and the evaluator factory: ``model -> {"<task>_<split>_<metric>": value, ..., "score": value}``.

One producer of metric keys for training (:func:`make_evaluator`), the ``contrastext eval`` command
(:func:`contrastext.evaluation.suite.evaluate_tasks`'s ``metrics``) and the user's files (eval specs,
:mod:`contrastext.evaluation.task_specs`): every number is named by :func:`metric_key`,
``<task>_<split>_<metric>`` (e.g. ``stsb_dev_spearman``, ``sst2_dev_accuracy``, ``minbert-sts_dev_pearson``,
``my_sts_file_spearman`` for a file named by its stem with the split ``file``), and :func:`task_metrics` turns one
task's scores into its keys plus ``<task>_<split>_score``, the task's headline metric (``Task.metric``, whose names
are the ``<metric>`` of the keys: ``spearman``, ``pearson``, ``accuracy``, ``f1``, ``mcc``, ``mrr_at_10``, and an
``ir:`` set's ``cosine_ndcg@10``, its metrics being sentence-transformers' IR keys, :mod:`~contrastext.evaluation.ir_keys`,
so ``<folder>_test_cosine_ndcg@10``). ``score``
is the headline metric of the FIRST evaluation set, so ``train.metric_for_best: score`` fits every recipe. All
values are ×100; the metrics are a flat ``{key: value}`` dict wherever they are produced.

Two ways to get predictions:

- ``predictions="embeddings"`` (sentence encoders): the cosine of the two sentences' embeddings,
  ``model.encoder.encode`` (:func:`contrastext.evaluation.sts.evaluate_sts`) for scored pairs; a user's
  ``pairs`` file by retrieval (:mod:`contrastext.evaluation.retrieval`), an ``ir`` folder by its queries searching
  its corpus (:func:`contrastext.evaluation.information_retrieval.evaluate_retrieval_set`) and a ``classification``
  file by the frozen-embedding probe on a seeded 80/20 split of its rows.
- ``predictions="head"`` (fine-tuned classifiers and regressors): ``model.predict(examples, batch_size=...,
  task=<task name>)`` returns class ids or scores, scored with the task's metric
  (:func:`contrastext.evaluation.classification.evaluate_predictions`).

``extras`` are further functions ``model -> {name: value}`` whose metrics are added as they are (geometry
and gradient diagnostics); ``overall`` computes keys from the metrics already there (multi-task means).

Example::

    >>> metric_key("stsb", "dev", "spearman")
    'stsb_dev_spearman'
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
from contrastext.data.task_kinds import SCORED_PAIR_KINDS
from contrastext.errors import ConfigError
from contrastext.evaluation import item_outputs
from contrastext.evaluation.ir_keys import IR_METRIC_NAMES
from contrastext.evaluation.task_specs import FileTask

Predictions = Literal["embeddings", "head"]
Evaluator = Callable[[Any], dict[str, float]]
METRIC_NAMES: tuple[str, ...] = (
    "spearman", "pearson", "accuracy", "f1", "mcc", "accuracy_at_1", "accuracy_at_10", "mrr_at_10", *IR_METRIC_NAMES
)
"""Every ``<metric>`` a task's scores may have, in the order tables show them (a result's other fields, such as
``n``, ``split`` or ``subsets``, are no metrics and get no key)."""
SCORE = "score"
"""The headline's name: ``<task>_<split>_score`` (the task's own metric) and ``score`` (the first set's)."""
DEFAULT_HEADLINE = "spearman"
"""The headline of a task that names no metric."""


def metric_key(task: str, split: str, metric: str) -> str:
    """The key of one number: ``"<task>_<split>_<metric>"`` (``stsb``, ``dev``, ``spearman`` -> ``stsb_dev_spearman``).

    ``task`` is the registry task's name, or a file's stem (split ``file`` unless it names one); ``metric`` one of
    :data:`METRIC_NAMES`, or :data:`SCORE` for the task's headline."""
    return f"{task}_{split}_{metric}"


def headline_metric(task) -> str:
    """The metric a task is judged by: its ``metric`` (a name of :data:`METRIC_NAMES`), else Spearman."""
    return task.metric or DEFAULT_HEADLINE


def task_metrics(task: str, split: str, scores: Mapping[str, Any], headline: str) -> dict[str, float | None]:
    """One task's keys: ``<task>_<split>_<metric>`` for every metric in ``scores`` (fields that are no metric left
    out), then ``<task>_<split>_score``, the value of ``headline``. An undefined value (None) stays None.

    Example::

        >>> task_metrics("cola", "dev", {"accuracy": 80.0, "mcc": 41.0, "n": 1043}, "mcc")
        {'cola_dev_accuracy': 80.0, 'cola_dev_mcc': 41.0, 'cola_dev_score': 41.0}
    """
    if headline not in scores:
        raise KeyError(f"{task}:{split}: the headline metric {headline!r} is not among the scores {sorted(scores)}")
    metrics = {metric_key(task, split, name): _number(value) for name, value in scores.items() if name in METRIC_NAMES}
    metrics[metric_key(task, split, SCORE)] = _number(scores[headline])
    return metrics


def _number(value) -> float | None:
    return None if value is None else float(value)


@dataclass(frozen=True)
class EvalSet:
    """One task's evaluation examples and the split they came from (``split`` names the keys).

    ``task`` is a registry :class:`~contrastext.data.tasks.Task` or a user's file
    (:class:`~contrastext.evaluation.task_specs.FileTask`). ``name`` replaces the task's name in the keys when the
    rows come from a file of their own (a user's ``data.eval_path``: its keys are named after that file, not after
    the training file the task is named after). ``retrieval`` holds an ``ir`` set's queries, corpus and judgements
    (a :class:`~contrastext.data.readers.beir.BeirData`; its ``examples`` are empty).
    """

    task: Any  # contrastext.data.tasks.Task or contrastext.evaluation.task_specs.FileTask
    split: str
    examples: Sequence[Example]
    name: str | None = None
    retrieval: Any = None  # contrastext.data.readers.beir.BeirData for an ir set

    @property
    def key_name(self) -> str:
        """The ``<task>`` of this set's keys: ``name`` when given, else the task's."""
        return self.name or self.task.name

    @property
    def prefix(self) -> str:
        """``"<name>_<split>"`` (``name``: the task's, unless given): the start of every key this set produces."""
        return f"{self.key_name}_{self.split}"

    def key(self, metric: str) -> str:
        """:func:`metric_key` of this set: ``<name>_<split>_<metric>``."""
        return metric_key(self.key_name, self.split, metric)

    @property
    def headline(self) -> str:
        """The task's own metric (``spearman``, ``pearson``, ``accuracy``, ``f1``, ``mcc``, ``mrr_at_10``)."""
        return headline_metric(self.task)

    @property
    def is_file(self) -> bool:
        """True for a user's evaluation file (an eval spec ``KIND:PATH``), False for a registry task."""
        return isinstance(self.task, FileTask)


def _scores_from_embeddings(model, eval_set: EvalSet, batch_size: int) -> dict[str, float]:
    encode = model.encoder.encode
    if eval_set.is_file and eval_set.task.eval_kind != "sts":
        return _file_scores(encode, eval_set, batch_size)
    from contrastext.evaluation.sts import evaluate_sts

    keep = item_outputs.active()
    result = evaluate_sts(encode, eval_set.examples, batch_size=batch_size, return_predictions=keep)
    if keep:
        item_outputs.record(eval_set.prefix, result["predictions"], result["labels"])
    return {"spearman": result["spearman"], "pearson": result["pearson"]}


def _file_scores(encode, eval_set: EvalSet, batch_size: int) -> dict[str, float]:
    """A pairs file by retrieval; an ir folder by its queries searching its corpus; a classification file by the probe, trained on a seeded 80 % of its rows and
    scored on the other 20 %."""
    from contrastext.data.tasks import holdout_split
    from contrastext.evaluation.classification import HOLDOUT_FRACTION, check_probe_training, evaluate_probe
    from contrastext.evaluation.retrieval import evaluate_pairs

    task = eval_set.task
    if task.eval_kind == "pairs":
        return evaluate_pairs(encode, eval_set.examples, batch_size=batch_size)
    if task.eval_kind == "ir":
        from contrastext.evaluation.information_retrieval import evaluate_retrieval_set

        return evaluate_retrieval_set(encode, eval_set.retrieval, batch_size=batch_size)
    train, evaluated = holdout_split(list(eval_set.examples), HOLDOUT_FRACTION, seed=0)
    check_probe_training(train, task.path, cross_validated=True, subsampled=False)
    return evaluate_probe(encode, train, evaluated, kind=task.kind, metric=task.metric, batch_size=batch_size)


def _scores_from_head(model, eval_set: EvalSet, batch_size: int) -> dict[str, float]:
    from contrastext.evaluation.classification import evaluate_predictions

    predictions = model.predict(eval_set.examples, batch_size=batch_size, task=eval_set.task.name)
    labels = [example.label for example in eval_set.examples]
    item_outputs.record(eval_set.prefix, predictions, labels)
    return evaluate_predictions(eval_set.task, predictions, labels)


SCORERS: dict[str, Callable[[Any, EvalSet, int], Mapping[str, Any]]] = {
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
    """``model -> metrics`` over ``sets`` (see the module docstring for the keys).

    With ``predictions="embeddings"`` a registry task must be of kind ``sts`` or ``regression`` (scored pairs); a
    user's file may be of any kind (sts, pairs, classification)."""
    if predictions not in SCORERS:
        raise ConfigError(f"unknown predictions {predictions!r}; known: {', '.join(SCORERS)}")
    if predictions == "embeddings":
        for eval_set in sets:
            if not eval_set.is_file and eval_set.task.kind not in SCORED_PAIR_KINDS:
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
            metrics.update(task_metrics(eval_set.key_name, eval_set.split, scores, eval_set.headline))
            if position == 0:
                metrics[SCORE] = metrics[eval_set.key(SCORE)]
        for extra in extras:
            metrics.update({name: float(value) for name, value in extra(model).items()})
        if overall is not None:
            metrics.update(overall(metrics))
        return metrics

    return evaluate
