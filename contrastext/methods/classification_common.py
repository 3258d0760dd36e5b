"""Shared ground of the classification fine-tuning methods (SCL, RECLAIM): data, head, collate, evaluation.

A fine-tuning run here is the standard BERT recipe (Devlin et al. 2019): the text (or the pair, encoded
together as ``[CLS] s1 [SEP] s2 [SEP]``) goes through the encoder, a head reads the last-layer ``[CLS]``
vector, and the task loss is cross-entropy (classes) or mean squared error on the gold score (scored-pair
tasks of kind ``sts`` or ``regression``: ``stsb``, ``sickr``, ``stsb-glue``, ``minbert-sts``).

What this module provides:

- :class:`ClassificationArgs`: the ``method_args`` keys every fine-tuning method shares;
- :func:`load_classification_data`: the task's training and evaluation examples from the registry, with
  ``data.limit``, ``data.few_shot`` (stratified, N per class, seeded), ``data.label_noise`` (share of
  training labels flipped, seeded) and an optional seeded ``holdout`` for tasks with one labelled split;
- :class:`IndexedExample`: an :class:`Example` that carries its position in the training set, so a
  method with memory banks (RECLAIM) can address them;
- :class:`ClassificationMethod`: a :class:`Method` base with the encoder, the head, the collate function
  (tokenisation, labels, example indices), the task loss and :meth:`~ClassificationMethod.predict`;
- :func:`make_evaluator`: ``method -> {metric: value}`` on the evaluation split with the task's own
  metric (:func:`contrastext.evaluation.classification.evaluate_predictions`); ``"score"`` is the task's
  headline metric (accuracy, F1 or Matthews correlation; Spearman for regression), so one recipe's
  ``train.metric_for_best: score`` fits every task.

Example::

    >>> data = load_classification_data(config, args, data_root, seed=1)
    >>> method = SomeClassificationMethod(encoder, data.task, max_length=64)
    >>> batch = method.collate(data.train[:8])
    >>> sorted(batch)
    ['attention_mask', 'indices', 'input_ids', 'labels', 'token_type_ids']
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from pydantic import BaseModel, ConfigDict, Field
from torch import Tensor

from contrastext.data.collate import labels_tensor, tokenize
from contrastext.data.examples import Example
from contrastext.errors import ConfigError
from contrastext.methods.base import Method
from contrastext.models.heads import ClassificationHead, RegressionHead
from contrastext.training.seeding import derive_seed

CLASSIFICATION_KINDS = ("single", "pair")
REGRESSION_KINDS = ("sts", "regression")  # scored pairs: stsb, sickr, stsb-glue, minbert-sts
SUPPORTED_KINDS = CLASSIFICATION_KINDS + REGRESSION_KINDS


class ClassificationArgs(BaseModel):
    """``method_args`` keys shared by the fine-tuning methods (each method adds its own)."""

    model_config = ConfigDict(extra="forbid")

    pooling: str = Field(default="cls", description="encoder pooling the head reads; [CLS] as in BERT/Gunel")
    head_dropout: float = Field(default=0.1, ge=0, lt=1, description="dropout before the head's linear layer")
    holdout: float | None = Field(
        default=None,
        gt=0,
        lt=1,
        description="tasks with one labelled split: this share of the evaluation split is held out (seeded) "
        "for evaluation and the rest is the training set",
    )
    holdout_seed: int = Field(default=0, ge=0, description="seed of the holdout split (fixed across runs)")


@dataclass(frozen=True)
class IndexedExample(Example):
    """An :class:`Example` that knows its row in the training set (memory banks are addressed by it)."""

    index: int = -1


@dataclass
class ClassificationData:
    """A task's training set (indexed, after few-shot / noise) and evaluation set, and how they were made."""

    task: Any  # contrastext.data.tasks.Task
    train: list[IndexedExample]
    eval: list[Example]
    description: dict = field(default_factory=dict)


