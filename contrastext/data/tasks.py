"""The benchmark task registry: task names -> files under the data root, reader, metric.

A task spec is ``name`` or ``name:split`` (``stsb``, ``stsb:dev``, ``sickr:dev``, ``qqp:dev``). A bare
name means the split the literature reports: the test set for STS-B, SICK-R, STS12-16, SST-5 and SNLI,
the dev set for GLUE tasks (their test labels are hidden) and minBERT. Each split lists one or more
candidate files, relative to the data root; the first that exists is read, so a user's full files
(``glue/QQP/dev.tsv``, ``nli/nli_for_simcse.csv``, ``wiki1m/wiki1m_for_simcse.txt``) win over the
reduced copies in the shared data. Example::

    data = load_task("stsb:dev", data_root="../shared/data")
    len(data.examples)          # 1500 scored pairs
    data = load_task("sts12")
    data.subsets.keys()         # MSRpar, MSRvid, SMTeuroparl, surprise.OnWN, surprise.SMTnews
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Literal, TypeVar

from contrastext.data import formats
from contrastext.data.examples import Example
from contrastext.data.root import DATA_ROOT_VARIABLE, resolve_data_root
from contrastext.data.task_kinds import TaskKind
from contrastext.errors import ContrastextError, EmptyDataError, MissingDataError, UnknownNameError
from contrastext.runtime.registry import Registry

Metric = Literal["spearman", "accuracy", "f1", "mcc", "pearson"]
"""A task's headline metric: the ``<metric>`` of its metric keys (``cola_dev_mcc``)."""
Reader = Callable[[Path], list[Example]]
SubsetReader = Callable[[Path], dict[str, list[Example]]]
ScoreRange = tuple[float, float]

STS_RANGE: ScoreRange = (0.0, 5.0)
"""Gold scores of STS12-16, the STS benchmark and its GLUE / minBERT copies."""
SICK_RANGE: ScoreRange = (1.0, 5.0)
"""SICK relatedness scores."""


@dataclass(frozen=True)
class Task:
    """One benchmark: what its examples are, how to read them, how to score them.

    ``splits`` maps a split name to candidate paths relative to the data root, most preferred first.
    ``reader(path)`` reads one split; ``subset_reader(path)``, when set (STS12-16), reads it as named
    subsets. ``metric`` is None for training-only data (sentences, triplets). ``score_range`` (similarity
    tasks) bounds the gold scores: :func:`load_task` passes it to the reader, which rejects a score outside it.
    """

    name: str
    kind: TaskKind
    metric: Metric | None
    num_labels: int | None
    label_names: tuple[str, ...] | None
    splits: dict[str, tuple[str, ...]]
    default_split: str
    reader: Reader
    subset_reader: SubsetReader | None = None
    description: str = ""
    score_range: ScoreRange | None = None


@dataclass
class TaskData:
    """The examples of one split of a task; ``subsets`` for STS12-16; ``skipped`` rows left out on purpose."""

    task: Task
    split: str
    examples: list[Example]
    subsets: dict[str, list[Example]] | None
    skipped: int
    path: Path | None = None


def _sts_year(year: int) -> Task:
    folder = f"senteval/downstream/STS/STS{year}-en-test"
    return Task(
        name=f"sts{year}",
        kind="sts",
        metric="spearman",
        num_labels=None,
        label_names=None,
        splits={"test": (folder,)},
        default_split="test",
        reader=formats.read_senteval_sts,
        subset_reader=formats.read_senteval_sts_subsets,
        description=f"SemEval STS 20{year} (SentEval layout), all subsets present in the folder",
        score_range=STS_RANGE,
    )


def _glue_splits(folder: str, names: Sequence[str] = ("train", "dev", "test")) -> dict[str, tuple[str, ...]]:
    return {name: (f"glue/{folder}/{name}.tsv",) for name in names}


_SST = "senteval/downstream/SST"
_SICK = "senteval/downstream/SICK"
_SNLI = "senteval/downstream/SNLI"

