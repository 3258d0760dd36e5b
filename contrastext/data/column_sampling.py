"""The batch samplers over a column store: the same batches as the in-memory samplers, without a list per row.

The in-memory samplers (:mod:`contrastext.data.sampling`) return an epoch as a list of lists of Python ints:
~36 bytes a row, 3.6 GB at 100M rows, before a step is taken. Here an epoch is a lazy sequence over the epoch's
permutation (one int32 torch tensor, 4 bytes a row); ``batches(epoch)[k]`` cuts batch ``k`` out of it when the trainer
asks for it. The batches are those of the in-memory samplers, on the same rows and seed (tested):

- :class:`ColumnRandomBatchSampler`: :class:`~contrastext.data.sampling.RandomBatchSampler`'s permutation, cut;
- :class:`ColumnLengthGroupedBatchSampler`: :class:`~contrastext.data.sampling.LengthGroupedBatchSampler` on the
  store's int32 lengths: a batch's mega-batch (``mega_batches × batch_size`` rows of the permutation) is sorted
  by length, stably, when one of its batches is asked for (the batch order is shuffled, so mega-batches are not
  kept);
- ``no_duplicates``: :class:`~contrastext.data.column_no_duplicates.ColumnNoDuplicatesBatchSampler`:
  :class:`~contrastext.data.batch_samplers.NoDuplicatesBatchSampler`'s batches on the store's 64-bit text hashes
  (equal texts, equal hashes), in the permutation's 4 bytes a row plus one bit a row and a few bytes per row that
  shares a text with another; only those rows are walked one by one (its module docstring, docs/DATA.md "Large
  files").

:func:`column_batch_sampler` picks one as :func:`contrastext.training.batch_sampling.make_batch_sampler` does.

Example::

    >>> sampler = column_batch_sampler(store, "batch_sampler", group_by_length=True, batch_size=64, seed=0)
    >>> batches = sampler.batches(0)
    >>> len(batches), store.take(batches[0])[0].texts
"""

from __future__ import annotations

import operator
from collections.abc import Sequence

import numpy as np
import torch

from contrastext.data.column_no_duplicates import ColumnNoDuplicatesBatchSampler
from contrastext.data.column_store import ColumnExamples
from contrastext.runtime.seeding import make_generator


