"""A CSV / TSV pair file read in blocks of rows: Arrow's string kernels where a block has no quoting, the csv module
row by row where it has.

Read row by row, a 100M-row file costs minutes in Python alone (about 3.5 µs a row: the csv module, the checks,
the generators). Most large pair files hold no quote character at all: each line is then one record and its fields
are the line split at the delimiter, which Arrow's kernels do for a whole block of lines at once. :func:`csv_blocks`
reads the file :data:`BLOCK_BYTES` at a time, cut at a line end, and reads a block with those kernels when every
line in it is plain:

- no ``"`` (the csv module's quote character, for TSV too) and no NUL byte;
- valid UTF-8, and no carriage return left once the line's ending run of ``\\r`` / ``\\n`` is taken off
  (:func:`~contrastext.data.readers.lines.iter_lines`' rule);
- no line longer than the csv module's field size limit;
- the header's number of fields on every line, and no text empty once stripped.

Any other block (one quote in it is enough) is read by the exact reader,
:func:`~contrastext.data.readers.lines.csv_records` from the block's first line, through to the first record
that ends at or after the block's end (a quoted field may run past it), and the plain reading resumes after that
record. The exact reader raises the errors (``path:line``) that the in-memory reader raises; a plain block is, by
the list above, one whose rows the exact reader would return unchanged, so both give the same rows, texts and line
numbers (tests/data/test_csv_blocks.py compares them on files that mix both kinds of blocks).

Texts are stripped as ``str.strip()`` strips (every character for which ``str.isspace()`` holds).

Example::

    >>> for block in csv_blocks("pairs.csv", ["anchor", "positive"], delimiter=","):
    ...     block.texts[0], block.lines       # Arrow strings of the anchors, each row's line number
"""

from __future__ import annotations

import csv
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from contrastext.data.readers.lines import (
    PathLike,
    csv_records,
    decode_lines,
    require_columns,
    require_file,
    require_text,
)
from contrastext.errors import DataFormatError

BLOCK_BYTES = 8 << 20
"""Bytes read at a time (a block is cut at its last line end; a longer line makes a longer block)."""

PYTHON_WHITESPACE = "".join(chr(code) for code in range(sys.maxunicode + 1) if chr(code).isspace())
"""The characters ``str.strip()`` removes."""

Row = tuple[int, tuple[str, ...]]


@dataclass
class TextBlock:
    """Rows of a file: ``texts``, one Arrow string array a column read (stripped, none empty), and ``lines``
    (int64), the line each row starts at."""

    texts: list  # list[pyarrow.Array]
    lines: np.ndarray

    def __len__(self) -> int:
        return len(self.lines)

    @classmethod
    def from_rows(cls, rows: Sequence[Row], width: int) -> TextBlock:
        import pyarrow as pa

        texts = [pa.array([row[position] for _, row in rows], type=pa.string()) for position in range(width)]
        return cls(texts, np.fromiter((line for line, _ in rows), dtype=np.int64, count=len(rows)))

    def filter(self, keep: np.ndarray) -> TextBlock:
        """The rows where ``keep`` (bool) holds."""
        import pyarrow as pa

        mask = pa.array(keep)
        return TextBlock([text.filter(mask) for text in self.texts], self.lines[keep])


def csv_blocks(path: PathLike, text_columns: Sequence[str], delimiter: str = ",") -> Iterator[TextBlock]:
    """The rows of a CSV (``delimiter=","``) or TSV (``"\\t"``) file with a header naming ``text_columns``, a
    block at a time (module docstring): the texts of those columns, stripped, and each row's first line."""
    path = require_file(path)
    with path.open("rb") as handle:
        first, consumed, lines_read = _exact_records(path, handle, 0, 1, delimiter, stop_after=1)
        if not first:
            raise DataFormatError(path, None, "the file is empty")
        first_line, first_fields = first[0]
        header = [name.strip() for name in first_fields]
        if not all(name in header for name in text_columns):
            raise DataFormatError(
                path, first_line,
                f"expected a header row naming the columns {', '.join(text_columns)}; found {first_fields!r}",
            )  # fmt: skip
        reading = _Reading(path, delimiter, header, [header.index(name) for name in text_columns])
        position, line = consumed, 1 + lines_read
        while True:
            block = _next_block(handle, position)
            if not block:
                return
            rows = reading.plain_block(block, line)
            if rows is not None:
                yield rows
                position, line = position + len(block), line + len(rows)
                continue
            rows, consumed, lines_read = _exact_records(
                path, handle, position, line, delimiter, stop_at=len(block), check=reading.checked
            )
            yield TextBlock.from_rows(rows, len(reading.positions))
            position, line = position + consumed, line + lines_read


