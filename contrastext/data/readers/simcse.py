"""Readers for SimCSE's training files: one sentence a line (wiki1m) and the ``sent0,sent1[,hard_neg]`` csv."""

from __future__ import annotations

from typing import Literal

from contrastext.data.examples import Example
from contrastext.data.readers.lines import (
    ExampleList,
    PathLike,
    iter_csv_rows,
    iter_lines,
    log_skipped,
    require_columns,
    require_text,
    source,
)
from contrastext.errors import DataFormatError

SIMCSE_PAIR_COLUMNS = ["sent0", "sent1"]
SIMCSE_TRIPLET_COLUMNS = ["sent0", "sent1", "hard_neg"]


def read_sentences(path: PathLike, blank_lines: Literal["skip", "raise"] = "skip") -> ExampleList:
    """One sentence a line (SimCSE's ``wiki1m_for_simcse.txt``): ``Example((sentence,))`` per line.

    A blank line holds no sentence: with ``blank_lines="skip"`` it is skipped and recorded in
    ``skipped_sources``; with ``"raise"`` it is an error.
    """
    if blank_lines not in ("skip", "raise"):
        raise ValueError(f"blank_lines must be 'skip' or 'raise', not {blank_lines!r}")
    examples = ExampleList()
    for line, text in iter_lines(path):
        if not text.strip():
            if blank_lines == "raise":
                raise DataFormatError(path, line, "blank line, expected one sentence")
            examples.skipped_sources.append(f"{source(path, line)}: blank line")
            continue
        examples.append(Example(texts=(text.strip(),), source=source(path, line)))
    return log_skipped(path, examples)


def read_simcse_csv(path: PathLike) -> ExampleList:
    """SimCSE's supervised csv: header ``sent0,sent1`` (pairs) or ``sent0,sent1,hard_neg`` (triplets).

    Real CSV quoting (fields with commas are quoted). Every row must have the header's column count;
    each example's texts are (anchor, positive) or (anchor, positive, hard negative), label None.
    """
    rows = iter_csv_rows(path, delimiter=",")
    first = next(rows, None)
    if first is None:
        raise DataFormatError(path, None, "the file is empty")
    header = [name.strip() for name in first[1]]
    if header not in (SIMCSE_PAIR_COLUMNS, SIMCSE_TRIPLET_COLUMNS):
        raise DataFormatError(path, first[0], f"expected the header sent0,sent1 or sent0,sent1,hard_neg; found {first[1]!r}")
    examples = ExampleList()
    for line, fields in rows:
        require_columns(path, line, fields, header)
        texts = tuple(require_text(path, line, value, name) for value, name in zip(fields, header, strict=True))
        examples.append(Example(texts=texts, source=source(path, line)))
    return examples
