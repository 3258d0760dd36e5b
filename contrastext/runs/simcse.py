"""Recipes ``simcse-unsup`` and ``simcse-sup``: data, encoder, objective and evaluator of a SimCSE run.

The method is :class:`contrastext.methods.simcse.SimCSE`; the recipes' ``method_args`` are :class:`SimCSEUnsupArgs`
and :class:`SimCSESupArgs` (here, beside the run that reads them). The objective is built by name from the
objectives registry (``method_args.loss``: any registered objective, checked against the registry when the
arguments are read; default ``infonce``) by :func:`make_pair_objective`. One source per knob: the recipe's
own knobs (``temperature``, ``symmetric``, ``hard_negative_weight``; gd adds its own, see
:data:`SimCSEUnsupArgs.objective_knobs`) reach every objective whose constructor takes that argument, and
``method_args.loss_args`` holds the objective's other arguments; a knob given in ``loss_args`` is a ConfigError
naming ``method_args.<knob>``.

Every recipe on this method (``simcse-unsup``, ``simcse-sup``, ``mnrl``, ``gd``) goes through
:func:`build_simcse`, which checks the objective against the shape of the training data before the model
loads (:func:`check_objective_fits`): (anchor, positive) pairs and dropout twins need an objective that
takes ``loss(anchors, positives)``; (anchor, positive, hard negative) triplets one that takes
``loss(anchors, positives, negatives)`` (infonce, capt, triplet). A pair-only objective (dcl, align_uniform,
the margin losses...) on data with a negative column is a ConfigError naming ``method_args.loss`` and the
column, never a silent drop of the negatives: name the two columns to train on with ``data.columns.text``
and ``data.columns.pair`` to leave the negatives out.

Example::

    >>> config = load_config(recipe_path("simcse-unsup"), ["train.max_steps=3", "data.limit=24"])
    >>> bundle = build_unsup(config, config.method_args_as(SimCSEUnsupArgs), data_root)
    >>> bundle.method(bundle.method.collate(bundle.train_examples[:8]))
    {'infonce': tensor(1.98, grad_fn=...)}
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator
from torch import nn

from contrastext.errors import ConfigError
from contrastext.methods.simcse import SimCSE
from contrastext.objectives.matryoshka import Matryoshka
from contrastext.objectives.registry import (
    OBJECTIVES,
    BatchShape,
    make_objective,
    objective_arguments,
    objectives_taking,
    takes_shape,
)
from contrastext.runs.bank_negatives import check_bank_negatives, with_bank_negatives
from contrastext.runs.data import TrainingData, load_training_data
from contrastext.runs.encoders import build_encoder
from contrastext.runs.evaluation import sentence_evaluator
from contrastext.runs.prompts import apply_model_prompts, prompted_examples
from contrastext.runs.protocol import PaperSetting, Protocol
from contrastext.runs.registry import RunSpec
from contrastext.runs.stages import MethodBundle
from contrastext.runtime.processes import rank_and_world_size
from contrastext.training.config import TrainConfig, registered

MlpUse = Literal["train", "always", "none"]


class SimCSEUnsupArgs(BaseModel):
    """``method_args`` of ``simcse-unsup``."""

    model_config = ConfigDict(extra="forbid")

    objective_knobs: ClassVar[dict[str, str]] = {"temperature": "temperature", "symmetric": "symmetric"}
    """The recipe's knobs that are objective arguments: ``method_args`` key -> the objective's constructor argument.
    Each reaches every objective that takes that argument (:func:`make_pair_objective`); none may be given in
    ``loss_args`` too."""

    loss: str = Field(
        default="infonce",
        description="the objective, by its registry name (any registered objective that takes the data's batches: "
        "infonce, dcl, align_uniform, ...)",
    )
    loss_args: dict[str, Any] = Field(
        default_factory=dict,
        description="the objective's other constructor arguments (e.g. similarity, alpha, t); the recipe's own knobs "
        "(temperature, symmetric, ...) are set with their method_args keys, not here",
    )
    temperature: float = Field(
        default=0.05, gt=0, description="τ of every objective that takes a temperature (infonce, dcl, hinged_dcl, ...)"
    )
    pooling: str | None = Field(
        default=None,
        description="cls, cls_before_pooler, mean, max, pooler, first_last_avg; None keeps the model's own "
        "(a sentence-transformers folder's pooling, mean for a plain Hugging Face model). The recipes write "
        "SimCSE's cls explicitly",
    )
    mlp: MlpUse | None = Field(
        default=None,
        description="SimCSE's MLP: train (a new MLP in training only), always (kept at inference), none; None "
        "adds no MLP and keeps the model's own layers. The recipes write SimCSE's choice explicitly",
    )
    symmetric: bool = Field(
        default=False, description="also the positives -> anchors direction (objectives that take symmetric: infonce)"
    )
    gather: bool = Field(default=True, description="gather candidates across processes (world size > 1)")
    matryoshka_dims: list[int] | None = Field(
        default=None,
        description="Matryoshka (Kusupati et al. 2022; sentence-transformers' MatryoshkaLoss): the loss is also "
        "computed on these leading dims of the embeddings, each prefix L2-normalised, and summed with "
        "matryoshka_weights, e.g. [384, 256, 128, 64]; each at most the model's embedding width; None: off",
    )
    matryoshka_weights: list[float] | None = Field(
        default=None, description="one weight per matryoshka_dims entry; None: 1 each (as sentence-transformers)"
    )
    matryoshka_n_dims_per_step: int = Field(
        default=-1,
        description="dims drawn at random per step out of matryoshka_dims (MatryoshkaLoss' n_dims_per_step); "
        "-1: all of them",
    )

    @field_validator("matryoshka_dims")
    @classmethod
    def _dims_positive_and_distinct(cls, dims: list[int] | None) -> list[int] | None:
        if dims is not None:
            if not dims or any(dim <= 0 for dim in dims):
                raise ValueError("give one or more positive dims, e.g. [384, 256, 128, 64]")
            if len(set(dims)) != len(dims):
                raise ValueError("a dim is repeated")
        return dims

    @field_validator("matryoshka_weights")
    @classmethod
    def _one_weight_per_dim(cls, weights: list[float] | None, info: ValidationInfo) -> list[float] | None:
        dims = info.data.get("matryoshka_dims")
        if weights is not None and dims is None:
            raise ValueError("weights of method_args.matryoshka_dims, which is not set")
        if weights is not None and len(weights) != len(dims):
            raise ValueError(f"{len(weights)} weights for the {len(dims)} matryoshka_dims {dims}: one weight per dim")
        return weights

    @field_validator("matryoshka_n_dims_per_step")
    @classmethod
    def _all_or_some_dims(cls, value: int, info: ValidationInfo) -> int:
        if value == 0 or value < -1:
            raise ValueError("-1 (all dims) or a positive number of dims")
        if value != -1 and info.data.get("matryoshka_dims") is None:
            raise ValueError("dims drawn out of method_args.matryoshka_dims, which is not set")
        return value

    @field_validator("loss")
    @classmethod
    def _a_registered_objective(cls, name: str) -> str:
        return registered(name, OBJECTIVES)

    @field_validator("loss_args")
    @classmethod
    def _knobs_have_one_key(cls, loss_args: dict[str, Any]) -> dict[str, Any]:
        for key, argument in cls.objective_knobs.items():
            if argument in loss_args:
                raise ValueError(
                    f"{argument!r} is the recipe's knob method_args.{key}: set method_args.{key} "
                    f"(one source per setting), not method_args.loss_args.{argument}"
                )
        return loss_args


class SimCSESupArgs(SimCSEUnsupArgs):
    """``method_args`` of ``simcse-sup``: hard negatives weighed (the recipe keeps SimCSE's MLP at inference)."""

    objective_knobs: ClassVar[dict[str, str]] = {
        **SimCSEUnsupArgs.objective_knobs, "hard_negative_weight": "hard_negative_weight"
    }

    hard_negative_weight: float = Field(
        default=0.0, description="added to each anchor's own hard-negative logit (objectives that take it: infonce)"
    )


def objective_options(args: SimCSEUnsupArgs) -> dict[str, Any]:
    """The constructor arguments of ``args.loss``: each of the recipe's knobs (``objective_knobs``) that the
    objective's constructor takes (a knob left None keeps the objective's own default), then ``args.loss_args``.
    Driven by the constructor's signature, so any registered objective is built the same way."""
    accepted = objective_arguments(args.loss)
    options = {
        argument: getattr(args, key)
        for key, argument in args.objective_knobs.items()
        if argument in accepted and getattr(args, key) is not None
    }
    return {**options, **args.loss_args}


def make_pair_objective(args: SimCSEUnsupArgs) -> nn.Module:
    """``args.loss`` from the objectives registry with :func:`objective_options`, wrapped in
    :class:`~contrastext.objectives.matryoshka.Matryoshka` when ``args.matryoshka_dims`` is set."""
    objective = make_objective(args.loss, **objective_options(args))
    if args.matryoshka_dims is None:
        return objective
    return Matryoshka(objective, args.matryoshka_dims, args.matryoshka_weights, args.matryoshka_n_dims_per_step)


def check_matryoshka_dims(config: TrainConfig, objective: nn.Module, encoder) -> None:
    """A ConfigError naming ``method_args.matryoshka_dims`` when a dim is wider than the embeddings the encoder
    trains (sentence-transformers refuses it too); a line when the full width is not among the dims (its warning:
    the untruncated embedding is then not trained)."""
    if not isinstance(objective, Matryoshka):
        return
    width = training_width(encoder)
    dims = list(objective.dims)
    if dims[0] > width:
        raise ConfigError(
            f"{key_origin(config, 'method_args.matryoshka_dims')}: method_args.matryoshka_dims={dims}: {dims[0]} is "
            f"wider than the model's embeddings ({width} dims); every dim must be at most {width}"
        )
    if width not in dims:
        print(f"matryoshka: the model's full width {width} is not among method_args.matryoshka_dims {dims}: "
              f"the untruncated embedding is not trained as such", flush=True)


def training_width(encoder) -> int:
    """The width of the embeddings a method trains: the projection's output when there is one (it is used in
    training), else the encoder's embedding width."""
    projection = getattr(encoder, "projection", None)
    return int(projection.output_dim) if projection is not None else int(encoder.embedding_dim)


def widest_row(examples) -> int:
    """The most texts a training example holds; a column store (``data.storage: columns``) says it by its
    columns, without reading its rows."""
    columns = getattr(examples, "columns", None)
    return len(columns) if columns is not None else max((len(example.texts) for example in examples), default=0)


def batch_shape(data: TrainingData, supervised: bool) -> BatchShape:
    """``triplets`` when the training examples carry hard negatives (a third text, or more: n-tuples), else
    ``pairs`` (dropout twins of unsupervised runs are pairs of the same sentence)."""
    return "triplets" if supervised and widest_row(data.examples) >= 3 else "pairs"


def negatives_per_row(data: TrainingData, supervised: bool) -> int:
    """The hard negatives of a training example (0 for pairs and dropout twins)."""
    return widest_row(data.examples) - 2 if supervised and len(data.examples) else 0


def check_objective_fits(config: TrainConfig, name: str, objective: nn.Module, data: TrainingData,
                         supervised: bool) -> None:
    """A ConfigError naming ``method_args.loss`` when ``objective`` cannot take the batches of ``data``
    (:func:`contrastext.objectives.registry.takes_shape`); called before the model loads. A pair-only objective
    on triplets names the negative column and the two ways out; nothing is dropped silently."""
    shape = batch_shape(data, supervised)
    negatives = negatives_per_row(data, supervised)
    if negatives > 1 and takes_shape(objective, "triplets") and not takes_shape(objective, "pairs"):
        stacking = [name for name in objectives_taking("triplets") if name in objectives_taking("pairs")]
        raise ConfigError(
            f"{loss_origin(config)}: method_args.loss={name}: {type(objective).__name__} takes one negative per "
            f"anchor, and the training data has {negatives} a row (n-tuples of {data.description.get('train', '?')}). "
            f"Use an objective that takes the negatives stacked ({', '.join(stacking)}), or keep one a row: "
            "--set data.num_negatives=1"
        )
    if takes_shape(objective, shape):
        return
    key = f"{loss_origin(config)}: method_args.loss={name}"
    owner = type(objective).__name__
    if shape == "triplets" and takes_shape(objective, "pairs"):
        negatives, pairs_only = negative_column(config, data)
        raise ConfigError(
            f"{key}: {owner} takes (anchor, positive) pairs only, and the training data has hard negatives: "
            f"{negatives}. Use an objective that takes negatives ({', '.join(objectives_taking('triplets'))}), "
            f"or train on the pairs alone: {pairs_only}"
        )
    trains_on = (
        "(anchor, positive) pairs with no negative column" if supervised else "dropout twins of single sentences"
    )
    if takes_shape(objective, "triplets"):
        more = ", or give (anchor, positive, negative) triplets (data.columns.negative)" if supervised else ""
        raise ConfigError(
            f"{key}: {owner} needs a hard negative per anchor (loss(anchors, positives, negatives)); "
            f"the recipe {config.method} trains on {trains_on}. Use a pair objective "
            f"({', '.join(objectives_taking('pairs'))}){more}"
        )
    raise ConfigError(
        f"{key}: {owner} is not an objective on (anchor, positive[, negative]) batches; the recipe {config.method} trains "
        f"on {'triplets' if shape == 'triplets' else trains_on}: use one of "
        f"{', '.join(objectives_taking(shape))}"
    )


def check_batch_has_negatives(config: TrainConfig, name: str, objective: nn.Module, shape: BatchShape,
                              gather: bool, supervised: bool = True) -> None:  # fmt: skip
    """A ConfigError naming ``train.batch_size`` and the objective when an in-batch objective (``in_batch``: the
    other rows are the negatives) would see batches of one pair with no hard negative: its loss is then identically
    0 (InfoNCE) or alignment alone (AlignUniform), and nothing trains. Called before the model loads.

    The rows are those one process computes the loss over: ``train.batch_size`` split over the launcher's processes
    (``WORLD_SIZE``), or the whole batch when the method gathers them (``gather`` with several processes). On
    triplets a batch of one still has its hard negative, so it is accepted."""
    if shape != "pairs" or not getattr(objective, "in_batch", False):
        return
    batch, world = config.train.batch_size, launched_world_size()
    rows = batch if gather or world == 1 else batch // world
    if rows >= 2:
        return
    needed = 2 if gather or world == 1 else 2 * world
    where = f"{rows} per process ({batch} over {world} processes)" if rows != batch else "1"
    raise ConfigError(
        f"{key_origin(config, 'train.batch_size')}: train.batch_size={batch}: {type(objective).__name__} "
        f"(method_args.loss={name}) contrasts each pair with the other pairs of its batch, and a batch of {where} "
        f"has none: its loss is constant and nothing trains. Use train.batch_size of at least {needed}"
        + (", or give (anchor, positive, negative) triplets (data.columns.negative)" if supervised else "")
    )


def launched_world_size() -> int:
    """The number of processes training will run in: the process group's, else the launcher's ``WORLD_SIZE``."""
    world = rank_and_world_size()[1]
    if world > 1:
        return world
    try:
        return max(1, int(os.environ.get("WORLD_SIZE", "1")))
    except ValueError:
        return 1


def key_origin(config: TrainConfig, key: str) -> str:
    """Where a dotted key came from: ``--set KEY (over FILE)`` or the recipe file."""
    file = config.source or "<config>"
    parts = key.split(".")
    prefixes = {".".join(parts[: n + 1]) for n in range(len(parts))}
    return f"--set {key} (over {file})" if prefixes & set(config.overridden_keys) else file


def loss_origin(config: TrainConfig) -> str:
    """Where ``method_args.loss`` came from: ``--set method_args.loss (over FILE)`` or the recipe file."""
    file = config.source or "<config>"
    overridden = any(key in ("method_args", "method_args.loss") for key in config.overridden_keys)
    return f"--set method_args.loss (over {file})" if overridden else file


def negative_column(config: TrainConfig, data: TrainingData) -> tuple[str, str]:
    """The data's negative column in words, and how to train on its pairs alone."""
    columns = data.description.get("columns")
    if "nli" in data.description:
        return (
            f"the contradiction hypotheses of the NLI rows of {data.description['train']} (SimCSE's triplets)",
            "a file of (anchor, positive) pairs with data.path / data.dataset",
        )
    if columns and len(columns) >= 3:
        given = " (data.columns.negative)" if (config.data.columns and config.data.columns.negative) else ""
        negatives = ", ".join(columns[2:])
        where = f"column{'s' if len(columns) > 3 else ''} {negatives!r}{given} of {data.description['train']}"
        return where, (
            f"--set data.columns.text={columns[0]} data.columns.pair={columns[1]} (the column {negatives} is "
            "then not read)"
        )
    return (
        f"the third text (hard negative) of data.task {data.description.get('train', '?')}",
        "a file or dataset of pairs with data.path / data.dataset, naming its two columns with "
        "data.columns.text and data.columns.pair",
    )


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
    objective: nn.Module | None = None, extras=(), nli: bool = False,
) -> MethodBundle:
    """A SimCSE bundle: ``data.task`` (default ``default_task``) or ``data.path``, the encoder, the objective.
    ``nli``: a user's (premise, hypothesis, label) rows become SimCSE's triplets (:mod:`contrastext.data.nli`)."""
    data = load_training_data(config, data_root, default_task=default_task, nli=nli)
    examples = prompted_examples(config, data.examples, data.description, key_origin(config, "data.prompts"))
    objective = objective if objective is not None else make_pair_objective(args)
    check_objective_fits(config, args.loss, objective, data, supervised)  # before the model loads
    check_batch_has_negatives(config, args.loss, objective, batch_shape(data, supervised), args.gather, supervised)
    layout = check_bank_negatives(config, args.loss, objective, examples, supervised)  # negatives.source: bank
    evaluator = sentence_evaluator(config, data_root, extras=extras(examples) if callable(extras) else extras)
    encoder = sentence_encoder(config, args)
    check_matryoshka_dims(config, objective, encoder)
    apply_model_prompts(config, encoder)  # saved with the model, as the training applied them
    online = None
    if layout is not None:
        examples, online = with_bank_negatives(config, layout, examples, encoder, training_width(encoder))
    method = SimCSE(encoder, objective, supervised=supervised, gather=args.gather, part_name=args.loss,
                    negatives=online)
    return MethodBundle(method, examples, evaluator, final_report=lambda m: final_report(m, data.description))


