"""Low-level reading shared by every reader: numbered lines, CSV rows, field parsing, skip bookkeeping.

Files are read as bytes and decoded as UTF-8 one line at a time, so an undecodable byte is reported
with its line number; a UTF-8 byte-order mark at the start of the file is dropped. Every parsing
problem raises :class:`~contrastext.errors.DataFormatError` naming ``path:line``.
"""

from __future__ import annotations

import codecs
import csv
import itertools
import json
import logging
import math
import os
import stat
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Literal

from contrastext.data.examples import Example
from contrastext.errors import DataFormatError, MissingDataError, NotRegularFileError

logger = logging.getLogger("contrastext.data")

OnBadLabel = Literal["raise", "skip"]
PathLike = str | os.PathLike


class ExampleList(list[Example]):
    """The examples a reader returns, plus the rows it skipped on purpose.

    It is a plain ``list[Example]`` with one extra attribute, ``skipped_sources``: one
    ``"path:line: reason"`` string per skipped row (an unscored STS pair, a row with a bad label
    read with ``on_bad_label="skip"``). ``skipped`` is their count. Nothing is dropped silently:
    every skip is recorded here and logged as a warning.
    """

    def __init__(self, examples=(), skipped_sources=()) -> None:
        super().__init__(examples)
        self.skipped_sources: list[str] = list(skipped_sources)

    @property
    def skipped(self) -> int:
        return len(self.skipped_sources)

    def extend_from(self, other: ExampleList) -> None:
        """Append another result's examples and its skipped rows."""
        self.extend(other)
        self.skipped_sources.extend(other.skipped_sources)


def log_skipped(path: PathLike, examples: ExampleList) -> ExampleList:
    """Log a warning when rows were skipped; return ``examples`` unchanged."""
    if examples.skipped:
        shown = "; ".join(examples.skipped_sources[:5])
        more = f" (and {examples.skipped - 5} more)" if examples.skipped > 5 else ""
        logger.warning("%s: skipped %d row(s): %s%s", path, examples.skipped, shown, more)
    return examples


def source(path: PathLike, line: int) -> str:
    """The ``Example.source`` string of a row: ``"path:line"``."""
    return f"{path}:{line}"


