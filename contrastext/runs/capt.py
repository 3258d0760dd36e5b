"""Recipes ``capt`` and ``capt-continued``: CAPT pre-training (:mod:`contrastext.methods.capt`), then fine-tuning.

The run: pre-train (``<output_dir>/pretrain``; the evaluator is STS-B dev, cosine of the pooled vectors),
then fine-tune the pre-trained encoder with a fresh classification head on a GLUE task
(``method_args.finetune_task``, e.g. sst2 or rte; ``<output_dir>/finetune-<task>``) and report its dev
metrics as ``finetune_<task>_<split>_<metric>``. ``<output_dir>/metrics.json`` holds both stages.

Example::

    >>> config = load_config(recipe_path("capt"), ["train.max_steps=3", "data.limit=64"])
    >>> summary = run_recipe(config, data_root=Path("../shared/data"))
    >>> summary["metrics"]["stsb_dev_spearman"], summary["metrics"]["finetune_sst2_dev_accuracy"]
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from contrastext.methods.capt import CAPTArgs, CAPTMethod
from contrastext.methods.classification import ClassificationArgs, FineTuneMethod
from contrastext.objectives.temperature import FixedTemperature, InvertedTriangleTemperature
from contrastext.runs.classification import head_evaluator
from contrastext.runs.data import load_classification_data, load_training_examples
from contrastext.runs.encoders import build_encoder
from contrastext.runs.evaluation import sentence_evaluator
from contrastext.runs.registry import RunSpec
from contrastext.runs.stages import (
    NO_EVAL_OR_SAVE,
    MethodBundle,
    run_training,
    seeded_build,
    stage_config,
    write_summary,
)
from contrastext.runtime.seeding import set_seed
from contrastext.training.config import TrainConfig


def capt_encoder(config: TrainConfig, args: CAPTArgs):
    """A random small BERT with the model's vocabulary (``from_scratch``) or the model's own weights, with
    the projection head g (used in training only)."""
    projection: dict[str, Any] = {"name": "mlp2", "output_dim": args.projection_dim, "activation": "relu"}
    if args.projection_hidden is not None:
        projection["hidden_dim"] = args.projection_hidden
    return build_encoder(
        config,
        pooling=args.pooling,
        projection=projection,
        projection_at_inference=False,
        normalize=False,
        from_scratch=args.backbone if args.from_scratch else None,
    )


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
    )
    return MethodBundle(method, examples, sentence_evaluator(config, data_root))


def finetune_config(config: TrainConfig, args: CAPTArgs) -> TrainConfig:
    """The fine-tuning stage's config: ``finetune_*`` settings, the task's dev split, its own output folder."""
    task = args.finetune_task.partition(":")[0]
    train = {
        **NO_EVAL_OR_SAVE,
        "max_steps": args.finetune_steps,
        "lr": args.finetune_lr,
        "batch_size": args.finetune_batch_size,
        "drop_last": False,
        "warmup_ratio": 0.1,
        "warmup_steps": None,
        "metric_for_best": "score",
        "greater_is_better": True,
    }
    data = {"task": args.finetune_task, "limit": args.finetune_limit, "few_shot": None, "label_noise": 0.0}
    evaluation = {"tasks": [f"{task}:dev"], "limit": args.finetune_eval_limit}
    return stage_config(config, f"finetune-{task}", train=train, data=data, eval=evaluation)


def finetune(config: TrainConfig, args: CAPTArgs, encoder, data_root: Path | None, resume: bool = False) -> dict:
    """Fine-tune ``encoder`` (in place) with a fresh head on ``finetune_task``; run_training's summary."""
    ft_config = finetune_config(config, args)
    ft_args = ClassificationArgs(pooling=encoder.pooling, holdout=args.finetune_holdout)
    data = load_classification_data(ft_config, ft_args, data_root, seed=config.seed)
    set_seed(ft_config.train_seed)  # the fresh head's initialisation
    method = FineTuneMethod(encoder, data.task)
    description = dict(data.description)
    bundle = MethodBundle(method, list(data.train), head_evaluator(ft_config, data), final_report=lambda _m: description)
    return run_training(ft_config, bundle, resume=resume)


def run(config: TrainConfig, args: CAPTArgs, data_root: Path | None, resume: bool = False) -> dict:
    """Pre-train (STS-B dev at the end), then fine-tune on ``finetune_task``; writes ``metrics.json``."""
    pre_config = stage_config(config, "pretrain")
    bundle = seeded_build(build, pre_config, args, data_root)
    pretrain = run_training(pre_config, bundle, resume=resume)
    metrics = {name: float(value) for name, value in pretrain["metrics"].items()}
    summary: dict[str, Any] = {"method": config.method, "output_dir": str(config.output_dir), "pretrain": pretrain}
    if args.finetune_task:
        tuned = finetune(config, args, bundle.method.encoder, data_root, resume=resume)
        task = args.finetune_task.partition(":")[0]
        metrics.update({f"finetune_{name}": float(value) for name, value in tuned["metrics"].items()
                        if name.startswith(f"{task}_")})
        summary["finetune"] = tuned
    summary["metrics"] = metrics
    write_summary(config.output_dir, summary)
    return summary


SPEC = RunSpec(name="capt", args_model=CAPTArgs, build=build, run=run)
