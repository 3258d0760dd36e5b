"""``data.batch_sampler: no_duplicates`` over a column store: the batches of
:class:`~contrastext.data.batch_samplers.NoDuplicatesBatchSampler`, in a few bytes a row.

The in-memory sampler turns every row into a tuple of text ids (~100 bytes of Python a row: ~10 GB at 100M
rows). Here the texts are the store's 64-bit hashes (equal texts, equal hashes: the batches are the in-memory ones,
tested; two different texts sharing a hash, p ≈ n²/2⁶⁵, would only be kept apart) and only the rows that can
collide are looked at one by one:

- :func:`shared_texts` finds, once, the texts that appear in more than one row (a row's texts are a set, as in the
  in-memory sampler): the hash column is read in chunks from its file (not mapped: its pages stay out of the
  process), split by the hashes' top bits into partitions of at most :data:`PARTITION_BYTES`, each sorted in
  place. The rows holding such a text are the *shared rows*: their indices, their texts' ids (``-1``: a text of
  this row only) and their key (the most frequent of their texts, the in-memory sampler's grouping), plus one bit
  a row saying which rows they are.
- a row of no shared text never collides: the walk of a pass (:func:`walk`) takes every such row it meets, so it
  jumps over runs of them in one step and visits only the shared rows, with the in-memory sampler's walk (the
  deferred rows in groups by key, in a heap); the epoch's batches are recorded as slices of the permutation (first
  and last position, the deferred rows taken first, the positions set aside) and cut when asked for
  (:class:`NoDuplicatesBatches`).

Memory: the epoch's permutation (int32, 4 bytes a row, as the other column samplers), one bit a row, ~32 bytes a
batch, and per shared row ~8 + 4 × columns bytes while the pass holds it; at most one partition of hashes while the
shared texts are found (freed before the first epoch). Time: reading and sorting the hashes once, then per epoch
the permutation and one vectorised pass over it; the Python walk is linear in the shared rows (and their deferrals)
and in the batches that have a deferred row waiting. A pass is built whole when the epoch is first asked for: its
length is the trainer's ``len(batches)``, which depends on the whole walk (the short last walks of a pass, the
resample passes of ``drop_last``), so it cannot be known before the walk ends.

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
from array import array
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from contrastext.data.batch_samplers import MAX_RESAMPLE_PASSES, warn_shortfall

CHUNK_ROWS = 1 << 20
"""Rows read, or positions of the permutation looked at, at a time."""

PARTITION_BYTES = 256 << 20
"""The most hash bytes sorted at once while the shared texts are found (a text in many rows adds its copies to
its partition)."""


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
        index in :attr:`rows`."""
        if len(self.rows) == 0:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
        positions, indices = [], []
        for start in range(0, len(order), CHUNK_ROWS):
            rows = order[start : start + CHUNK_ROWS].astype(np.int64)
            hit = ((self.bits[rows >> 3] >> (rows & 7).astype(np.uint8)) & 1).astype(bool)
            positions.append(np.flatnonzero(hit) + start)
            indices.append(np.searchsorted(self.rows, rows[hit]))
        return np.concatenate(positions), np.concatenate(indices)


def _partition_duplicates(hashes: np.ndarray, bits: int) -> tuple[np.ndarray, np.ndarray]:
    """The values found more than once among the first-in-row cells, and their counts, one partition of the top
    ``bits`` bits at a time (ascending)."""
    found, counts = [], []
    shift = np.uint64(64 - bits) if bits else None
    for part in range(1 << bits):
        pieces = []
        for _, chunk in hash_chunks(hashes):
            keep = first_in_row(chunk)
            if shift is not None:
                keep &= (chunk >> shift) == np.uint64(part)
            pieces.append(chunk[keep])
        values = np.concatenate(pieces) if pieces else np.empty(0, dtype=np.uint64)
        del pieces
        values.sort()
        repeated = values[1:][values[1:] == values[:-1]]
        del values
        unique, extra = np.unique(repeated, return_counts=True)
        found.append(unique)
        counts.append(extra + 1)
    return np.concatenate(found), np.concatenate(counts).astype(np.int64)


def shared_texts(hashes: np.ndarray, partition_bytes: int | None = None) -> SharedTexts:
    """The texts of more than one row of ``hashes`` (n × columns uint64) and those rows (module docstring)."""
    n, columns = hashes.shape
    partition_bytes = partition_bytes or PARTITION_BYTES
    bits = 0
    while (n * columns * 8) >> bits > partition_bytes and bits < 16:
        bits += 1
    shared, counts = _partition_duplicates(hashes, bits)
    rows, ids, keys = [], [], []
    mask = np.zeros((n + 7) // 8, dtype=np.uint8)
    chunk_rows = CHUNK_ROWS - CHUNK_ROWS % 8
    for start, chunk in hash_chunks(hashes, chunk_rows):
        if len(shared):
            index = np.minimum(np.searchsorted(shared, chunk), len(shared) - 1)
            hit = (shared[index] == chunk) & first_in_row(chunk)
        else:
            index, hit = np.zeros(chunk.shape, dtype=np.int64), np.zeros(chunk.shape, dtype=bool)
        holds = hit.any(axis=1)
        mask[start // 8 : start // 8 + (len(chunk) + 7) // 8] = np.packbits(holds, bitorder="little")
        if not holds.any():
            continue
        index, hit = index[holds], hit[holds]
        text_ids = np.where(hit, index, -1).astype(np.int32)
        frequency = np.where(hit, counts[index], 0)
        keys.append(text_ids[np.arange(len(text_ids)), np.argmax(frequency, axis=1)])
        rows.append(np.flatnonzero(holds) + start)
        ids.append(text_ids)
    return SharedTexts(
        hashes=shared, counts=counts,
        rows=np.concatenate(rows) if rows else np.empty(0, dtype=np.int64),
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
    rows_of, keys = memoryview(shared.rows.astype(np.int64)), memoryview(shared.keys)
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
        for key, parked in touched.items():
            queue = groups[key]
            if parked:
                queue.extendleft(reversed(parked))
            if queue and in_heap.get(key) != queue[0]:
                heapq.heappush(heap, (queue[0], key))
                in_heap[key] = queue[0]
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
