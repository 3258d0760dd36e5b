"""Batches without duplicate texts (``data.batch_sampler: no_duplicates``): sentence-transformers'
``NoDuplicatesBatchSampler``, the same batches from the same rows and seed, without its quadratic scans.

With in-batch negatives (InfoNCE / MNRL: every other row's positive is a negative of an anchor) a text that
appears twice in a batch is a false negative: the anchor is pushed away from a copy of its own positive.
This sampler forms batches in which no text appears twice, across all the text columns of the rows
(anchor, positive, negatives: the values of a row are compared as a set, so a row may repeat a text of its
own, as the dropout twins of unsupervised SimCSE do). Labels and scores are not texts (``Example.label``;
sentence-transformers leaves its ``valid_label_columns`` out the same way).

The semantics are sentence-transformers' (v6, ``sentence_transformers/base/sampler.py``), to the batch:

- epoch ``e``: a ``torch.Generator`` seeded with ``seed + e``; one pass = ``torch.randperm(n)`` of the rows
  (int32 where it fits, as theirs);
- a batch is filled by walking the rows not yet used, in the permutation's order, taking each row none of
  whose texts is already in the batch; a row that collides is *deferred*: it stays where it is and is tried
  again, first, by the next batch;
- a walk that reaches the end without filling the batch yields it when ``drop_last`` is false, drops it
  otherwise, and the next walk starts over the rows left (so a pass ends when every row is used or dropped);
- with ``drop_last`` a pass may give fewer than ``n // batch_size`` batches (many repeated texts): the rows are
  drawn again (a new permutation from the same generator) and batches are added up to that count, for at most
  2 more passes (those batches repeat rows of the epoch; a warning says so). Without ``drop_last`` the first
  pass is never cut, and may give more (smaller) batches than ``ceil(n / batch_size)``.

The order is a function of (seed, epoch) only, so a resumed run skips to its batch and every process of a
multi-process run computes the same global batches (each takes its slice ``batch[rank::world]``): every
process gets the same number of batches.

How it is fast: the texts become integer ids once; the rows deferred by earlier batches are kept in groups by
the row's most frequent text (its *key*), ordered by position, in a heap. A batch walks those groups in
position order and sets aside a whole group at once when its key is already in the batch, where the walk over
a linked list of the rows (sentence-transformers) visits every deferred row of every batch again: with one text
in 10 % of 1M rows that is ~10⁹ visits. Then it walks the untouched rows in order. The rows taken, and their
order, are the walk's (tested against sentence-transformers' sampler on the same rows and seed). What is still
visited one by one: a deferred row that collides on a text other than its key (rare: its key is its most frequent
text), and every untouched row once.

Example::

    >>> sampler = NoDuplicatesBatchSampler([("a", "b"), ("a", "c"), ("d", "e"), ("f", "g")], batch_size=2, seed=0)
    >>> [sorted(batch) for batch in sampler.batches(0)]  # rows 0 and 1 share "a": never in one batch
"""

from __future__ import annotations

import heapq
import logging
from collections import deque
from collections.abc import Sequence

import torch

logger = logging.getLogger(__name__)

BATCH_SAMPLERS = ("batch_sampler", "no_duplicates")
"""``data.batch_sampler`` values, sentence-transformers' ``BatchSamplers`` names: ``batch_sampler`` (default: a
seeded permutation cut into batches, or length-grouped with ``train.group_by_length``) and ``no_duplicates``."""

MAX_RESAMPLE_PASSES = 2
"""Extra passes that may complete an epoch's ``n // batch_size`` batches (sentence-transformers' value)."""


def warn_shortfall(sampler, epoch: int, got: int, expected: int) -> None:
    """Say once per sampler (``sampler.shortfall_warned``) that an epoch drew rows again, or came out short."""
    if sampler.shortfall_warned:
        return
    sampler.shortfall_warned = True
    if got >= expected:
        logger.warning("data.batch_sampler=no_duplicates: epoch %d: one pass over the rows gave fewer than %d "
                       "batches without duplicates; the rest draw rows again (repeats within the epoch)",
                       epoch, expected)
    else:
        logger.warning("data.batch_sampler=no_duplicates: epoch %d gives %d of %d batches: the data has too "
                       "few distinct texts for batch_size %d; consider a smaller one",
                       epoch, got, expected, sampler.batch_size)


def requeue(touched: dict, groups: dict, heap: list, in_heap: dict) -> None:
    """After a batch: the rows each touched group parked go back in front of it (in order), and every group whose
    first row changed goes back in the heap of groups ordered by their first row."""
    for key, parked in touched.items():
        queue = groups[key]
        if parked:
            queue.extendleft(reversed(parked))
        if queue and in_heap.get(key) != queue[0]:
            heapq.heappush(heap, (queue[0], key))
            in_heap[key] = queue[0]