def task_and_splits(config) -> tuple[Any, str, str]:
    """``(task, train split, eval split)`` from ``data.task`` and ``eval.tasks``.

    ``data.task: sst2`` trains on ``sst2:train``; ``data.task: sst2:train`` says so explicitly. The
    evaluation split is the first of ``eval.tasks`` (it must be the same task), else ``dev``.
    """
    from contrastext.data.tasks import get_task, parse_task_spec

    if not config.data.task:
        raise ConfigError(f"{config.source or '<config>'}: data.task: a classification task is required, e.g. sst2")
    name, _, split = config.data.task.partition(":")
    task = get_task(name)
    if split:
        parse_task_spec(config.data.task)  # an unknown split lists the valid ones
    train_split = split or "train"
    eval_split = "dev"
    if config.eval.tasks:
        eval_task, eval_split = parse_task_spec(config.eval.tasks[0])
        if eval_task.name != task.name:
            raise ConfigError(
                f"{config.source or '<config>'}: eval.tasks: fine-tuning on {task.name} is evaluated on the same "
                f"task, got {config.eval.tasks[0]!r}"
            )
    if task.kind not in SUPPORTED_KINDS:
        raise ConfigError(
            f"{config.source or '<config>'}: data.task: {task.name} has kind {task.kind!r}; fine-tuning needs a "
            f"task of kind {', '.join(SUPPORTED_KINDS)} (e.g. sst2, mrpc, cola, rte, qnli, qqp, stsb, sst5)"
        )
    return task, train_split, eval_split


def load_classification_data(config, args: ClassificationArgs, data_root: Path | None, seed: int) -> ClassificationData:
    """Training and evaluation examples of ``data.task`` (see the module docstring for every option)."""
    from contrastext.data.tasks import holdout_split, load_task

    task, train_split, eval_split = task_and_splits(config)
    if args.holdout is not None:
        rows = load_task(task, data_root, split=eval_split).examples
        train, evaluation = holdout_split(rows, args.holdout, args.holdout_seed)
        train_name = f"{task.name}:{eval_split} minus a {args.holdout:.0%} holdout (seed {args.holdout_seed})"
        eval_name = f"{task.name}:{eval_split} {args.holdout:.0%} holdout (seed {args.holdout_seed})"
    else:
        train = load_task(task, data_root, split=train_split).examples
        evaluation = load_task(task, data_root, split=eval_split).examples
        train_name, eval_name = f"{task.name}:{train_split}", f"{task.name}:{eval_split}"
    train = _labelled(train, task, train_name)
    evaluation = _labelled(evaluation, task, eval_name)
    if config.data.limit is not None:
        train = train[: config.data.limit]
    if config.eval.limit is not None:
        evaluation = evaluation[: config.eval.limit]
    description: dict = {"task": task.name, "train": train_name, "eval": eval_name, "draw_seed": seed}
    if config.data.few_shot is not None:
        train = _few_shot(train, task, config.data.few_shot, seed)
        description["few_shot_per_class"] = config.data.few_shot
    if config.data.label_noise > 0:
        train, flipped = _label_noise(train, task, config.data.label_noise, seed)
        description["label_noise"] = config.data.label_noise
        description["labels_flipped"] = flipped
    description["n_train"] = len(train)
    description["n_eval"] = len(evaluation)
    indexed = [IndexedExample(e.texts, e.label, e.source, index=i) for i, e in enumerate(train)]
    return ClassificationData(task=task, train=indexed, eval=evaluation, description=description)


def _labelled(examples: Sequence[Example], task, split_name: str) -> list[Example]:
    """The examples, checked to carry a label of the task's type (GLUE test files are unlabelled)."""
    if not examples:
        raise ConfigError(f"{split_name}: the split has no examples")
    for example in examples:
        bad = example.label is None or (isinstance(example.label, float) and math.isnan(example.label))
        if not bad and task.kind in CLASSIFICATION_KINDS:
            bad = not 0 <= int(example.label) < task.num_labels
        if bad:
            raise ConfigError(
                f"{example.source or split_name}: fine-tuning needs labelled examples "
                f"({task.kind}, {task.num_labels} classes), got label {example.label!r}; "
                "is this an unlabelled test split?"
            )
    return list(examples)


def _few_shot(examples: list[Example], task, per_class: int, seed: int) -> list[Example]:
    from contrastext.data.sampling import few_shot

    if task.kind not in CLASSIFICATION_KINDS:
        raise ConfigError(f"data.few_shot draws N examples per class; {task.name} is a regression task")
    return few_shot(examples, per_class, seed=seed)


def _label_noise(examples: list[Example], task, share: float, seed: int) -> tuple[list[Example], int]:
    from contrastext.data.sampling import flip_labels

    if task.kind not in CLASSIFICATION_KINDS:
        raise ConfigError(f"data.label_noise flips class labels; {task.name} is a regression task")
    # A stream of its own, so which labels flip is independent of which examples the few-shot draw kept.
    noisy, flipped = flip_labels(examples, share, seed=derive_seed(seed, 1), num_classes=task.num_labels)
    return noisy, len(flipped)


