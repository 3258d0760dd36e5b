"""Scores of predictions against gold labels: thin, checked wrappers over scikit-learn and scipy.

Every function returns a plain ``float`` as a fraction (accuracy 0.91, Spearman 0.82). The evaluation
results of :mod:`contrastext.evaluation.sts`, :mod:`~contrastext.evaluation.classification` and the
``contrastext eval`` command report them ×100, as the SentEval and SimCSE tables do; pass
``percent=True`` to get that scale here.

Inputs are checked first: both sequences must be one-dimensional, non-empty, of the same length and free
of NaN; otherwise ``ValueError`` says which argument is wrong and how.

Example::

    >>> spearman([1.0, 2.0, 3.0], [0.1, 0.5, 0.4])
    0.5
    >>> accuracy([0, 1, 1], [0, 1, 0], percent=True)
    66.66666666666666
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

ArrayLike = Sequence[float] | Sequence[int] | np.ndarray


def _checked_pair(predictions: ArrayLike, labels: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """Return both inputs as 1-D arrays after checking shape, length and NaN."""
    arrays = []
    for name, values in (("predictions", predictions), ("labels", labels)):
        array = np.asarray(values)
        if array.ndim != 1:
            raise ValueError(f"{name} must be one-dimensional, got shape {tuple(array.shape)}")
        if array.size == 0:
            raise ValueError(f"{name} is empty: nothing to score")
        if array.dtype.kind == "f" and np.isnan(array).any():
            where = int(np.flatnonzero(np.isnan(array))[0])
            raise ValueError(f"{name} contains NaN (first at index {where})")
        arrays.append(array)
    if arrays[0].shape[0] != arrays[1].shape[0]:
        raise ValueError(
            f"predictions and labels differ in length: {arrays[0].shape[0]} predictions, "
            f"{arrays[1].shape[0]} labels"
        )
    return arrays[0], arrays[1]


def _scaled(value: float, percent: bool) -> float:
    return float(value) * 100.0 if percent else float(value)


def accuracy(predictions: ArrayLike, labels: ArrayLike, percent: bool = False) -> float:
    """Fraction of predictions equal to their label (``sklearn.metrics.accuracy_score``)."""
    predictions, labels = _checked_pair(predictions, labels)
    from sklearn import metrics as sk_metrics

    return _scaled(sk_metrics.accuracy_score(labels, predictions), percent)


def f1(predictions: ArrayLike, labels: ArrayLike, average: str | None = None, percent: bool = False) -> float:
    """F1 score (``sklearn.metrics.f1_score``).

    ``average=None`` picks ``"binary"`` (positive class 1) when the labels are exactly {0, 1} (GLUE's
    MRPC and QQP report it), else ``"macro"`` (unweighted mean over classes, for SST-5 and other
    multi-class tasks). Pass ``"binary"``, ``"macro"``, ``"micro"`` or ``"weighted"`` to force one.
    """
    predictions, labels = _checked_pair(predictions, labels)
    if average is None:
        classes = set(np.unique(labels).tolist()) | set(np.unique(predictions).tolist())
        average = "binary" if classes <= {0, 1} else "macro"
    if average not in {"binary", "macro", "micro", "weighted"}:
        raise ValueError(f"average must be binary, macro, micro or weighted, got {average!r}")
    from sklearn import metrics as sk_metrics

    return _scaled(sk_metrics.f1_score(labels, predictions, average=average, zero_division=0), percent)


def macro_f1(predictions: ArrayLike, labels: ArrayLike, percent: bool = False) -> float:
    """Unweighted mean of the per-class F1 scores."""
    return f1(predictions, labels, average="macro", percent=percent)


def matthews(predictions: ArrayLike, labels: ArrayLike, percent: bool = False) -> float:
    """Matthews correlation coefficient (``sklearn.metrics.matthews_corrcoef``), CoLA's metric."""
    predictions, labels = _checked_pair(predictions, labels)
    from sklearn import metrics as sk_metrics

    return _scaled(sk_metrics.matthews_corrcoef(labels, predictions), percent)


def pearson(predictions: ArrayLike, labels: ArrayLike, percent: bool = False) -> float:
    """Pearson correlation (``scipy.stats.pearsonr``). Constant input gives NaN, as in scipy."""
    predictions, labels = _checked_pair(predictions, labels)
    if len(predictions) < 2:
        raise ValueError("a correlation needs at least 2 values, got 1")
    from scipy import stats

    return _scaled(stats.pearsonr(predictions.astype(np.float64), labels.astype(np.float64))[0], percent)


def spearman(predictions: ArrayLike, labels: ArrayLike, percent: bool = False) -> float:
    """Spearman rank correlation (``scipy.stats.spearmanr``). Constant input gives NaN, as in scipy."""
    predictions, labels = _checked_pair(predictions, labels)
    if len(predictions) < 2:
        raise ValueError("a correlation needs at least 2 values, got 1")
    from scipy import stats

    return _scaled(stats.spearmanr(predictions, labels)[0], percent)


# Names a task's ``metric`` may use, mapped to the function computing it.
METRICS: dict[str, Callable[..., float]] = {
    "accuracy": accuracy,
    "acc": accuracy,
    "f1": f1,
    "macro_f1": macro_f1,
    "mcc": matthews,
    "matthews": matthews,
    "matthews_corrcoef": matthews,
    "pearson": pearson,
    "spearman": spearman,
}

# The canonical key each metric is reported under in result dictionaries.
CANONICAL_NAMES: dict[str, str] = {
    "accuracy": "accuracy",
    "acc": "accuracy",
    "f1": "f1",
    "macro_f1": "f1",
    "mcc": "mcc",
    "matthews": "mcc",
    "matthews_corrcoef": "mcc",
    "pearson": "pearson",
    "spearman": "spearman",
}


def get_metric(name: str) -> Callable[..., float]:
    """The metric function called ``name`` (see :data:`METRICS`); ``ValueError`` lists the valid names."""
    key = name.lower().replace("-", "_")
    if key not in METRICS:
        raise ValueError(f"unknown metric {name!r}; valid metrics: {', '.join(sorted(METRICS))}")
    return METRICS[key]


def canonical_metric_name(name: str) -> str:
    """The key under which ``name`` is reported: accuracy, f1, mcc, pearson or spearman."""
    get_metric(name)
    return CANONICAL_NAMES[name.lower().replace("-", "_")]
