"""data/column_sampling.py: on a column store, the batches (and the tokenised inputs) of the in-memory samplers on
the same rows and seed: random, length-grouped and no_duplicates; a function of (seed, epoch), so a resumed run
gets the same order."""

from __future__ import annotations

import random

import pytest
import torch

from contrastext.data.batch_samplers import NoDuplicatesBatchSampler
from contrastext.data.collate import tokenize
from contrastext.data.column_convert import column_examples
from contrastext.data.column_sampling import (
    ColumnLengthGroupedBatchSampler,
    ColumnRandomBatchSampler,
    column_batch_sampler,
)
from contrastext.data.sampling import LengthGroupedBatchSampler, RandomBatchSampler
from contrastext.data.sources import DataSpec, read_texts


@pytest.fixture(scope="module")
def pairs(tmp_path_factory):
    """(the store, the in-memory examples) of 997 pairs with many repeated texts and varied lengths."""
    import csv

    folder = tmp_path_factory.mktemp("pairs")
    draw = random.Random(3)
    path = folder / "pairs.csv"
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["anchor", "positive"])
        for _ in range(997):
            writer.writerow([f"question {draw.randrange(300)}" + " word" * draw.randrange(12),
                             "hot answer" if draw.random() < 0.05 else f"answer {draw.randrange(2000)}"])
    store = column_examples(path, ["anchor", "positive"], cache_dir=folder / "cache", progress=False)
    return store, list(read_texts(DataSpec(path=str(path)), "pairs", "mnrl").examples)


@pytest.mark.parametrize("batch_size, drop_last", [(32, True), (32, False), (997, True), (1000, True)])
def test_random_batches_are_the_in_memory_ones(pairs, batch_size, drop_last):
    store, _ = pairs
    ours = ColumnRandomBatchSampler(len(store), batch_size, seed=5, drop_last=drop_last)
    theirs = RandomBatchSampler(len(store), batch_size, seed=5, drop_last=drop_last)
    for epoch in (0, 1):
        assert list(ours.batches(epoch)) == theirs.batches(epoch)
    assert len(ours) == len(theirs)


@pytest.mark.parametrize("batch_size, drop_last, mega_batches", [(16, True, 3), (16, False, 3), (50, True, 50)])
def test_length_grouped_batches_are_the_in_memory_ones(pairs, batch_size, drop_last, mega_batches):
    store, examples = pairs
    lengths = [sum(len(text) for text in example.texts) for example in examples]
    assert store.lengths.tolist() == lengths
    ours = ColumnLengthGroupedBatchSampler(store.lengths, batch_size, 7, drop_last, mega_batches)
    theirs = LengthGroupedBatchSampler(lengths, batch_size, 7, drop_last, mega_batches)
    for epoch in (0, 2):
        assert list(ours.batches(epoch)) == theirs.batches(epoch)


@pytest.mark.parametrize("drop_last", [True, False])
def test_no_duplicates_batches_are_the_in_memory_ones(pairs, drop_last):
    store, examples = pairs
    ours = column_batch_sampler(store, "no_duplicates", False, 48, seed=1, drop_last=drop_last)
    theirs = NoDuplicatesBatchSampler([example.texts for example in examples], 48, seed=1, drop_last=drop_last)
    for epoch in (0, 1):
        batches = list(ours.batches(epoch))
        assert batches == theirs.batches(epoch)
        for batch in batches:
            texts = [text for example in store.take(batch) for text in set(example.texts)]
            assert len(texts) == len(set(texts))


def test_the_chooser_follows_the_config_values(pairs):
    store, _ = pairs
    assert isinstance(column_batch_sampler(store, "batch_sampler", True, 8, 0), ColumnLengthGroupedBatchSampler)
    assert type(column_batch_sampler(store, "batch_sampler", False, 8, 0)) is ColumnRandomBatchSampler


def test_the_collated_inputs_are_the_in_memory_ones(pairs, minilm_path):
    from transformers import AutoTokenizer

    store, examples = pairs
    tokenizer = AutoTokenizer.from_pretrained(minilm_path)
    batch = ColumnLengthGroupedBatchSampler(store.lengths, 16, 0, mega_batches=4).batches(0)[3]
    ours = [example.texts for example in store.take(batch)]
    assert ours == [examples[row].texts for row in batch]
    for column in (0, 1):
        got = tokenize(tokenizer, [texts[column] for texts in ours], max_length=32)
        expected = tokenize(tokenizer, [examples[row].texts[column] for row in batch], max_length=32)
        assert got.keys() == expected.keys()
        assert all(torch.equal(got[name], expected[name]) for name in got)


def test_a_resumed_sampler_gives_the_same_order(pairs):
    store, _ = pairs
    for make in (lambda: column_batch_sampler(store, "batch_sampler", True, 16, 11),
                 lambda: column_batch_sampler(store, "batch_sampler", False, 16, 11),
                 lambda: column_batch_sampler(store, "no_duplicates", False, 16, 11)):
        first, resumed = make(), make()
        first.batches(0)
        assert list(resumed.batches(1))[5:] == list(first.batches(1))[5:]
        assert list(first.batches(1)) != list(first.batches(0))
