"""Degenerate training data, found before any model loads (issue 21, item 5).

- :func:`is_blank`: a text with nothing left once whitespace, control, format (zero-width, bidi) and unassigned
  or private-use characters are removed, which is what BERT's tokenizer removes before it splits
  (``BasicTokenizer._clean_text``): the text encodes as the special tokens alone. :func:`drop_blank` drops the
  examples holding one and says which.
- :func:`duplicate_positives`: how many rows repeat another row's positive (the second text of a pair, the
  sentence itself for dropout twins). Such a row's in-batch negatives can equal its positive; when every row is
  the same, the in-batch loss is a constant log B.

Example::

    >>> is_blank("\\u200b\\u200f \\u2066"), is_blank("a")
    (True, False)
"""

from __future__ import annotations

import unicodedata
from collections import Counter
from collections.abc import Sequence

from contrastext.data.examples import Example

REMOVED_CATEGORIES = frozenset({"Cc", "Cf", "Cn", "Co", "Cs", "Zs", "Zl", "Zp"})
"""Unicode categories removed before tokenising: controls, format (zero-width, bidi), unassigned, private use,
surrogates and separators."""

DUPLICATE_WARNING = 0.10
"""Share of rows repeating another row's positive above which the run warns."""


def is_blank(text: str) -> bool:
    """Whether ``text`` has no character left once :data:`REMOVED_CATEGORIES` and whitespace are removed."""
    stripped = text.strip()
    if stripped and unicodedata.category(stripped[0]) not in REMOVED_CATEGORIES:
        return False  # the common case, decided by one character
    return all(char.isspace() or unicodedata.category(char) in REMOVED_CATEGORIES for char in text)


def drop_blank(examples: Sequence[Example]) -> tuple[list[Example], list[Example]]:
    """(the examples whose every text has a character left, the others)."""
    kept: list[Example] = []
    dropped: list[Example] = []
    for example in examples:
        (dropped if any(is_blank(text) for text in example.texts) else kept).append(example)
    return kept, dropped


def positive(example: Example) -> str:
    """The text the anchor is pulled to: the second of a pair or triplet, the sentence of dropout twins."""
    return example.texts[1] if len(example.texts) > 1 else example.texts[0]


def duplicate_positives(examples: Sequence[Example]) -> tuple[int, str | None]:
    """(how many rows repeat an earlier row's positive, the most repeated positive or None)."""
    counts = Counter(positive(example) for example in examples)
    repeated = sum(count - 1 for count in counts.values())
    if not repeated:
        return 0, None
    return repeated, counts.most_common(1)[0][0]
