"""Readers for the GLUE ``glue/<TASK>/{train,dev,test}.tsv`` files.

Columns are found by the header names GLUE uses, so the test files (which lack the label column) read
as unlabelled examples. CoLA's train/dev files and the QQP subset have no header: their columns are
taken by position. Most GLUE files are plain TAB-separated text with raw quote characters; the RTE and
QQP copies here are CSV-quoted (``"..."`` with doubled inner quotes) and are read with the csv module.
Labels: class indices as in Hugging Face ``glue`` (RTE/QNLI: entailment 0, not_entailment 1).
"""

from __future__ import annotations

import logging
import re

from contrastext.data.readers.lines import (
    ExampleList,
    PathLike,
    ScoreRange,
    iter_csv_rows,
    iter_tab_rows,
    parse_int_label,
    parse_named_label,
    parse_score,
)
from contrastext.data.readers.tabular import read_columns

logger = logging.getLogger("contrastext.data")

ENTAILMENT_LABELS = {"entailment": 0, "not_entailment": 1}
COLA_COLUMNS = ("source", "label", "original_mark", "sentence")
QQP_COLUMNS = ("id", "qid1", "qid2", "question1", "question2", "is_duplicate")


def read_glue_stsb(path: PathLike, score_range: ScoreRange | None = None) -> ExampleList:
    """GLUE STS-B: ``sentence1``, ``sentence2``, float ``score`` (0-5); test files are unscored."""
    return read_columns(
        path,
        iter_tab_rows(path),
        text_columns=("sentence1", "sentence2"),
        label_column="score",
        parse_label=lambda p, line, value, column: parse_score(p, line, value, column, score_range),
    )


def read_glue_sst2(path: PathLike) -> ExampleList:
    """GLUE SST-2: header ``sentence<TAB>label`` (0 negative, 1 positive); test: ``index<TAB>sentence``."""
    return read_columns(
        path,
        iter_tab_rows(path),
        text_columns=("sentence",),
        label_column="label",
        parse_label=lambda p, line, value, column: parse_int_label(p, line, value, column, 2),
    )


def read_glue_mrpc(path: PathLike) -> ExampleList:
    """MRPC (GLUE and SentEval ``msr_paraphrase_*.txt``): ``Quality``, ``#1 String``, ``#2 String``.

    The files start with a UTF-8 byte-order mark, which is dropped.
    """
    return read_columns(
        path,
        iter_tab_rows(path),
        text_columns=("#1 String", "#2 String"),
        label_column="Quality",
        parse_label=lambda p, line, value, column: parse_int_label(p, line, value, column, 2),
    )


def read_glue_cola(path: PathLike) -> ExampleList:
    """CoLA: no header; source, label (0/1), original mark, sentence. Test: header ``index sentence``."""
    return read_columns(
        path,
        iter_tab_rows(path),
        text_columns=("sentence",),
        label_column="label",
        parse_label=lambda p, line, value, column: parse_int_label(p, line, value, column, 2),
        headerless_columns=COLA_COLUMNS,
    )


def read_glue_rte(path: PathLike) -> ExampleList:
    """RTE: ``sentence1``, ``sentence2``, ``label``: entailment -> 0, not_entailment -> 1.

    Accepts the label names of the GLUE release and the 0/1 indices of the Hugging Face export;
    ``-1`` (the export's test files) and a missing label column mean unlabelled (``label=None``).
    """
    return read_columns(
        path,
        iter_csv_rows(path, delimiter="\t"),
        text_columns=("sentence1", "sentence2"),
        label_column="label",
        parse_label=_entailment_or_unlabelled,
    )


def read_glue_qnli(path: PathLike) -> ExampleList:
    """QNLI: ``question``, ``sentence``, ``label``: entailment -> 0, not_entailment -> 1."""
    return read_columns(
        path,
        iter_tab_rows(path),
        text_columns=("question", "sentence"),
        label_column="label",
        parse_label=_entailment_or_unlabelled,
    )


def read_glue_qqp(path: PathLike) -> ExampleList:
    """QQP: ``question1``, ``question2``, ``is_duplicate`` (0/1); CSV-quoted.

    The GLUE files have a header; the 23,497-row subset has none (id, qid1, qid2, question1,
    question2, is_duplicate by position). One row of that subset has a space instead of a TAB before
    its label (``"...jlpt5? 0"``): such a row is repaired, with a warning naming its line.
    """
    return read_columns(
        path,
        iter_csv_rows(path, delimiter="\t"),
        text_columns=("question1", "question2"),
        label_column="is_duplicate",
        parse_label=lambda p, line, value, column: parse_int_label(p, line, value, column, 2),
        headerless_columns=QQP_COLUMNS,
        repair=_split_label_glued_with_space,
    )


def _entailment_or_unlabelled(path: PathLike, line: int, value: str, column: str) -> int | None:
    if value.strip() == "-1":
        return None
    return parse_named_label(path, line, value, column, ENTAILMENT_LABELS)


_GLUED_LABEL = re.compile(r"^(.*\S)\s+([01])$", re.DOTALL)


def _split_label_glued_with_space(path: PathLike, line: int, fields: list[str], expected: int) -> list[str]:
    """A row one column short whose last field ends in whitespace + 0/1: split that label off."""
    if len(fields) != expected - 1:
        return fields
    match = _GLUED_LABEL.match(fields[-1])
    if match is None:
        return fields
    logger.warning("%s:%d: label separated by a space instead of a TAB; read as %s", path, line, match[2])
    return [*fields[:-1], match[1], match[2]]
