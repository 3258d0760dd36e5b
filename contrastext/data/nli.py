"""NLI rows (premise, hypothesis, label) as SimCSE's supervised triplets (premise, entailment, contradiction).

Gao, Yao & Chen, "SimCSE: Simple Contrastive Learning of Sentence Embeddings", EMNLP 2021, §4 (supervised):
for each premise, an entailment hypothesis is its positive and a contradiction hypothesis its hard negative;
neutral hypotheses are not used. :func:`nli_triplets` builds those triplets from labelled pairs:

- labels: ``entailment`` / ``neutral`` / ``contradiction`` (any case), or the integers of GLUE's MNLI and of the
  Hugging Face ``snli``, ``multi_nli`` and ``sentence-transformers/all-nli`` (pair-class) datasets, whose
  ClassLabel names are ``[entailment, neutral, contradiction]``: **0 entailment, 1 neutral, 2 contradiction**.
  SNLI's rows without a gold label (``-`` in its files, ``-1`` in the ``snli`` dataset) are dropped and counted,
  as neutral rows are. Any other label is a DataFormatError naming the row's ``file:line``;
- pairing: the hypotheses of one premise (the same text, wherever its rows are) are paired in file order, the
  i-th entailment with the i-th contradiction; a premise's entailments or contradictions beyond the shorter
  list are left out and counted. A triplet is emitted when its second row is read, so rows grouped by premise
  (as NLI files are) keep their order.

This rule rebuilds the shared ``nli/snli_devtest_for_simcse.csv`` (SimCSE's format, 5,883 triplets) from
SentEval's SNLI dev + test files exactly, row for row (tests/data/test_nli.py).

Example::

    >>> rows = [Example(("A man sleeps.", "A person rests."), "entailment", "nli.csv:2"),
    ...         Example(("A man sleeps.", "A man is awake."), "2", "nli.csv:3"),
    ...         Example(("A man sleeps.", "He is tired."), "neutral", "nli.csv:4")]
    >>> triplets, counts = nli_triplets(rows)
    >>> triplets[0].texts, counts.neutral
    (('A man sleeps.', 'A person rests.', 'A man is awake.'), 1)
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from contrastext.data.examples import Example
from contrastext.data.readers.lines import ExampleList
from contrastext.errors import DataFormatError

ENTAILMENT, NEUTRAL, CONTRADICTION = "entailment", "neutral", "contradiction"
NO_GOLD = None
NLI_LABELS: dict[str, str | None] = {
    "entailment": ENTAILMENT,
    "neutral": NEUTRAL,
    "contradiction": CONTRADICTION,
    "0": ENTAILMENT,
    "1": NEUTRAL,
    "2": CONTRADICTION,
    "-": NO_GOLD,
    "-1": NO_GOLD,
}
"""A label's text (stripped, lower case; ``0.0`` reads as ``0``) -> its NLI class; None: no gold label."""


@dataclass(frozen=True)
class NLICounts:
    """What :func:`nli_triplets` did: the rows of each label, the triplets made and the hypotheses left unpaired."""

    rows: int
    entailment: int
    neutral: int
    contradiction: int
    no_gold: int
    triplets: int
    premises: int
    unpaired_entailment: int
    unpaired_contradiction: int

    def describe(self, where: str) -> str:
        """One line: the rows read as SimCSE's triplets, with the counts."""
        line = (
            f"{where}: NLI rows (premise, hypothesis, label) read as SimCSE's triplets (premise, entailment, "
            f"contradiction): {self.rows} rows ({self.entailment} entailment, {self.contradiction} contradiction, "
            f"{self.neutral} neutral dropped"
        )
        if self.no_gold:
            line += f", {self.no_gold} without a gold label dropped"
        return line + (
            f") -> {self.triplets} triplets from {self.premises} premises, a premise's i-th entailment paired with "
            f"its i-th contradiction; {self.unpaired_entailment} entailment and {self.unpaired_contradiction} "
            "contradiction hypotheses left unpaired"
        )


def nli_class(value: object, where: str | None) -> str | None:
    """The NLI class of a label (see :data:`NLI_LABELS`); anything else is a DataFormatError naming ``where``."""
    text = str(value).strip().lower()
    try:
        number = float(text)
        if number.is_integer():
            text = str(int(number))
    except ValueError:
        pass
    if text not in NLI_LABELS:
        path, line = _split_source(where)
        raise DataFormatError(
            path, line,
            f"label {value!r} is not an NLI label: entailment, neutral, contradiction, or 0 / 1 / 2 in that order "
            "(GLUE MNLI, Hugging Face snli / multi_nli); - or -1 for no gold label",
        )  # fmt: skip
    return NLI_LABELS[text]


def nli_triplets(rows: Sequence[Example]) -> tuple[ExampleList, NLICounts]:
    """SimCSE's triplets from ``(premise, hypothesis)`` examples labelled by :func:`nli_class` (module docstring).
    A triplet's ``source`` is its entailment row's."""
    waiting: dict[str, tuple[deque[Example], deque[Example]]] = {}
    classes = {ENTAILMENT: 0, NEUTRAL: 0, CONTRADICTION: 0, NO_GOLD: 0}
    triplets = ExampleList()
    for row in rows:
        if len(row.texts) != 2:
            raise ValueError(f"nli_triplets takes (premise, hypothesis) examples, got {len(row.texts)} texts")
        kind = nli_class(row.label, row.source)
        classes[kind] += 1
        if kind not in (ENTAILMENT, CONTRADICTION):
            continue
        premise = row.texts[0]
        entailments, contradictions = waiting.setdefault(premise, (deque(), deque()))
        mine, others = (entailments, contradictions) if kind == ENTAILMENT else (contradictions, entailments)
        if not others:
            mine.append(row)
            continue
        other = others.popleft()
        entailment, contradiction = (row, other) if kind == ENTAILMENT else (other, row)
        triplets.append(Example((premise, entailment.texts[1], contradiction.texts[1]), source=entailment.source))
    counts = NLICounts(
        rows=len(rows),
        entailment=classes[ENTAILMENT],
        neutral=classes[NEUTRAL],
        contradiction=classes[CONTRADICTION],
        no_gold=classes[NO_GOLD],
        triplets=len(triplets),
        premises=len({example.texts[0] for example in triplets}),
        unpaired_entailment=sum(len(pair[0]) for pair in waiting.values()),
        unpaired_contradiction=sum(len(pair[1]) for pair in waiting.values()),
    )
    return triplets, counts


def _split_source(where: str | None) -> tuple[str, int | None]:
    """``"path:line"`` -> ``(path, line)``; a source without a line number -> ``(source, None)``."""
    if not where:
        return "<examples>", None
    path, _, line = where.rpartition(":")
    return (path, int(line)) if path and line.isdigit() else (where, None)


__all__ = ["CONTRADICTION", "ENTAILMENT", "NEUTRAL", "NLICounts", "NLI_LABELS", "nli_class", "nli_triplets"]
