"""data/column_no_duplicates.py: on an array of text hashes, batch for batch the in-memory
``NoDuplicatesBatchSampler`` (itself sentence-transformers') on the same rows and seed: with and without
drop_last, several epochs and seeds, the resample passes, many repeated texts; the hashes read in chunks from a
file or an array, split into partitions; memory in arrays, not a Python object per row."""

from __future__ import annotations

import random

import numpy as np
import pytest

import contrastext.data.column_no_duplicates as column_no_duplicates
from contrastext.data.batch_samplers import NoDuplicatesBatchSampler
from contrastext.data.column_no_duplicates import ColumnNoDuplicatesBatchSampler, shared_texts


def rows_with_duplicates(count: int, columns: int, distinct: int, seed: int, hot: float = 0.0, twins: float = 0.0):
    """``count`` rows of ``columns`` texts from ``distinct``; a share ``hot`` is one of 3 frequent texts, a share
    ``twins`` repeats the row's first text (a row's texts are a set)."""
    draw = random.Random(seed)
    rows = []
    for _ in range(count):
        row: list[str] = []
        for _ in range(columns):
            chance = draw.random()
            if chance < hot:
                row.append(f"hot {draw.randrange(3)}")
            elif chance < hot + twins and row:
                row.append(row[0])
            else:
                row.append(f"text {draw.randrange(distinct)}")
        rows.append(tuple(row))
    return rows


def hashes_of(rows) -> np.ndarray:
    """Each text's 64-bit stand-in hash (random bits per distinct text, as xxh3's are spread)."""
    draw = random.Random(0)
    table: dict[str, int] = {}
    return np.array([[table.setdefault(text, draw.getrandbits(64)) for text in row] for row in rows],
                    dtype=np.uint64)  # fmt: skip


CASES = [  # count, columns, distinct texts, hot share, twins share, batch size, drop_last, seed
    (300, 2, 1000, 0.0, 0.0, 16, True, 42),  # few duplicates
    (300, 2, 120, 0.0, 0.0, 16, False, 0),  # many: rows deferred to later batches
    (200, 3, 400, 0.2, 0.1, 8, True, 7),  # frequent texts: passes too short, rows drawn again
    (200, 3, 400, 0.2, 0.1, 8, False, 7),  # the same without drop_last: several short batches at the end
    (150, 1, 60, 0.0, 0.0, 10, True, 3),  # single sentences
    (150, 2, 10**6, 0.0, 0.5, 10, True, 3),  # dropout twins (simcse-unsup): no text shared by two rows
    (97, 2, 50, 0.5, 0.0, 5, True, 11),  # so few distinct texts that even the resampled passes fall short
    (64, 2, 500, 0.0, 0.0, 64, False, 1),  # one batch of all rows
    (5, 2, 500, 0.0, 0.0, 8, True, 1),  # fewer rows than a batch: nothing with drop_last
]


@pytest.mark.parametrize(("count", "columns", "distinct", "hot", "twins", "batch_size", "drop_last", "seed"), CASES)
def test_the_batches_are_the_in_memory_ones(count, columns, distinct, hot, twins, batch_size, drop_last, seed):
    rows = rows_with_duplicates(count, columns, distinct, seed=count + seed, hot=hot, twins=twins)
    ours = ColumnNoDuplicatesBatchSampler(hashes_of(rows), batch_size, seed, drop_last)
    theirs = NoDuplicatesBatchSampler(rows, batch_size, seed, drop_last)
    for epoch in (0, 1, 2):
        batches = ours.batches(epoch)
        assert list(batches) == theirs.batches(epoch)
        assert len(batches) == len(theirs.batches(epoch))
    assert len(ours) == len(theirs) and ours.expected_batches() == theirs.expected_batches()


