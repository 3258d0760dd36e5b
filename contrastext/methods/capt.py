"""CAPT: pre-training with masked language modelling plus a contrast between a sequence and its corrupted copy.

Luo, Li, Zhou, Wang, Zhang, Zhou, Liu, "Rethinking denoised auto-encoding in language pre-training"
(EMNLP 2021; arXiv 2010.06351 "CAPT: Contrastive Pre-Training for Learning Denoised Sequence
Representations"). Each sentence x gives a corrupted copy x̂ (BERT masking by default; span masking,
local shuffling, deletion or substitution as options, :mod:`contrastext.data.views`, special tokens are
never corrupted). With s = g(f(x)) and ŝ = g(f(x̂)) the projected ``[CLS]`` representations (f the
encoder, g a 2-layer MLP projection head) and a queue q of projected representations of earlier batches:

    ℓ(s_i) = −log  e^{sim(s_i, ŝ_i)/τ} / ( Σ_j e^{sim(s_i, ŝ_j)/τ} + Σ_{j≠i} e^{sim(s_i, s_j)/τ} + Σ_k e^{sim(s_i, q_k)/τ} )
    capt  = 1/B Σ_i [ ℓ(s_i) + ℓ(ŝ_i) ]                      (:class:`contrastext.objectives.capt.CAPT`)
    mlm   = mean over masked positions of −log p(x_t | x̂)   (BERT's MLM, head tied to the input embeddings)
    total = w_mlm · mlm + w_capt · capt                       (loss_weights, both 1.0 by default)

τ follows CAPT's inverted-triangle schedule τ(t) = |t − T/2| / T + floor over the T optimiser steps of the
run (:class:`~contrastext.objectives.temperature.InvertedTriangleTemperature`, advanced in ``after_step``),
or is fixed. After every optimiser step the batch's s and ŝ (detached) enter the FIFO queue
(:class:`~contrastext.negatives.queue.Queue`), MoCo-style.

The MLM head is our own, explicit copy of BERT's ``BertLMPredictionHead``: dense → GELU → LayerNorm →
logits = h·Eᵀ + b with E the encoder's word-embedding matrix (tied, as in BERT). It is freshly initialised
in both recipes: ``capt.yaml`` pre-trains a randomly initialised small BERT (``TextEncoder.from_config``
with all-MiniLM-L6-v2's vocabulary) on wiki1m sentences; ``capt-continued.yaml`` continues pre-training
all-MiniLM-L6-v2 itself (its weights are loaded but it ships no MLM head, so the head starts untrained).

The run (``run``): pre-train (``<output_dir>/pretrain``; the evaluator is STS-B dev, cosine of the
pooled vectors), then fine-tune the pre-trained encoder with a classification head on a GLUE task
(``method_args.finetune_task``, e.g. sst2 or rte; ``<output_dir>/finetune-<task>``) and report its dev
metric. ``<output_dir>/metrics.json`` holds both.

Example::

    >>> config = load_config("recipes/capt.yaml", ["train.max_steps=3", "data.limit=64"])
    >>> summary = run_recipe(config, data_root=Path("../shared/data"))
    >>> summary["metrics"]["stsb_dev_spearman"], summary["metrics"]["finetune_sst2_accuracy"]
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

import torch
import torch.nn.functional as F
from pydantic import BaseModel, ConfigDict, Field
from torch import Tensor, nn

from contrastext.data.collate import tokenize
from contrastext.data.examples import Example
from contrastext.data.sampling import RandomBatchSampler
from contrastext.data.views import IGNORE_INDEX, make_view
from contrastext.errors import ConfigError
from contrastext.methods.base import Method
from contrastext.methods.classification_common import (
    ClassificationArgs,
    ClassificationMethod,
    load_classification_data,
    make_evaluator,
)
from contrastext.methods.registry import MethodBundle, MethodSpec, resolve_model, run_training, seeded_build
from contrastext.methods.simcse import build_sts_evaluator, load_training_examples
from contrastext.negatives.queue import Queue
from contrastext.objectives.capt import CAPT
from contrastext.objectives.temperature import FixedTemperature, InvertedTriangleTemperature
from contrastext.training.seeding import set_seed

ENCODER_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
MASKING_VIEWS = ("token_mask", "span_mask")
Corruption = Literal["token_mask", "span_mask", "shuffle", "delete", "substitute"]

DEFAULT_BACKBONE: dict[str, Any] = {
    "hidden_size": 256,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "intermediate_size": 1024,
    "max_position_embeddings": 512,
}


class CAPTArgs(BaseModel):
    """``method_args`` of the ``capt`` recipe (see docs/methods/capt.md)."""

    model_config = ConfigDict(extra="forbid")

    from_scratch: bool = Field(default=True, description="random backbone from `backbone` + the model's tokenizer")
    backbone: dict[str, Any] = Field(default_factory=lambda: dict(DEFAULT_BACKBONE), description="BertConfig keys")
    pooling: str = Field(default="cls", description="sequence representation: [CLS], as BERT")
    corruption: Corruption = Field(default="token_mask", description="how the corrupted copy is made")
    mask_probability: float = Field(default=0.15, ge=0, le=1, description="share of tokens masked (MLM, masks)")
    corruption_probability: float = Field(default=0.1, ge=0, lt=1, description="delete / substitute share")
    shuffle_window: int = Field(default=3, ge=1, description="k of the local shuffle")
    projection_dim: int = Field(default=128, gt=0, description="output width of the projection head g")
    projection_hidden: int | None = Field(default=None, gt=0, description="hidden width of g (default: hidden)")
    temperature: Literal["inverted_triangle", "fixed"] = "inverted_triangle"
    temperature_floor: float = Field(default=0.05, gt=0, description="lowest τ of the inverted triangle")
    fixed_temperature: float = Field(default=0.1, gt=0, description="τ when temperature is fixed")
    queue_size: int = Field(default=4096, ge=0, description="queue of projected s, ŝ; 0: no queue")
    mlm_weight: float = Field(default=1.0, ge=0)
    capt_weight: float = Field(default=1.0, ge=0)
    finetune_task: str | None = Field(default="sst2", description="GLUE task fine-tuned after pre-training")
    finetune_steps: int = Field(default=200, gt=0)
    finetune_lr: float = Field(default=5e-5, gt=0)
    finetune_batch_size: int = Field(default=32, gt=0)
    finetune_limit: int | None = Field(default=None, gt=0, description="first N training examples")
    finetune_eval_limit: int | None = Field(default=None, gt=0, description="first N dev examples")
    finetune_holdout: float | None = Field(default=None, gt=0, lt=1, description="for tasks with a dev split only")


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

    The encoder must have a projection (the head g). ``collate`` gives ``original`` and ``corrupted``
    token batches, ``mlm_labels`` and, when the corruption is not a masking, a separately ``masked`` copy
    that the MLM reads.
    """

    def __init__(
        self,
        encoder,
        max_length: int,
        corruption: Corruption = "token_mask",
        mask_probability: float = 0.15,
        corruption_probability: float = 0.1,
        shuffle_window: int = 3,
        temperature: FixedTemperature | InvertedTriangleTemperature | None = None,
        queue_size: int = 4096,
        loss_weights: dict[str, float] | None = None,
    ):
        super().__init__()
        if encoder.projection is None:
            raise ConfigError("CAPT needs an encoder with a projection head (TextEncoder(projection=...))")
        self.encoder = encoder
        self.max_length = max_length
        tokenizer = encoder.tokenizer
        vocab_size = len(tokenizer)
        if tokenizer.mask_token_id is None:
            raise ConfigError("CAPT needs a tokenizer with a [MASK] token (BERT-style vocabulary)")
        self.corruption = corruption
        options = {
            "token_mask": {"mask_token_id": tokenizer.mask_token_id, "vocab_size": vocab_size,
                           "probability": mask_probability},
            "span_mask": {"mask_token_id": tokenizer.mask_token_id, "vocab_size": vocab_size,
                          "probability": mask_probability},
            "shuffle": {"k": shuffle_window},
            "delete": {"probability": corruption_probability, "pad_token_id": tokenizer.pad_token_id},
            "substitute": {"vocab_size": vocab_size, "probability": corruption_probability},
        }
        self.view = make_view(corruption, **options[corruption])
        self.mask_view = make_view("token_mask", **options["token_mask"])
        self.temperature = temperature if temperature is not None else FixedTemperature(0.1)
        self.objective = CAPT(temperature=self.temperature)
        self.queue = Queue(queue_size, encoder.projection.output_dim) if queue_size > 0 else None
        embedding_rows = encoder.backbone.get_input_embeddings().num_embeddings
        self.mlm_head = TiedMLMHead(encoder.hidden_size, embedding_rows)
        self.loss_weights = dict(loss_weights or {"mlm": 1.0, "capt": 1.0})
        self._pending: list[Tensor] = []  # projected s, ŝ of this step's micro-batches, for the queue

    # ------------------------------------------------------------------------------------ batches
    def collate(self, examples: list[Example]) -> dict:
        if len(examples) < 2:
            raise ValueError(f"CAPT needs at least 2 sentences per batch (in-batch negatives), got {len(examples)}")
        tokens = tokenize(self.encoder.tokenizer, [example.texts[0] for example in examples], self.max_length)
        corrupted = self.view(tokens, generator=self.generator)
        batch = {"original": _inputs(tokens), "corrupted": _inputs(corrupted)}
        if "labels" in corrupted:  # a masking corruption: the MLM reads the corrupted copy itself
            batch["mlm_labels"] = corrupted["labels"]
        else:
            masked = self.mask_view(tokens, generator=self.generator)
            batch["masked"] = _inputs(masked)
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

    def after_step(self) -> None:
        """Enqueue this step's projected representations and move the temperature schedule on."""
        if self.queue is not None:
            for representations in self._pending:
                self.queue.enqueue(representations)
        self._pending.clear()
        if isinstance(self.temperature, InvertedTriangleTemperature):
            self.temperature.advance()


