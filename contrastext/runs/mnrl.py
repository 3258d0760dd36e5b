"""Recipe ``mnrl``: multiple-negatives ranking fine-tuning of a sentence-transformers model on the user's pairs.

The most common real fine-tuning job, as sentence-transformers' ``MultipleNegativesRankingLoss`` does it (Henderson
et al. 2017, "Efficient Natural Language Response Suggestion for Smart Reply"; the loss of
``SentenceTransformerTrainer`` examples): for a batch of ``(anchor_i, positive_i[, hard_negative_i])`` rows,

    ℓ_i = −log  exp(s·cos(a_i, p_i)) / Σ_j [exp(s·cos(a_i, p_j)) + exp(s·cos(a_i, n_j))]

with scale ``s = 20`` (``temperature`` τ = 1/s = 0.05): every other positive of the batch, and every hard
negative, is a negative of anchor i. The method is :class:`contrastext.methods.simcse.SimCSE` (supervised: one
forward pass) with InfoNCE; the arguments are :class:`MNRLArgs`. Unlike the SimCSE recipes, nothing about the
model changes: its pooling, Dense layers, normalisation and ``max_seq_length`` are kept (no [CLS] switch, no MLP;
see :func:`contrastext.runs.encoders.build_encoder`); ``data.max_length`` truncates the training batches only.
Without a data source in the recipe or on the command line it trains on the registry's NLI triplets.
``negatives.source: bank`` adds k online hard negatives per anchor from a kept bank of the training texts
(:mod:`contrastext.runs.bank_negatives`; docs/methods/mnrl.md, "Online hard negatives").

Example::

    >>> config = load_config(recipe_path("mnrl"), ["data.path=pairs.csv", "train.max_steps=3"])
    >>> summary = run_recipe(config)

    contrastext train mnrl --set data.path=pairs.csv --set model=bundled:all-MiniLM-L6-v2
    contrastext train mnrl --set data.path=pairs.csv --set negatives.source=bank negatives.k=8
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from contrastext.runs.plan import StagePlan, single_stage
from contrastext.runs.protocol import PaperSetting, Protocol
from contrastext.runs.registry import RunSpec
from contrastext.runs.simcse import SimCSESupArgs, build_simcse
from contrastext.runs.stages import MethodBundle
from contrastext.training.config import TrainConfig


class MNRLArgs(SimCSESupArgs):
    """``method_args`` of ``mnrl``: SimCSE's supervised arguments with the model kept as it is by default."""

    gather: bool = Field(
        default=False,
        description="gather candidates across processes (sentence-transformers' gather_across_devices; "
        "off as there): true gives every process the negatives of all",
    )
    max_seq_length: int | None = Field(
        default=None,
        gt=0,
        description="the saved model's maximum input length; None keeps the model's own (data.max_length only "
        "truncates training batches)",
    )


DEFAULT_TASK = "nli-triplets"


def build(config: TrainConfig, args: MNRLArgs, data_root: Path | None) -> MethodBundle:
    """The user's pairs (``data.path`` / ``data.dataset``; default the NLI triplets), the model as it is,
    InfoNCE with scale 1/τ = 20."""
    return build_simcse(config, args, data_root, supervised=True, default_task=DEFAULT_TASK)


def plan(config: TrainConfig, args: MNRLArgs) -> list[StagePlan]:
    """One stage, on the user's data or the default task."""
    data = config.data
    return single_stage(config, source=None if data.path or data.dataset or data.task else DEFAULT_TASK)


# Henderson et al. give the loss, not these values: each is named by its source (docs/methods/mnrl.md).
PROTOCOL = Protocol(
    paper="Henderson et al. 2017; sentence-transformers' MultipleNegativesRankingLoss",
    settings=(
        PaperSetting("train.batch_size", "not given by the paper: ours; each row's negatives are the batch's others"),
        PaperSetting("train.lr", "sentence-transformers' fit() default"),
        PaperSetting("train.schedule", "sentence-transformers' fit() default"),
        PaperSetting("train.warmup_ratio", "sentence-transformers' training examples"),
        PaperSetting("method_args.temperature", "MultipleNegativesRankingLoss: 1 / scale 20"),
        PaperSetting("data.max_length", "ours: at most the model's max_seq_length"),
        PaperSetting("method_args.pooling", "null: the model's own, as sentence-transformers"),
    ),
    presets={},
    docs="docs/methods/mnrl.md",
)

SPEC = RunSpec(name="mnrl", args_model=MNRLArgs, build=build, plan=plan, protocol=PROTOCOL, in_batch_negatives=True,
                takes_prompts=True, takes_negatives=True)
