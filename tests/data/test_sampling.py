"""Seeded samplers: batches, few-shot, label noise, task schedules."""

from __future__ import annotations

from collections import Counter

import pytest

from contrastext.data.examples import Example
from contrastext.data.sampling import (
    LengthGroupedBatchSampler,
    MultiTaskBatchSampler,
    RandomBatchSampler,
    TaskSampler,
    few_shot,
    flip_labels,
)
from contrastext.errors import ConfigError


def test_random_batches_are_seeded_per_epoch():
    sampler = RandomBatchSampler(10, 4, seed=1, drop_last=True)
    first = sampler.batches(0)
    assert first == RandomBatchSampler(10, 4, seed=1).batches(0)
    assert first != sampler.batches(1)
    assert [len(batch) for batch in first] == [4, 4]
    assert [len(b) for b in RandomBatchSampler(10, 4, seed=1, drop_last=False).batches(0)] == [4, 4, 2]


def test_length_grouped_batches_have_similar_lengths():
    lengths = [i % 50 for i in range(1000)]
    sampler = LengthGroupedBatchSampler(lengths, 10, seed=0, mega_batches=100)
    batches = sampler.batches(0)
    assert sorted(i for batch in batches for i in batch) == list(range(1000))
    spread = sum(max(lengths[i] for i in b) - min(lengths[i] for i in b) for b in batches) / len(batches)
    assert spread < 2
    assert batches == LengthGroupedBatchSampler(lengths, 10, seed=0, mega_batches=100).batches(0)


def _labelled(counts: dict[int, int]) -> list[Example]:
    return [Example((f"{label}-{i}",), label) for label, count in counts.items() for i in range(count)]


def test_few_shot_takes_n_per_class_and_errors_when_short():
    examples = _labelled({0: 20, 1: 30, 2: 8})
    chosen = few_shot(examples, 8, seed=0)
    assert Counter(e.label for e in chosen) == {0: 8, 1: 8, 2: 8}
    assert chosen == few_shot(examples, 8, seed=0) and chosen != few_shot(examples, 8, seed=1)
    with pytest.raises(ConfigError, match=r"data.few_shot=10: too few examples for class\(es\) 2 \(8\)"):
        few_shot(examples, 10, seed=0)


def test_flip_labels_flips_exactly_the_share_to_other_classes():
    examples = _labelled({0: 50, 1: 50, 2: 100})
    noisy, flipped = flip_labels(examples, 0.2, seed=0)
    assert len(flipped) == 40
    changed = [i for i, (a, b) in enumerate(zip(examples, noisy, strict=True)) if a.label != b.label]
    assert changed == flipped
    assert flip_labels(examples, 0.2, seed=0)[1] == flipped != flip_labels(examples, 0.2, seed=1)[1]


def test_task_samplers():
    assert list(_take(TaskSampler("sequential", [2, 1]), 4)) == [0, 0, 1, 0]
    assert list(_take(TaskSampler("round_robin", [3, 1, 2]), 6)) == [0, 1, 2, 0, 2, 0]
    proportional = TaskSampler("proportional", [90, 10], seed=0)
    counts = Counter(_take(proportional, 2000))
    assert counts[0] / 2000 == pytest.approx(0.9, abs=0.03)
    flattened = Counter(_take(TaskSampler("proportional", [90, 10], seed=0, temperature=1e6), 2000))
    assert flattened[0] / 2000 == pytest.approx(0.5, abs=0.05)
    with pytest.raises(ConfigError, match="unknown 'random'"):
        TaskSampler("random", [1])


def test_task_sampler_resumes_from_its_position():
    sampler = TaskSampler("proportional", [5, 5, 5], seed=3)
    head = _take(sampler, 7)
    state = sampler.state_dict()
    rest = _take(sampler, 10)
    again = TaskSampler("proportional", [5, 5, 5], seed=3)
    again.load_state_dict(state)
    assert state == {"position": 7} and _take(again, 10) == rest and len(head) == 7


def test_multitask_batches_hold_one_task_each():
    sampler = MultiTaskBatchSampler([12, 4], batch_size=4, strategy="round_robin", seed=0)
    batches = sampler.batches(0)
    assert len(batches) == 4
    assert [all(i >= 12 for i in batch) for batch in batches] == [False, True, False, False]
    assert batches == sampler.batches(0) and batches != sampler.batches(1)


def _take(sampler: TaskSampler, count: int) -> list[int]:
    return [next(sampler) for _ in range(count)]
