"""Recipes ``capt`` and ``capt-continued``: CAPT pre-training (:mod:`contrastext.methods.capt`), then fine-tuning.

The recipes' ``method_args`` are :class:`CAPTArgs` (here, beside the run that reads them: the pre-training's
settings, which :func:`build` passes to the Method as explicit arguments, and the fine-tuning protocol,
``finetune_*``). ``corruption`` is any registered view, checked against :data:`contrastext.data.views.VIEWS` when
the arguments are read.

The run: pre-train (``<output_dir>/pretrain``; the evaluator is STS-B dev, cosine of the pooled vectors;
with ``train.metric_for_best: null``, the recipes' default, the last weights are kept, as the paper
fine-tunes its pre-trained model), then fine-tune the pre-trained encoder with a fresh classification head
on a GLUE task (``method_args.finetune_task``, e.g. sst2 or rte), once per fine-tuning seed
(``finetune_seeds``, 5 by default, each from the same pre-trained weights, in
``<output_dir>/finetune-<task>/seed-<s>``), and report the median (or mean: ``finetune_aggregate``) of their
dev metrics as ``finetune_<task>_<split>_<metric>``. ``<output_dir>/metrics.json`` holds both stages.

The run's size reaches both stages: ``--set train.max_steps`` (or ``train.epochs``), ``data.limit`` and
``eval.limit`` set the pre-training and every fine-tuning, unless ``method_args.finetune_steps`` /
``finetune_limit`` / ``finetune_eval_limit`` are given with ``--set`` too (then the fine-tunings keep those).

Example::

    >>> config = load_config(recipe_path("capt"), ["train.max_steps=3", "data.limit=64"])
    >>> summary = run_recipe(config, data_root=Path("../shared/data"))
    >>> summary["metrics"]["stsb_dev_spearman"], summary["metrics"]["finetune_sst2_dev_accuracy"]
"""

from __future__ import annotations

import copy
import statistics
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from contrastext.data.views import VIEWS
from contrastext.methods.capt import CAPTMethod
from contrastext.methods.classification import FineTuneMethod
from contrastext.models.projection import build_projection
from contrastext.objectives.temperature import FixedTemperature, InvertedTriangleTemperature
from contrastext.runs.classification import ClassificationArgs, head_evaluator
from contrastext.runs.data import USER_DATA_CLEARED, load_classification_data, load_training_examples
from contrastext.runs.encoders import build_encoder
from contrastext.runs.evaluation import sentence_evaluator
from contrastext.runs.plan import StagePlan
from contrastext.runs.protocol import PaperSetting, Protocol
from contrastext.runs.registry import RunSpec
from contrastext.runs.stages import (
    NO_EVAL_OR_SAVE,
    MethodBundle,
    finished_summary,
    run_training,
    seeded_build,
    stage_config,
    stage_length,
    stage_limit,
    write_summary,
)
from contrastext.runtime.seeding import set_seed
from contrastext.training.config import TrainConfig, registered

# CAPT-Small (§3.1: "a 6-layer Transformer with 256 hidden size and 4 attention heads"; Table 4: FFN inner
# hidden size 1024, dropout 0.1 = BertConfig's default). max_position_embeddings is not given (BERT's 512).
DEFAULT_BACKBONE: dict[str, Any] = {
    "hidden_size": 256,
    "num_hidden_layers": 6,
    "num_attention_heads": 4,
    "intermediate_size": 1024,
    "max_position_embeddings": 512,
}


CORRUPTION_KNOBS = {
    "probability": "method_args.mask_probability (masking views) or method_args.corruption_probability",
    "k": "method_args.shuffle_window",
    "mask_token_id": "the tokenizer",
    "vocab_size": "the tokenizer",
    "pad_token_id": "the tokenizer",
}
"""A view's constructor arguments that CAPT sets itself (:func:`contrastext.methods.capt.corruption_view`) -> where
each comes from; ``corruption_args`` gives the others (one source per knob)."""


