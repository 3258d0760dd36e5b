"""Multi-task BERT: sentiment (SST-5), paraphrase (Quora) and similarity (STS) on one encoder.

After the CS224N default final project and the report "Robust embeddings using contrastive and multiple
negatives on BERT" (Mohammed & Sabane; docs/methods/multitask.md quotes it). Its final model (§5.1, Table 2
Exp 13–15, "MT-DNN + DPHA + CL"):

- the sentence vector is BERT's POOLER output p = tanh(W_p·h_[CLS] + b_p) (§6.1 "the pooler output performs
  better than the last hidden state"), with dropout on it (Table 2's "dropout");
- CL, a common layer shared by every head (§4 "Parameter Sharing"): c(x) = tanh(W_c·dropout(x) + b_c);
- a single-text task (SST-5, kind ``single``): ``logits = W_s·c(p)``, part = cross-entropy;
- a pair task (Quora, kind ``pair``; STS, kind ``regression``/``sts``): a CROSS-ENCODER (§4 "Dense
  Prediction Heads", §6.1: separately encoded sentences gave "random classifier accuracy for PD"): the
  pair is encoded jointly in both orders, e₁₂ = p([CLS] s1 [SEP] s2 [SEP]) and e₂₁ = p([CLS] s2 [SEP] s1
  [SEP]), with their difference d = e₁₂ − e₂₁, and the :class:`~contrastext.models.heads.DensePairHead`
  gives ``out = W_o [tanh(w₁·c(e₁₂)); tanh(w₂·c(e₂₁)); tanh(w₃·c(d))] + b_o`` (DPHA; ``pair_activation:
  none`` is DPH, ``pair_difference: false`` PH). A binary pair task has one logit and binary cross-entropy
  (§4 "a single logit with BCELoss"), a scored pair one output and mean squared error against the 0–5
  score, a pair task with more classes one logit per class and cross-entropy.
  ``pair_encoding: separate`` is the bi-encoder instead (each text alone, c(p(s1)), c(p(s2)) into a
  :class:`~contrastext.models.heads.PairHead`).
- optional multiple negatives ranking (``mnr: true``; §3.2, Henderson et al. 2017): the duplicate pairs
  (label 1) of the ``mnr_task`` batch, each text encoded alone, InfoNCE with in-batch negatives,
  part ``mnr`` = −(1/K) Σᵢ log(exp(s(xᵢ, yᵢ)/τ) / Σⱼ exp(s(xᵢ, yⱼ)/τ)).

The parts are named after the tasks (plus ``mnr``) and weighted by ``method_args.loss_weights`` (and
``mnr_weight``). Which task each batch holds is the run's task sampler (:mod:`contrastext.runs.multitask`).

With ``method_args.pcgrad: true`` every step instead holds examples of EVERY task
(:class:`~contrastext.data.sampling.JointTaskBatchSampler`) and the shared parameters (encoder + shared
layer) follow PCGrad (Yu et al. 2020, :mod:`contrastext.methods.pcgrad`), the projected task gradients
AVERAGED (``pcgrad_reduction: mean``, the report's "mean of the input gradients"): the trainer only calls
``total.backward()``, so ``forward`` computes each task's gradient itself (``torch.autograd.grad``),
projects the conflicting ones and returns the task losses DETACHED (for the log) plus a part ``pcgrad``
whose value is 0 and whose gradient is the combination (:func:`~contrastext.methods.pcgrad.pcgrad_surrogate`).
The ``mnr`` part counts towards its task's gradient there. Single process only.

Example::

    >>> method = MultitaskMethod(encoder, [get_task("minbert-sst"), get_task("minbert-sts")])
    >>> method(method.collate([TaskExample(("a fine film",), 3, task=0), TaskExample(("a", "b"), 2.5, task=1)]))
    {'minbert-sst': tensor(1.61, grad_fn=...), 'minbert-sts': tensor(6.2, grad_fn=...)}
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from contrastext.data.collate import encoder_inputs, labels_tensor, tokenize
from contrastext.data.examples import Example
from contrastext.data.task_kinds import SCORED_PAIR_KINDS
from contrastext.errors import ConfigError
from contrastext.methods.pcgrad import pcgrad_surrogate
from contrastext.models.heads import ClassificationHead, DensePairHead, PairHead
from contrastext.models.projection import DenseLayer
from contrastext.objectives.registry import make_objective
from contrastext.runtime.processes import is_distributed
from contrastext.training.method import Method

DEFAULT_TASKS = ("minbert-sst", "minbert-quora", "minbert-sts")
MNR_PART = "mnr"


def head_outputs(task: Any) -> int:
    """Outputs of a task's head: its classes (single text), 1 for a binary or scored pair, else its classes."""
    if task.kind == "single":
        return task.num_labels
    if task.kind in SCORED_PAIR_KINDS or task.num_labels == 2:
        return 1
    return task.num_labels


