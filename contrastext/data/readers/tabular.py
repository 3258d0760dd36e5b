"""Rows with named columns -> Examples: the shared core of the GLUE, minBERT and generic table readers.

A file either starts with a header row naming its columns (found when the header holds every text
column), or has no header and its columns are given by position (``headerless_columns``). Texts are
taken from ``text_columns`` in order; the label from ``label_column`` when the file has one (GLUE test
files do not: their examples get ``label=None``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from contrastext.data.examples import Example
from contrastext.data.readers.lines import (
    ExampleList,
    LabelParser,
    OnBadLabel,
    PathLike,
    log_skipped,
    require_columns,
    require_text,
    source,
)
from contrastext.errors import DataFormatError

RowRepair = Callable[[PathLike, int, list[str], int], list[str]]


def read_columns(
    path: PathLike,
    rows: Iterator[tuple[int, list[str]]],
    *,
    text_columns: Sequence[str],
    label_column: str | None,
    parse_label: LabelParser | None,
    headerless_columns: Sequence[str] | None = None,
    repair: RowRepair | None = None,
    on_bad_label: OnBadLabel = "raise",
    require_label: bool = False,
) -> ExampleList:
    """Turn ``(line, fields)`` rows into Examples, checking the column count of every row.

    A ``label_column`` the header lacks gives unlabelled examples (GLUE test files), or, with
    ``require_label``, a DataFormatError naming the header (a user's table).

    ``parse_label(path, line, value, column)`` returns the label, or None for an "unlabelled" marker;
    it raises DataFormatError for a bad one, which ``on_bad_label="skip"`` turns into a recorded skip.
    ``repair(path, line, fields, expected_count)`` may fix a known malformation before the count check.
    """
    if on_bad_label not in ("raise", "skip"):
        raise ValueError(f"on_bad_label must be 'raise' or 'skip', not {on_bad_label!r}")
    first = next(rows, None)
    if first is None:
        raise DataFormatError(path, None, "the file is empty")
    header, data_rows = _header_and_rows(path, first, rows, text_columns, headerless_columns)
    text_index = [header.index(name) for name in text_columns]
    if require_label and label_column is not None and label_column not in header:
        raise DataFormatError(
            path, first[0], f"no column {label_column!r} in the header; the columns are {', '.join(header)}"
        )
    label_index = header.index(label_column) if label_column is not None and label_column in header else None

    examples = ExampleList()
    for line, fields in data_rows:
        if repair is not None:
            fields = repair(path, line, fields, len(header))
        require_columns(path, line, fields, header)
        label = None
        if label_index is not None and parse_label is not None:
            try:
                label = parse_label(path, line, fields[label_index], header[label_index])
            except DataFormatError as error:
                if on_bad_label == "raise":
                    raise
                examples.skipped_sources.append(str(error))
                continue
        texts = tuple(require_text(path, line, fields[index], header[index]) for index in text_index)
        examples.append(Example(texts=texts, label=label, source=source(path, line)))
    return log_skipped(path, examples)


def _header_and_rows(
    path: PathLike,
    first: tuple[int, list[str]],
    rows: Iterator[tuple[int, list[str]]],
    text_columns: Sequence[str],
    headerless_columns: Sequence[str] | None,
) -> tuple[list[str], Iterator[tuple[int, list[str]]]]:
    first_line, first_fields = first
    header = [name.strip() for name in first_fields]
    if all(name in header for name in text_columns):
        return header, rows
    if headerless_columns is not None:
        return list(headerless_columns), _chain(first, rows)
    raise DataFormatError(
        path,
        first_line,
        f"expected a header row naming the columns {', '.join(text_columns)}; found {first_fields!r}",
    )


def _chain(first: tuple[int, list[str]], rows: Iterator[tuple[int, list[str]]]) -> Iterator[tuple[int, list[str]]]:
    yield first
    yield from rows