_TASK_ENTRIES: dict[str, Task] = {
    task.name: task
    for task in [
        Task(
            name="stsb",
            kind="sts",
            metric="spearman",
            num_labels=None,
            label_names=None,
            splits={split: (f"stsb/original/sts-{split}.csv",) for split in ("train", "dev", "test")},
            default_split="test",
            reader=formats.read_stsb_csv,
            description="STS benchmark release (scores 0-5)",
            score_range=STS_RANGE,
        ),
        *(_sts_year(year) for year in (12, 13, 14, 15, 16)),
        Task(
            name="sickr",
            kind="sts",
            metric="spearman",
            num_labels=None,
            label_names=None,
            splits={
                "train": (f"{_SICK}/SICK_train.txt",),
                "dev": (f"{_SICK}/SICK_trial.txt",),
                "test": (f"{_SICK}/SICK_test_annotated.txt",),
            },
            default_split="test",
            reader=formats.read_sick,
            description="SICK relatedness (scores 1-5); dev is SICK_trial",
            score_range=SICK_RANGE,
        ),
        Task(
            name="stsb-glue",
            kind="regression",
            metric="pearson",
            num_labels=1,
            label_names=None,
            splits=_glue_splits("STS-B"),
            default_split="dev",
            reader=formats.read_glue_stsb,
            description="GLUE STS-B as regression (scores 0-5)",
            score_range=STS_RANGE,
        ),
        Task(
            name="sst2",
            kind="single",
            metric="accuracy",
            num_labels=2,
            label_names=("negative", "positive"),
            splits=_glue_splits("SST-2"),
            default_split="dev",
            reader=formats.read_glue_sst2,
            description="GLUE SST-2 sentiment",
        ),
        Task(
            name="sst5",
            kind="single",
            metric="accuracy",
            num_labels=5,
            label_names=("very negative", "negative", "neutral", "positive", "very positive"),
            splits={split: (f"{_SST}/fine/sentiment-{split}",) for split in ("train", "dev", "test")},
            default_split="test",
            reader=partial(formats.read_senteval_sst, num_labels=5),
            description="SentEval SST fine-grained sentiment",
        ),
        Task(
            name="mrpc",
            kind="pair",
            metric="f1",
            num_labels=2,
            label_names=("not_paraphrase", "paraphrase"),
            splits=_glue_splits("MRPC"),
            default_split="dev",
            reader=formats.read_glue_mrpc,
            description="GLUE MRPC paraphrase",
        ),
        Task(
            name="cola",
            kind="single",
            metric="mcc",
            num_labels=2,
            label_names=("unacceptable", "acceptable"),
            splits=_glue_splits("CoLA"),
            default_split="dev",
            reader=formats.read_glue_cola,
            description="GLUE CoLA acceptability",
        ),
        Task(
            name="rte",
            kind="pair",
            metric="accuracy",
            num_labels=2,
            label_names=("entailment", "not_entailment"),
            splits=_glue_splits("RTE"),
            default_split="dev",
            reader=formats.read_glue_rte,
            description="GLUE RTE entailment",
        ),
        Task(
            name="qnli",
            kind="pair",
            metric="accuracy",
            num_labels=2,
            label_names=("entailment", "not_entailment"),
            splits=_glue_splits("QNLI"),
            default_split="dev",
            reader=formats.read_glue_qnli,
            description="GLUE QNLI (only dev here: hold out part of it with holdout_split)",
        ),
        Task(
            name="qqp",
            kind="pair",
            metric="accuracy",
            num_labels=2,
            label_names=("not_duplicate", "duplicate"),
            splits={
                "train": ("glue/QQP/train.tsv",),
                "dev": ("glue/QQP/dev.tsv", "glue/QQP/subset_dev_23497.tsv"),
                "test": ("glue/QQP/test.tsv",),
            },
            default_split="dev",
            reader=formats.read_glue_qqp,
            description="GLUE QQP; dev is dev.tsv, else the 23,497-row subset",
        ),
        Task(
            name="snli",
            kind="pair",
            metric="accuracy",
            num_labels=3,
            label_names=("entailment", "neutral", "contradiction"),
            splits={split: (f"{_SNLI}/s1.{split}",) for split in ("train", "dev", "test")},
            default_split="test",
            reader=formats.read_senteval_snli,
            description="SNLI, SentEval layout (s1/s2/labels files)",
        ),
        Task(
            name="nli-triplets",
            kind="triplets",
            metric=None,
            num_labels=None,
            label_names=None,
            splits={"train": ("nli/nli_for_simcse.csv", "nli/snli_devtest_for_simcse.csv")},
            default_split="train",
            reader=formats.read_simcse_csv,
            description="SimCSE supervised triplets (anchor, entailment, contradiction)",
        ),
        Task(
            name="wiki1m",
            kind="sentences",
            metric=None,
            num_labels=None,
            label_names=None,
            splits={"train": ("wiki1m/wiki1m_for_simcse.txt", "wiki1m/wiki1m_for_simcse.head11914.txt")},
            default_split="train",
            reader=formats.read_sentences,
            description="SimCSE unsupervised Wikipedia sentences",
        ),
        Task(
            name="minbert-sst",
            kind="single",
            metric="accuracy",
            num_labels=5,
            label_names=("very negative", "negative", "neutral", "positive", "very positive"),
            splits={split: (f"minbert/ids-sst-{split}.csv",) for split in ("train", "dev")},
            default_split="dev",
            reader=formats.read_minbert_sst,
            description="CS224N minBERT SST-5",
        ),
        Task(
            name="minbert-sts",
            kind="regression",
            metric="pearson",
            num_labels=1,
            label_names=None,
            splits={split: (f"minbert/sts-{split}.csv",) for split in ("train", "dev")},
            default_split="dev",
            reader=formats.read_minbert_sts,
            description="CS224N minBERT STS (similarity 0-5)",
            score_range=STS_RANGE,
        ),
        Task(
            name="minbert-quora",
            kind="pair",
            metric="accuracy",
            num_labels=2,
            label_names=("not_duplicate", "duplicate"),
            splits={
                "train": ("minbert/quora-train.csv",),
                "dev": ("minbert/quora-dev.csv",),
            },
            default_split="dev",
            reader=partial(formats.read_minbert_quora, on_bad_label="skip"),
            description="CS224N minBERT Quora; rows with an empty label are skipped and counted",
        ),
    ]
}

