"""Recipes ``simcse-unsup`` and ``simcse-sup``: data, encoder, objective and evaluator of a SimCSE run.

The method is :class:`contrastext.methods.simcse.SimCSE`; the objective is built by name from the
objectives registry (``method_args.loss``, default ``infonce`` with ``temperature`` / ``symmetric`` /
``hard_negative_weight``; any other pair objective with ``method_args.loss_args``).

Example::

    >>> config = load_config(recipe_path("simcse-unsup"), ["train.max_steps=3", "data.limit=24"])
    >>> bundle = build_unsup(config, config.method_args_as(SimCSEUnsupArgs), data_root)
    >>> bundle.method(bundle.method.collate(bundle.train_examples[:8]))
    {'infonce': tensor(1.98, grad_fn=...)}
"""

from __future__ import annotations

from pathlib import Path

from torch import nn

from contrastext.errors import ConfigError
from contrastext.methods.simcse import SimCSE, SimCSESupArgs, SimCSEUnsupArgs
from contrastext.objectives.registry import make_objective
from contrastext.runs.data import load_training_data
from contrastext.runs.encoders import build_encoder
from contrastext.runs.evaluation import sentence_evaluator
from contrastext.runs.registry import RunSpec
from contrastext.runs.stages import MethodBundle
from contrastext.training.config import TrainConfig


def make_pair_objective(args: SimCSEUnsupArgs) -> nn.Module:
    """``args.loss`` from the objectives registry; InfoNCE takes the recipe's τ, direction and hard-negative
    weight, every objective takes ``args.loss_args`` (which win)."""
    options: dict = {}
    if args.loss == "infonce":
        options = {"temperature": args.temperature, "symmetric": args.symmetric}
        if isinstance(args, SimCSESupArgs):
            options["hard_negative_weight"] = args.hard_negative_weight
    objective = make_objective(args.loss, **{**options, **args.loss_args})
    if not getattr(objective, "pair", True):
        raise ConfigError(
            f"method_args.loss: {args.loss} is not a pair objective (loss(anchors, positives[, negatives])); "
            "SimCSE needs one, e.g. infonce, dcl, align_uniform, margin_euclidean"
        )
    return objective


def sentence_encoder(config: TrainConfig, args: SimCSEUnsupArgs):
    """``config.model`` with the recipe's pooling and SimCSE's MLP (training only, always, or none); a setting
    left as None keeps the model's own (see :func:`contrastext.runs.encoders.build_encoder`)."""
    return build_encoder(
        config,
        pooling=args.pooling,
        projection="mlp" if args.mlp in ("train", "always") else None,
        projection_at_inference={"always": True, "train": False}.get(args.mlp),  # none / None: the model's own
        max_seq_length=getattr(args, "max_seq_length", None),  # mnrl's; None keeps the model's
    )


def build_simcse(
    config: TrainConfig, args: SimCSEUnsupArgs, data_root: Path | None, supervised: bool, default_task: str,
    objective: nn.Module | None = None, extras=(),
) -> MethodBundle:
    """A SimCSE bundle: ``data.task`` (default ``default_task``) or ``data.path``, the encoder, the objective."""
    data = load_training_data(config, data_root, default_task=default_task)
    examples = data.examples
    evaluator = sentence_evaluator(config, data_root, extras=extras(examples) if callable(extras) else extras)
    objective = objective if objective is not None else make_pair_objective(args)
    method = SimCSE(sentence_encoder(config, args), objective, supervised=supervised, gather=args.gather,
                    part_name=args.loss)
    return MethodBundle(method, examples, evaluator, final_report=lambda _m: {"data": data.description})


def build_unsup(config: TrainConfig, args: SimCSEUnsupArgs, data_root: Path | None) -> MethodBundle:
    """``simcse-unsup``: dropout twins on sentences (``data.task`` default ``wiki1m``)."""
    return build_simcse(config, args, data_root, supervised=False, default_task="wiki1m")


def build_sup(config: TrainConfig, args: SimCSESupArgs, data_root: Path | None) -> MethodBundle:
    """``simcse-sup``: NLI triplets (``data.task`` default ``nli-triplets``) with hard negatives."""
    return build_simcse(config, args, data_root, supervised=True, default_task="nli-triplets")


SPECS = [
    RunSpec(name="simcse-unsup", args_model=SimCSEUnsupArgs, build=build_unsup),
    RunSpec(name="simcse-sup", args_model=SimCSESupArgs, build=build_sup),
]