def _inputs(tokens: dict) -> dict[str, Tensor]:
    return {name: tokens[name] for name in ENCODER_INPUTS if name in tokens}


# ---------------------------------------------------------------------------------------------- building
def planned_steps(config, num_examples: int) -> int:
    """The optimiser steps the Trainer will run (``train.max_steps``, or what ``train.epochs`` give)."""
    train = config.train
    candidates = []
    if train.max_steps is not None:
        candidates.append(train.max_steps)
    if train.epochs is not None:
        per_epoch = len(RandomBatchSampler(num_examples, train.batch_size, config.train_seed, train.drop_last))
        candidates.append(int(train.epochs * per_epoch // train.grad_accumulation))
    return max(1, min(candidates))


def build_capt_encoder(config, args: CAPTArgs):
    """A random small BERT with the model's vocabulary (``from_scratch``) or the model's own weights."""
    from contrastext.models.encoder import TextEncoder

    projection = {"name": "mlp2", "output_dim": args.projection_dim, "activation": "relu"}
    if args.projection_hidden is not None:
        projection["hidden_dim"] = args.projection_hidden
    model = resolve_model(config.model)
    if args.from_scratch:
        return TextEncoder.from_config(
            args.backbone, model, pooling=args.pooling, max_seq_length=config.data.max_length, projection=projection
        )
    return TextEncoder.from_pretrained(
        model, pooling=args.pooling, max_seq_length=config.data.max_length, projection=projection,
        projection_at_inference=False, normalize=False,
    )


def build(config, args: CAPTArgs, data_root: Path | None) -> MethodBundle:
    """The pre-training bundle: CAPT method, wiki1m (or ``data.task`` / ``data.path``) sentences, STS evaluator."""
    examples = load_training_examples(config, data_root, default_task="wiki1m")
    encoder = build_capt_encoder(config, args)
    if args.temperature == "inverted_triangle":
        temperature = InvertedTriangleTemperature(planned_steps(config, len(examples)), floor=args.temperature_floor)
    else:
        temperature = FixedTemperature(args.fixed_temperature)
    method = CAPTMethod(
        encoder,
        max_length=config.data.max_length,
        corruption=args.corruption,
        mask_probability=args.mask_probability,
        corruption_probability=args.corruption_probability,
        shuffle_window=args.shuffle_window,
        temperature=temperature,
        queue_size=args.queue_size,
        loss_weights={"mlm": args.mlm_weight, "capt": args.capt_weight},
    )
    return MethodBundle(method, examples, build_sts_evaluator(config, data_root))


# ---------------------------------------------------------------------------------------------- fine-tuning
class FineTuneMethod(ClassificationMethod):
    """Plain fine-tuning: cross-entropy (``ce``) or, for scored pairs, mean squared error (``mse``)."""

    def forward(self, batch: dict) -> dict[str, Tensor]:
        logits = self.head(self.encode_batch(batch).pooled)
        return {"mse" if self.is_regression else "ce": self.task_loss(logits, batch["labels"])}


def finetune_config(config, args: CAPTArgs):
    """The fine-tuning run's config: ``finetune_*`` settings, the task's dev split, its own output folder."""
    task = args.finetune_task.partition(":")[0]
    train = config.train.model_copy(
        update={
            "max_steps": args.finetune_steps,
            "epochs": None,
            "lr": args.finetune_lr,
            "batch_size": args.finetune_batch_size,
            "drop_last": False,
            "warmup_ratio": 0.1,
            "warmup_steps": None,
            "eval_every": None,
            "save_every": None,
            "metric_for_best": "score",
            "greater_is_better": True,
            "early_stopping_patience": None,
        }
    )
    data = config.data.model_copy(update={"task": args.finetune_task, "limit": args.finetune_limit, "few_shot": None,
                                          "label_noise": 0.0})
    evaluation = config.eval.model_copy(update={"tasks": [f"{task}:dev"], "limit": args.finetune_eval_limit})
    output_dir = str(Path(config.output_dir) / f"finetune-{task}")
    return config.model_copy(update={"train": train, "data": data, "eval": evaluation, "output_dir": output_dir})


def finetune(config, args: CAPTArgs, encoder, data_root: Path | None, resume: bool = False) -> dict:
    """Fine-tune ``encoder`` (in place) with a fresh head on ``finetune_task``; run_training's summary."""
    ft_config = finetune_config(config, args)
    ft_args = ClassificationArgs(pooling=encoder.pooling, holdout=args.finetune_holdout)
    data = load_classification_data(ft_config, ft_args, data_root, seed=config.seed)
    set_seed(ft_config.train_seed)  # the fresh head's initialisation
    method = FineTuneMethod(encoder, data.task, max_length=config.data.max_length)
    evaluator = make_evaluator(data.eval, data.task, batch_size=config.eval.batch_size)
    description = dict(data.description)
    bundle = MethodBundle(method, list(data.train), evaluator, final_report=lambda _method: description)
    return run_training(ft_config, bundle, resume=resume)


def pretrain_config(config):
    """The pre-training run's config: the same, written under ``<output_dir>/pretrain``."""
    return config.model_copy(update={"output_dir": str(Path(config.output_dir) / "pretrain")})


def run(config, args: CAPTArgs, data_root: Path | None, resume: bool = False) -> dict:
    """Pre-train (STS-B dev at the end), then fine-tune on ``finetune_task``; writes ``metrics.json``."""
    pre_config = pretrain_config(config)
    bundle = seeded_build(build, pre_config, args, data_root)
    pretrain = run_training(pre_config, bundle, resume=resume)
    metrics = {name: float(value) for name, value in pretrain["metrics"].items()}
    summary: dict[str, Any] = {"method": config.method, "output_dir": str(config.output_dir), "pretrain": pretrain}
    if args.finetune_task:
        tuned = finetune(config, args, bundle.method.encoder, data_root, resume=resume)
        task = args.finetune_task.partition(":")[0]
        metrics.update({f"finetune_{task}_{name}": float(value) for name, value in tuned["metrics"].items()})
        summary["finetune"] = tuned
    summary["metrics"] = metrics
    path = Path(config.output_dir) / "metrics.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(summary, indent=2, sort_keys=True, default=str) + "\n", encoding="utf-8")
    return summary


SPEC = MethodSpec(name="capt", args_model=CAPTArgs, build=build, run=run)