def test_random_shapes_in_small_chunks_and_partitions_give_the_in_memory_batches(monkeypatch):
    """Many small random settings, the hashes read 24 rows at a time and sorted in up to 64 partitions."""
    monkeypatch.setattr(column_no_duplicates, "CHUNK_ROWS", 24)
    monkeypatch.setattr(column_no_duplicates, "PARTITION_BYTES", 200)
    for trial in range(60):
        draw = random.Random(trial)
        rows = rows_with_duplicates(draw.randrange(1, 300), draw.randrange(1, 4), draw.choice([3, 10, 50, 300, 5000]),
                                    seed=trial, hot=draw.choice([0.0, 0.05, 0.3]), twins=0.05)  # fmt: skip
        batch_size, seed, drop_last = draw.randrange(1, 40), draw.randrange(5), draw.random() < 0.5
        ours = ColumnNoDuplicatesBatchSampler(hashes_of(rows), batch_size, seed, drop_last)
        theirs = NoDuplicatesBatchSampler(rows, batch_size, seed, drop_last)
        for epoch in (0, 1):
            assert list(ours.batches(epoch)) == theirs.batches(epoch), (trial, epoch)


def test_the_hashes_are_read_from_their_file(tmp_path, monkeypatch):
    monkeypatch.setattr(column_no_duplicates, "CHUNK_ROWS", 40)
    rows = rows_with_duplicates(500, 2, 200, seed=1, hot=0.05)
    values = hashes_of(rows)
    path = tmp_path / "hashes.uint64"
    values.tofile(path)
    mapped = np.memmap(path, dtype="<u8", mode="r", shape=values.shape)
    ours = ColumnNoDuplicatesBatchSampler(mapped, 16, 4)
    assert list(ours.batches(3)) == NoDuplicatesBatchSampler(rows, 16, 4).batches(3)


def test_only_the_rows_sharing_a_text_are_held():
    rows = [(f"q{i}", f"a{i}") for i in range(1000)] + [("q1", "other"), ("same", "same")]
    shared = shared_texts(hashes_of(rows))
    assert shared.rows.tolist() == [1, 1000] and len(shared.hashes) == 1 and shared.counts.tolist() == [2]
    assert shared.ids.tolist() == [[0, -1], [0, -1]] and shared.keys.tolist() == [0, 0]
    assert np.unpackbits(shared.bits, bitorder="little")[: len(rows)].nonzero()[0].tolist() == [1, 1000]


def test_an_epoch_is_arrays_cut_when_asked_for():
    """Without shared texts the pass is whole batches of the permutation: no row is visited one by one, and the
    epoch holds the permutation, not a list per batch; slices and negative indices as a list's."""
    rows = [(f"q{i}", f"a{i}") for i in range(10_000)]
    sampler = ColumnNoDuplicatesBatchSampler(hashes_of(rows), 64, 0, drop_last=False)
    batches = sampler.batches(0)
    assert len(batches) == 157 and len(batches.passes) == 1
    record = batches.passes[0]
    assert record.order.dtype == np.int32 and len(record.taken) == 0 and len(record.skipped) == 0
    reference = NoDuplicatesBatchSampler(rows, 64, 0, drop_last=False).batches(0)
    assert batches[-1] == reference[-1] and batches[3:5] == reference[3:5]
    with pytest.raises(IndexError):
        batches[157]


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="positive batch size"):
        ColumnNoDuplicatesBatchSampler(np.zeros((3, 2), dtype=np.uint64), 0, seed=0)
    with pytest.raises(ValueError, match="non-negative"):
        ColumnNoDuplicatesBatchSampler(np.zeros((3, 2), dtype=np.uint64), 2, seed=-1)


def test_spilled_partitions_count_the_rows_of_each_text(monkeypatch):
    """Read 16 rows at a time and spilled into partitions of 40 hashes, the counts are the rows' (a text counted
    once a row): a frequent text is the key of its rows, as the in-memory sampler groups them."""
    monkeypatch.setattr(column_no_duplicates, "CHUNK_ROWS", 16)
    monkeypatch.setattr(column_no_duplicates, "PARTITION_BYTES", 320)
    rows = rows_with_duplicates(400, 3, 150, seed=5, hot=0.1, twins=0.1)
    values = hashes_of(rows)
    shared = shared_texts(values)
    counts: dict[int, int] = {}
    for row in values.tolist():
        for text in set(row):
            counts[text] = counts.get(text, 0) + 1
    expected = sorted((text, count) for text, count in counts.items() if count > 1)
    assert list(zip(shared.hashes.tolist(), shared.counts.tolist(), strict=True)) == expected
    hot = {text for text, count in counts.items() if count > 30}
    assert len(hot) == 3
    for row, key in zip(shared.rows.tolist(), shared.keys.tolist(), strict=True):
        if hot & set(values[row].tolist()):
            assert int(shared.hashes[key]) in hot