def final_report(method: SimCSE, description: dict) -> dict:
    """The summary's ``data`` description, and with bank negatives the bank's size and encoding time
    (:meth:`~contrastext.negatives.online.OnlineNegatives.report`)."""
    online = getattr(method, "negatives", None)
    return {"data": description} if online is None else {"data": description, "negatives": online.report()}


def build_unsup(config: TrainConfig, args: SimCSEUnsupArgs, data_root: Path | None) -> MethodBundle:
    """``simcse-unsup``: dropout twins on sentences (``data.task`` default ``wiki1m``)."""
    return build_simcse(config, args, data_root, supervised=False, default_task="wiki1m")


def build_sup(config: TrainConfig, args: SimCSESupArgs, data_root: Path | None) -> MethodBundle:
    """``simcse-sup``: NLI triplets (``data.task`` default ``nli-triplets``) with hard negatives; a user's
    (premise, hypothesis, label) rows are made SimCSE's triplets (entailment positive, contradiction negative)."""
    return build_simcse(config, args, data_root, supervised=True, default_task="nli-triplets", nli=True)


# The SimCSE paper's BERT-base settings (docs/methods/simcse-*.md, "The paper's setting and ours"); what it
# does not state is named by its source, the authors' run_unsup_example.sh / run_sup_example.sh.
SIMCSE_PAPER = "Gao, Yao & Chen, EMNLP 2021"
UNSUP_PROTOCOL = Protocol(
    paper=SIMCSE_PAPER,
    settings=(
        PaperSetting("train.epochs", "paper: 1 epoch"),
        PaperSetting("train.batch_size", "paper: BERT-base"),
        PaperSetting("train.lr", "paper: BERT-base"),
        PaperSetting("train.schedule", "SimCSE's code: HF Trainer's linear decay, no warmup"),
        PaperSetting("data.max_length", "SimCSE's run_unsup_example.sh: --max_seq_length 32"),
        PaperSetting("method_args.temperature", "paper: τ"),
        PaperSetting("method_args.pooling", "paper: [CLS]"),
        PaperSetting("method_args.mlp", "paper: the MLP in training only"),
    ),
    presets={},
    docs="docs/methods/simcse-unsup.md",
)
SUP_PROTOCOL = Protocol(
    paper=SIMCSE_PAPER,
    settings=(
        PaperSetting("train.epochs", "paper: 3 epochs"),
        PaperSetting("train.batch_size", "paper: 512 in all, 4 GPUs × 128"),
        PaperSetting("train.lr", "paper: BERT-base"),
        PaperSetting("train.schedule", "SimCSE's code: HF Trainer's linear decay, no warmup"),
        PaperSetting("data.max_length", "SimCSE's run_sup_example.sh: --max_seq_length 32"),
        PaperSetting("method_args.temperature", "paper: τ"),
        PaperSetting("method_args.mlp", "SimCSE's run_sup_example.sh: kept, no --mlp_only_train"),
    ),
    presets={},
    docs="docs/methods/simcse-sup.md",
)

UNSUP_SPEC = RunSpec(name="simcse-unsup", args_model=SimCSEUnsupArgs, build=build_unsup, protocol=UNSUP_PROTOCOL,
                     in_batch_negatives=True, takes_prompts=True)
SUP_SPEC = RunSpec(name="simcse-sup", args_model=SimCSESupArgs, build=build_sup, protocol=SUP_PROTOCOL,
                   in_batch_negatives=True, takes_prompts=True, takes_negatives=True)
