"""Seeded sampling: batch orders, few-shot subsets, label noise and multi-task schedules.

Everything here is a pure function of a seed and a position, so a run can stop and resume anywhere:

- batch samplers (``batches(epoch) -> list[list[int]]``): :class:`RandomBatchSampler` (a fresh
  permutation per epoch) and :class:`LengthGroupedBatchSampler` (similar lengths together, as in Hugging
  Face's ``group_by_length``: sort inside mega-batches of ``mega_batches × batch_size``, then shuffle
  the batch order), and :class:`MultiTaskBatchSampler` (every batch from one task), :class:`JointTaskBatchSampler` (every batch
  holds every task, for PCGrad);
- :func:`few_shot` keeps N examples per class (Gunel et al. 2021's few-shot setting);
- :func:`flip_labels` flips a share p of the labels to another class and says which;
- :class:`TaskSampler` picks the task of each step: ``sequential`` (task after task), ``round_robin``
  (one batch of each in turn, exhausted tasks skipped) or ``proportional`` (MT-DNN, Liu et al. 2019:
  P(task i) ∝ (wᵢ · nᵢ)^(1/T), nᵢ = its number of batches). Its state is its position.

Example::

    >>> sampler = TaskSampler("proportional", num_batches=[100, 10], seed=0)
    >>> [next(sampler) for _ in range(5)]   # mostly task 0
    >>> sampler.state_dict()
    {'position': 5}
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import torch

from contrastext.data.examples import Example
from contrastext.errors import ConfigError
from contrastext.runtime.seeding import derive_seed, make_generator

TASK_STRATEGIES = ("sequential", "round_robin", "proportional")


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


def few_shot(examples: Sequence[Example], per_class: int, seed: int) -> list[Example]:
    """``per_class`` examples of each label, chosen with ``seed``; in the order they were read."""
    by_label: dict = defaultdict(list)
    for index, example in enumerate(examples):
        if example.label is None:
            raise ConfigError(
                f"data.few_shot needs labelled examples; {example.source or index} has no label"
            )
        by_label[example.label].append(index)
    short = {label: len(items) for label, items in by_label.items() if len(items) < per_class}
    if short:
        raise ConfigError(
            f"data.few_shot={per_class}: too few examples for class(es) "
            + ", ".join(f"{label!r} ({count})" for label, count in sorted(short.items(), key=str))
        )
    rng = _rng(seed)
    chosen = []
    for label in sorted(by_label, key=str):
        chosen.extend(rng.choice(by_label[label], size=per_class, replace=False).tolist())
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


class TaskSampler:
    """Which task each step trains on; seeded, and resumable from its ``position``."""

    def __init__(
        self,
        strategy: str,
        num_batches: Sequence[int],
        seed: int = 0,
        temperature: float = 1.0,
        weights: Sequence[float] | None = None,
    ) -> None:
        if strategy not in TASK_STRATEGIES:
            raise ConfigError(
                f"data.task_sampling: unknown {strategy!r}; known: {', '.join(TASK_STRATEGIES)}"
            )
        if not num_batches or any(count < 1 for count in num_batches):
            raise ValueError(f"every task needs at least one batch, got {list(num_batches)}")
        if weights is not None and len(weights) != len(num_batches):
            raise ConfigError(f"data.task_weights has {len(weights)} values for {len(num_batches)} tasks")
        if temperature <= 0:
            raise ConfigError(f"data.task_temperature must be > 0, got {temperature}")
        self.strategy, self.seed = strategy, seed
        self.num_batches = list(num_batches)
        sizes = np.asarray(self.num_batches, dtype=np.float64) * np.asarray(
            weights or [1.0] * len(num_batches)
        )
        scaled = sizes ** (1.0 / temperature)
        self.probabilities = scaled / scaled.sum()
        self.cycle = self._cycle()
        self.position = 0

    def _cycle(self) -> list[int]:
        """One pass over every batch of every task, for the deterministic strategies."""
        if self.strategy == "sequential":
            return [task for task, count in enumerate(self.num_batches) for _ in range(count)]
        order, left = [], list(self.num_batches)
        while any(left):
            for task in range(len(left)):
                if left[task]:
                    order.append(task)
                    left[task] -= 1
        return order

    def task_at(self, position: int) -> int:
        """The task of step ``position`` (pure: does not move the sampler)."""
        if self.strategy == "proportional":
            return int(_rng(self.seed, position).choice(len(self.probabilities), p=self.probabilities))
        return self.cycle[position % len(self.cycle)]

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


class MultiTaskBatchSampler:
    """Batches over concatenated task datasets; each batch holds one task's examples only.

    ``task_sizes[i]`` examples of task i sit at indices ``sum(task_sizes[:i]) ...``; an epoch has as many
    batches as all tasks together, ordered by a :class:`TaskSampler` (a proportional draw past a task's
    last batch wraps around to its first).
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
    ) -> None:
        self.samplers = [
            RandomBatchSampler(size, batch_size, derive_seed(seed, task), drop_last)
            for task, size in enumerate(task_sizes)
        ]
        self.offsets = np.concatenate([[0], np.cumsum(task_sizes)[:-1]]).astype(int).tolist()
        self.strategy, self.seed, self.temperature, self.weights = strategy, seed, temperature, weights
        self.num_batches = [len(sampler) for sampler in self.samplers]
        TaskSampler(strategy, self.num_batches, seed, temperature, weights)  # validate now

    def batches(self, epoch: int) -> list[list[int]]:
        per_task = [
            [[self.offsets[task] + index for index in batch] for batch in sampler.batches(epoch)]
            for task, sampler in enumerate(self.samplers)
        ]
        tasks = TaskSampler(
            self.strategy, self.num_batches, derive_seed(self.seed, epoch), self.temperature, self.weights
        )
        used = [0] * len(per_task)
        result = []
        for _ in range(sum(self.num_batches)):
            task = next(tasks)
            result.append(per_task[task][used[task] % len(per_task[task])])
            used[task] += 1
        return result

    def __len__(self) -> int:
        return sum(self.num_batches)


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
