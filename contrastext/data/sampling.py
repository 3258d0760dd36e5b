"""Seeded sampling: batch orders, few-shot subsets, label noise and multi-task schedules.

Everything here is a pure function of a seed and a position, so a run can stop and resume anywhere:

- batch samplers (``batches(epoch) -> list[list[int]]``): :class:`RandomBatchSampler` (a fresh
  permutation per epoch) and :class:`LengthGroupedBatchSampler` (similar lengths together, as in Hugging
  Face's ``group_by_length``: sort inside mega-batches of ``mega_batches × batch_size``, then shuffle
  the batch order), and :class:`MultiTaskBatchSampler` (every batch from one task), :class:`JointTaskBatchSampler` (every batch
  holds every task, for PCGrad);
- :func:`few_shot` keeps N examples in total, following the label distribution (Gunel et al. 2021, §4.1),
  or N per class; :func:`stratified_indices` is its draw (also the SCL validation / test split);
- :func:`flip_labels` flips a share p of the labels to another class and says which;
- :class:`TaskSampler` picks the task of each batch: ``sequential`` (all epochs of one task, then the
  next), ``round_robin`` (an explicit task order, visited every epoch) or ``proportional`` (MT-DNN, Liu
  et al. 2019: the tasks' batches merged, ×wᵢ per task, and shuffled; without replacement within an epoch).
  Its state is its position.

Example::

    >>> sampler = TaskSampler("proportional", num_batches=[100, 10], seed=0, weights=[1.0, 2.0])
    >>> len(sampler), sum(step.task for step in sampler.epoch(0))   # 100 batches of task 0, 20 of task 1
    (120, 20)
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace
from typing import NamedTuple

import numpy as np
import torch

from contrastext.data.examples import Example
from contrastext.errors import ConfigError
from contrastext.runtime.seeding import derive_seed, make_generator

TASK_STRATEGIES = ("sequential", "round_robin", "proportional")
ROUND_ROBIN_UNITS = ("pass", "batch")


def _rng(*parts: int) -> np.random.Generator:
    return np.random.default_rng(derive_seed(*parts))


def _chunk(indices: list[int], batch_size: int, drop_last: bool) -> list[list[int]]:
    batches = [indices[start : start + batch_size] for start in range(0, len(indices), batch_size)]
    if drop_last and len(batches) > 1 and len(batches[-1]) < batch_size:
        batches.pop()
    return batches


class RandomBatchSampler:
    """A new seeded permutation per epoch, cut into batches (the last short one dropped if asked)."""

    def __init__(self, num_examples: int, batch_size: int, seed: int, drop_last: bool = True) -> None:
        if num_examples < 1 or batch_size < 1:
            raise ValueError(f"need examples and a positive batch size, got {num_examples} and {batch_size}")
        self.num_examples, self.batch_size, self.seed, self.drop_last = (
            num_examples,
            batch_size,
            seed,
            drop_last,
        )

    def batches(self, epoch: int) -> list[list[int]]:
        order = torch.randperm(self.num_examples, generator=make_generator(self.seed, epoch)).tolist()
        return _chunk(order, self.batch_size, self.drop_last)

    def __len__(self) -> int:
        return len(self.batches(0))


class LengthGroupedBatchSampler(RandomBatchSampler):
    """Batches of similar lengths (less padding); the order of the batches is still shuffled."""

    def __init__(
        self,
        lengths: Sequence[int],
        batch_size: int,
        seed: int,
        drop_last: bool = True,
        mega_batches: int = 50,
    ) -> None:
        super().__init__(len(lengths), batch_size, seed, drop_last)
        self.lengths = list(lengths)
        self.mega_size = mega_batches * batch_size

    def batches(self, epoch: int) -> list[list[int]]:
        order = torch.randperm(self.num_examples, generator=make_generator(self.seed, epoch)).tolist()
        grouped = []
        for start in range(0, len(order), self.mega_size):
            mega = order[start : start + self.mega_size]
            grouped.extend(sorted(mega, key=lambda index: -self.lengths[index]))
        batches = _chunk(grouped, self.batch_size, self.drop_last)
        shuffle = torch.randperm(len(batches), generator=make_generator(self.seed, epoch, 1)).tolist()
        return [batches[index] for index in shuffle]


def stratified_counts(labels: Sequence, total: int) -> dict:
    """``total`` shared among the labels in proportion to their counts in ``labels`` (largest remainder).

    Label c with n_c of the n rows gets ⌊total·n_c/n⌋, and the rows still missing go one each to the labels
    with the largest remainders (total·n_c mod n; ties: the larger class, then the label's order). Exact
    integer arithmetic, so the counts sum to ``total`` and no label gets more rows than it has.
    """
    counts: dict = defaultdict(int)
    for label in labels:
        counts[label] += 1
    size = len(labels)
    if not 0 <= total <= size:
        raise ValueError(f"cannot draw {total} of {size} rows")
    if size == 0:
        return {}
    shares = {label: total * count // size for label, count in counts.items()}
    order = sorted(counts, key=lambda label: (-(total * counts[label] % size), -counts[label], str(label)))
    for label in order[: total - sum(shares.values())]:
        shares[label] += 1
    return dict(sorted(shares.items(), key=lambda item: str(item[0])))


def stratified_indices(labels: Sequence, total: int, seed: int) -> list[int]:
    """``total`` positions of ``labels`` drawn without replacement with ``seed``, each label's count from
    :func:`stratified_counts` (the sample follows the label distribution); sorted."""
    by_label: dict = defaultdict(list)
    for index, label in enumerate(labels):
        by_label[label].append(index)
    rng = _rng(seed)
    chosen: list[int] = []
    for label, count in stratified_counts(labels, total).items():
        if count:
            chosen.extend(rng.choice(by_label[label], size=count, replace=False).tolist())
    return sorted(chosen)


def few_shot(examples: Sequence[Example], n: int, seed: int, per_class: bool = False) -> list[Example]:
    """A seeded few-shot training set, in the order the examples were read.

    Default: ``n`` examples IN TOTAL whose label counts follow the label distribution of ``examples``
    (:func:`stratified_counts`) — Gunel et al., ICLR 2021, §4.1: "we sample 10 different training set samples
    based on the total number of examples N ..., taking the label distribution of the original training set
    into account". ``per_class=True``: ``n`` examples of EACH label (a balanced draw, n × classes in all).
    """
    labels = []
    for index, example in enumerate(examples):
        if example.label is None:
            raise ConfigError(
                f"data.few_shot needs labelled examples; {example.source or index} has no label"
            )
        labels.append(example.label)
    if not per_class:
        if n > len(examples):
            raise ConfigError(f"data.few_shot={n}: only {len(examples)} labelled training examples")
        return [examples[index] for index in stratified_indices(labels, n, seed)]
    by_label: dict = defaultdict(list)
    for index, label in enumerate(labels):
        by_label[label].append(index)
    short = {label: len(items) for label, items in by_label.items() if len(items) < n}
    if short:
        raise ConfigError(
            f"data.few_shot={n} per class: too few examples for class(es) "
            + ", ".join(f"{label!r} ({count})" for label, count in sorted(short.items(), key=str))
        )
    rng = _rng(seed)
    chosen = []
    for label in sorted(by_label, key=str):
        chosen.extend(rng.choice(by_label[label], size=n, replace=False).tolist())
    return [examples[index] for index in sorted(chosen)]


def flip_labels(
    examples: Sequence[Example], share: float, seed: int, num_classes: int | None = None
) -> tuple[list[Example], list[int]]:
    """Flip ``round(share · n)`` labels, each to a different class drawn uniformly; returns (examples, flipped).

    The classes are ``range(num_classes)`` when given, else the labels present.
    """
    if not 0.0 <= share <= 1.0:
        raise ConfigError(f"data.label_noise must be in [0, 1], got {share}")
    labels = [example.label for example in examples]
    if any(label is None for label in labels):
        raise ConfigError("data.label_noise needs labelled examples")
    classes = list(range(num_classes)) if num_classes is not None else sorted(set(labels), key=str)
    if len(classes) < 2:
        raise ConfigError(f"data.label_noise needs at least two classes, got {classes}")
    rng = _rng(seed)
    flipped = sorted(rng.choice(len(examples), size=round(share * len(examples)), replace=False).tolist())
    result = list(examples)
    for index in flipped:
        others = [label for label in classes if label != labels[index]]
        result[index] = replace(result[index], label=others[int(rng.integers(len(others)))])
    return result, flipped


class TaskStep(NamedTuple):
    """One batch of a multi-task schedule: its task, the shuffled pass of that task it comes from
    (``round``, a key unique within the task) and its position in that pass (``index``)."""

    task: int
    round: tuple[int, int]
    index: int


class TaskSampler:
    """Which task each batch trains on, epoch by epoch: a pure function of (seed, epoch).

    ``num_batches[t]`` = n_t, the batches of one *pass* (a shuffled visit of every example) over task t.
    A task's k-th batch inside an epoch (inside the whole run for ``sequential``) is batch k mod n_t of
    its pass ⌊k / n_t⌋: nothing repeats within a pass.

    - ``sequential``: the entries of ``order`` one after the other, each for ``epochs`` passes of its task,
      over the WHOLE run ("one task at a time for all epochs"); epoch e is steps [e·N, (e+1)·N) of that
      run, N = Σ_{t ∈ order} n_t (past the run's end it starts again).
    - ``round_robin``: every epoch visits ``order`` (repeats allowed, e.g. ``[0, 2, 0, 2, 1]``);
      ``unit="pass"`` trains a whole pass of the entry's task before the next entry, ``unit="batch"`` one
      batch of each unfinished entry in turn.
    - ``proportional`` (MT-DNN, Liu et al. 2019, Algorithm 1: merge the tasks' batches, shuffle): an epoch
      holds c_t = round(w_t · n_t) batches of task t in a seeded random order (w_t = 2: every batch twice,
      from two passes). With a temperature T ≠ 1, c_t = round(N_w · p_t), p_t ∝ (w_t · n_t)^(1/T),
      N_w = Σ_t w_t · n_t. ``replacement=True`` draws each of Σ_t n_t steps independently with P(t) = p_t.

    ``epoch(e)`` lists the :class:`TaskStep` of every batch of epoch e; iterating yields the task of step
    after step (its state is its position).
    """

    def __init__(
        self,
        strategy: str,
        num_batches: Sequence[int],
        seed: int = 0,
        temperature: float = 1.0,
        weights: Sequence[float] | None = None,
        order: Sequence[int] | None = None,
        epochs: float = 1.0,
        unit: str = "pass",
        replacement: bool = False,
    ) -> None:
        if strategy not in TASK_STRATEGIES:
            raise ConfigError(
                f"data.task_sampling: unknown {strategy!r}; known: {', '.join(TASK_STRATEGIES)}"
            )
        if not num_batches or any(count < 1 for count in num_batches):
            raise ValueError(f"every task needs at least one batch, got {list(num_batches)}")
        if weights is not None and len(weights) != len(num_batches):
            raise ConfigError(f"data.task_weights has {len(weights)} values for {len(num_batches)} tasks")
        if weights is not None and any(weight <= 0 for weight in weights):
            raise ConfigError(f"data.task_weights must be > 0, got {list(weights)}")
        if temperature <= 0:
            raise ConfigError(f"data.task_temperature must be > 0, got {temperature}")
        if unit not in ROUND_ROBIN_UNITS:
            raise ConfigError(f"round-robin unit: unknown {unit!r}; known: {', '.join(ROUND_ROBIN_UNITS)}")
        if epochs <= 0:
            raise ValueError(f"epochs must be > 0, got {epochs}")
        self.strategy, self.seed, self.unit, self.replacement = strategy, seed, unit, bool(replacement)
        self.num_batches = list(num_batches)
        self.order = self._check_order(order)
        self.epochs = float(epochs)
        sizes = np.asarray(self.num_batches, dtype=np.float64) * np.asarray(weights or [1.0] * len(num_batches))
        scaled = sizes ** (1.0 / temperature)
        self.probabilities = scaled / scaled.sum()
        self.counts = [max(1, round(float(sizes.sum() * p))) for p in self.probabilities]
        self._run = self._sequential_run() if strategy == "sequential" else []
        self._cached: tuple[int, list[TaskStep]] | None = None
        self.position = 0

    def _check_order(self, order: Sequence[int] | None) -> list[int]:
        tasks = range(len(self.num_batches))
        if order is None:
            return list(tasks)
        order = [int(task) for task in order]
        if not order or any(task not in tasks for task in order):
            raise ValueError(f"task order {order}: expected task indices in 0..{len(tasks) - 1}")
        missing = sorted(set(tasks) - set(order))
        if missing:
            raise ValueError(f"task order {order} never trains task(s) {missing}")
        return order

    def __len__(self) -> int:
        """Steps of one epoch."""
        if self.strategy == "proportional":
            return sum(self.num_batches) if self.replacement else sum(self.counts)
        return sum(self.num_batches[task] for task in self.order)

    def epoch(self, epoch: int) -> list[TaskStep]:
        """The steps of epoch ``epoch`` (pure: does not move the sampler)."""
        if self._cached is None or self._cached[0] != epoch:
            self._cached = (epoch, self._build_epoch(epoch))
        return self._cached[1]

    def _build_epoch(self, epoch: int) -> list[TaskStep]:
        if self.strategy == "sequential":
            size = len(self)
            steps = []
            for position in range(epoch * size, (epoch + 1) * size):
                cycle, within = divmod(position, len(self._run))
                step = self._run[within]
                steps.append(TaskStep(step.task, (cycle, step.round[1]), step.index))
            return steps
        if self.strategy == "round_robin":
            return self._numbered(self._round_robin_tasks(), epoch)
        if self.replacement:
            draws = _rng(self.seed, epoch).choice(len(self.probabilities), size=len(self), p=self.probabilities)
            return self._numbered([int(task) for task in draws], epoch)
        merged = [task for task, count in enumerate(self.counts) for _ in range(count)]
        shuffle = torch.randperm(len(merged), generator=make_generator(self.seed, epoch)).tolist()
        return self._numbered([merged[index] for index in shuffle], epoch)

    def _sequential_run(self) -> list[TaskStep]:
        """The whole run: every entry of the order for ``epochs`` passes (at least one batch)."""
        tasks = [t for t in self.order for _ in range(max(1, round(self.epochs * self.num_batches[t])))]
        return self._numbered(tasks, 0)

    def _round_robin_tasks(self) -> list[int]:
        if self.unit == "pass":
            return [task for task in self.order for _ in range(self.num_batches[task])]
        tasks, left = [], [self.num_batches[task] for task in self.order]
        while any(left):
            for entry, task in enumerate(self.order):
                if left[entry]:
                    tasks.append(task)
                    left[entry] -= 1
        return tasks

    def _numbered(self, tasks: Sequence[int], group: int) -> list[TaskStep]:
        """Each task's k-th step here is batch k mod n_t of its pass (group, ⌊k / n_t⌋)."""
        used = [0] * len(self.num_batches)
        steps = []
        for task in tasks:
            passes, index = divmod(used[task], self.num_batches[task])
            steps.append(TaskStep(task, (group, passes), index))
            used[task] += 1
        return steps

    def task_at(self, position: int) -> int:
        """The task of step ``position`` counted over consecutive epochs (pure)."""
        epoch, index = divmod(position, len(self))
        return self.epoch(epoch)[index].task

    def __iter__(self) -> TaskSampler:
        return self

    def __next__(self) -> int:
        task = self.task_at(self.position)
        self.position += 1
        return task

    def state_dict(self) -> dict:
        return {"position": self.position}

    def load_state_dict(self, state: dict) -> None:
        self.position = int(state["position"])


def _batch_count(size: int, batch_size: int, drop_last: bool) -> int:
    """``len(_chunk(range(size), batch_size, drop_last))`` without building it."""
    full, rest = divmod(size, batch_size)
    return full + (1 if rest and not (drop_last and full) else 0)


class MultiTaskBatchSampler:
    """Batches over concatenated task datasets; each batch holds one task's examples only.

    ``task_sizes[i]`` examples of task i sit at indices ``sum(task_sizes[:i]) ...``. A :class:`TaskSampler`
    (``strategy`` and the keyword arguments after it) orders the batches; each of its steps is batch
    ``index`` of the seeded permutation ``round`` of its task, so a pass never repeats an example.
    """

    def __init__(
        self,
        task_sizes: Sequence[int],
        batch_size: int,
        strategy: str,
        seed: int,
        temperature: float = 1.0,
        weights: Sequence[float] | None = None,
        drop_last: bool = True,
        order: Sequence[int] | None = None,
        epochs: float = 1.0,
        unit: str = "pass",
        replacement: bool = False,
    ) -> None:
        if not task_sizes or any(size < 1 for size in task_sizes) or batch_size < 1:
            raise ValueError(f"need examples in every task and a positive batch size, got {list(task_sizes)}, {batch_size}")
        self.sizes, self.batch_size, self.seed, self.drop_last = list(task_sizes), batch_size, seed, drop_last
        self.offsets = np.concatenate([[0], np.cumsum(task_sizes)[:-1]]).astype(int).tolist()
        self.num_batches = [_batch_count(size, batch_size, drop_last) for size in task_sizes]
        self.schedule = TaskSampler(
            strategy, self.num_batches, seed, temperature, weights, order, epochs, unit, replacement
        )

    def _pass(self, task: int, key: tuple[int, int]) -> list[list[int]]:
        order = torch.randperm(self.sizes[task], generator=make_generator(self.seed, task, *key)).tolist()
        return [[self.offsets[task] + index for index in batch] for batch in _chunk(order, self.batch_size, self.drop_last)]

    def batches(self, epoch: int) -> list[list[int]]:
        passes: dict[tuple[int, tuple[int, int]], list[list[int]]] = {}
        result = []
        for step in self.schedule.epoch(epoch):
            key = (step.task, step.round)
            if key not in passes:
                passes[key] = self._pass(step.task, step.round)
            result.append(passes[key][step.index])
        return result

    def __len__(self) -> int:
        return len(self.schedule)


class JointTaskBatchSampler:
    """Every batch holds ``batch_size`` examples of EACH task (for PCGrad); shorter tasks wrap around.

    ``batches(epoch)`` is a pure function of (seed, epoch), like the trainer's other samplers; an epoch
    has as many batches as the task with the most.
    """

    def __init__(self, task_sizes: Sequence[int], batch_size: int, seed: int, drop_last: bool = True) -> None:
        self.samplers = [
            RandomBatchSampler(size, batch_size, derive_seed(seed, task), drop_last)
            for task, size in enumerate(task_sizes)
        ]
        self.offsets = np.concatenate([[0], np.cumsum(task_sizes)[:-1]]).astype(int).tolist()

    def batches(self, epoch: int) -> list[list[int]]:
        per_task = [
            [[offset + index for index in batch] for batch in sampler.batches(epoch)]
            for offset, sampler in zip(self.offsets, self.samplers, strict=True)
        ]
        count = max(len(batches) for batches in per_task)
        return [[i for batches in per_task for i in batches[k % len(batches)]] for k in range(count)]

    def __len__(self) -> int:
        return len(self.batches(0))
