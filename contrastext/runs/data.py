"""Training and evaluation data of the recipes, read from the task registry or a user's file.

- :func:`load_training_examples`: sentences, pairs or triplets for the contrastive recipes (``data.task`` or
  ``data.path``, first ``data.limit``);
- :func:`load_classification_data`: a labelled task's training set (few-shot draw ``data.few_shot``, label
  flips ``data.label_noise``, an optional seeded holdout) as :class:`IndexedExample` rows, and its
  evaluation set;
- :func:`split_validation_test`: the evaluation rows split, stratified and seeded, into a validation set
  (checkpoint selection) and a disjoint test set (reported), Gunel et al.'s protocol (ICLR 2021, §4.1);
- :func:`load_multitask_data`: every task of a multi-task run, concatenated in task order as
  :class:`TaskExample` rows, and each task's evaluation set.

Example::

    >>> data = load_classification_data(config, args, data_root, seed=1)
    >>> data.train[0].index, data.eval_set.prefix
    (0, 'sst2_dev')
    >>> data = split_validation_test(data, validation_size=500, test_share=0.5, seed=0)
    >>> data.eval_set.prefix, data.test_set.prefix, len(data.eval), len(data.test)
    ('sst2_validation', 'sst2_test', 436, 436)
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from contrastext.data.examples import Example, IndexedExample, TaskExample
from contrastext.errors import ConfigError
from contrastext.evaluation.evaluators import EvalSet
from contrastext.methods.classification import ClassificationArgs
from contrastext.methods.multitask import MultitaskArgs
from contrastext.runtime.seeding import derive_seed

CLASSIFICATION_KINDS = ("single", "pair")
REGRESSION_KINDS = ("sts", "regression")  # scored pairs: stsb, sickr, stsb-glue, minbert-sts
SUPPORTED_KINDS = CLASSIFICATION_KINDS + REGRESSION_KINDS
DEFAULT_MULTITASK_TASKS = ("minbert-sst", "minbert-quora", "minbert-sts")
FEW_SHOT_SAMPLING = ("label_distribution", "per_class")


def load_training_examples(config, data_root: Path | None, default_task: str) -> list[Example]:
    """``data.path`` (a SimCSE .txt or .csv file) or ``data.task`` (default ``default_task``), first ``data.limit``."""
    from contrastext.data.formats import read_sentences, read_simcse_csv
    from contrastext.data.tasks import load_task

    data = config.data
    if data.path is not None:
        path = Path(data.path).expanduser()
        examples = read_simcse_csv(path) if path.suffix.lower() in (".csv", ".tsv") else read_sentences(path)
    else:
        examples = load_task(data.task or default_task, data_root).examples
    examples = list(examples)
    if data.limit is not None:
        examples = examples[: data.limit]
    if len(examples) < 2:
        raise ConfigError(
            f"{config.source or '<config>'}: data: {len(examples)} training example(s); "
            "contrastive training needs at least 2 (check data.task, data.path, data.limit)"
        )
    return examples


@dataclass
class ClassificationData:
    """A task's training set (indexed, after few-shot / noise), evaluation set (what checkpoints are selected
    on), optional test set (scored once, on the selected checkpoint), and how they were made."""

    task: Any  # contrastext.data.tasks.Task
    train: list[IndexedExample]
    eval: list[Example]
    description: dict = field(default_factory=dict)
    eval_split: str = "dev"
    test: list[Example] | None = None
    test_split: str = "test"

    @property
    def eval_set(self) -> EvalSet:
        """The evaluation rows as an :class:`EvalSet` (keys ``<task>_<eval split>_<metric>``)."""
        return EvalSet(self.task, self.eval_split, self.eval)

    @property
    def test_set(self) -> EvalSet | None:
        """The test rows as an :class:`EvalSet` (keys ``<task>_test_<metric>``), None without a test split."""
        return None if self.test is None else EvalSet(self.task, self.test_split, self.test)


def task_and_splits(config) -> tuple[Any, str, str]:
    """``(task, train split, eval split)`` from ``data.task`` and ``eval.tasks``.

    ``data.task: sst2`` trains on ``sst2:train``; ``data.task: sst2:train`` says so explicitly. The
    evaluation split is the first of ``eval.tasks`` (it must be the same task), else ``dev``.
    """
    from contrastext.data.tasks import get_task, parse_task_spec

    if not config.data.task:
        raise ConfigError(f"{config.source or '<config>'}: data.task: a classification task is required, e.g. sst2")
    name, _, split = config.data.task.partition(":")
    task = get_task(name)
    if split:
        parse_task_spec(config.data.task)  # an unknown split lists the valid ones
    train_split = split or "train"
    eval_split = "dev"
    if config.eval.tasks:
        eval_task, eval_split = parse_task_spec(config.eval.tasks[0])
        if eval_task.name != task.name:
            raise ConfigError(
                f"{config.source or '<config>'}: eval.tasks: fine-tuning on {task.name} is evaluated on the same "
                f"task, got {config.eval.tasks[0]!r}"
            )
    if task.kind not in SUPPORTED_KINDS:
        raise ConfigError(
            f"{config.source or '<config>'}: data.task: {task.name} has kind {task.kind!r}; fine-tuning needs a "
            f"task of kind {', '.join(SUPPORTED_KINDS)} (e.g. sst2, mrpc, cola, rte, qnli, qqp, stsb, sst5)"
        )
    return task, train_split, eval_split


def load_classification_data(
    config, args: ClassificationArgs, data_root: Path | None, seed: int, few_shot_sampling: str = "per_class"
) -> ClassificationData:
    """Training and evaluation examples of ``data.task`` (see the module docstring for every option).

    ``data.few_shot`` = N: ``few_shot_sampling="label_distribution"`` draws N examples in total following the
    training label distribution (Gunel et al., §4.1; the ``scl`` recipe's default), ``"per_class"`` N of
    each class.
    """
    from contrastext.data.tasks import holdout_split, load_task

    task, train_split, eval_split = task_and_splits(config)
    if args.holdout is not None:
        rows = load_task(task, data_root, split=eval_split).examples
        train, evaluation = holdout_split(rows, args.holdout, args.holdout_seed)
        train_name = f"{task.name}:{eval_split} minus a {args.holdout:.0%} holdout (seed {args.holdout_seed})"
        eval_name = f"{task.name}:{eval_split} {args.holdout:.0%} holdout (seed {args.holdout_seed})"
    else:
        train = load_task(task, data_root, split=train_split).examples
        evaluation = load_task(task, data_root, split=eval_split).examples
        train_name, eval_name = f"{task.name}:{train_split}", f"{task.name}:{eval_split}"
    train = _labelled(train, task, train_name)
    evaluation = _labelled(evaluation, task, eval_name)
    if config.data.limit is not None:
        train = train[: config.data.limit]
    if config.eval.limit is not None:
        evaluation = evaluation[: config.eval.limit]
    description: dict = {"task": task.name, "train": train_name, "eval": eval_name, "draw_seed": seed}
    if config.data.few_shot is not None:
        train = _few_shot(train, task, config.data.few_shot, seed, few_shot_sampling)
        description["few_shot"] = config.data.few_shot
        description["few_shot_sampling"] = few_shot_sampling
        description["train_label_counts"] = _label_counts(train)
    if config.data.label_noise > 0:
        train, flipped = _label_noise(train, task, config.data.label_noise, seed)
        description["label_noise"] = config.data.label_noise
        description["labels_flipped"] = flipped
    description["n_train"] = len(train)
    description["n_eval"] = len(evaluation)
    indexed = [IndexedExample(e.texts, e.label, e.source, index=i) for i, e in enumerate(train)]
    return ClassificationData(
        task=task, train=indexed, eval=evaluation, description=description, eval_split=eval_split
    )


def _labelled(examples: Sequence[Example], task, split_name: str) -> list[Example]:
    """The examples, checked to carry a label of the task's type (GLUE test files are unlabelled)."""
    if not examples:
        raise ConfigError(f"{split_name}: the split has no examples")
    for example in examples:
        bad = example.label is None or (isinstance(example.label, float) and math.isnan(example.label))
        if not bad and task.kind in CLASSIFICATION_KINDS:
            bad = not 0 <= int(example.label) < task.num_labels
        if bad:
            raise ConfigError(
                f"{example.source or split_name}: fine-tuning needs labelled examples "
                f"({task.kind}, {task.num_labels} classes), got label {example.label!r}; "
                "is this an unlabelled test split?"
            )
    return list(examples)


def _few_shot(examples: list[Example], task, n: int, seed: int, sampling: str) -> list[Example]:
    from contrastext.data.sampling import few_shot

    if sampling not in FEW_SHOT_SAMPLING:
        raise ConfigError(f"few_shot_sampling: unknown {sampling!r}; known: {', '.join(FEW_SHOT_SAMPLING)}")
    if task.kind not in CLASSIFICATION_KINDS:
        raise ConfigError(f"data.few_shot draws N examples by class; {task.name} is a regression task")
    return few_shot(examples, n, seed=seed, per_class=sampling == "per_class")


def _label_counts(examples: Sequence[Example]) -> dict[str, int]:
    counts = Counter(str(example.label) for example in examples)
    return dict(sorted(counts.items()))


def split_validation_test(
    data: ClassificationData, validation_size: int, test_share: float, seed: int
) -> ClassificationData:
    """``data`` with its evaluation rows split into a validation set and a disjoint test set.

    Gunel et al., ICLR 2021, §4.1: "we sample half of the original validation set of GLUE benchmark and use
    it as our test set, and sample ~ 500 examples for our validation set from the original validation set,
    both taking the label distribution of the original validation set into account." Here: the test set is
    ``round(test_share · n)`` rows drawn stratified by label with ``derive_seed(seed, 0)``; the validation set
    is ``min(validation_size, rest)`` rows drawn stratified from the other rows with ``derive_seed(seed, 1)``
    (the paper does not say the two are disjoint; we make them so, hence SST-2's 872 dev rows give 436 test
    and 436 validation rows). Regression tasks are split at random (no classes to stratify on). The result's
    evaluation split is ``validation`` (keys ``<task>_validation_<metric>``), its test split ``test``.
    """
    from contrastext.data.sampling import stratified_indices

    rows = list(data.eval)
    n_test = round(test_share * len(rows))
    if n_test < 1 or n_test >= len(rows):
        raise ConfigError(
            f"method_args.test_share={test_share}: {len(rows)} evaluation rows ({data.description.get('eval')}) "
            "leave no test or no validation row"
        )
    strata = [e.label for e in rows] if data.task.kind in CLASSIFICATION_KINDS else [None] * len(rows)
    test_positions = set(stratified_indices(strata, n_test, seed=derive_seed(seed, 0)))
    rest = [index for index in range(len(rows)) if index not in test_positions]
    n_validation = min(validation_size, len(rest))
    chosen = stratified_indices([strata[index] for index in rest], n_validation, seed=derive_seed(seed, 1))
    validation = [rows[rest[position]] for position in chosen]
    test = [rows[index] for index in sorted(test_positions)]
    source = data.description.get("eval", f"{data.task.name}:{data.eval_split}")
    description = dict(data.description)
    description.update(
        {
            "validation": f"{source}: {len(validation)} rows, stratified (split seed {seed})",
            "test": f"{source}: {len(test)} rows ({test_share:.0%}), stratified, disjoint from validation "
            f"(split seed {seed})",
            "n_validation": len(validation),
            "n_test": len(test),
            "split_seed": seed,
        }
    )
    description.pop("n_eval", None)
    return replace(
        data, eval=validation, eval_split="validation", test=test, test_split="test", description=description
    )


def _label_noise(examples: list[Example], task, share: float, seed: int) -> tuple[list[Example], int]:
    from contrastext.data.sampling import flip_labels

    if task.kind not in CLASSIFICATION_KINDS:
        raise ConfigError(f"data.label_noise flips class labels; {task.name} is a regression task")
    # A stream of its own, so which labels flip is independent of which examples the few-shot draw kept.
    noisy, flipped = flip_labels(examples, share, seed=derive_seed(seed, 1), num_classes=task.num_labels)
    return noisy, len(flipped)


@dataclass
class MultitaskData:
    """The run's tasks, training examples (all tasks, concatenated in task order) and evaluation sets."""

    tasks: list[Any]  # contrastext.data.tasks.Task
    train: list[TaskExample]
    sizes: list[int]
    eval: dict[str, list[Example]]
    description: dict = field(default_factory=dict)

    @property
    def eval_sets(self) -> list[EvalSet]:
        """Each task's evaluation rows (its dev split, or the holdout of it), in task order."""
        return [EvalSet(task, "dev", self.eval[task.name]) for task in self.tasks]


def load_multitask_data(config, args: MultitaskArgs, data_root: Path | None) -> MultitaskData:
    """Each task's training split (or dev minus holdout) and evaluation split, ``data.limit`` / ``eval.limit``."""
    from contrastext.data.tasks import get_task, holdout_split, load_task

    if config.eval.tasks:
        raise ConfigError(
            f"{config.source or '<config>'}: eval.tasks: multitask evaluates each of data.tasks on its dev split "
            "(or its holdout); leave eval.tasks empty"
        )
    specs = list(config.data.tasks) or list(DEFAULT_MULTITASK_TASKS)
    tasks, train, sizes, evaluation, description = [], [], [], {}, {}
    for index, spec in enumerate(specs):
        name, _, split = spec.partition(":")
        task = get_task(name)
        if task.kind not in SUPPORTED_KINDS:
            raise ConfigError(
                f"{config.source or '<config>'}: data.tasks: {task.name} has kind {task.kind!r}; multitask needs "
                f"labelled tasks of kind {', '.join(SUPPORTED_KINDS)}"
            )
        if task.name in evaluation:
            raise ConfigError(f"{config.source or '<config>'}: data.tasks: {task.name} is given twice")
        if task.name in args.holdout_tasks:
            rows = load_task(task, data_root, split="dev").examples
            rows_train, rows_eval = holdout_split(rows, args.holdout, args.holdout_seed)
            where = f"{task.name}:dev minus a {args.holdout:.0%} holdout (seed {args.holdout_seed})"
            eval_where = f"{task.name}:dev {args.holdout:.0%} holdout (seed {args.holdout_seed}, {len(rows_eval)} rows)"
        else:
            rows_train = load_task(task, data_root, split=split or "train").examples
            rows_eval = load_task(task, data_root, split="dev").examples
            where, eval_where = f"{task.name}:{split or 'train'}", f"{task.name}:dev"
        rows_train = [row for row in rows_train if row.label is not None][: config.data.limit]
        rows_eval = [row for row in rows_eval if row.label is not None][: config.eval.limit]
        if not rows_train or not rows_eval:
            raise ConfigError(f"{where}: no labelled examples to train or evaluate on")
        tasks.append(task)
        train.extend(TaskExample(row.texts, row.label, row.source, task=index) for row in rows_train)
        sizes.append(len(rows_train))
        evaluation[task.name] = list(rows_eval)
        description[task.name] = {"train": where, "eval": eval_where, "n_train": len(rows_train),
                                  "n_eval": len(rows_eval)}
    return MultitaskData(tasks, train, sizes, evaluation, description)


def task_sizes(examples: Sequence[TaskExample]) -> list[int]:
    """Examples per task, checking they are concatenated in task order (what the samplers assume)."""
    tasks = [example.task for example in examples]
    if tasks != sorted(tasks):
        raise ValueError("multitask training examples must be concatenated in task order")
    return [tasks.count(index) for index in range(max(tasks) + 1)]
