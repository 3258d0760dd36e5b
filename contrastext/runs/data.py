"""Training and evaluation data of the recipes, read from the task registry or a user's file or dataset.

The data spec (:mod:`contrastext.data.sources`): ``data.task`` (a registry task) or ``data.path`` (a .csv, .tsv,
.jsonl/.json or .txt file, ``data.columns`` naming the columns) or ``data.dataset`` (Hugging Face ``datasets``:
a local folder or a hub name, ``data.split``). A source given with ``--set`` replaces the recipe file's (and
``config.data`` is updated, so ``config.yaml`` records what was read); two at the same level are an error.

- :func:`data_spec`: the run's :class:`~contrastext.data.sources.DataSpec`, with the source chosen;
- :func:`load_training_data` / :func:`load_training_examples`: sentences, pairs or triplets for the contrastive
  recipes (``data.limit``, see :func:`apply_limit`) and where they came from;
- :func:`load_classification_data`: a labelled task's training set (few-shot draw ``data.few_shot``, label
  flips ``data.label_noise``, an optional seeded holdout) as :class:`IndexedExample` rows, and its
  evaluation set. A user's labelled file is evaluated on ``data.eval_path`` (``data.eval_split`` of a dataset),
  else on a seeded holdout of it (``method_args.holdout``, default 20 %, seed ``holdout_seed``); its labels may
  be strings, any number of classes (``task.label_names``, saved in the run's ``metrics.json``);
- :func:`split_validation_test`: the evaluation rows split, stratified and seeded, into a validation set
  (checkpoint selection) and a disjoint test set (reported), Gunel et al.'s protocol (ICLR 2021, §4.1);
- :func:`load_multitask_data`: every task of a multi-task run, concatenated in task order as
  :class:`TaskExample` rows, and each task's evaluation set.

No function here resolves the data root unless a registry task is read.

Example::

    >>> data = load_classification_data(config, args, data_root, seed=1)
    >>> data.train[0].index, data.eval_set.prefix
    (0, 'sst2_dev')
    >>> data = split_validation_test(data, validation_size=500, test_share=0.5, seed=0)
    >>> data.eval_set.prefix, data.test_set.prefix, len(data.eval), len(data.test)
    ('sst2_validation', 'sst2_test', 436, 436)
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from contrastext.data.examples import Example, IndexedExample, TaskExample
from contrastext.data.quality import DUPLICATE_WARNING, drop_blank, duplicate_positives
from contrastext.data.sources import DEFAULT_HOLDOUT, SOURCE_KEYS, TARGET_ROLES, DataSpec, choose_source
from contrastext.data.task_kinds import CLASSIFICATION_KINDS, LABELLED_KINDS
from contrastext.errors import ConfigError
from contrastext.evaluation.evaluators import EvalSet
from contrastext.runtime.seeding import derive_seed

logger = logging.getLogger("contrastext.runs")

DEFAULT_MULTITASK_TASKS = ("minbert-sst", "minbert-quora", "minbert-sts")
FEW_SHOT_SAMPLING = ("label_distribution", "per_class")
# A stage that trains on a registry task (CAPT's fine-tuning) drops the run's own file or dataset keys.
USER_DATA_CLEARED: dict[str, Any] = {
    key: None
    for key in (
        "path", "dataset", "dataset_config", "split", "columns", "label_names", "eval_path", "eval_split", "num_negatives"
    )
}


def data_spec(config) -> DataSpec:
    """The run's data spec (:mod:`contrastext.data.sources`) with ONE source: a source given with ``--set``
    replaces the recipe file's (``config.data`` is updated to say so, and a warning names both); two sources
    at the same level are a ConfigError naming both. Keys that do not go with the source are errors."""
    data = config.data
    origin = config.source or "<config>"
    values = {key: getattr(data, key) for key in SOURCE_KEYS}
    chosen = choose_source(values, config.overridden_keys, origin)
    for key in SOURCE_KEYS:
        if key != chosen and values[key] is not None:
            logger.warning(
                "--set data.%s=%s replaces data.%s: %s of %s", chosen, values[chosen], key, values[key], origin
            )
            setattr(data, key, None)
    if data.num_negatives is not None and data.path is None and data.dataset is None:
        raise ConfigError(
            f"{origin}: data.num_negatives applies to data.path or data.dataset (rows with a list of negatives); "
            f"the training data is the registry task {data.task or 'of the recipe'}"
        )
    spec = DataSpec(
        task=data.task,
        path=data.path,
        dataset=data.dataset,
        dataset_config=data.dataset_config,
        split=data.split,
        columns=data.columns.model_dump() if data.columns is not None else None,
        label_names=data.label_names,
        eval_path=data.eval_path,
        eval_split=data.eval_split,
        num_negatives=data.num_negatives,
        origin=origin,
    )
    spec.check()
    return spec


@dataclass
class TrainingData:
    """A contrastive recipe's training examples and where they came from (``description``: source, file,
    columns, ``n_train``; the run's ``metrics.json`` reports it)."""

    examples: Sequence[Example]  # a list, or a ColumnExamples store (data.storage: columns)
    description: dict


