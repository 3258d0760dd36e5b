"""data/batch_samplers.py: batches without duplicate texts, batch for batch sentence-transformers'
``NoDuplicatesBatchSampler`` on the same rows and seed; a function of (seed, epoch); the same global batches
for every process of a multi-process run."""

from __future__ import annotations

import random

import pytest
import torch

from contrastext.data.batch_samplers import BATCH_SAMPLERS, NoDuplicatesBatchSampler


def rows_with_duplicates(count: int, columns: int, distinct: int, seed: int, hot: float = 0.0):
    """``count`` rows of ``columns`` texts drawn from ``distinct`` texts; a share ``hot`` of the texts is one of 3."""
    draw = random.Random(seed)
    return [
        tuple(f"hot {draw.randrange(3)}" if draw.random() < hot else f"text {draw.randrange(distinct)}"
              for _ in range(columns))
        for _ in range(count)
    ]


def st_batches(rows, batch_size: int, drop_last: bool, seed: int, epoch: int, label: bool = True):
    """sentence-transformers' batches, its trainer's way: a fresh torch.Generator, ``seed``, ``set_epoch``; the rows
    as a ``datasets.Dataset`` with a ``label`` column that ``valid_label_columns`` leaves out."""
    from datasets import Dataset
    from sentence_transformers.base.sampler import NoDuplicatesBatchSampler as STSampler

    columns = {f"column_{c}": [row[c] for row in rows] for c in range(len(rows[0]))}
    if label:
        columns["label"] = [index % 2 for index in range(len(rows))]  # equal labels are no duplicates
    sampler = STSampler(Dataset.from_dict(columns), batch_size=batch_size, drop_last=drop_last,
                        valid_label_columns=["label", "score"], generator=torch.Generator(), seed=seed)
    sampler.set_epoch(epoch)
    return [list(batch) for batch in sampler]


CASES = [  # count, columns, distinct texts, hot share, batch size, drop_last, seed
    (300, 2, 1000, 0.0, 16, True, 42),  # few duplicates
    (300, 2, 120, 0.0, 16, False, 0),  # many: rows deferred to later batches
    (200, 3, 400, 0.2, 8, True, 7),  # three frequent texts: passes too short, rows drawn again
    (200, 3, 400, 0.2, 8, False, 7),  # the same without drop_last: several short batches at the end
    (150, 1, 60, 0.0, 10, True, 3),  # single sentences (simcse-unsup)
    (97, 2, 50, 0.5, 5, True, 11),  # so few distinct texts that even the resampled passes fall short
    (64, 2, 500, 0.0, 64, False, 1),  # one batch of all rows
]


@pytest.mark.parametrize(("count", "columns", "distinct", "hot", "batch_size", "drop_last", "seed"), CASES)
def test_the_batches_are_sentence_transformers_batches(count, columns, distinct, hot, batch_size, drop_last, seed):
    rows = rows_with_duplicates(count, columns, distinct, seed=count + seed, hot=hot)
    sampler = NoDuplicatesBatchSampler(rows, batch_size, seed, drop_last)
    for epoch in (0, 1, 2):
        assert sampler.batches(epoch) == st_batches(rows, batch_size, drop_last, seed, epoch)


def test_random_shapes_give_sentence_transformers_batches():
    """Many small random settings, to reach the walk's corners (a row colliding on a text other than its most
    frequent one, groups emptied and refilled within a batch, passes ending on a short batch)."""
    draw = random.Random(2026)
    for trial in range(60):
        count, columns = draw.randrange(1, 120), draw.randrange(1, 4)
        rows = rows_with_duplicates(count, columns, draw.randrange(2, 200), seed=trial, hot=draw.choice([0, 0.1, 0.4]))
        batch_size, drop_last, seed = draw.randrange(1, 12), draw.random() < 0.5, draw.randrange(50)
        ours = NoDuplicatesBatchSampler(rows, batch_size, seed, drop_last).batches(trial % 3)
        assert ours == st_batches(rows, batch_size, drop_last, seed, trial % 3), (trial, count, batch_size, drop_last)


@pytest.mark.parametrize(("count", "columns", "distinct", "hot", "batch_size", "drop_last", "seed"), CASES)
def test_no_text_appears_twice_in_a_batch(count, columns, distinct, hot, batch_size, drop_last, seed):
    rows = rows_with_duplicates(count, columns, distinct, seed=count + seed, hot=hot)
    for batch in NoDuplicatesBatchSampler(rows, batch_size, seed, drop_last).batches(0):
        texts = [text for index in batch for text in set(rows[index])]
        assert len(texts) == len(set(texts)), batch
        assert len(batch) <= batch_size