class NoDuplicatesBatchSampler:
    """Batches of row indices in which no text appears twice (see the module docstring).

    ``rows``: the texts of each row (``[example.texts for example in examples]``). ``batches(epoch)`` is a
    pure function of ``seed`` and ``epoch``; the last epoch asked for is kept (the trainer asks for it again).
    """

    def __init__(self, rows: Sequence[Sequence[str]], batch_size: int, seed: int, drop_last: bool = True) -> None:
        if len(rows) < 1 or batch_size < 1:
            raise ValueError(f"need rows and a positive batch size, got {len(rows)} and {batch_size}")
        if seed < 0:
            raise ValueError(f"the seed must be non-negative, got {seed}")
        self.num_examples, self.batch_size, self.seed, self.drop_last = len(rows), batch_size, seed, drop_last
        ids: dict[str, int] = {}
        self._texts = [tuple({ids.setdefault(text, len(ids)): None for text in row}) for row in rows]
        self.num_texts = len(ids)
        counts = [0] * len(ids)
        for texts in self._texts:
            for text in texts:
                counts[text] += 1
        # A row's key: its most frequent text (the first of equals), so the rows behind one frequent text are
        # one group, set aside at once while that text is in the batch.
        self._keys = [max(texts, key=counts.__getitem__) if texts else -1 for texts in self._texts]
        self._cached: tuple[int, list[list[int]]] | None = None
        self.shortfall_warned = False

    def expected_batches(self) -> int:
        """sentence-transformers' ``__len__``: ``n // batch_size`` (drop_last) or ``ceil(n / batch_size)``."""
        if self.drop_last:
            return self.num_examples // self.batch_size
        return -(-self.num_examples // self.batch_size)

    def batches(self, epoch: int) -> list[list[int]]:
        if self._cached is not None and self._cached[0] == epoch:
            return self._cached[1]
        generator = torch.Generator()
        generator.manual_seed(self.seed + epoch)
        result = self._one_pass(generator)
        expected = self.expected_batches()
        if len(result) < expected and result:
            for _ in range(MAX_RESAMPLE_PASSES):
                result.extend(self._one_pass(generator)[: expected - len(result)])
                if len(result) >= expected:
                    break
            warn_shortfall(self, epoch, len(result), expected)
        self._cached = (epoch, result)
        return result

    def __len__(self) -> int:
        return len(self.batches(0))

    def _one_pass(self, generator: torch.Generator) -> list[list[int]]:
        """One permutation's batches: sentence-transformers' ``_iter_one_pass``, with the deferred rows grouped.

        The walk over the rows left is: first the deferred rows (all of them precede the rows never visited),
        in position order through the heap of group heads, a group set aside while its key is in the batch and
        a head that collides on another text parked until the batch is done; then the rows never visited."""
        n, size, drop_last = self.num_examples, self.batch_size, self.drop_last
        dtype = torch.int32 if n <= torch.iinfo(torch.int32).max else torch.int64
        order = torch.randperm(n, generator=generator, dtype=dtype).tolist()
        texts_of, key_of = self._texts, self._keys
        stamp = [0] * self.num_texts  # stamp[text] == number: the text is in batch `number`
        groups: dict[int, deque[int]] = {}  # key -> its deferred positions, ascending
        heap: list[tuple[int, int]] = []  # (head position, key); an entry is live while in_heap[key] is its head
        in_heap: dict[int, int] = {}
        waiting = 0  # deferred rows
        fresh = 0  # order[fresh:] has never been visited
        batches: list[list[int]] = []
        number = 0
        while fresh < n or waiting:
            number += 1
            batch: list[int] = []
            touched: dict[int, list[int]] = {}  # key -> its parked positions
            full = False
            while heap:  # 1. the deferred rows, in position order
                position, key = heapq.heappop(heap)
                if in_heap.get(key) != position:
                    continue  # stale
                del in_heap[key]
                parked = touched.setdefault(key, [])
                if stamp[key] == number:
                    continue  # the whole group collides on its key
                queue = groups[key]
                row = order[queue.popleft()]
                texts = texts_of[row]
                if any(stamp[text] == number for text in texts):
                    parked.append(position)  # collides on another text: the group's next row comes next
                    if queue:
                        heapq.heappush(heap, (queue[0], key))
                        in_heap[key] = queue[0]
                    continue
                waiting -= 1
                batch.append(row)
                if len(batch) == size:
                    full = True
                    break
                for text in texts:
                    stamp[text] = number  # the key among them: the group waits for the next batch
            while not full and fresh < n:  # 2. the rows never visited, in order; a collision joins its group
                row = order[fresh]
                texts = texts_of[row]
                collides = False
                for text in texts:
                    if stamp[text] == number:
                        collides = True
                        break
                if collides:
                    key = key_of[row]
                    queue = groups.get(key)
                    if queue is None:
                        queue = groups[key] = deque()
                    queue.append(fresh)
                    waiting += 1
                    touched.setdefault(key, [])
                else:
                    batch.append(row)
                    if len(batch) == size:
                        full = True
                    else:
                        for text in texts:
                            stamp[text] = number
                fresh += 1
            requeue(touched, groups, heap, in_heap)
            if batch and (full or not drop_last):
                batches.append(batch)
        return batches