# Seed streams of the data.limit draw (limit_rows: random), apart from the run's other draws.
LIMIT_STREAM = 7


def apply_limit(rows: Sequence, config, *stream: int) -> list:
    """``data.limit`` rows of ``rows``: the first N (``data.limit_rows: first``, the default), or N drawn at
    random with the run's ``seed`` (``random``), kept in file order. ``stream`` separates draws of one run (e.g.
    the task index in multi-task runs). Fewer rows than N, or no limit: all of them."""
    limit = config.data.limit
    if limit is None or len(rows) <= limit:
        return list(rows)
    if config.data.limit_rows == "first":
        return list(rows[:limit])
    rng = np.random.default_rng(derive_seed(config.seed, LIMIT_STREAM, *stream))
    return [rows[index] for index in np.sort(rng.choice(len(rows), size=limit, replace=False))]


def load_training_data(config, data_root: Path | None, default_task: str, nli: bool = False) -> TrainingData:
    """``data.path`` / ``data.dataset`` (read as the default task's kind: sentences, or pairs / triplets /
    n-tuples; ``nli``: (premise, hypothesis, label) rows as SimCSE's triplets) or ``data.task`` (default
    ``default_task``), :func:`apply_limit`. How the rows were read is printed (``data: ...`` lines, main process);
    a ``label`` / ``score`` column the recipe does not use is a warning."""
    from contrastext.data.sources import read_texts
    from contrastext.data.tasks import get_task, load_task

    spec = data_spec(config)
    if config.data.storage == "columns" and not spec.is_user_data:
        raise ConfigError(f"{config.source or '<config>'}: data.storage=columns reads data.path or data.dataset; the "
                          f"training data is the registry task {spec.task or default_task}")  # fmt: skip
    if spec.is_user_data and config.data.storage == "columns":
        return _column_training_data(config, spec, "sentences" if get_task(default_task).kind == "sentences" else
                                     "pairs")  # fmt: skip
    if spec.is_user_data:
        needs = "sentences" if get_task(default_task).kind == "sentences" else "pairs"
        read = read_texts(spec, needs, who=config.method, nli=nli)
        examples, description = list(read.examples), dict(read.description)
        _announce(read.notes, read.unused_targets)
    else:
        loaded = load_task(spec.task or default_task, data_root)
        examples = list(loaded.examples)
        description = {"source": "data.task", "train": f"{loaded.task.name}:{loaded.split}", "n_rows": len(examples)}
    examples = _without_blank_texts(examples, description)
    examples = apply_limit(examples, config)
    if len(examples) < 2:
        raise ConfigError(
            f"{config.source or '<config>'}: data: {len(examples)} training example(s); "
            "contrastive training needs at least 2 (check data.task, data.path, data.dataset, data.limit)"
        )
    description["n_train"] = len(examples)
    _report_duplicate_positives(examples, description)
    return TrainingData(examples, description)


def _column_training_data(config, spec: DataSpec, needs: str) -> TrainingData:
    """``data.storage: columns``: the training rows as a memory-mapped column store (:mod:`contrastext.data.
    column_store`), converted once into the cache; the blank-text rows are dropped while converting, the
    duplicate positives counted from the hashes (skipped above ``DUPLICATE_SCAN_ROWS``). Keys that need every row in memory
    are ConfigErrors naming them."""
    from contrastext.data.column_quality import DUPLICATE_SCAN_ROWS
    from contrastext.data.column_quality import duplicate_positives as column_duplicates
    from contrastext.data.column_sources import read_text_columns

    origin = config.source or "<config>"
    for key, value in (("limit", config.data.limit), ("prompts", config.data.prompts)):
        if value is not None:
            raise ConfigError(f"{origin}: data.{key} with data.storage=columns: {key} rewrites the rows in memory; "
                              f"use data.storage=memory, or a file that needs no data.{key}")  # fmt: skip
    store, description = read_text_columns(spec, needs, who=config.method)  # NLI rows: a ConfigError there
    if store.dropped_blank:
        logger.warning("data: dropped %d of %d rows with a text that is empty once tokenised, the first at %s",
                       store.dropped_blank, len(store) + store.dropped_blank, store.first_dropped)  # fmt: skip
    if len(store) < 2:
        raise ConfigError(f"{origin}: data: {len(store)} training example(s); contrastive training needs at least 2")
    description["n_train"] = len(store)
    _announce([f"{len(store):,} rows in a column store ({store.folder}), read a batch at a time"])
    counted = column_duplicates(store)
    if counted is None:
        logger.info("data: duplicate positives not counted above %s rows (data.storage=columns)",
                    f"{DUPLICATE_SCAN_ROWS:,}")
    else:
        _report_duplicate_count(*counted, len(store), description)
    return TrainingData(store, description)


