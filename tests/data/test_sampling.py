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
    stratified_counts,
    stratified_indices,
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


def test_few_shot_draws_n_in_total_following_the_label_distribution():
    """Gunel et al. §4.1: N examples in total, "taking the label distribution of the original training set
    into account". 10 of {0: 20, 1: 30, 2: 8}: quotas 3.45, 5.17, 1.38 -> 3, 5, 1 and the missing row to the
    largest remainder (class 0)."""
    examples = _labelled({0: 20, 1: 30, 2: 8})
    chosen = few_shot(examples, 10, seed=0)
    assert Counter(e.label for e in chosen) == {0: 4, 1: 5, 2: 1}
    assert chosen == few_shot(examples, 10, seed=0) and chosen != few_shot(examples, 10, seed=1)
    assert chosen == [e for e in examples if e in chosen]  # the order they were read
    sst2_like = _labelled({0: 29780, 1: 37569})  # SST-2 train's label counts
    assert Counter(e.label for e in few_shot(sst2_like, 20, seed=3)) == {0: 9, 1: 11}
    with pytest.raises(ConfigError, match=r"data.few_shot=59: only 58 labelled training examples"):
        few_shot(examples, 59, seed=0)


def test_few_shot_per_class_takes_n_of_each_label_and_errors_when_short():
    examples = _labelled({0: 20, 1: 30, 2: 8})
    chosen = few_shot(examples, 8, seed=0, per_class=True)
    assert Counter(e.label for e in chosen) == {0: 8, 1: 8, 2: 8}
    assert chosen == few_shot(examples, 8, seed=0, per_class=True)
    assert chosen != few_shot(examples, 8, seed=1, per_class=True)
    with pytest.raises(ConfigError, match=r"data.few_shot=10 per class: too few examples for class\(es\) 2 \(8\)"):
        few_shot(examples, 10, seed=0, per_class=True)


@pytest.mark.parametrize(
    ("counts", "total", "expected"),
    [
        ({0: 428, 1: 444}, 436, {0: 214, 1: 222}),  # SST-2 dev, halved: exact quotas
        ({0: 214, 1: 222}, 100, {0: 49, 1: 51}),  # quotas 49.08, 50.92
        ({"a": 1, "b": 1, "c": 1}, 2, {"a": 1, "b": 1, "c": 0}),  # equal remainders: label order
        ({0: 5, 1: 1}, 6, {0: 5, 1: 1}),  # everything
        ({0: 3, 1: 9}, 0, {0: 0, 1: 0}),
    ],
)
def test_stratified_counts_are_largest_remainder_quotas(counts, total, expected):
    labels = [label for label, count in counts.items() for _ in range(count)]
    assert stratified_counts(labels, total) == expected
    drawn = stratified_indices(labels, total, seed=5)
    assert drawn == sorted(set(drawn)) and len(drawn) == total
    assert Counter(labels[i] for i in drawn) == {label: n for label, n in expected.items() if n}
    with pytest.raises(ValueError, match="cannot draw"):
        stratified_counts(labels, len(labels) + 1)


def test_flip_labels_flips_exactly_the_share_to_other_classes():
    examples = _labelled({0: 50, 1: 50, 2: 100})
    noisy, flipped = flip_labels(examples, 0.2, seed=0)
    assert len(flipped) == 40
    changed = [i for i, (a, b) in enumerate(zip(examples, noisy, strict=True)) if a.label != b.label]
    assert changed == flipped
    assert flip_labels(examples, 0.2, seed=0)[1] == flipped != flip_labels(examples, 0.2, seed=1)[1]


def _task_of(index: int, sizes: list[int]) -> int:
    """The task whose examples sit at ``index`` of the concatenated datasets."""
    bound = 0
    for task, size in enumerate(sizes):
        bound += size
        if index < bound:
            return task
    raise IndexError(index)


def _per_task(batches: list[list[int]], sizes: list[int]) -> dict[int, list[int]]:
    """Every example index each task's batches visit, in order; each batch holds one task only."""
    seen: dict[int, list[int]] = {task: [] for task in range(len(sizes))}
    for batch in batches:
        tasks = {_task_of(index, sizes) for index in batch}
        assert len(tasks) == 1, batch
        seen[tasks.pop()].extend(batch)
    return seen


def test_proportional_epoch_merges_every_batch_once_and_shuffles():
    # MT-DNN (Liu et al. 2019, Algorithm 1): merge all datasets' batches, shuffle, visit each once.
    sizes = [40, 12, 20]
    sampler = MultiTaskBatchSampler(sizes, batch_size=4, strategy="proportional", seed=0)
    batches = sampler.batches(0)
    assert len(batches) == len(sampler) == 10 + 3 + 5
    seen = _per_task(batches, sizes)
    assert sorted(seen[0]) == list(range(40))  # without replacement: every example exactly once
    assert sorted(seen[1]) == list(range(40, 52))
    assert sorted(seen[2]) == list(range(52, 72))
    tasks = [_task_of(batch[0], sizes) for batch in batches]
    assert tasks != sorted(tasks)  # shuffled, not task after task
    assert batches == MultiTaskBatchSampler(sizes, 4, "proportional", seed=0).batches(0)  # pure in (seed, epoch)
    assert batches != sampler.batches(1)


