"""CAPT: pre-training with masked language modelling plus a contrast between a sequence and its corrupted copy.

Luo, Li, Zhou, Wang, Zhang, Zhou, Liu, "Rethinking denoised auto-encoding in language pre-training"
(EMNLP 2021; arXiv 2010.06351 "CAPT: Contrastive Pre-Training for Learning Denoised Sequence
Representations"). Each sentence x gives a corrupted copy x̂ (BERT masking by default; span masking,
local shuffling, deletion or substitution as options, :mod:`contrastext.data.views`, special tokens are
never corrupted). With s = A(f(x)) and ŝ = A(f(x̂)) the aggregated ``[CLS]`` representations (f the
encoder, A the aggregation layer: "a nonlinear projection with one hidden layer" whose inner width is the
FFN inner size and whose output width is the hidden size, §3.1 and Table 4) and a queue q of the aggregated
s and ŝ of earlier steps (§2.2):

    ℓ(s_i) = −log  e^{sim(s_i, ŝ_i)/τ} / ( Σ_j e^{sim(s_i, ŝ_j)/τ} + Σ_{j≠i} e^{sim(s_i, s_j)/τ} + Σ_k e^{sim(s_i, q_k)/τ} )
    capt  = Σ_i [ ℓ(s_i) + ℓ(ŝ_i) ]     Eq. 4 (``capt_reduction="sum"``; "mean" divides by B)
    mlm   = mean over masked positions of −log p(x_t | x̂)   (BERT's MLM, head tied to the input embeddings)
    total = w_mlm · mlm + w_capt · capt   ("the final training loss is the sum of the above two", §3.1: 1, 1)

τ follows CAPT's inverted-triangle schedule (Eq. 6) τ(t) = |t − T/2| / T + floor over the T optimiser steps of the
run (:class:`~contrastext.objectives.temperature.InvertedTriangleTemperature`: the trainer tells T through
``on_train_start``, the schedule advances in ``after_step``), or is fixed. After every optimiser step the batch's s and ŝ (detached) enter the FIFO queue
(:class:`~contrastext.negatives.queue.Queue`), MoCo-style.

The MLM head is our own, explicit copy of BERT's ``BertLMPredictionHead``: dense → GELU → LayerNorm →
logits = h·Eᵀ + b with E the encoder's word-embedding matrix (tied, as in BERT). It is freshly initialised
in both recipes: ``capt.yaml`` pre-trains a randomly initialised small BERT (``TextEncoder.from_config``
with all-MiniLM-L6-v2's vocabulary) on wiki1m sentences; ``capt-continued.yaml`` continues pre-training
all-MiniLM-L6-v2 itself (its weights are loaded but it ships no MLM head, so the head starts untrained).

The corrupted copy is any registered view (:data:`contrastext.data.views.VIEWS`, by name): :func:`corruption_view`
gives each view the constructor arguments it takes (the tokenizer's ids, the masking or corruption share, the shuffle
window) and ``corruption_args`` the rest, so a new view is usable here with no edit of this module.

The run (pre-train, then fine-tune on a GLUE task) and the recipe's ``method_args`` (``CAPTArgs``) are
:mod:`contrastext.runs.capt`; this module holds the Method.

Example::

    >>> method = CAPTMethod(encoder, temperature=InvertedTriangleTemperature(1, floor=0.05))
    >>> method.on_train_start(total_steps=1000)     # the trainer does this: T = 1000
    >>> method(method.collate(sentences[:8]))
    {'mlm': tensor(10.4, grad_fn=...), 'capt': tensor(43.3, grad_fn=...)}
"""

from __future__ import annotations

from typing import Any, Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from contrastext.data.collate import encoder_inputs, tokenize
from contrastext.data.examples import Example
from contrastext.data.views import IGNORE_INDEX, VIEWS, View, make_view
from contrastext.errors import ConfigError
from contrastext.negatives.distributed import all_gather_rows
from contrastext.negatives.queue import Queue
from contrastext.objectives.capt import CAPT
from contrastext.objectives.temperature import FixedTemperature, InvertedTriangleTemperature
from contrastext.training.method import Method


def corruption_view(
    name: str,
    tokenizer,
    mask_probability: float,
    corruption_probability: float,
    shuffle_window: int,
    extra: dict[str, Any],
) -> View:
    """The registered view ``name`` with the constructor arguments it takes, read from its signature: the
    tokenizer's ``mask_token_id`` / ``vocab_size`` / ``pad_token_id``, ``k`` = ``shuffle_window``, and
    ``probability`` = ``mask_probability`` for a masking view (one that takes ``mask_token_id``: token_mask,
    span_mask), else ``corruption_probability`` (delete, substitute); ``extra`` (the recipe's ``corruption_args``)
    gives the others (span_mask's ``p``, ``max_span``)."""
    accepted = VIEWS.accepted_arguments(name)
    given = {
        "mask_token_id": tokenizer.mask_token_id,
        "vocab_size": len(tokenizer),
        "pad_token_id": tokenizer.pad_token_id,
        "k": shuffle_window,
        "probability": mask_probability if "mask_token_id" in accepted else corruption_probability,
    }
    twice = sorted(set(given) & set(extra))
    if twice:
        raise ConfigError(
            f"method_args.corruption_args: {', '.join(twice)} come(s) from CAPT's own keys (the tokenizer, "
            "mask_probability / corruption_probability, shuffle_window), not corruption_args"
        )
    return make_view(name, **{key: value for key, value in given.items() if key in accepted}, **extra)