def batch_count(rows: int, batch_size: int, drop_last: bool) -> int:
    """How many batches ``rows`` rows are cut into (``sampling._chunk``: a short last batch dropped with
    ``drop_last`` unless it is the only one)."""
    count = -(-rows // batch_size)
    if drop_last and count > 1 and rows % batch_size:
        count -= 1
    return count


class PermutationBatches(Sequence[list[int]]):
    """The batches of one epoch: consecutive ``batch_size`` slices of ``order``, cut when asked for."""

    def __init__(self, order: torch.Tensor, batch_size: int, drop_last: bool) -> None:
        self.order, self.batch_size = order, batch_size
        self._count = batch_count(len(order), batch_size, drop_last)

    def __len__(self) -> int:
        return self._count

    def _position(self, index: int) -> int:
        position = operator.index(index)
        position += self._count if position < 0 else 0
        if not 0 <= position < self._count:
            raise IndexError(f"batch {index} of {self._count}")
        return position

    def __getitem__(self, index):  # type: ignore[override]
        if isinstance(index, slice):
            return [self[position] for position in range(self._count)[index]]
        start = self._position(index) * self.batch_size
        return self.order[start : start + self.batch_size].tolist()


class ColumnRandomBatchSampler:
    """:class:`~contrastext.data.sampling.RandomBatchSampler`, its epochs as :class:`PermutationBatches`."""

    def __init__(self, num_examples: int, batch_size: int, seed: int, drop_last: bool = True) -> None:
        if num_examples < 1 or batch_size < 1:
            raise ValueError(f"need examples and a positive batch size, got {num_examples} and {batch_size}")
        self.num_examples, self.batch_size, self.seed, self.drop_last = num_examples, batch_size, seed, drop_last
        self._cached: tuple[int, Sequence[list[int]]] | None = None

    def permutation(self, epoch: int) -> torch.Tensor:
        """The epoch's order of the rows: ``torch.randperm`` with the in-memory sampler's generator, as int32 where
        it fits (4 bytes a row; the same values as its int64 draw, tested)."""
        dtype = torch.int32 if self.num_examples <= torch.iinfo(torch.int32).max else torch.int64
        return torch.randperm(self.num_examples, generator=make_generator(self.seed, epoch), dtype=dtype)

    def batches(self, epoch: int) -> Sequence[list[int]]:
        if self._cached is None or self._cached[0] != epoch:
            self._cached = (epoch, self._batches(epoch))
        return self._cached[1]

    def _batches(self, epoch: int) -> Sequence[list[int]]:
        return PermutationBatches(self.permutation(epoch), self.batch_size, self.drop_last)

    def __len__(self) -> int:
        return batch_count(self.num_examples, self.batch_size, self.drop_last)


class LengthGroupedBatches(PermutationBatches):
    """One epoch of :class:`ColumnLengthGroupedBatchSampler`: batch ``k`` is chunk ``shuffle[k]`` of the
    permutation with each mega-batch sorted by decreasing length (stable), sorted when asked for."""

    def __init__(self, order: torch.Tensor, shuffle: torch.Tensor, lengths: np.ndarray, batch_size: int,
                 mega_size: int, drop_last: bool) -> None:  # fmt: skip
        super().__init__(order, batch_size, drop_last)
        self.shuffle, self.lengths, self.mega_size = shuffle, lengths, mega_size
        self._mega: tuple[int, np.ndarray] | None = None

    def __getitem__(self, index):  # type: ignore[override]
        if isinstance(index, slice):
            return [self[position] for position in range(len(self))[index]]
        chunk = int(self.shuffle[self._position(index)])
        start = chunk * self.batch_size
        mega = start // self.mega_size
        offset = start - mega * self.mega_size
        return self._sorted(mega)[offset : offset + self.batch_size].tolist()

    def _sorted(self, mega: int) -> np.ndarray:
        if self._mega is None or self._mega[0] != mega:
            rows = self.order[mega * self.mega_size : (mega + 1) * self.mega_size].numpy()
            keys = -np.asarray(self.lengths[rows], dtype=np.int64)
            self._mega = (mega, rows[np.argsort(keys, kind="stable")])
        return self._mega[1]


class ColumnLengthGroupedBatchSampler(ColumnRandomBatchSampler):
    """:class:`~contrastext.data.sampling.LengthGroupedBatchSampler` on an int32 length array (module docstring)."""

    def __init__(self, lengths: np.ndarray, batch_size: int, seed: int, drop_last: bool = True,
                 mega_batches: int = 50) -> None:  # fmt: skip
        super().__init__(len(lengths), batch_size, seed, drop_last)
        self.lengths = lengths
        self.mega_size = mega_batches * batch_size

    def _batches(self, epoch: int) -> Sequence[list[int]]:
        order = self.permutation(epoch)
        count = batch_count(self.num_examples, self.batch_size, self.drop_last)
        shuffle = torch.randperm(count, generator=make_generator(self.seed, epoch, 1))
        return LengthGroupedBatches(order, shuffle, self.lengths, self.batch_size, self.mega_size, self.drop_last)


def column_batch_sampler(store: ColumnExamples, batch_sampler: str, group_by_length: bool, batch_size: int,
                         seed: int, drop_last: bool = True):  # fmt: skip
    """The sampler ``data.batch_sampler`` / ``train.group_by_length`` ask for, over ``store`` (the batches of
    :func:`contrastext.training.batch_sampling.make_batch_sampler` on the same rows, which checks the pair)."""
    if batch_sampler == "no_duplicates":
        return ColumnNoDuplicatesBatchSampler(store.hashes, batch_size, seed, drop_last)
    if group_by_length:
        return ColumnLengthGroupedBatchSampler(store.lengths, batch_size, seed, drop_last)
    return ColumnRandomBatchSampler(len(store), batch_size, seed, drop_last)


__all__ = [
    "ColumnLengthGroupedBatchSampler",
    "ColumnRandomBatchSampler",
    "LengthGroupedBatches",
    "PermutationBatches",
    "batch_count",
    "column_batch_sampler",
]
