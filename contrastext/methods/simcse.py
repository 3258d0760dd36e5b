"""SimCSE: contrastive learning of sentence embeddings with dropout twins or NLI triplets.

Gao, Yao & Chen, "SimCSE: Simple Contrastive Learning of Sentence Embeddings", EMNLP 2021
(princeton-nlp/SimCSE). Both variants minimise InfoNCE over in-batch candidates, τ = 0.05:

    ℓ_i = −log  exp(sim(h_i, h_i⁺)/τ) / Σ_j [exp(sim(h_i, h_j⁺)/τ) + exp(sim(h_i, h_j⁻)/τ + w·[j = i])]

- ``simcse-unsup`` (Eq. 4): h_i and h_i⁺ are the SAME sentence encoded twice in train mode, the two
  dropout masks being the only augmentation; there are no h⁻ terms. [CLS] pooling with SimCSE's MLP
  (Linear + tanh) in training only (``--pooler_type cls --mlp_only_train``, evaluated as
  ``cls_before_pooler``): here ``pooling: cls`` + ``mlp: train``.
- ``simcse-sup`` (Eq. 5): (anchor, entailment, contradiction) triplets from NLI; the contradiction is a
  hard negative, ``w`` is ``hard_negative_weight`` (SimCSE's option, 0 by default), added to the logit of
  anchor i's own hard negative. SimCSE's supervised script (run_sup_example.sh) uses ``--pooler_type cls``
  WITHOUT ``--mlp_only_train``: the MLP is kept at test time, here ``mlp: always``.

The batch is encoded in one forward pass ([anchors; positives; negatives] rows), as SimCSE does, so every row
gets its own dropout mask. With several processes (``gather: true``) the embeddings of all processes are
gathered with their gradients and every process computes the loss of the global batch (SimCSE's
``do_mlm``-less ``cl_forward`` gathers z1, z2, z3 the same way).

Example::

    >>> config = load_config("recipes/simcse-unsup.yaml", ["train.max_steps=3", "data.limit=24"])
    >>> bundle = SPECS[0].build(config, config.method_args_as(SimCSEUnsupArgs), data_root)
    >>> bundle.method(bundle.method.collate(bundle.train_examples[:8]))
    {'infonce': tensor(1.98, grad_fn=...)}
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal

import torch
from pydantic import BaseModel, ConfigDict, Field
from torch import Tensor

from contrastext.data.collate import tokenize
from contrastext.data.examples import Example
from contrastext.errors import ConfigError, DataFormatError
from contrastext.methods.base import Method
from contrastext.methods.registry import MethodBundle, MethodSpec, resolve_model
from contrastext.negatives.distributed import all_gather_with_grad, is_distributed
from contrastext.objectives.infonce import InfoNCE

MlpUse = Literal["train", "always", "none"]
ENCODER_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


class SimCSEUnsupArgs(BaseModel):
    """``method_args`` of ``simcse-unsup``."""

    model_config = ConfigDict(extra="forbid")

    temperature: float = Field(default=0.05, gt=0, description="τ of InfoNCE")
    pooling: str = Field(default="cls", description="cls, cls_before_pooler, mean, max, pooler, first_last_avg")
    mlp: MlpUse = Field(default="train", description="SimCSE's MLP: training only, always, or none")
    symmetric: bool = Field(default=False, description="also the positives -> anchors direction")
    gather: bool = Field(default=True, description="gather candidates across processes (world size > 1)")


class SimCSESupArgs(SimCSEUnsupArgs):
    """``method_args`` of ``simcse-sup``: the MLP is kept at inference by default, hard negatives weighed."""

    mlp: MlpUse = Field(default="always", description="SimCSE's MLP: training only, always, or none")
    hard_negative_weight: float = Field(default=0.0, description="added to each anchor's own hard-negative logit")


class SimCSE(Method):
    """InfoNCE between two views of each example (+ its hard negative when the examples are triplets).

    ``views`` is the number of texts encoded per example: 2 for dropout twins (the sentence twice) and
    for (anchor, positive) pairs, 3 for (anchor, positive, hard negative) triplets. ``loss`` is called as
    ``loss(anchors, positives)`` (or with the hard negatives as a third argument), so any pair objective
    of :mod:`contrastext.objectives` fits; its value is the loss part ``part_name``.
    """

    def __init__(
        self,
        encoder,
        loss: torch.nn.Module,
        max_length: int,
        supervised: bool,
        gather: bool = True,
        part_name: str = "infonce",
    ):
        super().__init__()
        self.encoder = encoder
        self.loss = loss
        self.max_length = max_length
        self.supervised = supervised
        self.gather = gather
        self.part_name = part_name
        self.loss_weights = {part_name: 1.0}

    def collate(self, examples: list[Example]) -> dict:
        if not examples:
            raise ValueError("SimCSE.collate got an empty batch")
        if self.supervised:
            views = len(examples[0].texts)
            for example in examples:
                if len(example.texts) != views or views not in (2, 3):
                    raise DataFormatError(
                        example.source or "<examples>",
                        None,
                        f"simcse-sup needs (anchor, positive) pairs or (anchor, positive, hard_negative) "
                        f"triplets, all of one kind; got {len(example.texts)} texts after {views}-text examples",
                    )
            texts = [example.texts[view] for view in range(views) for example in examples]
            batch = tokenize(self.encoder.tokenizer, texts, self.max_length, special_tokens_mask=False)
        else:
            views = 2  # dropout twins: the same tokens twice, two dropout masks
            once = tokenize(
                self.encoder.tokenizer, [example.texts[0] for example in examples], self.max_length,
                special_tokens_mask=False,
            )
            batch = {name: torch.cat([tensor, tensor], dim=0) for name, tensor in once.items()}
        batch["views"] = views
        return batch

    def embed_views(self, batch: dict) -> list[Tensor]:
        """The batch's embeddings split per view: ``[anchors, positives(, negatives)]``, each (B, d)."""
        inputs = {name: batch[name] for name in ENCODER_INPUTS if name in batch}
        embedding = self.encoder(**inputs).embedding
        return list(embedding.chunk(int(batch["views"]), dim=0))

    def forward(self, batch: dict) -> dict[str, Tensor]:
        views = self.embed_views(batch)
        if self.gather and is_distributed():
            views = [all_gather_with_grad(view) for view in views]
        anchors, positives, *negatives = views
        if negatives:
            return {self.part_name: self.loss(anchors, positives, negatives[0])}
        return {self.part_name: self.loss(anchors, positives)}