def _announce(notes: Sequence[str], warnings: Sequence[str] = ()) -> None:
    """Print each note as a ``data: ...`` line on the main process (as the ``model: ...`` line); log each warning."""
    from contrastext.runtime.processes import is_main_process

    if is_main_process():
        for note in notes:
            print(f"data: {note}", flush=True)
    for warning in warnings:
        logger.warning("data: %s", warning)


def _without_blank_texts(examples: list[Example], description: dict) -> list[Example]:
    """The examples without those holding a text that is empty once tokenised (:func:`~contrastext.data.quality.
    is_blank`: only whitespace, zero-width or bidi characters); a warning counts them and names the first."""
    kept, dropped = drop_blank(examples)
    if dropped:
        first = dropped[0].source or f"row {examples.index(dropped[0]) + 1}"
        logger.warning(
            "data: dropped %d of %d rows with a text that is empty once tokenised (only whitespace, control, "
            "zero-width or bidi characters), the first at %s", len(dropped), len(examples), first,
        )  # fmt: skip
        description["n_dropped_blank"] = len(dropped)
    return kept


def _report_duplicate_positives(examples: Sequence[Example], description: dict) -> None:
    """Count the rows repeating another row's positive (``description["duplicate_positives"]``); a line says so,
    a warning above :data:`~contrastext.data.quality.DUPLICATE_WARNING` of the rows."""
    _report_duplicate_count(*duplicate_positives(examples), len(examples), description)


def _report_duplicate_count(repeated: int, most: str | None, rows: int, description: dict) -> None:
    """The line (or warning) of :func:`_report_duplicate_positives` from the count."""
    if not repeated:
        return
    share = repeated / rows
    description["duplicate_positives"] = repeated
    text = most if len(most) <= 60 else most[:57] + "..."
    message = (
        f"data: {repeated} of {rows} rows ({share:.1%}) repeat another row's positive (the most repeated: "
        f"{text!r}); in a batch holding two of them, each is the other's negative"
    )
    if share > DUPLICATE_WARNING:
        logger.warning(
            "%s. Above %.0f%%: remove the repeated rows, or --set data.batch_sampler=no_duplicates",
            message, 100 * DUPLICATE_WARNING,
        )  # fmt: skip
    else:
        logger.info(message)


def load_training_examples(config, data_root: Path | None, default_task: str) -> list[Example]:
    """The examples of :func:`load_training_data`."""
    return load_training_data(config, data_root, default_task).examples


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
    eval_key_name: str | None = None  # the keys' name when not the task's: data.eval_path's file name

    @property
    def eval_set(self) -> EvalSet:
        """The evaluation rows as an :class:`EvalSet` (keys ``<task>_<eval split>_<metric>``; rows of
        ``data.eval_path``: ``<eval file>_<eval split>_<metric>``)."""
        return EvalSet(self.task, self.eval_split, self.eval, name=self.eval_key_name)

    @property
    def test_set(self) -> EvalSet | None:
        """The test rows as an :class:`EvalSet` (keys ``<task>_test_<metric>``, or ``<eval file>_test_<metric>``),
        None without a test split."""
        if self.test is None:
            return None
        return EvalSet(self.task, self.test_split, self.test, name=self.eval_key_name)


def task_and_splits(config) -> tuple[Any, str, str]:
    """``(task, train split, eval split)``: :func:`task_splits_and_eval_name` without the name."""
    return task_splits_and_eval_name(config)[:3]


