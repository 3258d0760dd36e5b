"""Recipe ``mnrl``: multiple-negatives ranking fine-tuning of a sentence-transformers model on the user's pairs.

The method is :class:`contrastext.methods.simcse.SimCSE` (supervised: ``(anchor, positive[, hard_negative])``
rows, one forward pass) with InfoNCE at τ = 0.05, i.e. sentence-transformers' ``MultipleNegativesRankingLoss``
with its scale 20; the arguments are :class:`contrastext.methods.mnrl.MNRLArgs`. The encoder is the model as it
is (pooling, Dense, normalisation and ``max_seq_length`` kept; see :func:`contrastext.runs.encoders.build_encoder`).
Without a data source in the recipe or on the command line it trains on the registry's NLI triplets.

Example::

    >>> config = load_config(recipe_path("mnrl"), ["data.path=pairs.csv", "train.max_steps=3"])
    >>> summary = run_recipe(config)
"""

from __future__ import annotations

from pathlib import Path

from contrastext.methods.mnrl import MNRLArgs
from contrastext.runs.plan import StagePlan, single_stage
from contrastext.runs.protocol import PaperSetting, Protocol
from contrastext.runs.registry import RunSpec
from contrastext.runs.simcse import build_simcse
from contrastext.runs.stages import MethodBundle
from contrastext.training.config import TrainConfig

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

SPEC = RunSpec(name="mnrl", args_model=MNRLArgs, build=build, plan=plan, protocol=PROTOCOL)