class CAPTArgs(BaseModel):
    """``method_args`` of the ``capt`` recipe (see docs/methods/capt.md)."""

    model_config = ConfigDict(extra="forbid")

    from_scratch: bool = Field(default=True, description="random backbone from `backbone` + the model's tokenizer")
    backbone: dict[str, Any] = Field(default_factory=lambda: dict(DEFAULT_BACKBONE), description="BertConfig keys")
    pooling: str = Field(default="cls", description="sequence representation: [CLS], as BERT")
    corruption: str = Field(
        default="token_mask",
        description="how the corrupted copy is made: any registered view (token_mask, span_mask, shuffle, delete, "
        "substitute, ...)",
    )
    corruption_args: dict[str, Any] = Field(
        default_factory=dict,
        description="the view's other constructor arguments (span_mask: p, max_span); the tokenizer's ids, "
        "the shares and the shuffle window come from their own keys",
    )
    mask_probability: float = Field(default=0.15, ge=0, le=1, description="share of tokens masked (MLM, masks)")
    corruption_probability: float = Field(default=0.1, ge=0, lt=1, description="delete / substitute share")
    shuffle_window: int = Field(default=3, ge=1, description="k of the local shuffle")
    projection_dim: int | None = Field(
        default=None, gt=0, description="output width of the aggregation layer A (default: the hidden size, §3.1)"
    )
    projection_hidden: int | None = Field(
        default=None, gt=0, description="inner width of A (default: the backbone's FFN inner size, §3.1)"
    )
    projection_activation: Literal["relu", "gelu", "tanh"] = Field(
        default="relu", description="A's non-linearity (not given by the paper; SimCLR's ReLU)"
    )
    temperature: Literal["inverted_triangle", "fixed"] = "inverted_triangle"
    temperature_floor: float = Field(default=0.05, gt=0, description="lowest τ of the inverted triangle")
    fixed_temperature: float = Field(default=0.1, gt=0, description="τ when temperature is fixed")
    queue_size: int = Field(default=8192, ge=0, description="queue of aggregated s, ŝ (§3.1: 8192); 0: no queue")
    capt_reduction: Literal["sum", "mean"] = Field(
        default="sum", description="over the batch: Eq. 4 sums; mean divides by the batch size"
    )
    mlm_weight: float = Field(default=1.0, ge=0)
    capt_weight: float = Field(default=1.0, ge=0)
    finetune_task: str | None = Field(default="sst2", description="GLUE task fine-tuned after pre-training")
    finetune_seeds: int = Field(default=5, gt=0, description="fine-tuning runs (seeds seed, seed+1, …); §3.3")
    finetune_aggregate: Literal["median", "mean"] = Field(
        default="median", description="how the runs' dev metrics are reported (§3.3: median)"
    )
    finetune_steps: int = Field(default=200, gt=0)
    finetune_lr: float = Field(default=5e-5, gt=0)
    finetune_batch_size: int = Field(default=32, gt=0)
    finetune_limit: int | None = Field(default=None, gt=0, description="first N training examples")
    finetune_eval_limit: int | None = Field(default=None, gt=0, description="first N dev examples")
    finetune_holdout: float | None = Field(default=None, gt=0, lt=1, description="for tasks with a dev split only")

    @field_validator("corruption")
    @classmethod
    def _a_registered_view(cls, name: str) -> str:
        return registered(name, VIEWS)

    @field_validator("corruption_args")
    @classmethod
    def _knobs_have_one_key(cls, corruption_args: dict[str, Any]) -> dict[str, Any]:
        for argument, key in CORRUPTION_KNOBS.items():
            if argument in corruption_args:
                raise ValueError(f"the view's {argument!r} comes from {key}: set that, not corruption_args.{argument}")
        return corruption_args



def aggregation_layer(args: CAPTArgs, backbone_config) -> dict[str, Any]:
    """The spec of CAPT's aggregation layer A: "a nonlinear projection with one hidden layer. The inner hidden
    size of A is set to the same as FFN inner hidden size and the output hidden size is set to the same as
    Transformer hidden size" (§3.1; Table 4: 1024 and 256 for CAPT-Small). ``projection_hidden`` /
    ``projection_dim`` override the two widths."""
    return {
        "name": "mlp2",
        "hidden_dim": args.projection_hidden or int(backbone_config.intermediate_size),
        "output_dim": args.projection_dim or int(backbone_config.hidden_size),
        "activation": args.projection_activation,
    }


def capt_encoder(config: TrainConfig, args: CAPTArgs):
    """A random small BERT with the model's vocabulary (``from_scratch``) or the model's own weights, with
    the aggregation layer A (used in training only), whose widths follow the backbone's."""
    encoder = build_encoder(
        config,
        pooling=args.pooling,
        projection_at_inference=False,
        normalize=False,
        from_scratch=args.backbone if args.from_scratch else None,
    )
    encoder.projection = build_projection(aggregation_layer(args, encoder.backbone.config), encoder.hidden_size)
    return encoder