def build_encoder(config, args: ClassificationArgs):
    """The TextEncoder named by ``model:`` with the pooling the head reads and ``data.max_length``."""
    from contrastext.methods.registry import resolve_model
    from contrastext.models.encoder import TextEncoder

    return TextEncoder.from_pretrained(
        resolve_model(config.model), pooling=args.pooling, max_seq_length=config.data.max_length
    )


class ClassificationMethod(Method):
    """Encoder + head on the pooled ``[CLS]`` vector; subclasses add their loss parts in ``forward``.

    ``collate`` returns ``input_ids``, ``attention_mask``, ``token_type_ids`` (pairs are encoded
    together), ``labels`` (long for classes, float for regression) and ``indices`` (each example's row in
    the training set; -1 for examples that are not :class:`IndexedExample`).
    """

    def __init__(self, encoder, task, max_length: int, head_dropout: float = 0.1):
        super().__init__()
        if task.kind not in SUPPORTED_KINDS:
            raise ConfigError(f"task {task.name} has kind {task.kind!r}; fine-tuning supports {SUPPORTED_KINDS}")
        self.encoder = encoder
        self.task_name = task.name
        self.task_kind = task.kind
        self.num_labels = task.num_labels
        self.max_length = max_length
        width = encoder.hidden_size
        if self.is_regression:
            self.head = RegressionHead(width, dropout=head_dropout)
        else:
            self.head = ClassificationHead(width, task.num_labels, dropout=head_dropout)

    @property
    def is_regression(self) -> bool:
        return self.task_kind in REGRESSION_KINDS

    def tokenize(self, examples: Sequence[Example]) -> dict[str, Tensor]:
        """Tokenise single texts or pairs (``[CLS] a [SEP] b [SEP]``), padded to the longest in the batch."""
        first = [example.texts[0] for example in examples]
        second = None
        if self.task_kind != "single":
            if any(len(example.texts) < 2 for example in examples):
                where = next(e.source for e in examples if len(e.texts) < 2)
                raise ConfigError(f"{where}: task {self.task_name} needs text pairs, got a single text")
            second = [example.texts[1] for example in examples]
        encoded = tokenize(self.encoder.tokenizer, first, self.max_length, pairs=second, special_tokens_mask=False)
        return {key: encoded[key] for key in ("input_ids", "attention_mask", "token_type_ids") if key in encoded}

    def collate(self, examples: list[Example]) -> dict:
        batch = self.tokenize(examples)
        batch["labels"] = labels_tensor(examples, torch.float32 if self.is_regression else torch.long)
        batch["indices"] = torch.tensor([getattr(example, "index", -1) for example in examples], dtype=torch.long)
        return batch

    def encode_batch(self, batch: dict):
        """The encoder's output (EncoderOutput) for a collated batch."""
        return self.encoder(
            input_ids=batch["input_ids"],
            attention_mask=batch["attention_mask"],
            token_type_ids=batch.get("token_type_ids"),
        )

    def task_loss(self, logits: Tensor, labels: Tensor) -> Tensor:
        """Cross-entropy over classes, or mean squared error for regression tasks."""
        if self.is_regression:
            return F.mse_loss(logits.float(), labels.float())
        return F.cross_entropy(logits.float(), labels)

    @torch.no_grad()
    def predict(self, examples: Sequence[Example], batch_size: int = 64) -> np.ndarray:
        """Predicted class ids (or scores for regression) in input order, in eval mode."""
        was_training = self.training
        self.eval()
        device = next(self.parameters()).device
        outputs = []
        try:
            for start in range(0, len(examples), batch_size):
                batch = self.tokenize(examples[start : start + batch_size])
                batch = {key: value.to(device) for key, value in batch.items()}
                logits = self.head(self.encode_batch(batch).pooled)
                outputs.append(logits.float() if self.is_regression else logits.argmax(dim=-1))
        finally:
            self.train(was_training)
        return torch.cat(outputs).cpu().numpy()


def make_evaluator(
    examples: Sequence[Example], task, batch_size: int = 64
) -> Callable[[ClassificationMethod], dict[str, float]]:
    """``method -> {"accuracy", "f1", "mcc", "score"}`` (or spearman/pearson) on ``examples``."""
    from contrastext.evaluation.classification import evaluate_predictions

    labels = [example.label for example in examples]

    def evaluate(method: ClassificationMethod) -> dict[str, float]:
        predictions = method.predict(examples, batch_size=batch_size)
        result = evaluate_predictions(task, predictions, labels)
        return {key: float(value) for key, value in result.items() if key not in ("metric", "n")}

    return evaluate