class MultitaskMethod(Method):
    """Encoder + dropout + shared layer + one head per task; parts named after the tasks (plus ``mnr``, ``pcgrad``)."""

    def __init__(
        self,
        encoder,
        tasks: Sequence[Any],
        *,
        pooler_dropout: float = 0.1,
        shared_layer: bool = True,
        pair_encoding: Literal["joint", "separate"] = "joint",
        pair_difference: bool = True,
        pair_activation: Literal["tanh", "none"] = "tanh",
        pair_parts: Sequence[str] = ("u", "v", "diff"),
        symmetric_pairs: bool = True,
        loss_weights: dict[str, float] | None = None,
        mnr_task: str | None = None,
        mnr_temperature: float = 0.05,
        mnr_weight: float = 1.0,
        pcgrad: bool = False,
        pcgrad_reduction: Literal["mean", "sum"] = "mean",
    ):
        super().__init__()
        loss_weights = dict(loss_weights or {})
        self.encoder = encoder
        self.task_names = [task.name for task in tasks]
        self.task_kinds = {task.name: task.kind for task in tasks}
        self.outputs_of = {task.name: head_outputs(task) for task in tasks}
        unknown = sorted(set(loss_weights) - set(self.task_names))
        if unknown:
            raise ConfigError(f"method_args.loss_weights: unknown task(s) {unknown}; tasks: {self.task_names}")
        self.pair_encoding = pair_encoding
        self.pair_difference = pair_difference
        self.pair_activation = pair_activation
        self.pair_parts = tuple(pair_parts)
        self.symmetric_pairs = symmetric_pairs
        width = encoder.hidden_size
        self.dropout = nn.Dropout(pooler_dropout)
        self.shared = DenseLayer(width, width, activation="tanh") if shared_layer else nn.Identity()
        self.heads = nn.ModuleDict({task.name: self._head(task, width) for task in tasks})
        self.loss_weights = {name: float(loss_weights.get(name, 1.0)) for name in self.task_names}
        self.mnr_task = self._mnr_task(mnr_task) if mnr_task is not None else None
        if self.mnr_task is not None:
            self.mnr_loss = make_objective("infonce", temperature=mnr_temperature)
            self.loss_weights[MNR_PART] = float(mnr_weight)
        self.pcgrad = pcgrad
        self.pcgrad_reduction = pcgrad_reduction

    def _head(self, task: Any, width: int) -> nn.Module:
        outputs = head_outputs(task)
        if task.kind == "single":
            return ClassificationHead(width, outputs, dropout=0.0)
        if self.pair_encoding == "separate":
            return PairHead(width, outputs, parts=self.pair_parts, symmetric=self.symmetric_pairs, dropout=0.0)
        branches = 3 if self.pair_difference else 2
        return DensePairHead(width, outputs, branches=branches, activation=self.pair_activation)

    def start_scores_at(self, means: dict[str, float]) -> None:
        """Set each scored pair head's output bias to ``means[task]`` (``score_bias_init: label_mean``).

        A scored head's output is ``W_o·features + b_o``; with ``b_o = mean`` and the small initial ``W_o``
        it starts near the MSE-best constant instead of near 0, far below 0–5 scores, where the first steps'
        MSE gradient is large and of one sign for every pair (it then says "higher", not "which pairs")."""
        for name, mean in means.items():
            if self.task_kinds.get(name) not in SCORED_PAIR_KINDS:
                raise ValueError(f"{name!r} is not a scored pair task here; scored: {self.score_tasks()}")
            head = self.heads[name]
            linear = head.output if isinstance(head, DensePairHead) else head.classifier.linear
            with torch.no_grad():
                linear.bias.fill_(float(mean))

    def score_tasks(self) -> list[str]:
        return [name for name in self.task_names if self.task_kinds[name] in SCORED_PAIR_KINDS]

    def _mnr_task(self, name: str) -> str:
        if name not in self.task_names or self.task_kinds[name] != "pair":
            pairs = [task for task in self.task_names if self.task_kinds[task] == "pair"]
            raise ConfigError(f"method_args.mnr_task: {name!r} is not a paraphrase (pair) task here; pair tasks: {pairs}")
        return name

    # ------------------------------------------------------------------------------------ batches
    def collate(self, examples: list[Example]) -> dict:
        """``{task name: {token dicts, "labels"}}`` for the tasks present (see :meth:`tokenize_task`)."""
        batch: dict[str, dict] = {}
        for index, name in enumerate(self.task_names):
            rows = [example for example in examples if getattr(example, "task", None) == index]
            if rows:
                batch[name] = self.tokenize_task(name, rows, with_labels=True)
        if sum(len(entry["labels"]) for entry in batch.values()) != len(examples):
            raise ValueError("multitask collate needs TaskExample rows whose task indexes the method's tasks")
        return batch

    def tokenize_task(self, name: str, rows: Sequence[Example], with_labels: bool = False) -> dict:
        """One task's rows as token dicts: ``first`` (single texts), ``joint`` (a pair in both orders,
        ``[s1; s2]`` with ``[s2; s1]``: 2B rows) or ``first`` + ``second`` (separate); ``mnr`` (the duplicate
        pairs' texts, each alone: 2P rows) when this is the mnr task; ``labels``."""
        kind = self.task_kinds[name]
        firsts = [row.texts[0] for row in rows]
        if kind == "single":
            entry = {"first": self._tokens(firsts)}
        else:
            seconds = [row.texts[1] for row in rows]
            if self.pair_encoding == "joint":
                entry = {"joint": self._tokens(firsts + seconds, pairs=seconds + firsts)}
            else:
                entry = {"first": self._tokens(firsts), "second": self._tokens(seconds)}
        if with_labels:
            entry["labels"] = labels_tensor(rows, torch.long if kind == "single" or self.outputs_of[name] > 1 else torch.float32)
            duplicates = [row for row in rows if row.label == 1]
            if name == self.mnr_task and duplicates:
                entry[MNR_PART] = self._tokens([row.texts[0] for row in duplicates] + [row.texts[1] for row in duplicates])
        return entry

    def _tokens(self, texts: list[str], pairs: list[str] | None = None) -> dict[str, Tensor]:
        encoded = tokenize(self.encoder.tokenizer, texts, self.encoder.train_max_length, pairs=pairs,
                           special_tokens_mask=False)
        return encoder_inputs(encoded)

    # ------------------------------------------------------------------------------------ outputs
    def pooled(self, tokens: dict[str, Tensor]) -> Tensor:
        """The encoder's pooled vectors (the pooler output by default)."""
        return self.encoder(**tokens).pooled

    def common(self, pooled: Tensor) -> Tensor:
        """The shared layer over the dropped-out pooled vector: c(p) = tanh(W_c·dropout(p) + b_c)."""
        return self.shared(self.dropout(pooled))

    def outputs(self, name: str, entry: dict) -> Tensor:
        """Logits (class tasks; one logit for a binary pair task) or scores (scored pairs) of one task's entry."""
        kind = self.task_kinds[name]
        if kind == "single":
            return self.heads[name](self.common(self.pooled(entry["first"])))
        if "joint" in entry:
            forward, backward = self.pooled(entry["joint"]).chunk(2, dim=0)
            branches = [forward, backward] + ([forward - backward] if self.pair_difference else [])
            out = self.heads[name](*[self.common(branch) for branch in branches])
        else:
            out = self.heads[name](self.common(self.pooled(entry["first"])), self.common(self.pooled(entry["second"])))
        return out.squeeze(-1) if self.outputs_of[name] == 1 else out

    def task_loss(self, name: str, entry: dict) -> Tensor:
        """Cross-entropy (classes), binary cross-entropy on one logit (binary pairs) or MSE (scored pairs)."""
        outputs = self.outputs(name, entry).float()
        if self.task_kinds[name] in SCORED_PAIR_KINDS:
            return F.mse_loss(outputs, entry["labels"].float())
        if self.outputs_of[name] == 1:
            return F.binary_cross_entropy_with_logits(outputs, entry["labels"].float())
        return F.cross_entropy(outputs, entry["labels"])

    def mnr(self, entry: dict) -> Tensor:
        """Multiple negatives ranking over the batch's duplicate pairs, each text encoded alone."""
        anchors, positives = self.pooled(entry[MNR_PART]).chunk(2, dim=0)
        return self.mnr_loss(anchors, positives)

    def on_train_start(self, total_steps: int) -> None:
        """PCGrad projects each process's own task gradients; DDP would then average projections of local
        gradients, which is not PCGrad of the global ones. Refused across processes rather than done wrong."""
        super().on_train_start(total_steps)
        if self.pcgrad and is_distributed():
            raise ConfigError(
                "method_args.pcgrad: PCGrad runs in a single process only (it projects per-task gradients that "
                "DDP has not averaged yet); run without torchrun/accelerate launch, or set method_args.pcgrad=false"
            )

    def forward(self, batch: dict) -> dict[str, Tensor]:
        losses = {name: self.task_loss(name, entry) for name, entry in batch.items()}
        if self.mnr_task in batch and MNR_PART in batch[self.mnr_task]:
            losses[MNR_PART] = self.mnr(batch[self.mnr_task])
        if not (self.pcgrad and self.training and torch.is_grad_enabled()):
            return losses
        shared = [p for p in [*self.encoder.parameters(), *self.shared.parameters()] if p.requires_grad]
        specific = [p for p in self.heads.parameters() if p.requires_grad]
        per_task = []
        for name in batch:
            loss = losses[name] * self.loss_weights[name]
            if name == self.mnr_task and MNR_PART in losses:
                loss = loss + losses[MNR_PART] * self.loss_weights[MNR_PART]
            per_task.append(loss)
        surrogate = pcgrad_surrogate(per_task, shared, specific, generator=self.generator,
                                     reduction=self.pcgrad_reduction)
        return {**{name: loss.detach() for name, loss in losses.items()}, "pcgrad": surrogate}

    def predict(self, examples: Sequence[Example], batch_size: int = 64, task: str | None = None) -> np.ndarray:
        """Class ids or scores of one task's examples (``task``: its name), in order, in eval mode."""
        if task not in self.heads:
            raise ValueError(f"task {task!r} has no head here; tasks: {', '.join(self.task_names)}")

        def predict_batch(rows: Sequence[Example]) -> Tensor:
            entry = self.tokenize_task(task, rows)
            entry = {part: {k: v.to(self.device) for k, v in tokens.items()} for part, tokens in entry.items()}
            outputs = self.outputs(task, entry).float()
            if self.task_kinds[task] in SCORED_PAIR_KINDS:
                return outputs
            return (outputs > 0).long() if self.outputs_of[task] == 1 else outputs.argmax(dim=-1)

        return self.predict_in_batches(examples, batch_size, predict_batch)

    def export_classifiers(self, folder, card: dict | None = None) -> tuple[dict[str, Any], dict[str, str]]:
        """One Hugging Face sequence-classification folder per task that has an exact one, ``folder/<task>/``.

        Returns ``(exported {task: folder}, not exported {task: why})``. Only a single-text task without the
        shared layer exports (``method_args.shared_layer: false``: pooled vector → linear head, what
        ``BertForSequenceClassification`` computes with pooling ``pooler``). The shared layer CL adds a second
        dense+tanh after BERT's pooler, and the pair heads read the pair encoded in both orders (or each text
        alone): no transformers sequence-classification class computes either, so those are not exported
        rather than exported wrong (:mod:`contrastext.models.hf_export`)."""
        from pathlib import Path

        from contrastext.models.hf_export import export_classifier

        exported: dict[str, Any] = {}
        skipped: dict[str, str] = {}
        names_of = getattr(self, "label_names", None)
        for name in self.task_names:
            if self.task_kinds[name] != "single":
                skipped[name] = ("a pair head over the pair encoded in both orders (or each text alone): no "
                                 "transformers sequence-classification class computes it")
                continue
            if not isinstance(self.shared, nn.Identity):
                skipped[name] = ("the shared layer (method_args.shared_layer) adds a dense+tanh after the pooler: no "
                                 "transformers sequence-classification class computes it; train with "
                                 "method_args.shared_layer=false to get an export")
                continue
            names = names_of.get(name) if isinstance(names_of, dict) else None
            outputs = self.outputs_of[name]
            exported[name] = export_classifier(
                self.encoder,
                self.heads[name].linear,
                Path(folder) / name,
                label_names=[str(label) for label in names] if names else [str(i) for i in range(outputs)],
                task=name,
                task_kind="single",
                max_length=getattr(self.encoder, "train_max_length", None) or self.encoder.max_seq_length,
                card=card,
            )
        return exported, skipped