def test_task_weights_repeat_or_cut_a_tasks_pass():
    sizes = [40, 12, 20]
    sampler = MultiTaskBatchSampler(sizes, batch_size=4, strategy="proportional", seed=1, weights=[1.0, 2.0, 0.6])
    batches = sampler.batches(0)
    assert len(batches) == 10 + 6 + 3  # round(w_t · n_t) batches of task t: 1·10, 2·3, 0.6·5
    seen = _per_task(batches, sizes)
    assert Counter(seen[1]) == {index: 2 for index in range(40, 52)}  # 2x: every example twice (two passes)
    assert sorted(seen[1][:12]) == list(range(40, 52)) and seen[1][:12] != seen[1][12:]
    assert len(seen[2]) == 12 and len(set(seen[2])) == 12  # 3 of a pass's 5 batches, no repeats
    with pytest.raises(ConfigError, match="task_weights"):
        MultiTaskBatchSampler(sizes, 4, "proportional", seed=0, weights=[1.0, 2.0])
    with pytest.raises(ConfigError, match="task_weights must be > 0"):
        MultiTaskBatchSampler(sizes, 4, "proportional", seed=0, weights=[1.0, 0.0, 1.0])


def test_round_robin_visits_the_order_list_every_epoch():
    sizes = [8, 4, 6]  # batch 2: n = 4, 2, 3 batches
    order = [0, 2, 0, 2, 1]  # the report's Exp 3: SST, STS, SST, STS, QQP
    sampler = MultiTaskBatchSampler(sizes, batch_size=2, strategy="round_robin", seed=0, order=order)
    batches = sampler.batches(0)
    tasks = [_task_of(batch[0], sizes) for batch in batches]
    assert tasks == [0] * 4 + [2] * 3 + [0] * 4 + [2] * 3 + [1] * 2  # a whole pass per entry
    assert sorted(sum(batches[:4], [])) == list(range(8)) == sorted(sum(batches[7:11], []))
    assert batches[:4] != batches[7:11]  # the second SST entry is a fresh pass
    assert [_task_of(b[0], sizes) for b in sampler.batches(1)] == tasks
    by_batch = TaskSampler("round_robin", [4, 2, 3], order=order, unit="batch").epoch(0)
    assert [step.task for step in by_batch] == [0, 2, 0, 2, 1, 0, 2, 0, 2, 1, 0, 2, 0, 2, 0, 0]
    assert [step.task for step in TaskSampler("round_robin", [3, 1, 2]).epoch(0)] == [0, 0, 0, 1, 2, 2]
    with pytest.raises(ValueError, match=r"never trains task\(s\) \[1\]"):
        TaskSampler("round_robin", [3, 1, 2], order=[0, 2])


def test_sequential_trains_all_epochs_of_a_task_before_the_next():
    sizes = [8, 4]  # batch 2: n = 4, 2
    sampler = MultiTaskBatchSampler(sizes, batch_size=2, strategy="sequential", seed=0, order=[1, 0], epochs=3)
    epochs = [sampler.batches(epoch) for epoch in range(3)]
    tasks = [[_task_of(batch[0], sizes) for batch in batches] for batches in epochs]
    # 3 epochs of task 1 (6 batches), then 3 epochs of task 0 (12 batches), cut into epochs of 4 + 2.
    assert tasks == [[1] * 6, [0] * 6, [0] * 6]
    run = [index for batches in epochs for batch in batches for index in batch]
    assert Counter(run[:12]) == {index: 3 for index in range(8, 12)}  # 3 passes over task 1
    assert Counter(run[12:]) == {index: 3 for index in range(8)}
    assert [s.task for s in TaskSampler("sequential", [2, 1]).epoch(0)] == [0, 0, 1]


def test_task_sampler_options_and_errors():
    # Independent draws (the option): P(t) ∝ (w_t n_t)^(1/T), Σ n_t steps per epoch.
    drawn = TaskSampler("proportional", [90, 10], seed=0, replacement=True)
    counts = Counter(_take(drawn, 2000))
    assert len(drawn) == 100 and counts[0] / 2000 == pytest.approx(0.9, abs=0.03)
    # Without replacement a large temperature evens the per-epoch counts: round(100 * 1/2) each.
    assert TaskSampler("proportional", [90, 10], seed=0, temperature=1e6).counts == [50, 50]
    assert TaskSampler("proportional", [90, 10], seed=0).counts == [90, 10]
    with pytest.raises(ConfigError, match="unknown 'random'"):
        TaskSampler("random", [1])


def test_task_sampler_resumes_from_its_position():
    sampler = TaskSampler("proportional", [5, 5, 5], seed=3)
    head = _take(sampler, 7)
    state = sampler.state_dict()
    rest = _take(sampler, 20)
    again = TaskSampler("proportional", [5, 5, 5], seed=3)
    again.load_state_dict(state)
    assert state == {"position": 7} and _take(again, 20) == rest and len(head) == 7
    assert Counter(head + rest[:8]) == {0: 5, 1: 5, 2: 5}  # the first epoch: each task's 5 batches


def _take(sampler: TaskSampler, count: int) -> list[int]:
    return [next(sampler) for _ in range(count)]