def _next_block(handle, position: int) -> bytes:
    """The bytes from ``position`` up to the last line end within :data:`BLOCK_BYTES` (more when one line is longer;
    the file's last line may have no line end)."""
    handle.seek(position)
    block = handle.read(BLOCK_BYTES)
    end = block.rfind(b"\n") + 1
    while not end:
        more = handle.read(BLOCK_BYTES)
        if not more:
            return block
        end = more.rfind(b"\n") + 1
        end = len(block) + end if end else 0
        block += more
    return block[:end]


def _exact_records(
    path: Path,
    handle,
    position: int,
    line: int,
    delimiter: str,
    stop_at: int | None = None,
    stop_after: int | None = None,
    check=None,
) -> tuple[list, int, int]:
    """The csv module's records from byte ``position`` (line ``line``) until a record ends at or past ``stop_at``
    bytes read, or ``stop_after`` records: ``(records, bytes read, lines read)``; with ``check``, each record is
    ``check(record)`` as soon as it is read, so that a bad row raises before the next line is decoded (the order
    of the in-memory reader's errors)."""
    handle.seek(position)
    read = [0, 0]  # bytes, lines

    def raw_lines() -> Iterator[bytes]:
        for raw in handle:
            read[0] += len(raw)
            read[1] += 1
            yield raw

    records = []
    for record in csv_records(path, decode_lines(path, raw_lines(), first=line), delimiter):
        records.append(record if check is None else check(record))
        if (stop_after is not None and len(records) >= stop_after) or (stop_at is not None and read[0] >= stop_at):
            break
    return records, read[0], read[1]


class _Reading:
    """The header's width and the positions of the columns read, and the two ways of reading rows."""

    def __init__(self, path: Path, delimiter: str, header: list[str], positions: list[int]) -> None:
        self.path, self.delimiter, self.header, self.positions = path, delimiter, header, positions

    def checked(self, record: tuple[int, list[str]]) -> Row:
        """A record of the csv module as the in-memory reader checks it: the header's width, texts stripped and
        not empty (errors name ``path:line``)."""
        line, fields = record
        require_columns(self.path, line, fields, self.header)
        return line, tuple(require_text(self.path, line, fields[index], self.header[index]) for index in self.positions)

    def plain_block(self, block: bytes, line: int) -> TextBlock | None:
        """The rows of ``block`` (whole lines, the first at ``line``) by Arrow's kernels; None when a line is not
        plain (module docstring) and the exact reader must read the block."""
        import pyarrow as pa
        import pyarrow.compute as pc

        if b'"' in block or b"\x00" in block:
            return None
        ends = np.flatnonzero(np.frombuffer(block, dtype=np.uint8) == ord("\n")) + 1
        offsets = np.concatenate([[0], ends, [] if block.endswith(b"\n") else [len(block)]]).astype(np.int64)
        lines = pa.Array.from_buffers(pa.large_string(), len(offsets) - 1,
                                      [None, pa.py_buffer(offsets), pa.py_buffer(block)])  # fmt: skip
        try:
            lines.validate(full=True)  # UTF-8
        except pa.ArrowInvalid:
            return None
        if pc.max(pc.binary_length(lines)).as_py() > csv.field_size_limit():
            return None
        lines = pc.utf8_rtrim(lines, characters="\r\n")
        if b"\r" in block and pc.any(pc.greater(pc.count_substring(lines, "\r"), 0)).as_py():
            return None
        fields = pc.split_pattern(lines, pattern=self.delimiter)
        if not pc.all(pc.equal(pc.list_value_length(fields), len(self.header))).as_py():
            return None
        texts = []
        for position in self.positions:
            text = pc.utf8_trim(pc.list_element(fields, position), characters=PYTHON_WHITESPACE)
            if not pc.all(pc.greater(pc.binary_length(text), 0)).as_py():
                return None
            texts.append(text)
        return TextBlock(texts, np.arange(line, line + len(lines), dtype=np.int64))


__all__ = ["BLOCK_BYTES", "PYTHON_WHITESPACE", "TextBlock", "csv_blocks"]