class TiedMLMHead(nn.Module):
    """BERT's LM prediction head with the decoder tied to the input embeddings, written out.

    ``logits = LayerNorm(gelu(W h + c)) · Eᵀ + b`` where E (vocab × hidden) is passed at call time, so
    the embedding matrix is owned by the encoder only (and saved once).
    """

    def __init__(self, hidden_size: int, vocab_size: int, layer_norm_eps: float = 1e-12):
        super().__init__()
        self.dense = nn.Linear(hidden_size, hidden_size)
        self.activation = nn.GELU()
        self.layer_norm = nn.LayerNorm(hidden_size, eps=layer_norm_eps)
        self.bias = nn.Parameter(torch.zeros(vocab_size))

    def forward(self, hidden: Tensor, embedding_weight: Tensor) -> Tensor:
        hidden = self.layer_norm(self.activation(self.dense(hidden)))
        return F.linear(hidden, embedding_weight, self.bias)


class CAPTMethod(Method):
    """MLM + CAPT between each sentence and its corrupted copy; parts ``mlm`` and ``capt``.

    The encoder must have a projection (the aggregation layer A). ``collate`` gives ``original`` and ``corrupted``
    token batches, ``mlm_labels`` and, when the corruption is not a masking, a separately ``masked`` copy
    that the MLM reads.
    """

    def __init__(
        self,
        encoder,
        corruption: str = "token_mask",
        mask_probability: float = 0.15,
        corruption_probability: float = 0.1,
        shuffle_window: int = 3,
        temperature: FixedTemperature | InvertedTriangleTemperature | None = None,
        queue_size: int = 8192,
        loss_weights: dict[str, float] | None = None,
        capt_reduction: Literal["sum", "mean"] = "sum",
        corruption_args: dict[str, Any] | None = None,
    ):
        super().__init__()
        if encoder.projection is None:
            raise ConfigError("CAPT needs an encoder with a projection head (TextEncoder(projection=...))")
        self.encoder = encoder
        tokenizer = encoder.tokenizer
        if tokenizer.mask_token_id is None:
            raise ConfigError("CAPT needs a tokenizer with a [MASK] token (BERT-style vocabulary)")
        self.corruption = corruption
        self.view = corruption_view(
            corruption, tokenizer, mask_probability, corruption_probability, shuffle_window, corruption_args or {}
        )
        self.mask_view = corruption_view("token_mask", tokenizer, mask_probability, corruption_probability, 0, {})
        self.temperature = temperature if temperature is not None else FixedTemperature(0.1)
        self.objective = CAPT(temperature=self.temperature, reduction=capt_reduction)
        self.queue = Queue(queue_size, encoder.projection.output_dim) if queue_size > 0 else None
        embedding_rows = encoder.backbone.get_input_embeddings().num_embeddings
        self.mlm_head = TiedMLMHead(encoder.hidden_size, embedding_rows)
        self.loss_weights = dict(loss_weights or {"mlm": 1.0, "capt": 1.0})
        self._pending: list[Tensor] = []  # projected s, ŝ of this step's micro-batches, for the queue

    # ------------------------------------------------------------------------------------ batches
    def collate(self, examples: list[Example]) -> dict:
        if len(examples) < 2:
            raise ValueError(f"CAPT needs at least 2 sentences per batch (in-batch negatives), got {len(examples)}")
        texts = [example.texts[0] for example in examples]
        tokens = tokenize(self.encoder.tokenizer, texts, self.encoder.train_max_length)
        corrupted = self.view(tokens, generator=self.generator)
        batch = {"original": encoder_inputs(tokens), "corrupted": encoder_inputs(corrupted)}
        if "labels" in corrupted:  # a masking corruption: the MLM reads the corrupted copy itself
            batch["mlm_labels"] = corrupted["labels"]
        else:
            masked = self.mask_view(tokens, generator=self.generator)
            batch["masked"] = encoder_inputs(masked)
            batch["mlm_labels"] = masked["labels"]
        return batch

    # ------------------------------------------------------------------------------------ losses
    def forward(self, batch: dict) -> dict[str, Tensor]:
        original = self.encoder(**batch["original"])
        corrupted = self.encoder(**batch["corrupted"])
        s, s_hat = original.projected, corrupted.projected
        queue = self.queue.contents() if self.queue is not None and len(self.queue) > 0 else None
        capt = self.objective(s, s_hat, queue=queue)
        mlm_source = corrupted if "masked" not in batch else self.encoder(**batch["masked"])
        mlm = self.mlm_loss(mlm_source.token_embeddings, batch["mlm_labels"])
        if self.training and self.queue is not None:
            self._pending.append(torch.cat([s, s_hat]).detach())
        return {"mlm": mlm, "capt": capt}

    def mlm_loss(self, token_embeddings: Tensor, labels: Tensor) -> Tensor:
        """Cross-entropy of the tied MLM head at the masked positions (0, still in the graph, if none)."""
        chosen = labels != IGNORE_INDEX
        if not bool(chosen.any()):
            return token_embeddings.sum() * 0.0
        embedding_weight = self.encoder.backbone.get_input_embeddings().weight
        logits = self.mlm_head(token_embeddings[chosen], embedding_weight)
        return F.cross_entropy(logits.float(), labels[chosen])

    def on_train_start(self, total_steps: int) -> None:
        """The inverted-triangle schedule spans the run's ``total_steps`` optimiser steps (told by the trainer)."""
        super().on_train_start(total_steps)
        if isinstance(self.temperature, InvertedTriangleTemperature):
            self.temperature.set_total_steps(total_steps)

    def after_step(self) -> None:
        """Enqueue this step's projected representations and move the temperature schedule on."""
        if self.queue is not None:
            for representations in self._pending:  # every process's rows, so the queue is the same everywhere
                self.queue.enqueue(all_gather_rows(representations))
        self._pending.clear()
        if isinstance(self.temperature, InvertedTriangleTemperature):
            self.temperature.advance()
