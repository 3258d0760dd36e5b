"""Readers for the CS224N minBERT csv files: ``ids-sst-*.csv``, ``sts-*.csv``, ``quora-*.csv``.

TAB-separated with CSV quoting (pandas ``to_csv(sep="\\t")``) and a leading unnamed index column.
Columns: ids-sst ``id, sentence, sentiment`` (0-4); sts ``id, sentence1, sentence2, similarity``
(0-5, float); quora ``id, sentence1, sentence2, is_duplicate`` (``0.0``/``1.0``). The minBERT test
files lack the label column and read as unlabelled examples.

Two rows of ``quora-dev.csv`` have an empty label (broken quoting swallowed it). By default such a
row raises DataFormatError naming ``file:line``; ``on_bad_label="skip"`` skips it and records it in
``skipped_sources`` (minBERT's own loader drops them without a word).
"""

from __future__ import annotations

from contrastext.data.readers.lines import (
    ExampleList,
    OnBadLabel,
    PathLike,
    ScoreRange,
    iter_csv_rows,
    parse_int_label,
    parse_score,
)
from contrastext.data.readers.tabular import read_columns


def read_minbert_sst(path: PathLike, on_bad_label: OnBadLabel = "raise") -> ExampleList:
    """minBERT ``ids-sst-*.csv``: one sentence, label ``sentiment`` 0-4."""
    return read_columns(
        path,
        iter_csv_rows(path, delimiter="\t"),
        text_columns=("sentence",),
        label_column="sentiment",
        parse_label=lambda p, line, value, column: parse_int_label(p, line, value, column, 5),
        on_bad_label=on_bad_label,
    )


def read_minbert_sts(
    path: PathLike, on_bad_label: OnBadLabel = "raise", score_range: ScoreRange | None = None
) -> ExampleList:
    """minBERT ``sts-*.csv``: a pair, float label ``similarity`` 0-5."""
    return read_columns(
        path,
        iter_csv_rows(path, delimiter="\t"),
        text_columns=("sentence1", "sentence2"),
        label_column="similarity",
        parse_label=lambda p, line, value, column: parse_score(p, line, value, column, score_range),
        on_bad_label=on_bad_label,
    )


def read_minbert_quora(path: PathLike, on_bad_label: OnBadLabel = "raise") -> ExampleList:
    """minBERT ``quora-*.csv``: a pair, label ``is_duplicate`` 0/1 (written ``0.0``/``1.0``)."""
    return read_columns(
        path,
        iter_csv_rows(path, delimiter="\t"),
        text_columns=("sentence1", "sentence2"),
        label_column="is_duplicate",
        parse_label=lambda p, line, value, column: parse_int_label(p, line, value, column, 2),
        on_bad_label=on_bad_label,
    )
