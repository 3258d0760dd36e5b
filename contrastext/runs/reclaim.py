"""Recipe ``reclaim``: fine-tuning with RECLAIM's critic and active negatives (:mod:`contrastext.methods.reclaim`).

The recipe's ``method_args`` are :class:`ReclaimArgs` (here, beside the run that reads them); :func:`reclaim_method`
passes them to the Method as explicit arguments. ``search`` is any registered search (checked against
:data:`contrastext.negatives.search.SEARCHES`; ``search_nlist`` / ``search_nprobe`` go to a search that takes them).

The memory banks hold one row per training example, so the method is built once the training set is known:
after ``data.limit`` / ``data.few_shot`` / ``data.label_noise`` (:func:`load_classification_data`) and, for the
paper's semi-supervised setting (§5.1), after :func:`labelled_subset` has drawn a seeded random
``method_args.labelled_fraction`` of it (the paper: 1, 5, 10, 20, 30 or 50 % with K = 10, which ``k`` then
defaults to; a ``k`` given in the config or with ``--set`` wins, and a warning says so)::

    contrastext train reclaim --set method_args.labelled_fraction=0.05         # k = 10

Example::

    >>> config = load_config(recipe_path("reclaim"), ["train.max_steps=3", "data.limit=64", "method_args.k=4"])
    >>> metrics = run_recipe(config, data_root=Path("../shared/data"))
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Literal

import torch
from pydantic import Field, ValidationInfo, field_validator, model_validator

from contrastext.data.examples import IndexedExample
from contrastext.errors import ConfigError
from contrastext.methods.reclaim import ReclaimMethod
from contrastext.negatives.search import SEARCHES
from contrastext.runs.classification import (
    ClassificationArgs,
    classifier_encoder,
    classifier_evaluation_text,
    head_evaluator,
)
from contrastext.runs.data import ClassificationData, load_classification_data
from contrastext.runs.plan import StagePlan
from contrastext.runs.protocol import PaperSetting, Protocol
from contrastext.runs.registry import RunSpec
from contrastext.runs.stages import MethodBundle
from contrastext.runtime.seeding import make_generator
from contrastext.training.config import TrainConfig, registered

LABELLED_STREAM = 2  # the draw's own random stream of its seed (few-shot draws use 0, label flips 1)
SEMI_SUPERVISED_K = 10  # paper §5.1: "in this case, we only use top-10 (K = 10) negative examples"

logger = logging.getLogger("contrastext.runs")


class ReclaimArgs(ClassificationArgs):
    """``method_args`` of the ``reclaim`` recipe (the paper's value beside each; docs/methods/reclaim.md)."""

    preset: Literal["paper", "practical"] = Field(
        default="paper",
        description="paper: the recipe's paper settings; practical: settings that learn on your own file in a few "
        "hundred steps (lr 3e-5 with 10 % warmup, head_lr 1e-3, k 10); a key given with --set wins "
        "(docs/methods/reclaim.md)",
    )
    lam: float = Field(
        default=0.1, ge=0, description="λ: weight of the ans part (loss = task + λ·ans); paper §5: 0.1; "
        "0 skips all ANS work (no critic, searches or bank updates)"
    )
    k: int = Field(
        default=100, gt=0, description="K nearest negatives per example and per bank (topk); paper §5.1: 100, "
        "and 10 in the semi-supervised setting: with labelled_fraction set and k not given, k is 10"
    )
    negative_reduction: Literal["half_sum", "mean"] = Field(
        default="half_sum", description="each side's K negative terms: ½ Σ (paper Eq. 6) or the mean (1/K) Σ"
    )
    momentum: float = Field(
        default=0.5, ge=0, lt=1, description="ρ of the bank update ũ ← (1 − ρ)u + ρũ (Eq. 7); the paper gives no "
        "value, 0.5 is Wu et al. 2018's memory-bank momentum"
    )
    bank_init: Literal["gaussian", "unit"] = Field(
        default="gaussian", description="bank rows start as N(0, I) (paper §3.4) or as unit-norm Gaussian draws"
    )
    negatives: Literal["topk", "in_batch", "random"] = Field(default="topk", description="ablation of ANS (§5.4)")
    random_fraction: float = Field(default=0.8, gt=0, le=1, description="share of the bank for negatives=random")
    search: str = Field(
        default="exact", description="top-K search over the banks, any registered search: exact (chunked matmul), "
        "faiss (IndexFlatIP rebuilt per call) or ivf (approximate faiss IVF index kept across steps, only changed "
        "rows re-indexed)"
    )
    search_nlist: int | None = Field(
        default=None, gt=0, description="search=ivf: inverted lists; None: 4·√N (1,038 at SST-2's 67,349 rows)"
    )
    search_nprobe: int | None = Field(
        default=None, gt=0, description="search=ivf: lists scanned per query; None: 2048/√nlist (64 at 67k "
        "rows, 32 at 1M)"
    )
    critic_hidden: int = Field(default=64, gt=0, description="width of the critic's layers; paper appendix: 64")
    labelled_fraction: float | None = Field(
        default=None, gt=0, le=1, description="semi-supervised setting (§5.1): train on a seeded random share "
        "of the labelled training set (the paper: 0.01, 0.05, 0.1, 0.2, 0.3, 0.5, with K = 10: k defaults to 10 "
        "then, a k given wins); None: all of it"
    )
    labelled_seed: int | None = Field(
        default=None, ge=0, description="seed of the labelled_fraction draw; None: the run's seed"
    )

    @model_validator(mode="before")
    @classmethod
    def _semi_supervised_k(cls, values: Any) -> Any:
        """§5.1: K = 10 in the semi-supervised setting (``labelled_fraction`` set) unless ``k`` is given."""
        if isinstance(values, dict) and values.get("labelled_fraction") is not None and "k" not in values:
            return {**values, "k": SEMI_SUPERVISED_K}
        return values

    @field_validator("search")
    @classmethod
    def _a_registered_search(cls, name: str) -> str:
        return registered(name, SEARCHES)

    @field_validator("search_nlist", "search_nprobe")
    @classmethod
    def _taken_by_the_search(cls, value: int | None, info: ValidationInfo) -> int | None:
        """Refused when the config is read (before any data or model loads) if the search does not take it."""
        search = info.data.get("search")
        argument = info.field_name.removeprefix("search_")
        if value is not None and search is not None and argument not in SEARCHES.accepted_arguments(search):
            raise ValueError(
                f"search {search!r} takes no {argument} (its arguments: "
                f"{', '.join(SEARCHES.accepted_arguments(search)) or 'none'}); it applies to search: ivf"
            )
        return value


def search_arguments(args: ReclaimArgs) -> dict[str, int]:
    """The constructor arguments of ``args.search`` given by ``search_nlist`` / ``search_nprobe`` (those set); a
    ConfigError when the search does not take one (only ivf's index has inverted lists)."""
    given = {"nlist": args.search_nlist, "nprobe": args.search_nprobe}
    given = {name: value for name, value in given.items() if value is not None}
    accepted = SEARCHES.accepted_arguments(args.search)
    refused = [name for name in given if name not in accepted]
    if refused:
        raise ConfigError(
            f"method_args.search_{' / search_'.join(refused)}: search {args.search!r} takes no {', '.join(refused)} "
            f"(its arguments: {', '.join(accepted) or 'none'}); these apply to search: ivf"
        )
    return given


def reclaim_method(encoder, task, num_train: int, args: ReclaimArgs) -> ReclaimMethod:
    """The Method with the recipe's settings as its explicit arguments (banks of ``num_train`` rows)."""
    return ReclaimMethod(
        encoder,
        task,
        num_train,
        lam=args.lam,
        k=args.k,
        negatives=args.negatives,
        negative_reduction=args.negative_reduction,
        momentum=args.momentum,
        bank_init=args.bank_init,
        random_fraction=args.random_fraction,
        search=args.search,
        search_options=search_arguments(args),
        critic_hidden=args.critic_hidden,
        head_dropout=args.head_dropout,
    )


def labelled_subset(examples: list[IndexedExample], fraction: float, seed: int) -> list[IndexedExample]:
    """A uniformly random ``round(fraction · n)`` (at least 1) of ``examples``, drawn with ``seed``.

    The kept rows stay in their reading order and are re-indexed 0..m−1 (their memory-bank rows).
    """
    size = max(1, round(fraction * len(examples)))
    order = torch.randperm(len(examples), generator=make_generator(seed, LABELLED_STREAM))
    kept = sorted(order[:size].tolist())
    return [
        IndexedExample(examples[i].texts, examples[i].label, examples[i].source, index=new)
        for new, i in enumerate(kept)
    ]


def semi_supervised(config: TrainConfig, args: ReclaimArgs, data: ClassificationData) -> ClassificationData:
    """``data`` with its training set cut to ``args.labelled_fraction`` (unchanged when it is None)."""
    if args.labelled_fraction is None:
        return data
    if config.data.few_shot is not None:
        raise ConfigError(
            f"{config.source or '<config>'}: method_args.labelled_fraction: a random share of the training set "
            "and data.few_shot (N per class) are two different draws; set only one"
        )
    seed = config.seed if args.labelled_seed is None else args.labelled_seed
    full = len(data.train)
    data.train = labelled_subset(data.train, args.labelled_fraction, seed)
    data.description.update(
        labelled_fraction=args.labelled_fraction, labelled_seed=seed, n_train_full=full, n_train=len(data.train)
    )
    return data


def say_semi_supervised_k(config: TrainConfig, args: ReclaimArgs) -> None:
    """With ``labelled_fraction``: a line on the K in force (§5.1's 10, or the k the config gives, which wins)."""
    if args.labelled_fraction is None:
        return
    if "k" in config.method_args:
        if args.k != SEMI_SUPERVISED_K:
            logger.warning(
                "method_args.k=%d given: it wins over the K = %d of the paper's semi-supervised setting (§5.1) that "
                "method_args.labelled_fraction would set", args.k, SEMI_SUPERVISED_K,
            )  # fmt: skip
        return
    logger.info("method_args.labelled_fraction=%s: k=%d, the paper's semi-supervised K (§5.1); --set method_args.k "
                "for another", args.labelled_fraction, args.k)


def build(config: TrainConfig, args: ReclaimArgs, data_root: Path | None) -> MethodBundle:
    """One RECLAIM fine-tuning run on ``data.task`` (banks sized to the training set)."""
    say_semi_supervised_k(config, args)
    data = semi_supervised(config, args, load_classification_data(config, args, data_root, seed=config.seed))
    method = reclaim_method(classifier_encoder(config, args), data.task, len(data.train), args)
    description = dict(data.description)
    return MethodBundle(method, list(data.train), head_evaluator(config, data), final_report=lambda _m: description)


def plan(config: TrainConfig, args: ReclaimArgs) -> list[StagePlan]:
    """One training; on a user's data its evaluation rows are the file's, not the recipe's ``eval.tasks``."""
    return [StagePlan("train", config, (config.seed,), evaluation=classifier_evaluation_text(config, args))]


PROTOCOL = Protocol(
    paper="RECLAIM, ICLR 2021 submission",
    settings=(
        PaperSetting("train.epochs", "paper appendix C"),
        PaperSetting("train.batch_size", "paper appendix C"),
        PaperSetting("train.lr", "paper appendix C"),
        PaperSetting("train.warmup_ratio", "not given by the paper: run_glue's default"),
        PaperSetting("train.metric_for_best", "paper appendix C: the final weights"),
        PaperSetting("method_args.lam", "paper §5"),
        PaperSetting("method_args.k", "paper §5.1"),
    ),
    presets={
        # Measured on 400 SST-2 rows as a user's CSV (200 others to evaluate, majority 55 %), all-MiniLM-L6-v2,
        # the recipe's 3 epochs (39 steps): 67.5 % accuracy; the paper's settings 56.5 %.
        "practical": {
            "train.lr": 5e-5,
            "train.warmup_ratio": 0.1,
            "train.head_lr": 1e-3,
            "method_args.k": 10,
        },
    },
    docs="docs/methods/reclaim.md",
)

SPEC = RunSpec(name="reclaim", args_model=ReclaimArgs, build=build, plan=plan, protocol=PROTOCOL)