def build(config: TrainConfig, args: CAPTArgs, data_root: Path | None) -> MethodBundle:
    """The pre-training bundle: CAPT method, wiki1m (or ``data.task`` / ``data.path``) sentences, STS evaluator.

    The inverted-triangle temperature learns the run's length from the trainer (``on_train_start``)."""
    examples = load_training_examples(config, data_root, default_task="wiki1m")
    if args.temperature == "inverted_triangle":
        temperature = InvertedTriangleTemperature(1, floor=args.temperature_floor)
    else:
        temperature = FixedTemperature(args.fixed_temperature)
    method = CAPTMethod(
        capt_encoder(config, args),
        corruption=args.corruption,
        mask_probability=args.mask_probability,
        corruption_probability=args.corruption_probability,
        shuffle_window=args.shuffle_window,
        temperature=temperature,
        queue_size=args.queue_size,
        loss_weights={"mlm": args.mlm_weight, "capt": args.capt_weight},
        capt_reduction=args.capt_reduction,
        corruption_args=args.corruption_args,
    )
    return MethodBundle(method, examples, sentence_evaluator(config, data_root))


def finetune_config(config: TrainConfig, args: CAPTArgs, seed: int | None = None) -> TrainConfig:
    """One fine-tuning run's config: ``finetune_*`` settings, the task's dev split, and its own output folder
    ``finetune-<task>/seed-<seed>/`` with ``seed`` as its top-level and training seed (head, order, dropout).

    The run's size given with ``--set`` reaches it: ``train.max_steps`` / ``train.epochs`` replace
    ``finetune_steps``, ``data.limit`` ``finetune_limit`` and ``eval.limit`` ``finetune_eval_limit``, unless that
    ``method_args.finetune_*`` key is given with ``--set`` too (:func:`~contrastext.runs.stages.stage_length`)."""
    task = args.finetune_task.partition(":")[0]
    seed = config.seed if seed is None else seed
    train = {
        "seed": seed,
        **NO_EVAL_OR_SAVE,
        **stage_length(config, {"max_steps": args.finetune_steps}, "finetune_steps"),
        "lr": args.finetune_lr,
        "batch_size": args.finetune_batch_size,
        "drop_last": False,
        "warmup_ratio": 0.1,
        "warmup_steps": None,
        "metric_for_best": "score",
        "greater_is_better": True,
    }
    limit = stage_limit(config, "finetune_limit", args.finetune_limit, "data.limit")
    # the pre-training file (data.path / data.dataset) is not the fine-tuning task; a classifier has no in-batch
    # negatives (data.batch_sampler back to the default)
    data = {"task": args.finetune_task, "limit": limit, "few_shot": None, "label_noise": 0.0,
            "batch_sampler": "batch_sampler", **USER_DATA_CLEARED}
    eval_limit = stage_limit(config, "finetune_eval_limit", args.finetune_eval_limit, "eval.limit")
    evaluation = {"tasks": [f"{task}:dev"], "limit": eval_limit}
    return stage_config(config, f"finetune-{task}/seed-{seed}", train=train, data=data, eval=evaluation, seed=seed)


def finetune_seeds(config: TrainConfig, args: CAPTArgs) -> list[int]:
    """The seeds of the fine-tuning runs: ``seed``, ``seed + 1``, … (``finetune_seeds`` of them)."""
    return [config.seed + k for k in range(args.finetune_seeds)]


def finetune(
    config: TrainConfig, args: CAPTArgs, encoder, data_root: Path | None, resume: bool = False, seed: int | None = None
) -> dict:
    """Fine-tune ``encoder`` (in place) with a fresh head on ``finetune_task``; run_training's summary."""
    ft_config = finetune_config(config, args, seed)
    ft_args = ClassificationArgs(pooling=encoder.pooling, holdout=args.finetune_holdout)
    data = load_classification_data(ft_config, ft_args, data_root, seed=config.seed)
    set_seed(ft_config.train_seed)  # the fresh head's initialisation
    method = FineTuneMethod(encoder, data.task)
    description = dict(data.description)
    bundle = MethodBundle(method, list(data.train), head_evaluator(ft_config, data), final_report=lambda _m: description)
    return run_training(ft_config, bundle, resume=resume)


