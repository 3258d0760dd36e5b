"""The data-quality checks of :mod:`contrastext.data.quality` on a column store, without the texts in Python.

- Blank texts: dropped while the file is converted (:func:`contrastext.data.column_convert.convert`, by
  :func:`~contrastext.data.quality.is_blank`'s rule); the store records how many and the first one's source.
- Duplicate positives (:func:`duplicate_positives`): counted on the positives' 64-bit hashes (one sort of an
  int64 column: 8 bytes a row, plus the sort's copy) up to :data:`DUPLICATE_SCAN_ROWS` rows; above it the check
  is skipped (None), as a sort of 100M hashes would hold ~2 GB for a line of advice. The count is the in-memory
  one unless two different positives share a hash (p ≈ n²/2⁶⁵).

Example::

    >>> duplicate_positives(store)          # (rows repeating an earlier positive, the most repeated) or None
    (3, 'the same answer')
"""

from __future__ import annotations

import numpy as np

from contrastext.data.column_store import ColumnExamples
from contrastext.data.quality import positive

DUPLICATE_SCAN_ROWS = 20_000_000
"""Stores with more rows skip the duplicate-positive count (see the module docstring)."""


def duplicate_positives(store: ColumnExamples, limit: int = DUPLICATE_SCAN_ROWS) -> tuple[int, str | None] | None:
    """:func:`contrastext.data.quality.duplicate_positives` of the store's rows, from the hashes of the positive
    column (the second text, the only one of sentences); None when the store holds more than ``limit`` rows."""
    if len(store) > limit:
        return None
    column = 1 if store.hashes.shape[1] > 1 else 0
    hashes = np.asarray(store.hashes[:, column])
    values, first, counts = np.unique(hashes, return_index=True, return_counts=True)
    repeated = int(len(hashes) - len(values))
    if not repeated:
        return 0, None
    best = np.flatnonzero(counts == counts.max())
    row = int(first[best].min())  # Counter.most_common: the first seen of the most repeated
    return repeated, positive(store[row])


__all__ = ["DUPLICATE_SCAN_ROWS", "duplicate_positives"]