# ---------------------------------------------------------------------------------------- building blocks
def build_encoder(config, pooling: str, mlp: MlpUse):
    """The TextEncoder of a SimCSE-style run: ``config.model`` with [CLS] (or other) pooling and the MLP."""
    from contrastext.models.encoder import TextEncoder

    return TextEncoder.from_pretrained(
        resolve_model(config.model),
        pooling=pooling,
        max_seq_length=config.data.max_length,
        projection=None if mlp == "none" else "mlp",
        projection_at_inference=mlp == "always",
    )


def load_training_examples(config, data_root: Path | None, default_task: str) -> list[Example]:
    """``data.path`` (a SimCSE .txt or .csv file) or ``data.task`` (default ``default_task``), first ``data.limit``."""
    from contrastext.data.formats import read_sentences, read_simcse_csv
    from contrastext.data.tasks import load_task

    data = config.data
    if data.path is not None:
        path = Path(data.path).expanduser()
        examples = read_simcse_csv(path) if path.suffix.lower() in (".csv", ".tsv") else read_sentences(path)
    else:
        examples = load_task(data.task or default_task, data_root).examples
    examples = list(examples)
    if data.limit is not None:
        examples = examples[: data.limit]
    if len(examples) < 2:
        raise ConfigError(
            f"{config.source or '<config>'}: data: {len(examples)} training example(s); "
            "contrastive training needs at least 2 (check data.task, data.path, data.limit)"
        )
    return examples


def metric_prefix(spec: str) -> str:
    """``"stsb:dev"`` -> ``"stsb_dev"``: the prefix of an STS task's metric names."""
    from contrastext.data.tasks import parse_task_spec

    task, split = parse_task_spec(spec)
    return f"{task.name}_{split}"


def sts_evaluator(
    specs: Sequence[str], data_root: Path | None, batch_size: int = 64, limit: int | None = None
) -> Callable[[Method], dict[str, float]]:
    """An evaluator ``method -> {"<task>_<split>_spearman": ρ×100, "..._pearson": r×100}`` on STS tasks.

    The tasks are read once, now (missing data fails before training starts); ``limit`` keeps the first
    N pairs of each (a smoke-test aid: numbers on a slice are not comparable with the literature).
    """
    from contrastext.data.tasks import load_task
    from contrastext.evaluation.sts import evaluate_sts

    tasks = {}
    for spec in specs:
        data = load_task(spec, data_root)
        if data.task.kind != "sts" and data.task.metric not in ("spearman", "pearson"):
            raise ConfigError(f"eval.tasks: {spec!r} is not an STS task (kind {data.task.kind!r})")
        pairs = data.examples[:limit] if limit is not None else data.examples
        tasks[metric_prefix(spec)] = pairs

    def evaluate(method: Method) -> dict[str, float]:
        metrics = {}
        for prefix, pairs in tasks.items():
            result = evaluate_sts(method.encoder.encode, pairs, batch_size=batch_size)
            metrics[f"{prefix}_spearman"] = float(result["spearman"])
            metrics[f"{prefix}_pearson"] = float(result["pearson"])
        return metrics

    return evaluate


def build_sts_evaluator(config, data_root: Path | None):
    """The evaluator of ``config.eval`` (None when it names no task)."""
    if not config.eval.tasks:
        return None
    return sts_evaluator(config.eval.tasks, data_root, config.eval.batch_size, config.eval.limit)


# ---------------------------------------------------------------------------------------------- recipes
def build_unsup(config, args: SimCSEUnsupArgs, data_root: Path | None) -> MethodBundle:
    """``simcse-unsup``: dropout twins on sentences (``data.task`` default ``wiki1m``)."""
    examples = load_training_examples(config, data_root, default_task="wiki1m")
    evaluator = build_sts_evaluator(config, data_root)
    encoder = build_encoder(config, args.pooling, args.mlp)
    loss = InfoNCE(temperature=args.temperature, symmetric=args.symmetric)
    method = SimCSE(encoder, loss, config.data.max_length, supervised=False, gather=args.gather)
    return MethodBundle(method, examples, evaluator)


def build_sup(config, args: SimCSESupArgs, data_root: Path | None) -> MethodBundle:
    """``simcse-sup``: NLI triplets (``data.task`` default ``nli-triplets``) with hard negatives."""
    examples = load_training_examples(config, data_root, default_task="nli-triplets")
    evaluator = build_sts_evaluator(config, data_root)
    encoder = build_encoder(config, args.pooling, args.mlp)
    loss = InfoNCE(
        temperature=args.temperature, symmetric=args.symmetric, hard_negative_weight=args.hard_negative_weight
    )
    method = SimCSE(encoder, loss, config.data.max_length, supervised=True, gather=args.gather)
    return MethodBundle(method, examples, evaluator)


SPECS = [
    MethodSpec(name="simcse-unsup", args_model=SimCSEUnsupArgs, build=build_unsup),
    MethodSpec(name="simcse-sup", args_model=SimCSESupArgs, build=build_sup),
]