TASKS: Registry[Task] = Registry("task", _TASK_ENTRIES, normalize=lambda name: name.strip().lower())
"""The benchmark tasks by name, case-insensitive (a :class:`~contrastext.runtime.registry.Registry`): a new task
is one ``Task(...)`` entry above."""


def task_names() -> list[str]:
    """The registered task names, sorted."""
    return TASKS.names()


def get_task(name: str) -> Task:
    """The task called ``name`` (case-insensitive); UnknownNameError lists the known names."""
    return TASKS.get(name)


def parse_task_spec(spec: str) -> tuple[Task, str]:
    """``"stsb:dev"`` -> (stsb task, "dev"); ``"stsb"`` -> (stsb task, its default split)."""
    name, _, split = spec.partition(":")
    task = get_task(name)
    split = split.strip() or task.default_split
    if split not in task.splits:
        raise UnknownNameError(
            f"task {task.name!r} has no split {split!r}; its splits: {', '.join(task.splits)}"
        )
    return task, split


def load_task(
    spec_or_task: str | Task,
    data_root: str | os.PathLike | None = None,
    split: str | None = None,
) -> TaskData:
    """Read one split of a task from the data root (``data_root``, else ``$CONTRASTEXT_DATA``).

    ``split`` picks the split when ``spec_or_task`` does not; naming two different splits is an error.
    A missing file raises MissingDataError naming the expected path(s) and where the root came from; a
    split without a single example (an empty file, a header only, every row skipped) raises EmptyDataError;
    a gold score outside the task's ``score_range`` raises DataFormatError naming the file and line.
    """
    task, split = _task_and_split(spec_or_task, split)
    root = resolve_data_root(data_root)
    path = _existing_path(task, split, root, from_argument=data_root is not None)
    options = {"score_range": task.score_range} if task.score_range is not None else {}
    if task.subset_reader is not None:
        subsets = task.subset_reader(path, **options)
        examples = [example for subset in subsets.values() for example in subset]
        skipped = sum(getattr(subset, "skipped", 0) for subset in subsets.values())
        _require_examples(task, split, path, examples, [])
        return TaskData(task, split, examples, dict(subsets), skipped, path)
    examples = task.reader(path, **options)
    _require_examples(task, split, path, examples, getattr(examples, "skipped_sources", []))
    return TaskData(task, split, examples, None, getattr(examples, "skipped", 0), path)