def task_splits_and_eval_name(config) -> tuple[Any, str, str, str]:
    """``(task, train split, eval split, name of the evaluation keys)`` from the data spec and ``eval.tasks``.

    ``data.task: sst2`` trains on ``sst2:train``; ``data.task: sst2:train`` says so explicitly. The
    evaluation split is the first of ``eval.tasks`` (it must be the same task), else ``dev``. A user's file or
    dataset (read here) is its own task, named after the file; its evaluation split is ``eval``
    (``data.eval_path``), the ``data.eval_split``, or ``holdout``. The evaluation keys are named after the task,
    except on ``data.eval_path``: after that file (``sst5_dev.csv``: ``sst5_dev_eval_accuracy``), so that
    they never read as the training file's numbers.
    """
    from contrastext.data.tasks import get_task, parse_task_spec

    spec = classification_spec(config)
    if spec.is_user_data:
        from contrastext.data.sources import read_labelled

        user = read_labelled(spec, who=config.method)
        return user.task, "train", user.eval_split, user.eval_key_name or user.task.name
    if not spec.task:
        raise ConfigError(
            f"{config.source or '<config>'}: data: fine-tuning needs labelled data: data.task (e.g. sst2), "
            "data.path (a file with a label column) or data.dataset"
        )
    name, _, split = spec.task.partition(":")
    task = get_task(name)
    if split:
        parse_task_spec(spec.task)  # an unknown split lists the valid ones
    train_split = split or "train"
    eval_split = "dev"
    if config.eval.tasks:
        eval_task, eval_split = parse_task_spec(config.eval.tasks[0])
        if eval_task.name != task.name:
            raise ConfigError(
                f"{config.source or '<config>'}: eval.tasks: fine-tuning on {task.name} is evaluated on the same "
                f"task, got {config.eval.tasks[0]!r}"
            )
    if task.kind not in LABELLED_KINDS:
        raise ConfigError(
            f"{config.source or '<config>'}: data.task: {task.name} has kind {task.kind!r}; fine-tuning needs a "
            f"task of kind {', '.join(LABELLED_KINDS)} (e.g. sst2, mrpc, cola, rte, qnli, qqp, stsb, sst5)"
        )
    return task, train_split, eval_split, task.name


def classification_spec(config) -> DataSpec:
    """:func:`data_spec` for a fine-tuning run. On a user's file or dataset, the evaluation rows come from
    ``data.eval_path`` / ``data.eval_split`` or a holdout, never from ``eval.tasks``: a recipe file's
    ``eval.tasks`` (its own task's dev split) gives way to a source given with ``--set`` (a warning says so,
    and ``config.eval.tasks`` is emptied); ``eval.tasks`` given beside the user's source is an error."""
    spec = data_spec(config)
    if not spec.is_user_data or not config.eval.tasks:
        return spec
    given = config.overridden_keys
    eval_from_set = "eval.tasks" in given or "eval" in given
    source_from_set = f"data.{spec.source}" in given or "data" in given
    if source_from_set and not eval_from_set:
        logger.warning(
            "--set data.%s replaces the recipe's data; its eval.tasks %s go with it: evaluating on %s",
            spec.source, list(config.eval.tasks),
            "data.eval_path" if spec.eval_path else "data.eval_split" if spec.eval_split else "a holdout",
        )
        config.eval.tasks = []
        return spec
    raise ConfigError(
        f"{'--set eval.tasks' if eval_from_set else config.source or '<config>'}: eval.tasks: a classifier "
        f"fine-tuned on data.{spec.source} is evaluated on data.eval_path (data.eval_split of a dataset) or a "
        "seeded holdout (method_args.holdout); leave eval.tasks empty"
    )


class HoldoutArgs(Protocol):
    """What :func:`load_classification_data` reads of a fine-tuning recipe's ``ClassificationArgs``
    (:mod:`contrastext.runs.classification`, which imports this module)."""

    holdout: float | None
    holdout_seed: int


