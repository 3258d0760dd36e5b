"""Semantic textual similarity (STS): rank correlation between cosine similarities and human scores.

For each scored pair ``(s1, s2, y)`` the prediction is ``cos(f(s1), f(s2))``; the result is Spearman's
ρ (and Pearson's r) between predictions and gold scores, ×100 as in the SimCSE / SentEval tables.
Each distinct sentence is encoded once.

STS12–STS16 come in subsets (e.g. STS12: MSRpar, MSRvid, SMTeuroparl, ...). Two aggregations are in use:

- ``"all"`` (SimCSE, Gao et al. 2021, the default): the subsets of a year are concatenated and one
  correlation is computed over all their pairs;
- ``"wmean"`` (SentEval, Conneau & Kiela 2018): the correlation of each subset, averaged with
  weights proportional to the subset's number of pairs.

Both appear in papers and differ by a few points, so the result names the one used and always lists
the per-subset numbers.

A correlation is undefined when the gold scores (or the predictions) of a set of pairs are constant: it is
reported as ``None`` (JSON ``null``) with a warning, never as NaN; a headline built on an undefined subset
correlation (``wmean``) is ``None`` too. Embeddings holding NaN or infinity raise ``NonFiniteError``.

Example::

    >>> result = evaluate_sts(encoder.encode, pairs, batch_size=64)
    >>> result["spearman"], result["n"]
    (82.0, 1500)
"""

from __future__ import annotations

import logging
import math
import warnings
from collections.abc import Callable, Sequence
from typing import Literal

import numpy as np

from contrastext.data.examples import Example
from contrastext.errors import EmptyDataError, NonFiniteError
from contrastext.evaluation.metrics import pearson, spearman

logger = logging.getLogger("contrastext.evaluation")

# Any callable ``encode(texts, batch_size=N) -> array (len(texts), dim)``, e.g. ``TextEncoder.encode``.
EncodeFn = Callable[..., np.ndarray]
Aggregation = Literal["all", "wmean"]
AGGREGATIONS: tuple[str, ...] = ("all", "wmean")


def embed_unique(encode: EncodeFn, texts: Sequence[str], batch_size: int = 64) -> dict[str, np.ndarray]:
    """Encode each distinct text once; return ``{text: embedding}`` (float64 rows)."""
    unique = list(dict.fromkeys(texts))
    if not unique:
        return {}
    embeddings = np.asarray(_to_numpy(encode(unique, batch_size=batch_size)), dtype=np.float64)
    if embeddings.ndim != 2 or embeddings.shape[0] != len(unique):
        raise ValueError(
            f"encode returned shape {tuple(embeddings.shape)} for {len(unique)} texts; "
            f"expected ({len(unique)}, dim)"
        )
    check_finite_embeddings(embeddings, unique)
    return dict(zip(unique, embeddings, strict=True))


def check_finite_embeddings(embeddings: np.ndarray, texts: Sequence[str]) -> None:
    """NonFiniteError when any embedding holds NaN or infinity (a diverged model): no score is computed from it."""
    bad = np.flatnonzero(~np.isfinite(embeddings).all(axis=1))
    if bad.size:
        raise NonFiniteError(
            f"the model produced NaN or infinite embeddings for {bad.size} of {len(texts)} texts "
            f"(e.g. {texts[int(bad[0])][:60]!r}); its weights are probably diverged"
        )


def _to_numpy(values) -> np.ndarray:
    if hasattr(values, "detach"):  # a torch tensor
        return values.detach().float().cpu().numpy()
    return np.asarray(values)


def check_scored_pairs(pairs: Sequence[Example]) -> None:
    """Raise ``ValueError`` naming the first example that is not a pair with a numeric score."""
    if not pairs:
        raise EmptyDataError("no scored pairs to evaluate")
    for index, example in enumerate(pairs):
        if len(example.texts) != 2 or example.label is None:
            where = example.source or f"example {index}"
            raise ValueError(
                f"{where}: STS needs pairs (s1, s2) with a numeric score, got "
                f"{len(example.texts)} texts and label {example.label!r}"
            )


def cosine_predictions(pairs: Sequence[Example], embeddings: dict[str, np.ndarray]) -> np.ndarray:
    """Cosine similarity of the two embeddings of every pair."""
    left = np.stack([embeddings[example.texts[0]] for example in pairs])
    right = np.stack([embeddings[example.texts[1]] for example in pairs])
    from sklearn.metrics.pairwise import paired_cosine_distances

    return 1.0 - paired_cosine_distances(left, right)


