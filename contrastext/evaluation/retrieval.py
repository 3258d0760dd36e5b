"""Pair retrieval: each anchor searches every positive (and hard negative) of the file by cosine similarity.

The evaluation of the ``pairs`` kind (a user's ``(anchor, positive[, hard_negative])`` rows, the data of the
``mnrl`` recipe). It gives sentence-transformers' ``InformationRetrievalEvaluator`` numbers for the queries
``{row i: anchor i}``, the corpus of the distinct candidate texts and ``relevant_docs = {row i: {positive i}}``
(``tests/evaluation/test_retrieval.py`` checks it against ST within 1e-6):

- candidates: the distinct texts of the positive column, and of the hard-negative column when there is one;
- a candidate whose text equals the anchor's is kept in its search, as ST keeps it (``exclude_identical=True``
  leaves it out: the rule of contrastext before issue 23, which scored higher when anchors also appear among
  the candidates);
- for anchor i, its rank is the number of OTHER candidates scored at least as high as its own positive. Exact
  ties count against it, so a model that maps everything to one vector scores 0, not 100; this is the one
  place where ST differs (it breaks exact ties by corpus id), and only when two candidates score exactly alike;
- ``accuracy_at_1`` / ``accuracy_at_10``: share of anchors whose positive ranks first / in the top 10;
  ``mrr_at_10``: mean reciprocal rank, 0 past rank 10 (the headline metric). All ×100.

For queries, a corpus and graded judgements (the BEIR layout) see ``evaluation/information_retrieval.py``.

Example::

    >>> evaluate_pairs(encoder.encode, [Example(("a cat", "a kitten")), Example(("a car", "an automobile"))])
    {'accuracy_at_1': 100.0, 'accuracy_at_10': 100.0, 'mrr_at_10': 100.0, 'n': 2, 'candidates': 2}
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from contrastext.data.examples import Example
from contrastext.errors import DataFormatError, EmptyDataError
from contrastext.evaluation.sts import EncodeFn, embed_unique

PAIR_METRICS: tuple[str, ...] = ("accuracy_at_1", "accuracy_at_10", "mrr_at_10")
HEADLINE = "mrr_at_10"
CHUNK = 1024
"""Anchors scored at once (a CHUNK x candidates matrix)."""


def check_pairs(pairs: Sequence[Example]) -> int:
    """The number of texts of every row (2 or 3, the same for all); DataFormatError naming the first bad row."""
    if not pairs:
        raise EmptyDataError("no pairs to evaluate")
    width = len(pairs[0].texts)
    for index, example in enumerate(pairs):
        if len(example.texts) != width or width not in (2, 3):
            raise DataFormatError(
                example.source or f"example {index}",
                None,
                f"pair retrieval needs (anchor, positive) or (anchor, positive, hard_negative) rows, all alike; "
                f"got {len(example.texts)} texts after {width}-text rows",
            )
    return width


def _unit(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms == 0, 1.0, norms)


def evaluate_pairs(
    encode: EncodeFn, pairs: Sequence[Example], batch_size: int = 64, exclude_identical: bool = False
) -> dict:
    """``accuracy_at_1``, ``accuracy_at_10``, ``mrr_at_10`` (×100), ``n`` anchors and ``candidates`` searched.

    ``exclude_identical``: leave a candidate whose text is the anchor's own (other than its positive) out of
    that anchor's search (default False: kept, as sentence-transformers keeps it)."""
    width = check_pairs(pairs)
    anchors = [example.texts[0] for example in pairs]
    positives = [example.texts[1] for example in pairs]
    negatives = [example.texts[2] for example in pairs] if width == 3 else []
    candidates = list(dict.fromkeys(positives + negatives))
    position = {text: index for index, text in enumerate(candidates)}
    embeddings = embed_unique(encode, anchors + candidates, batch_size=batch_size)
    anchor_matrix = _unit(np.stack([embeddings[text] for text in anchors]))
    candidate_matrix = _unit(np.stack([embeddings[text] for text in candidates]))
    ranks = np.empty(len(pairs), dtype=np.int64)
    for start in range(0, len(pairs), CHUNK):
        stop = min(start + CHUNK, len(pairs))
        scores = anchor_matrix[start:stop] @ candidate_matrix.T
        rows = np.arange(stop - start)
        own = np.array([position[text] for text in positives[start:stop]])
        for row, text in enumerate(anchors[start:stop] if exclude_identical else ()):
            same = position.get(text)
            if same is not None and same != own[row]:
                scores[row, same] = -np.inf  # the anchor's own text is not an answer to it
        target = scores[rows, own][:, None]
        at_least = (scores >= target).sum(axis=1) - 1  # every other candidate scored as high or higher
        ranks[start:stop] = at_least
    reciprocal = np.where(ranks < 10, 1.0 / (ranks + 1), 0.0)
    return {
        "accuracy_at_1": float(np.mean(ranks < 1) * 100),
        "accuracy_at_10": float(np.mean(ranks < 10) * 100),
        "mrr_at_10": float(np.mean(reciprocal) * 100),
        "n": len(pairs),
        "candidates": len(candidates),
    }
