"""Recipe ``multitask``: SST-5, Quora and STS heads on one encoder (:mod:`contrastext.methods.multitask`).

The run (the report's final protocol, §5.1): the tasks' data (:func:`~contrastext.runs.data.load_multitask_data`),
the SimCSE pre-step (``method_args.simcse``: SUPERVISED SimCSE on the ``simcse_task`` NLI triplets by default,
in ``<output_dir>/simcse-prestep``; ``unsupervised`` on the distinct training sentences of all tasks;
``none``; its length is ``simcse_steps`` / ``simcse_epochs``, or the run's ``train.max_steps`` /
``train.epochs`` given with ``--set`` when neither of those is; ``data.limit`` cuts its triplets too),
then multi-task training with the task sampler (one task per batch ordered by
``data.task_sampling``, see :func:`batch_sampler`; every task in each batch with PCGrad).

Evaluation: ``<task>_dev_<metric>`` of every task's head (accuracy / F1 / MCC for class tasks, Spearman /
Pearson for scored pairs, ×100), ``score`` (the first task's), ``mean`` = the report's overall score, the
plain mean of each task's accuracy (class tasks) or Pearson r (scored pairs) (§5 "Evaluation Metrics";
its 0.769 is (0.534 + 0.885 + 0.887) / 3, here ×100), and ``leaderboard_mean``, the same with r mapped
to [0, 100] as (r + 100) / 2.

Example::

    >>> config = load_config(recipe_path("multitask"), ["train.max_steps=30", "method_args.simcse=none"])
    >>> summary = run_recipe(config, data_root=Path("../shared/data"))
    >>> summary["metrics"]["mean"]
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import ClassVar, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from contrastext.data.examples import Example
from contrastext.data.sampling import JointTaskBatchSampler, MultiTaskBatchSampler
from contrastext.data.task_kinds import SCORED_PAIR_KINDS
from contrastext.errors import ConfigError
from contrastext.evaluation.evaluators import EvalSet, make_evaluator
from contrastext.methods.multitask import MultitaskMethod
from contrastext.methods.simcse import SimCSE
from contrastext.objectives.registry import make_objective
from contrastext.runs.data import apply_limit, load_multitask_data
from contrastext.runs.encoders import build_encoder
from contrastext.runs.plan import StagePlan, limit_note
from contrastext.runs.registry import RunSpec
from contrastext.runs.stages import (
    NO_EVAL_OR_SAVE,
    MethodBundle,
    run_training,
    seeded_build,
    stage_config,
    stage_length,
)
from contrastext.training.config import DataSection, TrainConfig
from contrastext.training.trainer import Trainer

logger = logging.getLogger(__name__)



class MultitaskArgs(BaseModel):
    """``method_args`` of the ``multitask`` recipe (docs/methods/multitask.md: each key with the report's value)."""

    model_config = ConfigDict(extra="forbid")

    # model
    pooling: str = Field(default="pooler", description="the sentence vector the heads read (report §6.1: pooler)")
    pooler_dropout: float = Field(default=0.1, ge=0, lt=1, description="dropout on the pooled vector (Table 2)")
    shared_layer: bool = Field(default=True, description="CL: a dense tanh layer shared by every head")
    pair_encoding: Literal["joint", "separate"] = Field(
        default="joint", description="joint: cross-encoder in both orders (DPH); separate: bi-encoder"
    )
    pair_difference: bool = Field(default=True, description="joint: the e12 - e21 branch (DPH; false: PH)")
    pair_activation: Literal["tanh", "none"] = Field(
        default="tanh", description="joint: activation on the branch logits (DPHA; none: DPH)"
    )
    pair_parts: list[str] = Field(default_factory=lambda: ["u", "v", "diff"], description="separate: PairHead features")
    symmetric_pairs: bool = Field(default=True, description="separate: average the pair head over both orders")
    loss_weights: dict[str, float] = Field(default_factory=dict, description="task name -> loss weight (1.0)")
    score_bias_init: Literal["label_mean", "torch"] = Field(
        default="label_mean",
        description="a scored pair head's output bias at the start: the mean training score (its outputs start "
        "at the MSE-best constant) or PyTorch's default (near 0, far below 0-5 scores)",
    )
    # multiple negatives ranking
    mnr: bool = Field(default=False, description="add the multiple negatives ranking part on mnr_task's duplicates")
    mnr_task: str = Field(default="minbert-quora", description="the paraphrase task whose label-1 pairs are positives")
    mnr_temperature: float = Field(default=0.05, gt=0, description="τ of the cosine InfoNCE (scale 1/τ = 20)")
    mnr_weight: float = Field(default=1.0, ge=0, description="weight of the mnr part")
    # the task schedule is data.* (data.task_sampling, ...); the keys that were here moved there (issue 20)
    moved_keys: ClassVar[dict[str, str]] = {
        key: f"data.{key}"
        for key in ("sequential_order", "round_robin_order", "round_robin_unit", "proportional_replacement")
    }
    # PCGrad
    pcgrad: bool = Field(default=False, description="every task each step, PCGrad on the shared parameters")
    pcgrad_reduction: Literal["mean", "sum"] = Field(default="mean", description="combine the projected gradients")
    # data
    holdout_tasks: list[str] = Field(default_factory=lambda: ["minbert-quora"], description="train on dev minus holdout")
    holdout: float = Field(default=0.2, gt=0, lt=1, description="share of the dev split held out for evaluation")
    holdout_seed: int = Field(default=0, ge=0)
    # SimCSE pre-step
    simcse: Literal["supervised", "unsupervised", "none"] = Field(
        default="supervised", description="SimCSE pre-step on simcse_task triplets, on the tasks' sentences, or none"
    )
    simcse_task: str = Field(default="nli-triplets", description="supervised pre-step data (anchor, entailment, contradiction)")
    simcse_epochs: float = Field(default=100.0, gt=0, description="pre-step epochs (report §4: 100 on SNLI)")
    simcse_steps: int | None = Field(default=None, gt=0, description="pre-step steps; wins over simcse_epochs")
    simcse_lr: float = Field(default=5e-5, gt=0)
    simcse_batch_size: int = Field(default=64, gt=1)
    simcse_temperature: float = Field(default=0.05, gt=0)


def multitask_method(encoder, tasks, args: MultitaskArgs) -> MultitaskMethod:
    """The Method with the recipe's settings as its explicit arguments."""
    return MultitaskMethod(
        encoder,
        tasks,
        pooler_dropout=args.pooler_dropout,
        shared_layer=args.shared_layer,
        pair_encoding=args.pair_encoding,
        pair_difference=args.pair_difference,
        pair_activation=args.pair_activation,
        pair_parts=args.pair_parts,
        symmetric_pairs=args.symmetric_pairs,
        loss_weights=args.loss_weights,
        mnr_task=args.mnr_task if args.mnr else None,
        mnr_temperature=args.mnr_temperature,
        mnr_weight=args.mnr_weight,
        pcgrad=args.pcgrad,
        pcgrad_reduction=args.pcgrad_reduction,
    )

def task_scores(sets: Sequence[EvalSet], metrics: Mapping[str, float]) -> list[tuple[bool, float]]:
    """``(is a scored pair, value)`` per set: the Pearson r (×100) of scored pairs, else the accuracy (×100)."""
    scores = []
    for eval_set in sets:
        scored = eval_set.task.kind in SCORED_PAIR_KINDS
        scores.append((scored, metrics[eval_set.key("pearson" if scored else "accuracy")]))
    return scores


def overall_scores(sets: Sequence[EvalSet]):
    """``metrics -> {"mean", "leaderboard_mean"}``: the report's plain mean of accuracies and Pearson r, and
    the course leaderboard's mean with each r (×100) mapped to (r + 100) / 2."""

    def overall(metrics: Mapping[str, float]) -> dict[str, float]:
        scores = task_scores(sets, metrics)
        return {
            "mean": float(np.mean([value for _, value in scores])),
            "leaderboard_mean": float(np.mean([(value + 100) / 2 if scored else value for scored, value in scores])),
        }

    return overall


def build(config: TrainConfig, args: MultitaskArgs, data_root: Path | None) -> MethodBundle:
    """The method, all tasks' training examples (in task order), the evaluator and the task sampler
    (:func:`batch_sampler`; built first, so bad orders or weights fail before any training)."""
    data = load_multitask_data(config, args, data_root)
    names = [task.name for task in data.tasks]
    sampler = batch_sampler(config, args, data.sizes, names)
    schedule = schedule_description(config, args, names)
    method = multitask_method(build_encoder(config, pooling=args.pooling), data.tasks, args)
    if args.score_bias_init == "label_mean":
        method.start_scores_at(training_score_means(method, data.train))
    sets = data.eval_sets
    evaluator = make_evaluator(sets, "head", batch_size=config.eval.batch_size, overall=overall_scores(sets))
    simcse = {"mode": args.simcse}
    if args.simcse != "none":
        length = prestep_length(config, args)
        simcse.update(steps=length["max_steps"], epochs=length["epochs"],
                      lr=args.simcse_lr, batch_size=args.simcse_batch_size, temperature=args.simcse_temperature)
    description = {"tasks": data.description, "sampling": schedule, "simcse": simcse}
    return MethodBundle(method, data.train, evaluator, final_report=lambda _method: description, batch_sampler=sampler)


def training_score_means(method: MultitaskMethod, examples: Sequence[Example]) -> dict[str, float]:
    """The mean training label of each scored pair task (rows carry their task's index in ``task``)."""
    means = {}
    for name in method.score_tasks():
        index = method.task_names.index(name)
        labels = [float(example.label) for example in examples if example.task == index]
        if labels:
            means[name] = float(np.mean(labels))
    return means


def task_order(data: DataSection, strategy: str, names: Sequence[str]) -> list[int] | None:
    """``data.sequential_order`` / ``data.round_robin_order`` (by ``strategy``) as task indices (None: data.tasks
    order)."""
    key = {"sequential": "sequential_order", "round_robin": "round_robin_order"}.get(strategy)
    order = getattr(data, key) if key else None
    if order is None:
        return None
    unknown = [name for name in order if name not in names]
    missing = [name for name in names if name not in order]
    if not order or unknown or missing:
        raise ConfigError(
            f"data.{key}: {order} must name every task of data.tasks ({list(names)}) at least once"
            + (f"; unknown: {unknown}" if unknown else "")
            + (f"; never trained: {missing}" if missing else "")
        )
    return [names.index(name) for name in order]


def schedule_description(config: TrainConfig, args: MultitaskArgs, names: Sequence[str]) -> dict:
    """What orders the batches (for the final report), checking the order lists."""
    if args.pcgrad:
        description = {"strategy": "joint+pcgrad", "reduction": args.pcgrad_reduction}
        if config.data.task_weights is not None:
            description["ignored"] = {"data.task_weights": config.data.task_weights}
        return description
    strategy = config.data.task_sampling
    order = task_order(config.data, strategy, names)
    description: dict = {"strategy": strategy}
    if strategy == "proportional":
        description.update(weights=config.data.task_weights, temperature=config.data.task_temperature,
                           replacement=config.data.proportional_replacement)
    else:
        description["order"] = [names[index] for index in order] if order is not None else list(names)
    if strategy == "round_robin":
        description["unit"] = config.data.round_robin_unit
    return description


def batch_sampler(config: TrainConfig, args: MultitaskArgs, sizes: Sequence[int], names: Sequence[str]):
    """Joint batches (PCGrad) or one task per batch ordered by ``data.task_sampling`` (see TaskSampler)."""
    train, data = config.train, config.data
    if args.pcgrad:
        if data.task_weights is not None:
            logger.warning(
                "data.task_weights %s have no effect with method_args.pcgrad: every PCGrad batch holds "
                "train.batch_size examples of every task, and the task gradients are combined unweighted",
                data.task_weights,
            )
        return JointTaskBatchSampler(sizes, train.batch_size, config.train_seed, train.drop_last)
    return MultiTaskBatchSampler(
        sizes,
        train.batch_size,
        data.task_sampling,
        config.train_seed,
        temperature=data.task_temperature,
        weights=data.task_weights if data.task_sampling == "proportional" else None,
        drop_last=train.drop_last,
        order=task_order(data, data.task_sampling, names),
        epochs=train.epochs or 1.0,
        unit=data.round_robin_unit,
        replacement=data.proportional_replacement,
    )


def prestep_examples(config: TrainConfig, args: MultitaskArgs, data_root: Path | None,
                     examples: Sequence[Example]) -> tuple[list[Example], str]:
    """``(rows, where they come from)``: supervised, the ``simcse_task`` triplets (``data.limit``);
    unsupervised, the distinct texts of the multi-task training rows."""
    from contrastext.data.tasks import get_task, load_task

    if args.simcse == "unsupervised":
        sentences = dict.fromkeys(text for example in examples for text in example.texts)
        return [Example((sentence,)) for sentence in sentences], "the multi-task training texts"
    task = get_task(args.simcse_task)
    if task.kind != "triplets":
        raise ConfigError(
            f"method_args.simcse_task: {task.name} has kind {task.kind!r}; supervised SimCSE needs "
            "(anchor, entailment, contradiction) triplets, e.g. nli-triplets"
        )
    data = load_task(task, data_root)
    rows = apply_limit(list(data.examples), config, 2**16)  # a stream apart from the tasks' indices
    if len(rows) < 2:
        raise ConfigError(f"method_args.simcse_task: {task.name} has {len(rows)} triplet(s); SimCSE needs at least 2")
    return rows, str(data.path)


def prestep_length(config: TrainConfig, args: MultitaskArgs) -> dict:
    """The pre-step's ``{"max_steps", "epochs"}``: ``simcse_steps``, else ``simcse_epochs``; but the run's
    ``train.max_steps`` / ``train.epochs`` given with ``--set`` when neither ``method_args.simcse_steps`` nor
    ``method_args.simcse_epochs`` is (:func:`~contrastext.runs.stages.stage_length`)."""
    own = ({"max_steps": args.simcse_steps, "epochs": None} if args.simcse_steps
           else {"epochs": args.simcse_epochs, "max_steps": None})
    return stage_length(config, own, "simcse_steps", "simcse_epochs")


def prestep_config(config: TrainConfig, args: MultitaskArgs) -> TrainConfig:
    """The pre-step's config: its own lr, batch size and length (:func:`prestep_length`), no evaluation, in
    ``<output_dir>/simcse-prestep``; ``data.limit`` is the run's (:func:`prestep_examples`)."""
    train = {
        **NO_EVAL_OR_SAVE,
        **prestep_length(config, args),
        "lr": args.simcse_lr,
        "head_lr": None,  # the pre-step has its own lr for every parameter
        "batch_size": args.simcse_batch_size,
        "warmup_ratio": 0.0,
        "warmup_steps": None,
    }
    return stage_config(config, "simcse-prestep", train=train)


def simcse_prestep(config: TrainConfig, args: MultitaskArgs, encoder, examples: Sequence[Example], resume: bool) -> None:
    """SimCSE on ``examples`` (triplets: supervised, Eq. 5 with the contradiction as hard negative; sentences:
    dropout twins), the encoder trained in place, for :func:`prestep_length`."""
    pre_config = prestep_config(config, args)
    supervised = args.simcse == "supervised"
    method = SimCSE(encoder, make_objective("infonce", temperature=args.simcse_temperature), supervised=supervised,
                    gather=False)
    Trainer(method, list(examples), pre_config).train(resume=resume)


def run(config: TrainConfig, args: MultitaskArgs, data_root: Path | None, resume: bool = False) -> dict:
    """(SimCSE pre-step,) then multi-task training with the task sampler; best weights' metrics in metrics.json."""
    bundle = seeded_build(build, config, args, data_root)
    if args.simcse != "none":
        examples, where = prestep_examples(config, args, data_root, bundle.train_examples)
        bundle.final_report(bundle.method)["simcse"].update(data=where, n_train=len(examples))  # the same dict
        simcse_prestep(config, args, bundle.method.encoder, examples, resume)
    return run_training(config, bundle, resume=resume)


def plan(config: TrainConfig, args: MultitaskArgs) -> list[StagePlan]:
    """(The SimCSE pre-step,) then the multi-task training, evaluated on each task's dev rows."""
    stages = []
    if args.simcse != "none":
        unsupervised = "the distinct texts of the multi-task training rows" if args.simcse == "unsupervised" else None
        stages.append(StagePlan("simcse-prestep", prestep_config(config, args), (config.seed,),
                                source=args.simcse_task, examples=unsupervised, evaluation="no evaluation"))
    evaluation = f"eval each task's dev rows{limit_note(config)}"
    stages.append(StagePlan("multitask", config, (config.seed,), evaluation=evaluation))
    return stages


SPEC = RunSpec(name="multitask", args_model=MultitaskArgs, build=build, run=run, plan=plan)