_SPECIAL_KINDS: tuple[tuple[Callable[[int], bool], str], ...] = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def special_file_kind(path: PathLike) -> str | None:
    """What ``path`` is when it exists but is not a regular file (``"a FIFO (named pipe)"``, ``"a character
    device"``, ``"a folder"``...); None for a regular file or a path that does not exist. Symbolic links are
    followed; nothing is opened (opening a FIFO would block)."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return None
    return next((kind for test, kind in _SPECIAL_KINDS if test(mode)), None)


def check_regular_file(path: PathLike, what: str = "data file") -> Path:
    """``path`` as a Path when it is a regular file (or a link to one). NotRegularFileError naming what it is
    for a FIFO, a device, a socket or a folder; MissingDataError when it does not exist."""
    path = Path(path)
    kind = special_file_kind(path)
    if kind is not None:
        raise NotRegularFileError(
            f"{what} {path} is {kind}, not a regular file: give a regular file (contrastext does not read "
            "pipes or devices: reading one could block or never end)"
        )
    if not path.is_file():
        broken = " (a broken symbolic link)" if path.is_symlink() else ""
        raise MissingDataError(f"{what} {path} does not exist{broken}")
    return path


def require_file(path: PathLike) -> Path:
    """Return ``path`` as a Path; MissingDataError naming it when it does not exist, NotRegularFileError naming
    what it is when it is a FIFO, a device, a socket or a folder (:func:`check_regular_file`)."""
    path = Path(path)
    if special_file_kind(path) is None and not path.is_file():
        raise MissingDataError(f"data file not found: {path}")
    return check_regular_file(path)


def require_folder(path: PathLike) -> Path:
    """Return ``path`` as a Path; raise MissingDataError naming it when it is not a folder."""
    path = Path(path)
    if not path.is_dir():
        raise MissingDataError(f"data folder not found: {path}")
    return path


def iter_lines(path: PathLike) -> Iterator[tuple[int, str]]:
    """Yield ``(line_number, text)`` for every line, numbered from 1, without the line ending.

    Only ``\\n`` (and ``\\r\\n``) end a line, so Unicode separators and a lone ``\\r`` inside a sentence
    stay in it. A file that cannot be opened (permissions) is a DataFormatError naming it.
    """
    path = require_file(path)
    try:
        handle = path.open("rb")
    except OSError as error:
        raise DataFormatError(path, None, f"cannot read the file ({error.strerror or error})") from None
    with handle:
        yield from decode_lines(path, handle)


def decode_lines(path: PathLike, raw_lines: Iterable[bytes], first: int = 1) -> Iterator[tuple[int, str]]:
    """:func:`iter_lines` on raw lines (each with its ``\\n``) that start at line ``first`` of ``path``: decoded
    as UTF-8 (a bad byte a DataFormatError naming the line), the byte-order mark dropped from line 1."""
    for number, raw in enumerate(raw_lines, start=first):
        if number == 1 and raw.startswith(codecs.BOM_UTF8):
            raw = raw[len(codecs.BOM_UTF8) :]
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            raise DataFormatError(
                path, number, f"not valid UTF-8 ({error.reason} at byte {error.start} of the line)"
            ) from None
        yield number, text.rstrip("\r\n")


def iter_tab_rows(path: PathLike) -> Iterator[tuple[int, list[str]]]:
    """Yield ``(line_number, fields)``: each line split on TAB, with no quoting at all."""
    for number, text in iter_lines(path):
        yield number, text.split("\t")


def iter_csv_rows(path: PathLike, delimiter: str = ",") -> Iterator[tuple[int, list[str]]]:
    """Yield ``(first_line_number, fields)`` for each record, with real CSV quoting (the csv module).

    A quoted field may span lines; the number given is the line where its record starts.
    """
    return csv_records(path, iter_lines(path), delimiter)


def csv_records(
    path: PathLike, lines: Iterable[tuple[int, str]], delimiter: str = ","
) -> Iterator[tuple[int, list[str]]]:
    """:func:`iter_csv_rows` on consecutive numbered lines of ``path`` (:func:`decode_lines`): ``(first_line_number,
    fields)`` for each record, bad quoting a DataFormatError naming the line the csv module stopped at."""
    lines = iter(lines)
    first = next(lines, None)
    if first is None:
        return
    before = first[0] - 1  # the line before the first: the csv module counts the lines it reads from 1
    texts = itertools.chain([first[1] + "\n"], (text + "\n" for _, text in lines))
    reader = csv.reader(texts, delimiter=delimiter, strict=True)
    start = first[0]
    while True:
        try:
            fields = next(reader)
        except StopIteration:
            return
        except csv.Error as error:
            raise DataFormatError(path, before + reader.line_num, f"bad CSV quoting: {error}") from None
        yield start, fields
        start = before + reader.line_num + 1


def iter_json_objects(path: PathLike, array_hint: str | None = None) -> Iterator[tuple[int, dict]]:
    """Yield ``(line_number, object)`` for each line of a JSON Lines file, blank lines skipped. A line that is not
    JSON, or JSON but not an object, is a DataFormatError naming ``path:line``; ``array_hint`` is the message
    instead when the bad line starts a JSON array (a whole ``.json`` file where one object a line was due)."""
    for line, text in iter_lines(path):
        if not text.strip():
            continue
        try:
            record = json.loads(text)
        except json.JSONDecodeError as error:
            if array_hint is not None and text.lstrip().startswith("["):
                raise DataFormatError(path, line, array_hint) from None
            raise DataFormatError(path, line, f"invalid JSON: {error.msg} at column {error.colno}") from None
        if not isinstance(record, dict):
            raise DataFormatError(path, line, f"expected a JSON object, found {type(record).__name__}")
        yield line, record


def require_columns(path: PathLike, line: int, fields: list[str], names: list[str], allow_extra: bool = False) -> None:
    """Raise unless the row has ``len(names)`` fields (or more, when ``allow_extra``)."""
    expected = len(names)
    if len(fields) == expected or (allow_extra and len(fields) > expected):
        return
    wanted = f"at least {expected}" if allow_extra else str(expected)
    raise DataFormatError(
        path, line, f"expected {wanted} columns ({', '.join(names)}), found {len(fields)}"
    )


def require_text(path: PathLike, line: int, value: str, column: str) -> str:
    """The text of a field without surrounding whitespace; an empty text is an error."""
    text = value.strip()
    if not text:
        raise DataFormatError(path, line, f"empty text in column {column!r}")
    return text


def parse_float(path: PathLike, line: int, value: str, column: str) -> float:
    """A finite float; whitespace around the number is tolerated."""
    try:
        number = float(value.strip())
    except ValueError:
        raise DataFormatError(path, line, f"column {column!r}: expected a number, found {value!r}") from None
    if not math.isfinite(number):
        raise DataFormatError(path, line, f"column {column!r}: expected a finite number, found {value!r}")
    return number


ScoreRange = tuple[float, float]
"""Inclusive (low, high) bounds of a similarity score, e.g. (0, 5) for STS and (1, 5) for SICK relatedness."""


def parse_score(path: PathLike, line: int, value: str, column: str, score_range: ScoreRange | None = None) -> float:
    """A finite float score; inside ``score_range`` (inclusive) when one is given."""
    score = parse_float(path, line, value, column)
    if score_range is not None and not score_range[0] <= score <= score_range[1]:
        low, high = score_range
        raise DataFormatError(
            path, line, f"column {column!r}: score {score:g} is outside the range {low:g}-{high:g} of this data"
        )
    return score


def parse_int_label(path: PathLike, line: int, value: str, column: str, num_labels: int | None = None) -> int:
    """A class index such as ``"1"``, ``" 1 "`` or ``"1.0"``; in ``range(num_labels)`` when given."""
    text = value.strip()
    try:
        number = float(text)
    except ValueError:
        number = math.nan
    if not text or not number.is_integer():
        raise DataFormatError(path, line, f"column {column!r}: expected an integer label, found {value!r}")
    label = int(number)
    if num_labels is not None and not 0 <= label < num_labels:
        raise DataFormatError(
            path, line, f"column {column!r}: unknown label {label}, expected 0..{num_labels - 1}"
        )
    return label


def parse_named_label(path: PathLike, line: int, value: str, column: str, names: Mapping[str, int]) -> int:
    """A label given by name (``entailment`` -> 0, ...); also accepts the index itself (``"0"``)."""
    text = value.strip()
    if text in names:
        return names[text]
    if text in {str(index) for index in names.values()}:
        return int(text)
    raise DataFormatError(
        path, line, f"column {column!r}: unknown label {value!r}, expected one of {', '.join(names)}"
    )


LabelParser = Callable[[PathLike, int, str, str], "int | float | None"]
