"""``data.batch_sampler: no_duplicates`` over a column store: the batches of
:class:`~contrastext.data.batch_samplers.NoDuplicatesBatchSampler`, in a few bytes a row.

The in-memory sampler turns every row into a tuple of text ids (~100 bytes of Python a row: ~10 GB at 100M
rows). Here the texts are the store's 64-bit hashes (equal texts, equal hashes: the batches are the in-memory
ones, tested; two different texts sharing a hash, p ≈ n²/2⁶⁵, would only be kept apart), and only the rows that
can collide are looked at one by one:

- :func:`shared_texts` finds, once, the texts found in more than one row (a row's texts are a set, as in the
  in-memory sampler). The hash column is read in chunks from its file (not mapped: its pages stay out of the
  process); up to :data:`PARTITION_BYTES` of hashes are sorted in memory; more are spilled, each chunk sorted,
  into files by their top bits (a temporary folder, 8 bytes a hash on disk for a moment), each file then sorted
  alone. One more read finds the *shared rows*, those holding such a text (a table of the shared hashes' top
  bits skips most cells at once): their indices, their texts' ids (``-1``: a text no other row has), their key
  (the most frequent of their texts: the in-memory sampler's groups) and one bit a row marking them.
- a row without a shared text never collides, so the walk of a pass (:func:`walk`) takes the runs of such rows
  whole, by arithmetic, and visits only the shared rows, with the in-memory sampler's walk (the deferred rows in
  groups by key, in a heap). A pass is recorded as slices of its permutation (each batch's first and last
  position, the deferred rows it takes first, the positions it sets aside: :class:`PassRecord`), and a batch is
  cut when asked for (:class:`NoDuplicatesBatches`).

Memory: the epoch's permutation (int32, 4 bytes a row, as the other column samplers), 1.1 bits a row, ~32 bytes
a batch, and per shared row ~16 + 4 × columns bytes (and a Python int while it waits, deferred); while the shared
texts are found, one partition of hashes (a text in many rows adds its copies to its partition), freed before the
first epoch. Time: the hashes read three times and sorted once, then per epoch the permutation, one vectorised
look at it, and a Python walk linear in the shared rows and their deferrals. The pass is walked whole when its
epoch is first asked for: its length (the trainer's ``len(batches)``) depends on the whole walk (the short walks at
the end of a pass, ``drop_last``'s resample passes), and the walk costs little where few rows share a text.

The rest is the in-memory sampler's, to the batch: epoch ``e`` seeds a ``torch.Generator`` with ``seed + e``, one
pass is a ``torch.randperm`` (int32 where it fits), ``drop_last`` drops a walk's short batch and draws up to
:data:`~contrastext.data.batch_samplers.MAX_RESAMPLE_PASSES` more passes to reach ``n // batch_size`` batches (the
rows of those extra passes' permutations that their batches use are kept, the rest dropped).

Example::

    >>> sampler = ColumnNoDuplicatesBatchSampler(store.hashes, batch_size=64, seed=0)
    >>> batches = sampler.batches(0)  # a sequence of len(batches) row-index lists, cut when asked for
    >>> store.take(batches[0])
"""

from __future__ import annotations

import heapq
import operator
import tempfile
from array import array
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from contrastext.data.batch_samplers import MAX_RESAMPLE_PASSES, requeue, warn_shortfall

CHUNK_ROWS = 1 << 20
"""Rows read, or positions of the permutation looked at, at a time."""

PARTITION_BYTES = 256 << 20
"""The most hash bytes sorted at once while the shared texts are found (more are spilled into partitions of about
this size; a text in many rows adds its copies to its partition)."""

BLOCK_SHIFT = 6
""":meth:`SharedTexts.positions` first looks at blocks of ``2**BLOCK_SHIFT`` rows (a table of n / 64 bytes)."""

FILTER_BITS = 24
"""The most top bits of the hashes in :func:`_filter`'s table (16 MiB), with which the scan for the shared rows
skips most cells at once."""


