"""The names of the information-retrieval metrics (no torch here: the metric-key producer imports them).

sentence-transformers' ``InformationRetrievalEvaluator`` keys without its evaluator-name prefix:
``{score function}_{metric}@{k}``, for the score functions ``cosine`` and ``dot``, the metrics ``accuracy``,
``precision``, ``recall``, ``ndcg``, ``mrr`` and ``map``, and every k of ``KS``. An ``ir:`` evaluation spec is
judged by :data:`HEADLINE`, ``cosine_ndcg@10`` (ST's primary metric with ``main_score_function="cosine"``).

Example::

    >>> metric_keys(["cosine"], [10])[:2]
    ['cosine_accuracy@10', 'cosine_precision@10']
"""

from __future__ import annotations

from collections.abc import Sequence

KS: tuple[int, ...] = (1, 3, 5, 10, 100)
SCORE_FUNCTIONS: tuple[str, ...] = ("cosine", "dot")
METRICS: tuple[str, ...] = ("accuracy", "precision", "recall", "ndcg", "mrr", "map")
HEADLINE = "cosine_ndcg@10"


def metric_keys(score_functions: Sequence[str] = SCORE_FUNCTIONS, ks: Sequence[int] = KS) -> list[str]:
    """Every key the IR metrics have, e.g. ``cosine_accuracy@1`` (score function, then metric, then k)."""
    return [f"{name}_{metric}@{k}" for name in score_functions for metric in METRICS for k in ks]


IR_METRIC_NAMES: tuple[str, ...] = tuple(metric_keys())
"""Every IR metric name, in the order :func:`metric_keys` gives them."""
