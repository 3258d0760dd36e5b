"""Classification with frozen embeddings (a SentEval-style linear probe) and scoring of fine-tuned predictions.

The probe (Conneau & Kiela 2018, "SentEval"; used for transfer tasks by SimCSE, Gao et al. 2021):

1. encode every distinct sentence once with the frozen encoder;
2. features: ``u`` for single-sentence tasks, ``[u, v, |u − v|, u * v]`` for sentence-pair tasks;
3. standardise the features (``StandardScaler``, fitted on the training split) and fit a multinomial
   logistic regression (scikit-learn, lbfgs, fixed ``random_state``);
4. choose the inverse regularisation C from ``C_GRID`` (SentEval's grid 2⁻²…2³) on the **dev split**
   when the evaluated split is not the dev split and a dev split exists, otherwise by **stratified
   5-fold cross-validation on train** (the result's ``"c_selection"`` says which). The selection score
   is the task's own metric (accuracy, F1 or Matthews correlation);
5. report accuracy, F1 (binary for two classes, else macro) and Matthews correlation on the evaluated
   split, ×100.

Example::

    >>> result = evaluate_probe(encoder.encode, train, test, kind="single")
    >>> sorted(result)
    ['C', 'accuracy', 'c_selection', 'f1', 'mcc', 'metric', 'n', 'n_train']
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from contrastext.data.examples import Example
from contrastext.data.task_kinds import CLASSIFICATION_KINDS, SCORED_PAIR_KINDS
from contrastext.errors import DataFormatError, MissingDataError
from contrastext.evaluation.metrics import (
    accuracy,
    canonical_metric_name,
    f1,
    get_metric,
    matthews,
    pearson,
    spearman,
)
from contrastext.evaluation.sts import EncodeFn, embed_unique

if TYPE_CHECKING:
    from sklearn.pipeline import Pipeline

C_GRID: tuple[float, ...] = tuple(2.0**power for power in range(-2, 4))
CV_FOLDS = 5
HOLDOUT_FRACTION = 0.2


def probe_features(examples: Sequence[Example], embeddings: dict[str, np.ndarray], kind: str) -> np.ndarray:
    """``u`` (kind ``"single"``) or ``[u, v, |u − v|, u * v]`` (kind ``"pair"``) for every example."""
    if kind == "single":
        return np.stack([embeddings[example.texts[0]] for example in examples])
    if kind == "pair":
        u = np.stack([embeddings[example.texts[0]] for example in examples])
        v = np.stack([embeddings[example.texts[1]] for example in examples])
        return np.concatenate([u, v, np.abs(u - v), u * v], axis=1)
    raise ValueError(f"probe features exist for kinds {', '.join(CLASSIFICATION_KINDS)}, got {kind!r}")


def _labels(examples: Sequence[Example], name: str) -> np.ndarray:
    for index, example in enumerate(examples):
        if example.label is None:
            where = example.source or f"{name} example {index}"
            raise DataFormatError(where, None, "the probe needs a class label, got none")
    return np.asarray([int(example.label) for example in examples])


def check_probe_training(train: Sequence[Example], path, cross_validated: bool, subsampled: bool) -> None:
    """DataFormatError naming the training file when the probe cannot be fitted on ``train``.

    It needs two classes at least, and for cross-validation two examples of every class.
    """
    labels = [example.label for example in train if example.label is not None]
    classes, counts = np.unique(np.asarray(labels, dtype=np.int64), return_counts=True)
    hint = " (after --max-train's subsampling: raise it)" if subsampled else ""
    if len(classes) < 2:
        raise DataFormatError(
            path, None, f"the probe needs at least 2 classes in the training labels, found {classes.tolist()}{hint}"
        )
    if cross_validated and counts.min() < 2:
        rare = classes[counts < 2].tolist()
        raise DataFormatError(
            path, None, f"cross-validation needs at least 2 training examples of every class; class(es) {rare} have 1{hint}"
        )


def _classifier(C: float, seed: int) -> Pipeline:
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    return make_pipeline(StandardScaler(), LogisticRegression(C=C, max_iter=2000, random_state=seed))


def _scores_along_c_path(
    fit_x: np.ndarray,
    fit_y: np.ndarray,
    score_x: np.ndarray,
    score_y: np.ndarray,
    score: Callable[..., float],
    c_grid: Sequence[float],
    seed: int,
) -> list[float]:
    """Score of the probe fitted on (fit_x, fit_y) for each C, on (score_x, score_y).

    The fits run along the increasing C grid with warm starts (as ``LogisticRegressionCV`` does), which
    gives the same optimum as independent fits in a fraction of the iterations.
    """
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    scaler = StandardScaler().fit(fit_x)
    fit_x, score_x = scaler.transform(fit_x), scaler.transform(score_x)
    model = LogisticRegression(max_iter=2000, random_state=seed, warm_start=True)
    scores = []
    for C in c_grid:
        model.set_params(C=C).fit(fit_x, fit_y)
        scores.append(score(model.predict(score_x), score_y))
    return scores


def fit_probe(
    train_x: np.ndarray,
    train_y: np.ndarray,
    dev: tuple[np.ndarray, np.ndarray] | None = None,
    metric: str = "accuracy",
    seed: int = 0,
    c_grid: Sequence[float] = C_GRID,
) -> tuple[Pipeline, float, str]:
    """Fit the standardised logistic regression; return ``(model, chosen C, how C was chosen)``.

    With ``dev = (dev_x, dev_y)`` each C is fitted on train and scored on dev; otherwise each C is scored
    by stratified ``CV_FOLDS``-fold cross-validation on train (mean over folds). Ties go to the smaller
    C (stronger regularisation). The returned model is refitted on all of train with the chosen C.
    """
    score = get_metric(metric)
    c_grid = sorted(c_grid)
    classes, counts = np.unique(train_y, return_counts=True)
    if len(classes) < 2:
        raise ValueError(f"the probe needs at least 2 classes in the training labels, got {classes.tolist()}")
    if dev is not None:
        totals = _scores_along_c_path(train_x, train_y, dev[0], dev[1], score, c_grid, seed)
        selection = "dev"
    else:
        folds = min(CV_FOLDS, int(counts.min()))
        if folds < 2:
            raise ValueError("cross-validation needs at least 2 training examples of every class")
        from sklearn.model_selection import StratifiedKFold

        splitter = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed)
        totals = np.zeros(len(c_grid))
        for fit_index, held_index in splitter.split(train_x, train_y):
            totals += _scores_along_c_path(
                train_x[fit_index], train_y[fit_index], train_x[held_index], train_y[held_index], score, c_grid, seed
            )
        selection = f"{folds}-fold CV on train"
    best_c = float(c_grid[int(np.argmax(totals))])
    return _classifier(best_c, seed).fit(train_x, train_y), best_c, selection


def classification_scores(
    predictions: np.ndarray, labels: np.ndarray, num_classes: int | None = None
) -> dict[str, float | int]:
    """Accuracy, F1 and Matthews correlation, ×100, and ``n``.

    F1 is binary (positive class 1) for a 2-class task and macro for more classes. ``num_classes`` is the
    TASK's class count when known: a 3-class task whose small evaluation set holds only classes 0 and 1 still
    gets macro F1. Without it, the classes present decide (binary when they are within {0, 1})."""
    average = None if num_classes is None else ("binary" if num_classes <= 2 else "macro")
    return {
        "accuracy": accuracy(predictions, labels, percent=True),
        "f1": f1(predictions, labels, average=average, percent=True),
        "mcc": matthews(predictions, labels, percent=True),
        "n": len(labels),
    }


def evaluate_probe(
    encode: EncodeFn,
    train: Sequence[Example],
    test: Sequence[Example],
    kind: str = "single",
    dev: Sequence[Example] | None = None,
    metric: str = "accuracy",
    batch_size: int = 64,
    seed: int = 0,
) -> dict:
    """Fit the probe on ``train`` (C chosen on ``dev``, else by CV on train) and score it on ``test``."""
    if not train or not test:
        raise ValueError(f"the probe needs training and evaluation examples, got {len(train)} and {len(test)}")
    splits = [train, test] + ([dev] if dev else [])
    texts = [text for split in splits for example in split for text in example.texts]
    embeddings = embed_unique(encode, texts, batch_size=batch_size)
    train_x, train_y = probe_features(train, embeddings, kind), _labels(train, "train")
    dev_xy = (probe_features(dev, embeddings, kind), _labels(dev, "dev")) if dev else None
    model, C, selection = fit_probe(train_x, train_y, dev_xy, metric=metric, seed=seed)
    predictions = model.predict(probe_features(test, embeddings, kind))
    scores = classification_scores(predictions, _labels(test, "evaluation"))
    return {
        **scores,
        "metric": canonical_metric_name(metric),
        "n_train": len(train),
        "C": C,
        "c_selection": selection,
    }


def _subsample(examples: Sequence[Example], size: int | None, seed: int) -> list[Example]:
    """A seeded random subset of ``size`` examples (kept in file order), or all of them."""
    if size is None or size >= len(examples):
        return list(examples)
    chosen = np.sort(np.random.default_rng(seed).choice(len(examples), size=size, replace=False))
    return [examples[index] for index in chosen]


def evaluate_classification(
    encode: EncodeFn,
    spec: str,
    data_root: str | os.PathLike | None = None,
    batch_size: int = 64,
    max_train: int | None = None,
    limit: int | None = None,
    seed: int = 0,
) -> dict:
    """Probe a registry task (``"sst2"``, ``"mrpc:dev"``...): train on its train split, score ``spec``'s split.

    ``max_train`` keeps a seeded random subset of the training split (and of the dev split used for C);
    ``limit`` keeps the first ``limit`` evaluation examples (a smoke-test aid). When the task has no
    train file (QNLI dev, the QQP subset here) a fixed, seeded ``HOLDOUT_FRACTION`` of the evaluated split
    is held out for evaluation and the rest trains the probe; the result's ``"held_out"`` says so.
    """
    from contrastext.data.tasks import holdout_split, load_task, parse_task_spec

    task, split = parse_task_spec(spec)
    if task.kind not in CLASSIFICATION_KINDS:
        raise ValueError(f"task {task.name} has kind {task.kind!r}; the probe handles {CLASSIFICATION_KINDS}")
    if split == "train":
        raise ValueError(f"{spec}: the probe trains on the train split; evaluate another split")
    evaluated_data = load_task(spec, data_root)
    evaluated = evaluated_data.examples
    held_out = None
    try:
        train_data = load_task(f"{task.name}:train", data_root)
        train, train_path = train_data.examples, train_data.path
    except MissingDataError:
        # Only one labelled split (QNLI dev, the QQP subset): train on part of it, evaluate on the rest.
        train, evaluated = holdout_split(evaluated, HOLDOUT_FRACTION, seed=seed)
        train_path = evaluated_data.path
        held_out = f"{HOLDOUT_FRACTION:.0%} of {split} held out (seed {seed}); no train split found"
    test = evaluated[:limit]
    subsampled = max_train is not None and max_train < len(train)
    train = _subsample(train, max_train, seed)
    dev = None
    if held_out is None and split != "dev" and "dev" in task.splits:
        dev = _subsample(load_task(f"{task.name}:dev", data_root).examples, max_train, seed)
    check_probe_training(train, train_path, cross_validated=not dev, subsampled=subsampled)
    result = evaluate_probe(
        encode, train, test, kind=task.kind, dev=dev, metric=task.metric, batch_size=batch_size, seed=seed
    )
    return {"split": split, **result, **({"held_out": held_out} if held_out else {})}


def evaluate_predictions(task, predictions: Sequence, labels: Sequence) -> dict:
    """Score a fine-tuned model's predictions with the task's metric, ×100.

    ``task`` is a registry ``Task`` or its name. Classification tasks (kinds ``single`` / ``pair``) get
    accuracy, F1 and Matthews correlation; similarity tasks (``sts`` / ``regression``) Spearman and
    Pearson. ``"metric"`` names the task's headline key (``task.metric``, a key's name) and ``"score"`` repeats its
    value.

    Example::

        >>> evaluate_predictions("cola", [1, 0, 1], [1, 0, 0])["metric"]
        'mcc'
    """
    if isinstance(task, str):
        from contrastext.data.tasks import get_task

        task = get_task(task)
    predictions, labels = np.asarray(predictions), np.asarray(labels)
    if task.kind in SCORED_PAIR_KINDS:
        scores: dict = {
            "spearman": spearman(predictions, labels, percent=True),
            "pearson": pearson(predictions, labels, percent=True),
            "n": len(labels),
        }
    elif task.kind in CLASSIFICATION_KINDS:
        scores = classification_scores(predictions, labels, num_classes=getattr(task, "num_labels", None))
    else:
        raise ValueError(f"task {task.name} has kind {task.kind!r}: it has no labels to score")
    return {**scores, "metric": task.metric, "score": scores[task.metric]}
