"""Training rows held in memory-mapped columns, fetched by index: the examples of a 100M-row file in bounded memory.

:class:`ColumnExamples` opens a folder written by :func:`contrastext.data.column_convert.convert` and is a
``Sequence[Example]``: ``len(store)`` rows, ``store[i]`` / ``store.take(indices)`` build the
:class:`~contrastext.data.examples.Example` objects of the rows asked for only (a batch at a time), with the same
texts and ``path:line`` source as the in-memory reader. The texts stay in the Arrow file, memory-mapped: the
operating system pages them in as batches are read and may drop them again, so the process holds them in its page
cache, not its heap. What the batch samplers need is compact and memory-mapped too:

- :attr:`ColumnExamples.lengths`: int32, each row's length in characters (``train.group_by_length``);
- :attr:`ColumnExamples.hashes`: uint64, n × columns, each text's xxh3 hash (``data.batch_sampler:
  no_duplicates`` compares texts by them: :mod:`contrastext.data.column_no_duplicates`).

Example::

    >>> store = ColumnExamples(folder)
    >>> len(store), store[0].texts, store[0].source
    (1000000, ('a question', 'its answer'), 'pairs.csv:2')
    >>> [example.texts for example in store.take([5, 2])]
"""

from __future__ import annotations

import json
import operator
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from contrastext.data.examples import Example
from contrastext.data.readers.lines import source

TEXTS = "texts.arrow"
LENGTHS = "lengths.int32"
HASHES = "hashes.uint64"
META = "meta.json"


def text_field(position: int) -> str:
    """The Arrow field holding the row's ``position``-th text (the file's own names are in ``meta.json``)."""
    return f"text_{position}"


class ColumnExamples(Sequence[Example]):
    """The rows of a column store (module docstring); ``columns``: the file's text columns read, ``where``: the
    file, ``dropped_blank`` / ``first_dropped``: the rows the conversion left out as blank."""

    def __init__(self, folder: str | Path) -> None:
        import pyarrow as pa

        self.folder = Path(folder)
        meta = json.loads((self.folder / META).read_text())
        self.where: str = meta["where"]
        self.columns: list[str] = list(meta["columns"])
        self.dropped_blank: int = int(meta["dropped_blank"])
        self.first_dropped: str | None = meta["first_dropped"]
        self._rows = int(meta["rows"])
        self._map = pa.memory_map(str(self.folder / TEXTS), "r")
        self.table = pa.ipc.open_file(self._map).read_all()  # zero-copy: the columns point into the mapping
        if self.table.num_rows != self._rows:
            raise ValueError(f"{self.folder}: {self.table.num_rows} rows in {TEXTS}, {self._rows} in {META}")
        self._names = [text_field(position) for position in range(len(self.columns))]
        # Each column's record batches, and the first row of each: a row is fetched from its own batch (a take
        # over the whole chunked column could concatenate it first).
        self._chunks = [self.table.column(name).chunks for name in [*self._names, "line"]]
        self._starts = np.cumsum([0] + [len(chunk) for chunk in self._chunks[0]])[:-1]
        self.lengths = np.memmap(self.folder / LENGTHS, dtype="<i4", mode="r", shape=(self._rows,))
        self.hashes = np.memmap(self.folder / HASHES, dtype="<u8", mode="r", shape=(self._rows, len(self.columns)))

    def __len__(self) -> int:
        return self._rows

    def __getitem__(self, index):  # type: ignore[override]
        if isinstance(index, slice):
            return self.take(range(self._rows)[index])
        position = operator.index(index)
        if position < 0:
            position += self._rows
        if not 0 <= position < self._rows:
            raise IndexError(f"row {index} of {self._rows}")
        return self.take([position])[0]

    def __iter__(self):
        for start in range(0, self._rows, 4096):
            part = self.table.slice(start, 4096)
            texts = [part.column(name).to_pylist() for name in self._names]
            lines = part.column("line").to_pylist()
            for *row, line in zip(*texts, lines, strict=True):
                yield Example(tuple(row), source=source(self.where, line))

    def take(self, indices: Iterable[int]) -> list[Example]:
        """The examples of rows ``indices``, in that order (what a batch needs; nothing else is read)."""
        rows = np.asarray(list(indices), dtype=np.int64)
        if rows.size and (rows.min() < 0 or rows.max() >= self._rows):
            raise IndexError(f"rows {rows.min()}..{rows.max()} of {self._rows}")
        chunk_of = np.searchsorted(self._starts, rows, side="right") - 1
        local = (rows - self._starts[chunk_of]).tolist()
        examples = []
        for chunk, position in zip(chunk_of.tolist(), local, strict=True):
            *row, line = (column[chunk][position].as_py() for column in self._chunks)
            examples.append(Example(tuple(row), source=source(self.where, line)))
        return examples


__all__ = ["HASHES", "LENGTHS", "META", "TEXTS", "ColumnExamples", "text_field"]
