"""Shared ground of the classification fine-tuning methods (SCL, RECLAIM, CAPT's fine-tuning): head, collate, loss.

A fine-tuning run here is the standard BERT recipe (Devlin et al. 2019): the text (or the pair, encoded
together as ``[CLS] s1 [SEP] s2 [SEP]``) goes through the encoder, a head reads the last-layer ``[CLS]``
vector, and the task loss is cross-entropy (classes) or mean squared error on the gold score (scored-pair
tasks of kind ``sts`` or ``regression``: ``stsb``, ``sickr``, ``stsb-glue``, ``minbert-sts``).

What this module provides:

- :class:`ClassificationMethod`: a :class:`Method` base with the encoder, the head, the collate function
  (tokenisation, labels, example indices from :class:`~contrastext.data.examples.IndexedExample`), the task
  loss and :meth:`~ClassificationMethod.predict`;
- :class:`FineTuneMethod`: plain fine-tuning (cross-entropy, or mean squared error for scored pairs).

The ``method_args`` keys every fine-tuning recipe shares (``ClassificationArgs``) are in
:mod:`contrastext.runs.classification`; data loading (few-shot draws, label noise, holdouts) is
:mod:`contrastext.runs.data`; evaluation is
:func:`contrastext.evaluation.evaluators.make_evaluator` with ``predictions="head"``.

Example::

    >>> method = FineTuneMethod(encoder, get_task("sst2"))
    >>> batch = method.collate(examples[:8])
    >>> sorted(batch)
    ['attention_mask', 'indices', 'input_ids', 'labels', 'token_type_ids']
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from contrastext.data.collate import encoder_inputs, labels_tensor, tokenize
from contrastext.data.examples import Example
from contrastext.data.task_kinds import LABELLED_KINDS, SCORED_PAIR_KINDS
from contrastext.errors import ConfigError
from contrastext.models.heads import ClassificationHead, RegressionHead
from contrastext.training.method import Method


class ClassificationMethod(Method):
    """Encoder + head on the pooled ``[CLS]`` vector; subclasses add their loss parts in ``forward``.

    ``collate`` returns ``input_ids``, ``attention_mask``, ``token_type_ids`` (pairs are encoded
    together), ``labels`` (long for classes, float for regression) and ``indices`` (each example's row in
    the training set; -1 for examples that are not :class:`IndexedExample`).
    """

    def __init__(self, encoder, task, head_dropout: float = 0.1):
        super().__init__()
        if task.kind not in LABELLED_KINDS:
            raise ConfigError(f"task {task.name} has kind {task.kind!r}; fine-tuning supports {LABELLED_KINDS}")
        self.encoder = encoder
        self.task_name = task.name
        self.task_kind = task.kind
        self.num_labels = task.num_labels
        # The class names in id order (a user's string labels, a registry task's names); [] for regression.
        self.label_names: list[str] = (
            []
            if task.kind in SCORED_PAIR_KINDS
            else [str(name) for name in task.label_names or range(task.num_labels)]
        )
        width = encoder.hidden_size
        if self.is_regression:
            self.head = RegressionHead(width, dropout=head_dropout)
        else:
            self.head = ClassificationHead(width, task.num_labels, dropout=head_dropout)

    @property
    def is_regression(self) -> bool:
        return self.task_kind in SCORED_PAIR_KINDS

    def tokenize(self, examples: Sequence[Example]) -> dict[str, Tensor]:
        """Tokenise single texts or pairs (``[CLS] a [SEP] b [SEP]``), padded to the longest in the batch."""
        first = [example.texts[0] for example in examples]
        second = None
        if self.task_kind != "single":
            if any(len(example.texts) < 2 for example in examples):
                where = next(e.source for e in examples if len(e.texts) < 2)
                raise ConfigError(f"{where}: task {self.task_name} needs text pairs, got a single text")
            second = [example.texts[1] for example in examples]
        encoded = tokenize(
            self.encoder.tokenizer, first, self.encoder.train_max_length, pairs=second, special_tokens_mask=False
        )
        return encoder_inputs(encoded)

    def collate(self, examples: list[Example]) -> dict:
        batch = self.tokenize(examples)
        batch["labels"] = labels_tensor(examples, torch.float32 if self.is_regression else torch.long)
        batch["indices"] = torch.tensor([getattr(example, "index", -1) for example in examples], dtype=torch.long)
        return batch

    def encode_batch(self, batch: dict):
        """The encoder's output (EncoderOutput) for a collated batch."""
        return self.encoder(**encoder_inputs(batch))

    def task_loss(self, logits: Tensor, labels: Tensor) -> Tensor:
        """Cross-entropy over classes, or mean squared error for regression tasks."""
        if self.is_regression:
            return F.mse_loss(logits.float(), labels.float())
        return F.cross_entropy(logits.float(), labels)

    def predict(self, examples: Sequence[Example], batch_size: int = 64, task: str | None = None) -> np.ndarray:
        """Predicted class ids (or scores for regression) in input order, in eval mode.

        ``task`` (the evaluator passes it) must be this method's task when given."""
        if task is not None and task != self.task_name:
            raise ValueError(f"this classifier is fine-tuned on {self.task_name}, not {task}")

        def predict_batch(rows: Sequence[Example]) -> Tensor:
            batch = {key: value.to(self.device) for key, value in self.tokenize(rows).items()}
            logits = self.head(self.encode_batch(batch).pooled).float()
            return logits if self.is_regression else logits.argmax(dim=-1)

        return self.predict_in_batches(examples, batch_size, predict_batch)

    def export_classifier(self, folder, label_names=None, card: dict | None = None):
        """Write encoder + head as a Hugging Face sequence-classification folder (``pipeline("text-classification",
        model=folder)`` loads it); returns the folder. ConfigError, nothing written, when the pooling has no exact
        Hugging Face equivalent (:mod:`contrastext.models.hf_export`). Label names: ``label_names``, else the
        method's ``label_names``, else ``"0"``, ``"1"``, …"""
        from contrastext.models.hf_export import export_classifier

        names = label_names or getattr(self, "label_names", None)
        if not self.is_regression and not names:
            names = [str(index) for index in range(self.num_labels)]
        return export_classifier(
            self.encoder,
            self.head.linear,
            folder,
            label_names=None if self.is_regression else [str(name) for name in names],
            regression=self.is_regression,
            text_pair=self.task_kind != "single",
            task=self.task_name,
            task_kind=self.task_kind,
            max_length=getattr(self.encoder, "train_max_length", None) or self.encoder.max_seq_length,
            card=card,
        )


class FineTuneMethod(ClassificationMethod):
    """Plain fine-tuning: cross-entropy (``ce``) or, for scored pairs, mean squared error (``mse``)."""

    def forward(self, batch: dict) -> dict[str, Tensor]:
        logits = self.head(self.encode_batch(batch).pooled)
        return {"mse" if self.is_regression else "ce": self.task_loss(logits, batch["labels"])}
