"""Recipe ``reclaim``: fine-tuning with RECLAIM's critic and active negatives (:mod:`contrastext.methods.reclaim`).

The memory banks hold one row per training example, so the method is built once the training set (after a
few-shot draw or ``data.limit``) is known.

Example::

    >>> config = load_config(recipe_path("reclaim"), ["train.max_steps=3", "data.limit=64", "method_args.k=4"])
    >>> metrics = run_recipe(config, data_root=Path("../shared/data"))
"""

from __future__ import annotations

from pathlib import Path

from contrastext.methods.reclaim import ReclaimArgs, ReclaimMethod
from contrastext.runs.classification import classifier_encoder, head_evaluator
from contrastext.runs.data import load_classification_data
from contrastext.runs.registry import RunSpec
from contrastext.runs.stages import MethodBundle
from contrastext.training.config import TrainConfig


def build(config: TrainConfig, args: ReclaimArgs, data_root: Path | None) -> MethodBundle:
    """One RECLAIM fine-tuning run on ``data.task`` (banks sized to the training set)."""
    data = load_classification_data(config, args, data_root, seed=config.seed)
    method = ReclaimMethod(classifier_encoder(config, args), data.task, num_train=len(data.train), args=args)
    description = dict(data.description)
    return MethodBundle(method, list(data.train), head_evaluator(config, data), final_report=lambda _m: description)


SPEC = RunSpec(name="reclaim", args_model=ReclaimArgs, build=build)