def load_classification_data(
    config, args: HoldoutArgs, data_root: Path | None, seed: int, few_shot_sampling: str = "per_class"
) -> ClassificationData:
    """Training and evaluation examples of ``data.task`` (see the module docstring for every option).

    ``data.few_shot`` = N: ``data.few_shot_sampling`` (else ``few_shot_sampling``, the recipe's default)
    ``"label_distribution"`` draws N examples in total following the training label distribution (Gunel et al.,
    §4.1; the ``scl`` recipe's default), ``"per_class"`` N of each class.
    """
    from contrastext.data.tasks import holdout_split, load_task

    spec = classification_spec(config)
    description: dict = {}
    eval_key_name = None
    if spec.is_user_data:
        task, train, evaluation, train_name, eval_name, eval_split, description, eval_key_name = _user_labelled(
            config, args, spec
        )
    elif args.holdout is not None:
        task, _, eval_split = task_and_splits(config)
        rows = load_task(task, data_root, split=eval_split).examples
        train, evaluation = holdout_split(rows, args.holdout, args.holdout_seed)
        train_name = f"{task.name}:{eval_split} minus a {args.holdout:.0%} holdout (seed {args.holdout_seed})"
        eval_name = f"{task.name}:{eval_split} {args.holdout:.0%} holdout (seed {args.holdout_seed})"
    else:
        task, train_split, eval_split = task_and_splits(config)
        train = load_task(task, data_root, split=train_split).examples
        evaluation = load_task(task, data_root, split=eval_split).examples
        train_name, eval_name = f"{task.name}:{train_split}", f"{task.name}:{eval_split}"
    train = _labelled(train, task, train_name)
    evaluation = _labelled(evaluation, task, eval_name)
    train = apply_limit(train, config)
    if config.eval.limit is not None:
        evaluation = evaluation[: config.eval.limit]
    description = {"task": task.name, "train": train_name, "eval": eval_name, "draw_seed": seed, **description}
    if config.data.few_shot is not None:
        few_shot_sampling = config.data.few_shot_sampling or few_shot_sampling
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
        task=task, train=indexed, eval=evaluation, description=description, eval_split=eval_split,
        eval_key_name=eval_key_name,
    )


def _user_labelled(config, args: HoldoutArgs, spec: DataSpec):
    """``(task, train, eval, train name, eval name, eval split, description, eval key name)`` of a user's labelled
    data (the key name: data.eval_path's, else None)."""
    from contrastext.data.sources import read_labelled
    from contrastext.data.tasks import holdout_split

    user = read_labelled(spec, who=config.method)
    unused_target = any(column in TARGET_ROLES for column in user.layout.unused)
    note = [user.unused_note] if user.unused_note else []
    _announce([] if unused_target else note, note if unused_target else [])
    origin = config.source or "<config>"
    if user.eval is not None:
        if args.holdout is not None:
            raise ConfigError(
                f"{origin}: method_args.holdout and data.{'eval_path' if spec.eval_path else 'eval_split'} both "
                "give the evaluation rows; set one"
            )
        train, evaluation, train_name, eval_name = user.train, user.eval, user.train_name, user.eval_name
    else:
        fraction = DEFAULT_HOLDOUT if args.holdout is None else args.holdout
        train, evaluation = holdout_split(user.train, fraction, args.holdout_seed)
        if not train or not evaluation:
            raise ConfigError(
                f"{origin}: {user.train_name}: {len(user.train)} rows leave nothing to train or evaluate on with a "
                f"{fraction:.0%} holdout; add rows or name evaluation data with data.eval_path"
            )
        train_name = f"{user.train_name} minus a {fraction:.0%} holdout (seed {args.holdout_seed})"
        eval_name = f"{user.train_name} {fraction:.0%} holdout (seed {args.holdout_seed}, {len(evaluation)} rows)"
        if args.holdout is None:
            logger.warning(
                "no evaluation data named (data.eval_path, data.eval_split): evaluating on a %.0f%% holdout of %s "
                "(seed %d, method_args.holdout / holdout_seed)", 100 * fraction, user.train_name, args.holdout_seed,
            )
    description = {"source": f"data.{spec.source}", "columns": user.layout.describe()}
    if user.task.label_names is not None:
        description["label_names"] = list(user.task.label_names)
    key_name = user.eval_key_name if user.eval is not None else None
    return user.task, train, evaluation, train_name, eval_name, user.eval_split, description, key_name


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


class MultitaskHoldout(Protocol):
    """What :func:`load_multitask_data` reads of the multitask recipe's ``MultitaskArgs`` (:mod:`contrastext.runs.multitask`,
    which imports this module)."""

    holdout_tasks: list[str]
    holdout: float
    holdout_seed: int


def load_multitask_data(config, args: MultitaskHoldout, data_root: Path | None) -> MultitaskData:
    """Each task's training split (or dev minus holdout) and evaluation split, ``data.limit`` / ``eval.limit``."""
    from contrastext.data.tasks import get_task, holdout_split, load_task

    sources = [f"data.{key}" for key in SOURCE_KEYS if getattr(config.data, key) is not None]
    if sources:
        raise ConfigError(
            f"{config.source or '<config>'}: {sources[0]}: multitask trains on data.tasks (registry tasks); "
            f"remove {sources[0]}"
        )
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
        if task.kind not in LABELLED_KINDS:
            raise ConfigError(
                f"{config.source or '<config>'}: data.tasks: {task.name} has kind {task.kind!r}; multitask needs "
                f"labelled tasks of kind {', '.join(LABELLED_KINDS)}"
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
        rows_train = apply_limit([row for row in rows_train if row.label is not None], config, index)
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