def _require_examples(task: Task, split: str, path: Path, examples: list, skipped: list[str]) -> None:
    """EmptyDataError naming the file when a split holds no example at all."""
    if examples:
        return
    if skipped:
        reason = f"every row was skipped ({len(skipped)}; first: {skipped[0]})"
    else:
        reason = "no example: the file is empty or holds a header only"
    raise EmptyDataError(f"{path}: {task.name}:{split}: {reason}")


def _task_and_split(spec_or_task: str | Task, split: str | None) -> tuple[Task, str]:
    if isinstance(spec_or_task, Task):
        task, chosen = spec_or_task, split or spec_or_task.default_split
    else:
        task, chosen = parse_task_spec(spec_or_task)
        if split is not None and ":" in spec_or_task and split != chosen:
            raise ContrastextError(f"task spec {spec_or_task!r} names split {chosen!r} but split={split!r} was also given")
        chosen = split or chosen
    if chosen not in task.splits:
        raise UnknownNameError(f"task {task.name!r} has no split {chosen!r}; its splits: {', '.join(task.splits)}")
    return task, chosen


def _existing_path(task: Task, split: str, root: Path, from_argument: bool) -> Path:
    candidates = [root / relative for relative in task.splits[split]]
    for candidate in candidates:
        if candidate.exists():
            return candidate
    expected = " or ".join(str(candidate) for candidate in candidates)
    how = "--data-root" if from_argument else f"${DATA_ROOT_VARIABLE}"
    raise MissingDataError(
        f"{task.name}:{split}: expected {expected}; the data root {root} comes from {how} "
        f"(set it with --data-root or ${DATA_ROOT_VARIABLE})"
    )


T = TypeVar("T")


def holdout_split(examples: Sequence[T], fraction: float, seed: int = 0) -> tuple[list[T], list[T]]:
    """Split one labelled split into (kept, held_out) for tasks with no second labelled split.

    For the QQP subset, minBERT Quora dev and QNLI dev. Fixed and seeded: the indices 0..n-1 are
    shuffled with ``random.Random(seed).shuffle``; the first ``round(fraction * n)`` shuffled indices
    are held out. Both parts keep the file order. The same (n, fraction, seed) always gives the same
    split, on every platform and Python version (``random.Random`` is a stable Mersenne Twister).
    Report the held-out size and the seed next to every number computed on it.

    >>> kept, held_out = holdout_split(list(range(10)), 0.2, seed=0)
    >>> len(kept), len(held_out)
    (8, 2)
    """
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"fraction must be between 0 and 1 (exclusive), not {fraction}")
    indices = list(range(len(examples)))
    random.Random(seed).shuffle(indices)
    held = set(indices[: round(fraction * len(examples))])
    kept = [example for index, example in enumerate(examples) if index not in held]
    held_out = [example for index, example in enumerate(examples) if index in held]
    return kept, held_out