def _undefined_reason(predictions: np.ndarray, scores: Sequence[float]) -> str:
    if len(predictions) < 2:
        return f"only {len(predictions)} pair"
    if np.ptp(np.asarray(scores, dtype=np.float64)) == 0:
        return "the gold scores are constant"
    if np.ptp(np.asarray(predictions, dtype=np.float64)) == 0:
        return "the predictions are constant"
    return "a degenerate input"


def correlations(predictions: np.ndarray, scores: Sequence[float], where: str = "") -> dict[str, float | int | None]:
    """``{"spearman", "pearson", "n"}`` with the correlations ×100; None (with a warning) where undefined."""
    result: dict[str, float | int | None] = {"spearman": math.nan, "pearson": math.nan, "n": len(predictions)}
    if len(predictions) >= 2:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # scipy's ConstantInputWarning: reported below, once, in our words
            result["spearman"] = spearman(predictions, scores, percent=True)
            result["pearson"] = pearson(predictions, scores, percent=True)
    undefined = [key for key in ("spearman", "pearson") if not math.isfinite(result[key])]
    if undefined:
        logger.warning(
            "%s%s undefined over %d pairs (%s): reported as null",
            f"{where}: " if where else "",
            " and ".join(undefined),
            len(predictions),
            _undefined_reason(predictions, scores),
        )
        result.update({key: None for key in undefined})
    return result


def evaluate_sts(
    encode: EncodeFn,
    pairs: Sequence[Example],
    batch_size: int = 64,
    subsets: dict[str, Sequence[Example]] | None = None,
    aggregation: Aggregation = "all",
    return_predictions: bool = False,
) -> dict:
    """Spearman and Pearson (×100) of cosine similarities against the gold scores.

    Args:
        encode: ``encode(texts, batch_size=N) -> (len(texts), dim)`` array or tensor.
        pairs: scored pairs ``Example((s1, s2), label=score)``; ignored when ``subsets`` is given.
        batch_size: passed to ``encode``.
        subsets: for STS12–16, ``{subset name: pairs}``. The result then has a ``"subsets"`` entry with the
            numbers of each, and the headline numbers follow ``aggregation``.
        aggregation: ``"all"`` (one correlation over the concatenated subsets, SimCSE) or ``"wmean"``
            (pair-count weighted mean of the subsets' correlations, SentEval).
        return_predictions: also return ``"predictions"`` (each pair's cosine, in order) and ``"labels"`` (the
            gold scores), over every pair (the subsets concatenated).

    Returns:
        ``{"spearman": float, "pearson": float, "n": int}``; with subsets also ``"aggregation"`` and
        ``"subsets": {name: {"spearman", "pearson", "n"}}``.
    """
    if aggregation not in AGGREGATIONS:
        raise ValueError(f"aggregation must be one of {', '.join(AGGREGATIONS)}, got {aggregation!r}")
    if subsets:
        pairs = [example for subset in subsets.values() for example in subset]
    check_scored_pairs(pairs)
    texts = [text for example in pairs for text in example.texts]
    embeddings = embed_unique(encode, texts, batch_size=batch_size)
    kept: dict = {}
    if return_predictions:
        kept = {"predictions": cosine_predictions(pairs, embeddings).tolist(), "labels": [float(e.label) for e in pairs]}
    if not subsets:
        return {**correlations(cosine_predictions(pairs, embeddings), [float(e.label) for e in pairs]), **kept}

    per_subset = {
        name: correlations(cosine_predictions(subset, embeddings), [float(e.label) for e in subset], name)
        for name, subset in subsets.items()
    }
    if aggregation == "all":
        headline = correlations(cosine_predictions(pairs, embeddings), [float(e.label) for e in pairs])
    else:
        headline = weighted_mean(per_subset)
    return {**headline, "aggregation": aggregation, "subsets": per_subset, **kept}


def weighted_mean(per_subset: dict[str, dict]) -> dict[str, float | int | None]:
    """SentEval's pair-weighted mean of the subsets' correlations; None when a subset's is undefined."""
    total = sum(result["n"] for result in per_subset.values())
    headline: dict[str, float | int | None] = {"n": total}
    for key in ("spearman", "pearson"):
        undefined = [name for name, result in per_subset.items() if result[key] is None]
        if undefined:
            logger.warning("wmean %s undefined: subset(s) %s have none; reported as null", key, ", ".join(undefined))
            headline[key] = None
        else:
            headline[key] = float(sum(result[key] * result["n"] for result in per_subset.values()) / total)
    return {"spearman": headline["spearman"], "pearson": headline["pearson"], "n": total}