def finetune_all_seeds(config: TrainConfig, args: CAPTArgs, encoder, data_root: Path | None, resume: bool) -> dict:
    """One fine-tuning run per seed, each from the same pre-trained weights; per-seed metrics, their median
    (§3.3: "the median of multiple random fine-tuning runs like RoBERTa") and mean (Table 2's caption:
    "Averaged dev results over 5 random seeds"). ``finetune_aggregate`` names the one reported as
    ``finetune_<task>_<split>_<metric>``. With ``resume``, a seed whose ``metrics.json`` exists is not run again."""
    task = args.finetune_task.partition(":")[0]
    pretrained = copy.deepcopy(encoder.state_dict())
    runs: dict[int, dict] = {}
    for seed in finetune_seeds(config, args):
        finished = finished_summary(finetune_config(config, args, seed).output_dir) if resume else None
        if finished is not None:
            runs[seed] = finished
            continue
        encoder.load_state_dict(pretrained)
        runs[seed] = finetune(config, args, encoder, data_root, resume=resume, seed=seed)
    per_seed = {seed: {name: float(value) for name, value in result["metrics"].items() if name.startswith(f"{task}_")}
                for seed, result in runs.items()}
    return {
        "aggregate": args.finetune_aggregate,
        "seeds": list(runs),
        "per_seed": {str(seed): metrics for seed, metrics in per_seed.items()},
        **seed_statistics(per_seed),
        "runs": {str(seed): result for seed, result in runs.items()},
    }


def seed_statistics(per_seed: dict[int, dict[str, float]]) -> dict[str, dict[str, float]]:
    """``{"median": {metric: …}, "mean": {metric: …}}`` over the fine-tuning runs' metrics."""
    names = sorted({name for metrics in per_seed.values() for name in metrics})
    values = {name: [metrics[name] for metrics in per_seed.values() if name in metrics] for name in names}
    return {
        "median": {name: statistics.median(column) for name, column in values.items()},
        "mean": {name: statistics.fmean(column) for name, column in values.items()},
    }


def run(config: TrainConfig, args: CAPTArgs, data_root: Path | None, resume: bool = False) -> dict:
    """Pre-train, then fine-tune the pre-trained encoder on ``finetune_task`` once per fine-tuning seed;
    writes ``metrics.json`` (pre-training's STS-B dev metrics and the fine-tuning runs' median or mean)."""
    pre_config = stage_config(config, "pretrain")
    bundle = seeded_build(build, pre_config, args, data_root)
    pretrain = run_training(pre_config, bundle, resume=resume)
    metrics = {name: float(value) for name, value in pretrain["metrics"].items()}
    summary: dict[str, Any] = {"method": config.method, "output_dir": str(config.output_dir), "pretrain": pretrain}
    if args.finetune_task:
        tuned = finetune_all_seeds(config, args, bundle.method.encoder, data_root, resume)
        metrics.update({f"finetune_{name}": value for name, value in tuned[args.finetune_aggregate].items()})
        summary["finetune"] = tuned
    summary["metrics"] = metrics
    write_summary(config.output_dir, summary)
    return summary


def plan(config: TrainConfig, args: CAPTArgs) -> list[StagePlan]:
    """Pre-training, then (with ``finetune_task``) one fine-tuning per seed of :func:`finetune_seeds`."""
    stages = [StagePlan("pretrain", stage_config(config, "pretrain"), (config.seed,))]
    if args.finetune_task:
        task = args.finetune_task.partition(":")[0]
        seeds = tuple(finetune_seeds(config, args))
        stages.append(StagePlan(f"finetune-{task}", finetune_config(config, args, seeds[0]), seeds))
    return stages


# recipes/capt.yaml and capt-continued.yaml share this spec: the paper's value is named where capt-continued's
# (a short continued pre-training) differs from it.
PROTOCOL = Protocol(
    paper="Luo et al., EMNLP 2021",
    settings=(
        PaperSetting("train.batch_size", "paper Table 4: 2k, small model"),
        PaperSetting("train.max_steps", "paper Table 4: 200k, small model"),
        PaperSetting("train.lr", "paper §3.1, Table 4: peak 5e-4, small model"),
        PaperSetting("data.max_length", "not given by the paper"),
        PaperSetting("method_args.mask_probability", "paper §3.1"),
        PaperSetting("method_args.temperature", "paper Eq. 6"),
        PaperSetting("method_args.temperature_floor", "paper Eq. 6"),
        PaperSetting("method_args.queue_size", "paper §3.1"),
    ),
    presets={},
    docs="docs/methods/capt.md",
)

SPEC = RunSpec(name="capt", args_model=CAPTArgs, build=build, run=run, plan=plan, protocol=PROTOCOL,
               in_batch_negatives=True)  # the pre-training contrast (Eq. 4); its fine-tunings use the default