def hash_chunks(hashes: np.ndarray, rows: int | None = None):
    """``(start, chunk)`` of an (n × columns) uint64 array, ``rows`` rows at a time. A ``np.memmap`` is read from
    its file (the pages go to the page cache, not the process); an array is sliced."""
    n, columns = hashes.shape
    rows = rows or CHUNK_ROWS
    filename = getattr(hashes, "filename", None)
    if filename is None:
        for start in range(0, n, rows):
            yield start, np.asarray(hashes[start : start + rows])
        return
    with open(filename, "rb") as handle:
        for start in range(0, n, rows):
            count = min(rows, n - start)
            handle.seek(hashes.offset + start * columns * 8)
            chunk = np.fromfile(handle, dtype="<u8", count=count * columns)
            yield start, chunk.reshape(count, columns)


def first_in_row(chunk: np.ndarray) -> np.ndarray:
    """Which cells of a chunk are the first of their value in their row (a row's texts are a set)."""
    first = np.ones(chunk.shape, dtype=bool)
    for column in range(1, chunk.shape[1]):
        for earlier in range(column):
            first[:, column] &= chunk[:, column] != chunk[:, earlier]
    return first


@dataclass
class SharedTexts:
    """The texts found in more than one row and the rows holding them (:func:`shared_texts`).

    ``hashes``: sorted uint64, the shared texts (their ids: positions here); ``counts``: the rows of each;
    ``rows``: sorted indices of the rows holding one; ``ids``: int32 (len(rows) × columns), each text's id or -1
    (a text no other row has); ``keys``: each shared row's most frequent text (the first of equals);
    ``bits``: one bit a row (``np.packbits`` order ``little``), set for the shared rows."""

    hashes: np.ndarray
    counts: np.ndarray
    rows: np.ndarray
    ids: np.ndarray
    keys: np.ndarray
    bits: np.ndarray

    def positions(self, order: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The positions in ``order`` (a permutation of the rows) of the shared rows, ascending, and each one's
        index in :attr:`rows`. A first look at each position asks whether its block of ``2**BLOCK_SHIFT`` rows
        holds a shared row (a table small enough to stay in the processor's cache), the bits only for those."""
        index_type = self.rows.dtype
        if len(self.rows) == 0:
            return np.empty(0, dtype=index_type), np.empty(0, dtype=index_type)
        blocks = np.zeros((len(self.bits) * 8 >> BLOCK_SHIFT) + 1, dtype=bool)
        blocks[self.rows >> BLOCK_SHIFT] = True
        positions, indices = [], []
        for start in range(0, len(order), CHUNK_ROWS):
            rows = order[start : start + CHUNK_ROWS]
            maybe = np.flatnonzero(blocks[rows >> BLOCK_SHIFT])
            candidates = rows[maybe]
            hit = ((self.bits[candidates >> 3] >> (candidates & 7).astype(np.uint8)) & 1).astype(bool)
            positions.append((maybe[hit] + start).astype(index_type))
            indices.append(np.searchsorted(self.rows, candidates[hit]).astype(index_type))
        return np.concatenate(positions), np.concatenate(indices)


def _sorted_cells(chunk: np.ndarray) -> np.ndarray:
    """A chunk's first-in-row cells (a row's texts are a set), sorted."""
    return np.sort(chunk[first_in_row(chunk)])


def _duplicates(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The values of ``values`` (sorted in place) found more than once, and how often."""
    values.sort()
    repeated = values[1:][values[1:] == values[:-1]]
    unique, extra = np.unique(repeated, return_counts=True)
    return unique, extra + 1


def _partition_duplicates(hashes: np.ndarray, budget: int) -> tuple[np.ndarray, np.ndarray]:
    """The hashes found in more than one row, sorted, and how many rows hold each. Up to ``budget`` cells are
    sorted in memory; more are first spilled, each chunk sorted, into ``2**bits`` files by their top bits (a
    temporary folder: 8 bytes a cell on disk for a moment), then each file is read and sorted alone."""
    n, columns = hashes.shape
    if n * columns <= budget:
        values = np.empty(n * columns, dtype=np.uint64)
        filled = 0
        for _, chunk in hash_chunks(hashes):
            cells = chunk[first_in_row(chunk)]
            values[filled : filled + len(cells)] = cells
            filled += len(cells)
        return _duplicates(values[:filled])
    bits = 1
    while (n * columns) >> bits > budget:
        bits += 1
    bounds = np.arange(1, 1 << bits, dtype=np.uint64) << np.uint64(64 - bits)
    found, counts = [], []
    with tempfile.TemporaryDirectory(prefix="contrastext-no-duplicates-") as folder:
        paths = [Path(folder) / f"part-{part}.uint64" for part in range(1 << bits)]
        handles = [path.open("wb") for path in paths]
        try:
            for _, chunk in hash_chunks(hashes):
                cells = _sorted_cells(chunk)
                for handle, piece in zip(handles, np.split(cells, np.searchsorted(cells, bounds)), strict=True):
                    piece.tofile(handle)
        finally:
            for handle in handles:
                handle.close()
        for path in paths:
            values = np.fromfile(path, dtype=np.uint64)
            path.unlink()
            unique, count = _duplicates(values)
            del values
            found.append(unique)
            counts.append(count)
    return np.concatenate(found), np.concatenate(counts)


def _filter(shared: np.ndarray) -> tuple[np.ndarray, np.uint64]:
    """A table of bytes, one per value of the hashes' top bits, set where a shared text has them: ~64 slots a
    shared text, from 2**10 up to 2**:data:`FILTER_BITS` (small tables stay in the processor's cache)."""
    bits = min(max(10, int(len(shared) * 64).bit_length()), FILTER_BITS)
    table = np.zeros(1 << bits, dtype=bool)
    shift = np.uint64(64 - bits)
    table[(shared >> shift).astype(np.intp)] = True
    return table, shift


def _any(cells: np.ndarray) -> np.ndarray:
    """``cells.any(axis=1)`` for a few columns, a column at a time (faster than the reduction)."""
    found = cells[:, 0].copy()
    for column in range(1, cells.shape[1]):
        found |= cells[:, column]
    return found


def shared_texts(hashes: np.ndarray, partition_bytes: int | None = None) -> SharedTexts:
    """The texts of more than one row of ``hashes`` (n × columns uint64) and those rows (module docstring)."""
    n, columns = hashes.shape
    shared, counts = _partition_duplicates(hashes, (partition_bytes or PARTITION_BYTES) // 8)
    index_type = np.int32 if n <= np.iinfo(np.int32).max else np.int64
    rows, ids, keys = [], [], []
    mask = np.zeros((n + 7) // 8, dtype=np.uint8)
    table, shift = _filter(shared)
    for start, chunk in hash_chunks(hashes) if len(shared) else ():
        candidates = np.flatnonzero(_any(table[(chunk >> shift).astype(np.intp)]))
        if not len(candidates):
            continue
        cells = chunk[candidates]
        index = np.minimum(np.searchsorted(shared, cells), len(shared) - 1)
        hit = (shared[index] == cells) & first_in_row(cells)
        holds = _any(hit)
        if not holds.any():
            continue
        index, hit = index[holds], hit[holds]
        found = candidates[holds] + start
        np.bitwise_or.at(mask, found >> 3, np.left_shift(1, found & 7).astype(np.uint8))
        text_ids = np.where(hit, index, -1).astype(np.int32)
        frequency = np.where(hit, counts[index], 0)
        keys.append(text_ids[np.arange(len(text_ids)), np.argmax(frequency, axis=1)])
        rows.append(found.astype(index_type))
        ids.append(text_ids)
    return SharedTexts(
        hashes=shared, counts=counts,
        rows=np.concatenate(rows) if rows else np.empty(0, dtype=index_type),
        ids=np.concatenate(ids) if ids else np.empty((0, columns), dtype=np.int32),
        keys=np.concatenate(keys) if keys else np.empty(0, dtype=np.int32),
        bits=mask,
    )  # fmt: skip


@dataclass
class PassRecord:
    """One pass's batches as slices of its permutation ``order``: batch ``k`` is the rows ``taken[t_k:t_k+1]``
    (deferred rows, in position order) then ``order[start_k:end_k]`` less the positions ``skipped[s_k:s_k+1]``
    (set aside by that batch)."""

    order: np.ndarray
    starts: array
    ends: array
    taken_offsets: array  # len(batches) + 1
    taken: array
    skipped_offsets: array  # len(batches) + 1
    skipped: array

    def __len__(self) -> int:
        return len(self.starts)

    def batch(self, k: int) -> list[int]:
        start, end = self.starts[k], self.ends[k]
        fresh = self.order[start:end]
        skipped = self.skipped[self.skipped_offsets[k] : self.skipped_offsets[k + 1]]
        if len(skipped):
            fresh = np.delete(fresh, np.frombuffer(skipped, dtype=np.int64) - start)
        return self.taken[self.taken_offsets[k] : self.taken_offsets[k + 1]].tolist() + fresh.tolist()

    def truncate(self, count: int) -> None:
        """Keep the first ``count`` batches, and of the permutation only what they use."""
        del self.starts[count:], self.ends[count:]
        del self.taken_offsets[count + 1 :], self.skipped_offsets[count + 1 :]
        del self.taken[self.taken_offsets[-1] :], self.skipped[self.skipped_offsets[-1] :]
        used = self.ends[-1] if count else 0
        if used < len(self.order):
            self.order = self.order[:used].copy()


def walk(order: np.ndarray, shared: SharedTexts, batch_size: int, drop_last: bool) -> PassRecord:
    """One pass over ``order``: the in-memory sampler's ``_one_pass`` (its docstring), visiting only the shared
    rows; the rows of no shared text between them are taken as runs."""
    n, size = len(order), batch_size
    positions_array, indices_array = shared.positions(order)
    positions, indices = memoryview(positions_array), memoryview(indices_array)
    rows_of, keys = memoryview(shared.rows), memoryview(shared.keys)
    columns = shared.ids.shape[1]
    ids = memoryview(np.ascontiguousarray(shared.ids).reshape(-1))
    count_shared = len(positions)
    record = PassRecord(order, array("q"), array("q"), array("q", [0]), array("q"), array("q", [0]), array("q"))
    stamp = [0] * len(shared.hashes)  # stamp[text] == number: the text is in batch `number`
    groups: dict[int, deque[int]] = {}  # key -> its deferred shared positions (indices into `positions`)
    heap: list[tuple[int, int]] = []  # (head, key); live while in_heap[key] is the head
    in_heap: dict[int, int] = {}
    waiting = fresh = following = number = 0  # following: the next shared position at or after `fresh`

    def texts(j: int) -> list[int]:
        base = indices[j] * columns
        return [text for text in ids[base : base + columns] if text >= 0]

    while fresh < n or waiting:
        if not waiting:  # whole batches of rows without a shared text, up to the next shared row
            next_shared = positions[following] if following < count_shared else n
            runs = (next_shared - fresh) // size
            if runs:
                record.starts.extend(range(fresh, fresh + runs * size, size))
                record.ends.extend(range(fresh + size, fresh + (runs + 1) * size, size))
                record.taken_offsets.extend([record.taken_offsets[-1]] * runs)
                record.skipped_offsets.extend([record.skipped_offsets[-1]] * runs)
                fresh += runs * size
                number += runs
                continue
        number += 1
        taken_mark, skipped_mark = len(record.taken), len(record.skipped)
        length = 0
        touched: dict[int, list[int]] = {}
        full = False
        while heap:  # 1. the deferred rows, in position order (batch_samplers.NoDuplicatesBatchSampler._one_pass)
            head, key = heapq.heappop(heap)
            if in_heap.get(key) != head:
                continue
            del in_heap[key]
            parked = touched.setdefault(key, [])
            if stamp[key] == number:
                continue
            queue = groups[key]
            j = queue.popleft()
            row_texts = texts(j)
            if any(stamp[text] == number for text in row_texts):
                parked.append(j)
                if queue:
                    heapq.heappush(heap, (queue[0], key))
                    in_heap[key] = queue[0]
                continue
            waiting -= 1
            record.taken.append(rows_of[indices[j]])
            length += 1
            if length == size:
                full = True
                break
            for text in row_texts:
                stamp[text] = number
        start = fresh
        while not full and fresh < n:  # 2. the rows never visited: runs without a shared text, then a shared row
            next_shared = positions[following] if following < count_shared else n
            room = size - length
            if next_shared - fresh >= room:
                fresh += room
                length, full = size, True
                break
            length += next_shared - fresh
            fresh = next_shared
            if fresh == n:
                break
            j = following
            row_texts = texts(j)
            if any(stamp[text] == number for text in row_texts):
                key = keys[indices[j]]
                queue = groups.get(key)
                if queue is None:
                    queue = groups[key] = deque()
                queue.append(j)
                waiting += 1
                touched.setdefault(key, [])
                record.skipped.append(fresh)
            else:
                length += 1
                if length == size:
                    full = True
                else:
                    for text in row_texts:
                        stamp[text] = number
            fresh += 1
            following += 1
        requeue(touched, groups, heap, in_heap)  # the parked rows back in front, the groups back in the heap
        if length and (full or not drop_last):
            record.starts.append(start)
            record.ends.append(fresh)
            record.taken_offsets.append(len(record.taken))
            record.skipped_offsets.append(len(record.skipped))
        else:
            del record.taken[taken_mark:], record.skipped[skipped_mark:]
    return record


class NoDuplicatesBatches(Sequence[list[int]]):
    """One epoch: the batches of its passes (:class:`PassRecord`), each cut when asked for."""

    def __init__(self, passes: list[PassRecord]) -> None:
        self.passes = passes
        self._firsts = np.cumsum([0] + [len(record) for record in passes])

    def __len__(self) -> int:
        return int(self._firsts[-1])

    def __getitem__(self, index):  # type: ignore[override]
        if isinstance(index, slice):
            return [self[position] for position in range(len(self))[index]]
        position = operator.index(index)
        position += len(self) if position < 0 else 0
        if not 0 <= position < len(self):
            raise IndexError(f"batch {index} of {len(self)}")
        which = int(np.searchsorted(self._firsts, position, side="right")) - 1
        return self.passes[which].batch(position - int(self._firsts[which]))


class ColumnNoDuplicatesBatchSampler:
    """:class:`~contrastext.data.batch_samplers.NoDuplicatesBatchSampler` over a store's hash column (``hashes``:
    n × columns uint64, e.g. ``store.hashes``); ``batches(epoch)`` is a :class:`NoDuplicatesBatches`, the last
    epoch asked for kept."""

    def __init__(self, hashes: np.ndarray, batch_size: int, seed: int, drop_last: bool = True) -> None:
        if len(hashes) < 1 or batch_size < 1:
            raise ValueError(f"need rows and a positive batch size, got {len(hashes)} and {batch_size}")
        if seed < 0:
            raise ValueError(f"the seed must be non-negative, got {seed}")
        self.num_examples, self.batch_size, self.seed, self.drop_last = len(hashes), batch_size, seed, drop_last
        self.shared = shared_texts(hashes)
        self._cached: tuple[int, NoDuplicatesBatches] | None = None
        self.shortfall_warned = False

    def expected_batches(self) -> int:
        """sentence-transformers' ``__len__``: ``n // batch_size`` (drop_last) or ``ceil(n / batch_size)``."""
        if self.drop_last:
            return self.num_examples // self.batch_size
        return -(-self.num_examples // self.batch_size)

    def batches(self, epoch: int) -> NoDuplicatesBatches:
        if self._cached is None or self._cached[0] != epoch:
            self._cached = None  # the last epoch's permutation goes before the next one is drawn
            self._cached = (epoch, self._batches(epoch))
        return self._cached[1]

    def __len__(self) -> int:
        return len(self.batches(0))

    def _pass(self, generator: torch.Generator) -> PassRecord:
        n = self.num_examples
        dtype = torch.int32 if n <= torch.iinfo(torch.int32).max else torch.int64
        order = torch.randperm(n, generator=generator, dtype=dtype).numpy()
        return walk(order, self.shared, self.batch_size, self.drop_last)

    def _batches(self, epoch: int) -> NoDuplicatesBatches:
        generator = torch.Generator()
        generator.manual_seed(self.seed + epoch)
        passes = [self._pass(generator)]
        got, expected = len(passes[0]), self.expected_batches()
        if got < expected and got:
            for _ in range(MAX_RESAMPLE_PASSES):
                extra = self._pass(generator)
                extra.truncate(min(len(extra), expected - got))
                passes.append(extra)
                got += len(extra)
                if got >= expected:
                    break
            warn_shortfall(self, epoch, got, expected)
        return NoDuplicatesBatches(passes)


__all__ = [
    "CHUNK_ROWS",
    "PARTITION_BYTES",
    "ColumnNoDuplicatesBatchSampler",
    "NoDuplicatesBatches",
    "PassRecord",
    "SharedTexts",
    "first_in_row",
    "hash_chunks",
    "shared_texts",
    "walk",
]
