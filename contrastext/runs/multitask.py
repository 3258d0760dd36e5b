"""Recipe ``multitask``: SST-5, Quora and STS heads on one encoder (:mod:`contrastext.methods.multitask`).

The run: the tasks' data (:func:`~contrastext.runs.data.load_multitask_data`), an optional unsupervised
SimCSE pre-step (``method_args.simcse_steps`` steps on the distinct training sentences of all tasks, in
``<output_dir>/simcse-prestep``), then multi-task training with the task sampler (one task per batch, by
``data.task_sampling``; every task in each batch with PCGrad).

Evaluation: ``<task>_dev_<metric>`` of every task's head (accuracy / F1 / MCC for class tasks, Spearman /
Pearson for scored pairs, ×100), ``score`` (the first task's), and ``mean`` = the course leaderboard's
overall score: the mean over tasks of the accuracy and of the Pearson r mapped to [0, 100] as
100·(r + 1)/2.

Example::

    >>> config = load_config(recipe_path("multitask"), ["train.max_steps=30", "data.task_sampling=round_robin"])
    >>> summary = run_recipe(config, data_root=Path("../shared/data"))
    >>> summary["metrics"]["mean"]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from contrastext.data.examples import Example
from contrastext.data.sampling import JointTaskBatchSampler, MultiTaskBatchSampler
from contrastext.evaluation.evaluators import EvalSet, make_evaluator
from contrastext.methods.multitask import SCORE_KINDS, MultitaskArgs, MultitaskMethod
from contrastext.methods.simcse import SimCSE
from contrastext.objectives.registry import make_objective
from contrastext.runs.data import load_multitask_data, task_sizes
from contrastext.runs.encoders import build_encoder
from contrastext.runs.registry import RunSpec
from contrastext.runs.stages import (
    NO_EVAL_OR_SAVE,
    MethodBundle,
    run_training,
    seeded_build,
    stage_config,
)
from contrastext.training.config import TrainConfig
from contrastext.training.trainer import Trainer


def leaderboard_mean(sets: Sequence[EvalSet]):
    """``metrics -> {"mean": ...}``: accuracies as they are, Pearson r (×100) mapped to (r + 100) / 2."""

    def overall(metrics: Mapping[str, float]) -> dict[str, float]:
        values = []
        for eval_set in sets:
            if eval_set.task.kind in SCORE_KINDS:
                values.append((metrics[f"{eval_set.prefix}_pearson"] + 100) / 2)
            else:
                values.append(metrics[f"{eval_set.prefix}_accuracy"])
        return {"mean": float(np.mean(values))}

    return overall


def build(config: TrainConfig, args: MultitaskArgs, data_root: Path | None) -> MethodBundle:
    """The method, all tasks' training examples (in task order) and the evaluator; see :func:`batch_sampler`."""
    data = load_multitask_data(config, args, data_root)
    method = MultitaskMethod(build_encoder(config, pooling=args.pooling), data.tasks, args)
    sets = data.eval_sets
    evaluator = make_evaluator(sets, "head", batch_size=config.eval.batch_size, overall=leaderboard_mean(sets))
    description = {"tasks": data.description, "sampling": "joint+pcgrad" if args.pcgrad else config.data.task_sampling}
    return MethodBundle(method, data.train, evaluator, final_report=lambda _method: description)


def batch_sampler(config: TrainConfig, args: MultitaskArgs, sizes: Sequence[int]):
    """Joint batches (PCGrad) or one task per batch ordered by ``data.task_sampling``."""
    train, data = config.train, config.data
    if args.pcgrad:
        return JointTaskBatchSampler(sizes, train.batch_size, config.train_seed, train.drop_last)
    return MultiTaskBatchSampler(
        sizes,
        train.batch_size,
        data.task_sampling,
        config.train_seed,
        temperature=data.task_temperature,
        weights=data.task_weights,
        drop_last=train.drop_last,
    )


def simcse_prestep(config: TrainConfig, args: MultitaskArgs, encoder, examples: Sequence[Example], resume: bool) -> None:
    """A few unsupervised SimCSE steps on the distinct training sentences (encoder trained in place)."""
    sentences = list(dict.fromkeys(text for example in examples for text in example.texts))
    train = {
        **NO_EVAL_OR_SAVE,
        "max_steps": args.simcse_steps,
        "lr": args.simcse_lr,
        "batch_size": args.simcse_batch_size,
        "warmup_ratio": 0.0,
        "warmup_steps": None,
    }
    pre_config = stage_config(config, "simcse-prestep", train=train)
    method = SimCSE(encoder, make_objective("infonce", temperature=args.simcse_temperature), supervised=False,
                    gather=False)
    Trainer(method, [Example((sentence,)) for sentence in sentences], pre_config).train(resume=resume)


def run(config: TrainConfig, args: MultitaskArgs, data_root: Path | None, resume: bool = False) -> dict:
    """(SimCSE pre-step,) then multi-task training with the task sampler; best weights' metrics in metrics.json."""
    bundle = seeded_build(build, config, args, data_root)
    if args.simcse_steps:
        simcse_prestep(config, args, bundle.method.encoder, bundle.train_examples, resume)
    bundle.batch_sampler = batch_sampler(config, args, task_sizes(bundle.train_examples))
    return run_training(config, bundle, resume=resume)


SPEC = RunSpec(name="multitask", args_model=MultitaskArgs, build=build, run=run)
