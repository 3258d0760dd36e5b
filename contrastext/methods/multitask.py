"""Multi-task BERT: sentiment (SST-5), paraphrase (Quora) and similarity (STS) on one encoder.

After the CS224N default final project and the report "Robust embeddings using contrastive and multiple
negatives on BERT". One encoder; each sentence's ``[CLS]`` vector goes through a shared layer
``h = tanh(W·cls + b)``; then one head per task:

- a single-text task (SST-5, kind ``single``): ``logits = W_s · dropout(h)``, part = cross-entropy;
- a pair-class task (Quora, kind ``pair``): :class:`~contrastext.models.heads.PairHead` on (h₁, h₂) with
  features ``[h₁; h₂; h₁ − h₂]`` taken in both orders and averaged (``symmetric``), cross-entropy;
- a scored-pair task (STS, kind ``regression``/``sts``): the same pair head with one output, mean squared
  error against the 0–5 score.

Each training step draws one task's batch (``data.task_sampling``: ``sequential`` task after task,
``round_robin`` one batch each in turn, ``proportional`` MT-DNN's P(task i) ∝ (wᵢ·nᵢ)^(1/T) with
``data.task_weights`` wᵢ and ``data.task_temperature`` T; :class:`~contrastext.data.sampling.MultiTaskBatchSampler`).
The parts are named after the tasks and weighted by ``method_args.loss_weights``.

With ``method_args.pcgrad: true`` every step instead holds ``train.batch_size`` examples of EVERY task
(:class:`~contrastext.data.sampling.JointTaskBatchSampler`) and the shared parameters (encoder + shared layer) follow PCGrad (Yu et al.
2020, :mod:`contrastext.methods.pcgrad`): the trainer only calls ``total.backward()``, so ``forward``
computes each task's gradient itself (``torch.autograd.grad``), projects the conflicting ones and returns
the task losses DETACHED (for the log) plus a part ``pcgrad`` whose value is 0 and whose gradient is the
projected sum (:func:`~contrastext.methods.pcgrad.pcgrad_surrogate`). Single process only.

The run around it (the tasks' data, the task sampler, the optional SimCSE pre-step, the evaluator with
``<task>_dev_<metric>`` keys and the overall ``mean``) is :mod:`contrastext.runs.multitask`.

Example::

    >>> method = MultitaskMethod(encoder, [get_task("minbert-sst"), get_task("minbert-sts")])
    >>> method(method.collate([TaskExample(("a fine film",), 3, task=0), TaskExample(("a", "b"), 2.5, task=1)]))
    {'minbert-sst': tensor(1.61, grad_fn=...), 'minbert-sts': tensor(6.2, grad_fn=...)}
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from pydantic import BaseModel, ConfigDict, Field
from torch import Tensor, nn

from contrastext.data.collate import encoder_inputs, labels_tensor, tokenize
from contrastext.data.examples import Example
from contrastext.errors import ConfigError
from contrastext.methods.pcgrad import pcgrad_surrogate
from contrastext.models.heads import ClassificationHead, PairHead
from contrastext.models.projection import DenseLayer
from contrastext.training.method import Method

DEFAULT_TASKS = ("minbert-sst", "minbert-quora", "minbert-sts")
CLASS_KINDS = ("single", "pair")
SCORE_KINDS = ("regression", "sts")


class MultitaskArgs(BaseModel):
    """``method_args`` of the ``multitask`` recipe (see docs/methods/multitask.md)."""

    model_config = ConfigDict(extra="forbid")

    pooling: str = Field(default="cls", description="the sentence vector the heads read")
    shared_layer: bool = Field(default=True, description="a dense tanh layer shared by every head")
    head_dropout: float = Field(default=0.1, ge=0, lt=1)
    pair_parts: list[str] = Field(default_factory=lambda: ["u", "v", "diff"], description="PairHead features")
    symmetric_pairs: bool = Field(default=True, description="average the pair head over both orders")
    loss_weights: dict[str, float] = Field(default_factory=dict, description="task name -> loss weight (1.0)")
    pcgrad: bool = Field(default=False, description="every task each step, PCGrad on the shared parameters")
    holdout_tasks: list[str] = Field(default_factory=lambda: ["minbert-quora"], description="train on dev minus holdout")
    holdout: float = Field(default=0.2, gt=0, lt=1, description="share of the dev split held out for evaluation")
    holdout_seed: int = Field(default=0, ge=0)
    simcse_steps: int = Field(default=0, ge=0, description="unsupervised SimCSE steps before multi-task training")
    simcse_lr: float = Field(default=3e-5, gt=0)
    simcse_batch_size: int = Field(default=64, gt=1)
    simcse_temperature: float = Field(default=0.05, gt=0)


class MultitaskMethod(Method):
    """Encoder + shared layer + one head per task; parts named after the tasks (plus ``pcgrad``)."""

    def __init__(self, encoder, tasks: Sequence[Any], args: MultitaskArgs | None = None):
        super().__init__()
        args = args or MultitaskArgs()
        self.encoder = encoder
        self.task_names = [task.name for task in tasks]
        self.task_kinds = {task.name: task.kind for task in tasks}
        unknown = sorted(set(args.loss_weights) - set(self.task_names))
        if unknown:
            raise ConfigError(f"method_args.loss_weights: unknown task(s) {unknown}; tasks: {self.task_names}")
        width = encoder.hidden_size
        self.shared = DenseLayer(width, width, activation="tanh") if args.shared_layer else nn.Identity()
        heads = {}
        for task in tasks:
            if task.kind == "single":
                heads[task.name] = ClassificationHead(width, task.num_labels, dropout=args.head_dropout)
            else:
                labels = task.num_labels if task.kind == "pair" else 1
                heads[task.name] = PairHead(width, labels, parts=tuple(args.pair_parts),
                                            symmetric=args.symmetric_pairs, dropout=args.head_dropout)
        self.heads = nn.ModuleDict(heads)
        self.loss_weights = {name: float(args.loss_weights.get(name, 1.0)) for name in self.task_names}
        self.pcgrad = args.pcgrad

    # ------------------------------------------------------------------------------------ batches
    def collate(self, examples: list[Example]) -> dict:
        """``{task name: {"first": tokens, "second": tokens (pairs), "labels"}}`` for the tasks present."""
        batch: dict[str, dict] = {}
        for index, name in enumerate(self.task_names):
            rows = [example for example in examples if getattr(example, "task", None) == index]
            if rows:
                batch[name] = self.tokenize_task(name, rows, with_labels=True)
        if sum(len(entry["labels"]) for entry in batch.values()) != len(examples):
            raise ValueError("multitask collate needs TaskExample rows whose task indexes the method's tasks")
        return batch

    def tokenize_task(self, name: str, rows: Sequence[Example], with_labels: bool = False) -> dict:
        kind = self.task_kinds[name]
        entry = {"first": self._tokens([row.texts[0] for row in rows])}
        if kind != "single":
            entry["second"] = self._tokens([row.texts[1] for row in rows])
        if with_labels:
            entry["labels"] = labels_tensor(rows, torch.float32 if kind in SCORE_KINDS else torch.long)
        return entry

    def _tokens(self, texts: list[str]) -> dict[str, Tensor]:
        encoded = tokenize(self.encoder.tokenizer, texts, self.encoder.max_seq_length, special_tokens_mask=False)
        return encoder_inputs(encoded)

    # ------------------------------------------------------------------------------------ outputs
    def features(self, tokens: dict[str, Tensor]) -> Tensor:
        """The shared layer over the encoder's pooled vector."""
        return self.shared(self.encoder(**tokens).pooled)

    def outputs(self, name: str, entry: dict) -> Tensor:
        """Logits (class tasks) or scores (scored pairs) of one task's entry."""
        first = self.features(entry["first"])
        if self.task_kinds[name] == "single":
            return self.heads[name](first)
        scores = self.heads[name](first, self.features(entry["second"]))
        return scores.squeeze(-1) if self.task_kinds[name] in SCORE_KINDS else scores

    def task_loss(self, name: str, entry: dict) -> Tensor:
        outputs = self.outputs(name, entry)
        if self.task_kinds[name] in SCORE_KINDS:
            return F.mse_loss(outputs.float(), entry["labels"].float())
        return F.cross_entropy(outputs.float(), entry["labels"])

    def forward(self, batch: dict) -> dict[str, Tensor]:
        losses = {name: self.task_loss(name, entry) for name, entry in batch.items()}
        if not (self.pcgrad and self.training and torch.is_grad_enabled()):
            return losses
        shared = [p for p in [*self.encoder.parameters(), *self.shared.parameters()] if p.requires_grad]
        specific = [p for p in self.heads.parameters() if p.requires_grad]
        weighted = [losses[name] * self.loss_weights[name] for name in losses]
        surrogate = pcgrad_surrogate(weighted, shared, specific, generator=self.generator)
        return {**{name: loss.detach() for name, loss in losses.items()}, "pcgrad": surrogate}

    def predict(self, examples: Sequence[Example], batch_size: int = 64, task: str | None = None) -> np.ndarray:
        """Class ids or scores of one task's examples (``task``: its name), in order, in eval mode."""
        if task not in self.heads:
            raise ValueError(f"task {task!r} has no head here; tasks: {', '.join(self.task_names)}")

        def predict_batch(rows: Sequence[Example]) -> Tensor:
            entry = self.tokenize_task(task, rows)
            entry = {part: {k: v.to(self.device) for k, v in tokens.items()} for part, tokens in entry.items()}
            outputs = self.outputs(task, entry).float()
            return outputs if self.task_kinds[task] in SCORE_KINDS else outputs.argmax(dim=-1)

        return self.predict_in_batches(examples, batch_size, predict_batch)
