"""Rows with list-valued columns, ``{"query": "...", "pos": ["..", ".."], "neg": ["..", ".."]}``, as n-tuples.

The retrieval training format of FlagEmbedding / BGE and of many hub datasets: one query, a list of positives and
a list of (hard) negatives. sentence-transformers trains on fixed columns instead, ``(anchor, positive,
negative_1 … negative_n)`` (its ``mine_hard_negatives(output_format="n-tuple")``), every row with the same n.
:func:`read_ntuples` turns the first into the second:

- one example per positive: ``(query, positive_k, negative_1 … negative_n)`` for each positive k of a row, the
  row's negatives repeated for each (as ``mine_hard_negatives`` repeats them for each positive of a query);
- n is ``num_negatives`` when given: a row with fewer negatives is dropped, as sentence-transformers' n-tuple
  format drops the queries it found fewer than n negatives for; a row with more keeps its first n;
- without it, n is the fewest negatives of any row, so no row is dropped (the negatives after the first n of a
  row are left out, and counted);
- a row whose positive list is empty gives no example and is recorded (``skipped_sources``);
- a plain string where a list is expected is a list of one (a negative column holding one text a row);
- a list holding a non-string, a blank text or a query that is not a string is a DataFormatError naming
  ``path:line``.

:class:`NTupleCounts` says what was done; ``describe()`` is the line the run prints.

Example::

    >>> rows = [(1, {"query": "q1", "pos": ["p1", "p2"], "neg": ["n1", "n2", "n3"]}),
    ...         (2, {"query": "q2", "pos": ["p3"], "neg": ["n4", "n5"]})]
    >>> examples, counts = read_ntuples("train.jsonl", rows, "query", "pos", "neg")
    >>> [example.texts for example in examples]
    [('q1', 'p1', 'n1', 'n2'), ('q1', 'p2', 'n1', 'n2'), ('q2', 'p3', 'n4', 'n5')]
    >>> counts.num_negatives, counts.negatives_left_out
    (2, 1)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from contrastext.data.examples import Example
from contrastext.data.readers.lines import ExampleList, PathLike, require_text, source
from contrastext.errors import DataFormatError


@dataclass(frozen=True)
class NTupleCounts:
    """What :func:`read_ntuples` did: ``rows`` read, ``examples`` made (one per kept positive), ``num_negatives``
    (n) per example and where n came from (``chosen``), the fewest and most negatives of a row, the rows dropped
    for having fewer than n (``too_few``) or no positive (``no_positive``), the negatives beyond the first n."""

    rows: int
    examples: int
    num_negatives: int
    chosen: str
    fewest: int
    most: int
    too_few: int
    no_positive: int
    negatives_left_out: int

    def describe(self, where: str, columns: tuple[str, ...]) -> str:
        """One line: the list-valued columns of ``where`` read as one row per positive, with the counts."""
        anchor, positive, *negative = columns
        n = self.num_negatives
        columns_shown = {0: "", 1: ", negative_1", 2: ", negative_1, negative_2"}.get(n, f", negative_1 … negative_{n}")
        shape = f"(anchor, positive{columns_shown})"
        line = (
            f"{where}: list-valued columns read as one row per positive ({positive}), the anchor {anchor!r}"
            + (f" and the negatives of {negative[0]!r} as n-tuple columns" if negative else "")
            + f": {self.rows} rows -> {self.examples} {shape} rows"
        )
        if negative:
            line += f"; n = {n} ({self.chosen}), rows hold {self.fewest}–{self.most} negatives"
            line += f", {self.too_few} rows with fewer than {n} dropped (as sentence-transformers' n-tuple format)"
            line += f", {self.negatives_left_out} negatives beyond a row's first {n} left out"
        if self.no_positive:
            line += f"; {self.no_positive} rows without a positive skipped"
        return line


def read_ntuples(
    path: PathLike,
    records: Iterable[tuple[int, Mapping]],
    anchor: str,
    positive: str,
    negative: str | None = None,
    num_negatives: int | None = None,
) -> tuple[ExampleList, NTupleCounts]:
    """Examples ``(anchor, positive, negative_1 … negative_n)`` from ``(line, record)`` pairs (module docstring)."""
    if num_negatives is not None and num_negatives < 0:
        raise ValueError(f"num_negatives must be >= 0, not {num_negatives}")
    rows: list[tuple[int, str, list[str], list[str]]] = []
    for line, record in records:
        query = _text(path, line, record, anchor)
        positives = _texts(path, line, record, positive)
        negatives = _texts(path, line, record, negative) if negative is not None else []
        rows.append((line, query, positives, negatives))
    with_positive = [row for row in rows if row[2]]
    counts = [len(row[3]) for row in with_positive]
    n = num_negatives if num_negatives is not None else min(counts, default=0)
    examples = ExampleList()
    too_few = left_out = 0
    for line, query, positives, negatives in rows:
        if not positives:
            examples.skipped_sources.append(f"{source(path, line)}: no positive in {positive!r}")
            continue
        if len(negatives) < n:
            too_few += 1
            examples.skipped_sources.append(
                f"{source(path, line)}: {len(negatives)} negatives in {negative!r}, fewer than {n}"
            )
            continue
        left_out += len(negatives) - n
        for text in positives:
            examples.append(Example((query, text, *negatives[:n]), source=source(path, line)))
    result = NTupleCounts(
        rows=len(rows),
        examples=len(examples),
        num_negatives=n,
        chosen="data.num_negatives" if num_negatives is not None else "the fewest of any row: none dropped",
        fewest=min(counts, default=0),
        most=max(counts, default=0),
        too_few=too_few,
        no_positive=len(rows) - len(with_positive),
        negatives_left_out=left_out,
    )
    return examples, result


def _text(path: PathLike, line: int, record: Mapping, column: str) -> str:
    value = _value(path, line, record, column)
    if not isinstance(value, str):
        found = "a list" if isinstance(value, list) else repr(value)
        raise DataFormatError(path, line, f"key {column!r}: expected a string (one text a row), found {found}")
    return require_text(path, line, value, column)


def _texts(path: PathLike, line: int, record: Mapping, column: str) -> list[str]:
    value = _value(path, line, record, column)
    if isinstance(value, str):
        return [require_text(path, line, value, column)]
    if not isinstance(value, list | tuple):
        raise DataFormatError(path, line, f"key {column!r}: expected a list of strings, found {value!r}")
    texts = []
    for position, item in enumerate(value, start=1):
        if not isinstance(item, str):
            raise DataFormatError(
                path, line, f"key {column!r}: item {position} is {item!r}, not a string; a list-valued column holds texts"
            )
        texts.append(require_text(path, line, item, f"{column}[{position}]"))
    return texts


def _value(path: PathLike, line: int, record: Mapping, column: str) -> object:
    if column not in record:
        raise DataFormatError(path, line, f"missing key {column!r}; keys are {', '.join(record)}")
    return record[column]


__all__ = ["NTupleCounts", "read_ntuples"]
