"""A generic reader for a user's own CSV / TSV / JSONL file, given which columns hold the texts and label.

Examples::

    read_table("pairs.csv", text_columns=["question", "answer"])                  # unlabelled pairs
    read_table("reviews.tsv", text_columns=["text"], label_column="stars")        # int labels
    read_table("reviews.csv", text_columns=["text"], label_column="sentiment", label_type="str")  # "pos", "neg"
    read_table("sts.jsonl", text_columns=["s1", "s2"], label_column="score", label_type="float")
    read_table("nli.csv", text_columns=["premise", "hypothesis"], label_column="gold",
               label_names={"entailment": 0, "neutral": 1, "contradiction": 2})
    table_columns("reviews.jsonl")     # TableColumns(names=['id', 'text', 'stars'], texts=['text'])

The same row logic serves any source of records (``read_records``: the rows of a Hugging Face dataset).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from contrastext.data.examples import Example
from contrastext.data.readers.lines import (
    ExampleList,
    LabelParser,
    OnBadLabel,
    PathLike,
    iter_csv_rows,
    iter_json_objects,
    log_skipped,
    parse_float,
    parse_int_label,
    parse_named_label,
    require_text,
    source,
)
from contrastext.data.readers.tabular import read_columns
from contrastext.errors import DataFormatError

TableFormat = Literal["csv", "tsv", "jsonl"]
LabelType = Literal["int", "float", "str"]
FORMAT_BY_SUFFIX: dict[str, TableFormat] = {".csv": "csv", ".tsv": "tsv", ".jsonl": "jsonl", ".json": "jsonl"}
JSON_ARRAY_HINT = (
    "a JSON array: write one JSON object a line (JSON Lines), or read the file with data.dataset (Hugging Face "
    "datasets)"
)


@dataclass(frozen=True)
class TableColumns:
    """The columns of a table in file order (``names``), those that hold text (``texts``): every column
    of a CSV / TSV, the keys of a JSONL file's first object whose value is a string, and those that hold lists
    (``lists``): the keys of a JSONL file's first object whose value is a list, a dataset's list-of-strings
    features (``{"query": "...", "pos": [...], "neg": [...]}``: :mod:`contrastext.data.readers.ntuples`)."""

    names: list[str]
    texts: list[str]
    lists: list[str] = field(default_factory=list)


def read_table(
    path: PathLike,
    text_columns: Sequence[str],
    label_column: str | None = None,
    *,
    file_format: TableFormat | None = None,
    label_type: LabelType = "int",
    label_names: Mapping[str, int] | None = None,
    on_bad_label: OnBadLabel = "raise",
) -> ExampleList:
    """Read ``path`` into Examples with ``texts`` from ``text_columns`` (in order) and the label column.

    - ``file_format``: "csv" (comma, CSV quoting), "tsv" (TAB, CSV quoting) or "jsonl" (one JSON
      object a line); by default from the suffix (.csv, .tsv, .jsonl/.json).
    - CSV/TSV files need a header row naming the columns; JSONL objects are looked up by key.
    - Labels: ``label_names`` maps strings to class indices; else ``label_type`` "int", "float" or "str"
      (the label's text, stripped: string labels mapped to classes later). No ``label_column`` means
      unlabelled examples; a ``label_column`` the file lacks is an error. A bad label raises
      (``on_bad_label="skip"`` skips the row and records it in ``skipped_sources``).
    """
    if not text_columns:
        raise ValueError("text_columns must name at least one column")
    file_format = file_format or _format_from_suffix(path)
    parse_label = _label_parser(label_type, label_names)
    if file_format == "jsonl":
        return read_records(path, json_records(path), text_columns, label_column, parse_label, on_bad_label)
    delimiter = "," if file_format == "csv" else "\t"
    examples = read_columns(
        path,
        iter_csv_rows(path, delimiter=delimiter),
        text_columns=tuple(text_columns),
        label_column=label_column,
        parse_label=parse_label,
        on_bad_label=on_bad_label,
        require_label=True,
    )
    return examples


def table_columns(path: PathLike, file_format: TableFormat | None = None) -> TableColumns:
    """The header of a CSV / TSV file, or the keys of a JSONL file's first object (see :class:`TableColumns`).

    An empty file (or one holding blank lines only) is a DataFormatError naming it."""
    file_format = file_format or _format_from_suffix(path)
    if file_format == "jsonl":
        first = next(json_records(path), None)
        if first is None:
            raise DataFormatError(path, None, "the file is empty")
        record = first[1]
        return TableColumns(
            list(record),
            [key for key, value in record.items() if isinstance(value, str)],
            [key for key, value in record.items() if isinstance(value, list)],
        )
    first_row = next(iter_csv_rows(path, delimiter="," if file_format == "csv" else "\t"), None)
    if first_row is None:
        raise DataFormatError(path, None, "the file is empty")
    line, fields = first_row
    names = [name.strip() for name in fields]
    empty = [position + 1 for position, name in enumerate(names) if not name]
    if empty or len(set(names)) != len(names):
        problem = f"column {empty[0]} has no name" if empty else "two columns have the same name"
        raise DataFormatError(path, line, f"expected a header row naming every column; {problem} in {fields!r}")
    return TableColumns(names, list(names))


def read_records(
    path: PathLike,
    records: Iterable[tuple[int, Mapping]],
    text_columns: Sequence[str],
    label_column: str | None,
    parse_label: LabelParser,
    on_bad_label: OnBadLabel = "raise",
) -> ExampleList:
    """Examples from ``(line, record)`` pairs of mappings (JSONL objects, dataset rows); errors name ``path:line``."""
    examples = ExampleList()
    for line, record in records:
        if label_column is not None and label_column in record:
            try:
                label = parse_label(path, line, _as_text(path, line, record[label_column], label_column), label_column)
            except DataFormatError as error:
                if on_bad_label == "raise":
                    raise
                examples.skipped_sources.append(str(error))
                continue
        elif label_column is not None:
            raise DataFormatError(path, line, f"missing key {label_column!r}")
        else:
            label = None
        texts = []
        for column in text_columns:
            if column not in record:
                raise DataFormatError(path, line, f"missing key {column!r}; keys are {', '.join(record)}")
            texts.append(require_text(path, line, _as_text(path, line, record[column], column), column))
        examples.append(Example(texts=tuple(texts), label=label, source=source(path, line)))
    return log_skipped(path, examples)


def parse_str_label(path: PathLike, line: int, value: str, column: str) -> str:
    """A label's text without surrounding whitespace; an empty label is an error."""
    text = value.strip()
    if not text:
        raise DataFormatError(path, line, f"column {column!r}: empty label")
    return text


def _format_from_suffix(path: PathLike) -> TableFormat:
    suffix = Path(path).suffix.lower()
    if suffix not in FORMAT_BY_SUFFIX:
        raise ValueError(f"cannot tell the format of {path} from its suffix; pass file_format='csv', 'tsv' or 'jsonl'")
    return FORMAT_BY_SUFFIX[suffix]


def _label_parser(label_type: str, label_names: Mapping[str, int] | None) -> LabelParser:
    if label_names is not None:
        return lambda p, line, value, column: parse_named_label(p, line, value, column, label_names)
    if label_type == "int":
        return parse_int_label
    if label_type == "float":
        return parse_float
    if label_type == "str":
        return parse_str_label
    raise ValueError(f"label_type must be 'int', 'float' or 'str', not {label_type!r}")


def json_records(path: PathLike) -> Iterator[tuple[int, dict]]:
    """The ``(line, object)`` pairs of a JSON Lines file, blank lines skipped; a bad line is a DataFormatError
    naming ``path:line`` (:func:`~contrastext.data.readers.lines.iter_json_objects`)."""
    return iter_json_objects(path, array_hint=JSON_ARRAY_HINT)


def _as_text(path: PathLike, line: int, value: object, column: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or value is None or not isinstance(value, int | float):
        raise DataFormatError(path, line, f"key {column!r}: expected a string or number, found {value!r}")
    return repr(value)
