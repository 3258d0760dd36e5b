"""Alignment and uniformity of an embedding space (Wang & Isola, ICML 2020).

On L2-normalised embeddings f(·):

    alignment  = E_{(x, y) ~ positive pairs} ‖f(x) − f(y)‖²                 (α = 2; lower is better, ≥ 0)
    uniformity = log E_{x, y ~ data, x ≠ y} exp(−t ‖f(x) − f(y)‖²)          (t = 2; lower is better, ≤ 0)

"Understanding Contrastive Representation Learning through Alignment and Uniformity on the Hypersphere",
Wang & Isola 2020; SimCSE (Gao et al. 2021, §5) measures both on STS-B: positive pairs are the pairs
scored ≥ 4, and uniformity is taken over all distinct sentences of the split.

Example::

    >>> alignment(np.eye(3), np.eye(3))
    0.0
    >>> alignment_uniformity(encoder.encode, data_root, split="dev")
    {'alignment': 0.28, 'uniformity': -2.9, 'n_positive_pairs': 426, 'n_sentences': 2994, 'split': 'dev'}
"""

from __future__ import annotations

import os

import numpy as np

from contrastext.evaluation.sts import EncodeFn, embed_unique

POSITIVE_THRESHOLD = 4.0


def _unit_rows(embeddings: np.ndarray, name: str) -> np.ndarray:
    array = np.asarray(embeddings, dtype=np.float64)
    if array.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array (n, dim), got shape {tuple(array.shape)}")
    if not np.isfinite(array).all():
        raise ValueError(f"{name} contains NaN or infinite values")
    from sklearn.preprocessing import normalize

    return normalize(array)


def alignment(left: np.ndarray, right: np.ndarray, alpha: float = 2.0) -> float:
    """Mean ‖f(x) − f(y)‖^α over positive pairs (rows ``left[i]``, ``right[i]``), after L2 normalisation."""
    left, right = _unit_rows(left, "left"), _unit_rows(right, "right")
    if left.shape != right.shape:
        raise ValueError(f"left and right must have the same shape, got {left.shape} and {right.shape}")
    if left.shape[0] == 0:
        raise ValueError("alignment needs at least one positive pair")
    return float(np.mean(np.linalg.norm(left - right, axis=1) ** alpha))


def uniformity(embeddings: np.ndarray, t: float = 2.0) -> float:
    """log of the mean of exp(−t ‖f(x) − f(y)‖²) over all pairs x ≠ y, after L2 normalisation."""
    unit = _unit_rows(embeddings, "embeddings")
    if unit.shape[0] < 2:
        raise ValueError(f"uniformity needs at least 2 embeddings, got {unit.shape[0]}")
    from scipy.spatial.distance import pdist
    from scipy.special import logsumexp

    squared = pdist(unit, metric="sqeuclidean")
    return float(logsumexp(-t * squared) - np.log(squared.size))


def alignment_uniformity(
    encode: EncodeFn,
    data_root: str | os.PathLike | None = None,
    split: str = "dev",
    batch_size: int = 64,
    threshold: float = POSITIVE_THRESHOLD,
) -> dict:
    """Alignment over the STS-B pairs of ``split`` scored ≥ ``threshold`` and uniformity over its sentences."""
    from contrastext.data.tasks import load_task

    pairs = load_task(f"stsb:{split}", data_root).examples
    embeddings = embed_unique(encode, [text for example in pairs for text in example.texts], batch_size)
    positives = [example for example in pairs if float(example.label) >= threshold]
    if not positives:
        raise ValueError(f"no STS-B {split} pair is scored >= {threshold}: alignment is undefined")
    left = np.stack([embeddings[example.texts[0]] for example in positives])
    right = np.stack([embeddings[example.texts[1]] for example in positives])
    return {
        "alignment": alignment(left, right),
        "uniformity": uniformity(np.stack(list(embeddings.values()))),
        "n_positive_pairs": len(positives),
        "n_sentences": len(embeddings),
        "split": split,
    }
