"""The one record type every reader returns and every method consumes."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Example:
    """One example: one to three texts and an optional label.

    - a sentence (wiki1m):            texts=(s,), label=None
    - a labelled sentence (SST-2):    texts=(s,), label=int
    - a scored pair (STS):            texts=(s1, s2), label=float score
    - a labelled pair (MRPC, RTE):    texts=(s1, s2), label=int
    - an NLI triplet (SimCSE sup):    texts=(anchor, positive, hard_negative), label=None

    ``source`` is "path:line" of the row it was read from, so later errors can point at it.
    """

    texts: tuple[str, ...]
    label: int | float | None = None
    source: str | None = None


@dataclass(frozen=True)
class IndexedExample(Example):
    """An :class:`Example` that knows its row in the training set (RECLAIM's memory banks are addressed by it)."""

    index: int = -1


@dataclass(frozen=True)
class TaskExample(Example):
    """An :class:`Example` that knows which task (index into a multi-task run's task list) it belongs to."""

    task: int = -1