def test_a_row_may_repeat_its_own_text_and_every_row_is_used_once_per_pass():
    """Dropout twins (s, s) of unsupervised SimCSE: the row's values are a set, as in sentence-transformers."""
    rows = [(f"s{index % 30}", f"s{index % 30}") for index in range(60)]  # each sentence twice, in two rows
    sampler = NoDuplicatesBatchSampler(rows, 6, seed=5, drop_last=False)
    batches = sampler.batches(0)
    assert sorted(index for batch in batches for index in batch) == list(range(60))
    for batch in batches:
        assert len({rows[index][0] for index in batch}) == len(batch)
    assert batches == st_batches(rows, 6, False, 5, 0, label=False)


def test_the_order_is_a_function_of_seed_and_epoch():
    rows = rows_with_duplicates(500, 2, 300, seed=1)
    first, again = NoDuplicatesBatchSampler(rows, 32, 9), NoDuplicatesBatchSampler(rows, 32, 9)
    assert first.batches(3) == again.batches(3)  # another instance, another history
    assert first.batches(0) != first.batches(1)
    assert NoDuplicatesBatchSampler(rows, 32, 10).batches(0) != first.batches(0)
    assert len(first) == len(first.batches(0)) == 500 // 32  # drop_last: n // batch_size, as sentence-transformers


def test_a_pass_that_falls_short_draws_rows_again_up_to_the_advertised_count(caplog):
    """Batches of 2 from 16 rows "a", 8 "b", 4 "c": a pass pairs the rows it can (fewer than 28 // 2 batches),
    the rows are drawn again (2 more passes at most) up to 14 batches; sentence-transformers' behaviour."""
    rows = [("a",)] * 16 + [("b",)] * 8 + [("c",)] * 4
    sampler = NoDuplicatesBatchSampler(rows, 2, seed=0)
    one_pass = sampler._one_pass(torch.Generator().manual_seed(0))
    batches = sampler.batches(0)
    assert len(one_pass) < len(batches) == sampler.expected_batches() == 14
    assert batches[: len(one_pass)] == one_pass
    assert batches == st_batches(rows, 2, True, 0, 0, label=False)
    assert "draw rows again" in caplog.text


def test_too_few_distinct_texts_give_a_short_epoch_and_say_so(caplog):
    rows = [("a",)] * 26 + [("b",)] * 2  # a pass gives 2 batches (a, b), the 2 more passes 2 each
    sampler = NoDuplicatesBatchSampler(rows, 2, seed=0)
    assert len(sampler.batches(0)) == 6 and sampler.expected_batches() == 14
    assert sampler.batches(0) == st_batches(rows, 2, True, 0, 0, label=False)
    assert "too few distinct texts" in caplog.text


@pytest.mark.parametrize("world", [2, 3])
def test_every_process_gets_the_same_number_of_batches_and_the_slices_cover_each_batch(world):
    """Each process builds its own sampler (its own process, its own history) and takes ``batch[rank::world]``,
    as the trainer does: the same count on every rank, disjoint slices that make up the global batch."""
    rows = rows_with_duplicates(1000, 2, 400, seed=3, hot=0.05)
    per_rank = []
    for rank in range(world):
        sampler = NoDuplicatesBatchSampler(list(rows), 24, seed=42)  # a fresh instance per rank
        per_rank.append([batch[rank::world] for batch in sampler.batches(1)])
    assert len({len(batches) for batches in per_rank}) == 1
    reference = NoDuplicatesBatchSampler(rows, 24, seed=42).batches(1)
    for position, batch in enumerate(reference):
        slices = [per_rank[rank][position] for rank in range(world)]
        assert sorted(index for part in slices for index in part) == sorted(batch)
        assert {len(part) for part in slices} == {24 // world}  # drop_last: equal local batches


def test_names_and_bad_arguments():
    assert BATCH_SAMPLERS == ("batch_sampler", "no_duplicates")  # sentence-transformers' BatchSamplers values
    from sentence_transformers.base.sampler import BatchSamplers

    assert {sampler.value for sampler in BatchSamplers} >= set(BATCH_SAMPLERS)
    with pytest.raises(ValueError, match="positive batch size"):
        NoDuplicatesBatchSampler([("a",)], 0, seed=0)
    with pytest.raises(ValueError, match="need rows"):
        NoDuplicatesBatchSampler([], 4, seed=0)
