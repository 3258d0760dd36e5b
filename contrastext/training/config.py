"""Typed, validated training configuration: one YAML file plus ``--set key=value`` overrides.

Every section forbids unknown keys (with a did-you-mean that knows the Hugging Face Trainer names, see
:mod:`contrastext.training.key_names`); a misspelt key, a value of the wrong type or a non-finite number
(``.inf``, ``.nan``, ``1e999``) raises :class:`~contrastext.errors.ConfigError` naming the dotted key and the
file (or the ``--set`` override it came from); so does a file that is not valid UTF-8. ``method_args`` is free here and validated by each method with its own pydantic model
through :func:`validate_method_args`, with the same kind of messages.

Example::

    >>> config = load_config("recipes/simcse-unsup.yaml", ["train.max_steps=10", "method_args.temperature=0.1"])
    >>> config.train.max_steps
    10
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Collection, Iterable
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar, get_args, get_origin

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from contrastext.errors import ConfigError
from contrastext.runtime.registry import Registry
from contrastext.runtime.yaml_reader import MAX_DEPTH, YamlLimitError, read_yaml
from contrastext.training.key_names import config_keys, suggest

NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)[eE][+-]?\d+$")
ModelT = TypeVar("ModelT", bound=BaseModel)
EMPTY_OUTPUT = "an empty path would write into the current folder: name the run's folder (`.` if that is meant)"
MAX_SET_KEY_PARTS = MAX_DEPTH // 2
"""Most dotted parts of a ``--set`` key (configs use three; its value may nest the rest of :data:`MAX_DEPTH`)."""


class Section(BaseModel):
    """Base of every config section: unknown keys and non-finite floats are errors, assignments are validated."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)


class TrainSection(Section):
    """Optimisation, schedule, precision, evaluation and checkpoint cadence."""

    max_steps: int | None = Field(
        default=None,
        gt=0,
        description="optimiser steps of the run; when set it decides the length and `epochs` is not used "
        "(the data is cycled as often as needed), except when `epochs` is given with --set and `max_steps` "
        "is not: the command line wins over the recipe file",
    )
    epochs: float | None = Field(
        default=None,
        gt=0,
        description="passes over the training data (fractions allowed); used when `max_steps` is unset, or "
        "when given with --set over a recipe's `max_steps`",
    )
    batch_size: int = Field(default=64, gt=0, description="global batch size (all processes together)")
    drop_last: bool = Field(default=True, description="drop an epoch's last, smaller batch")
    group_by_length: bool = Field(
        default=False,
        description="batches of similar text lengths (less padding; sorted inside shuffled mega-batches, as "
        "Hugging Face's group_by_length)",
    )
    lr: float = Field(default=3e-5, gt=0, description="peak learning rate")
    optimizer: Literal["adamw", "adam", "adafactor", "sgd"] = Field(
        default="adamw",
        description="adamw (fused where the device has it), adam (its weight decay is an L2 penalty), adafactor "
        "(transformers' Adafactor as Hugging Face Trainer's optim=adafactor: scale_parameter and relative_step "
        "off, so train.lr and the schedule apply) or sgd (with train.momentum)",
    )
    momentum: float = Field(
        default=0.0, ge=0, description="SGD's momentum (train.optimizer=sgd only; Hugging Face: optim_args)"
    )
    head_lr: float | None = Field(
        default=None,
        gt=0,
        description="peak learning rate of the trainable parameters outside the method's encoder (task heads, "
        "shared layers, projections, critics), on the same schedule; null: train.lr for every parameter",
    )
    weight_decay: float = Field(
        default=0.0, ge=0, description="weight decay (never on biases and normalisation weights)"
    )
    adam_betas: tuple[float, float] = Field(
        default=(0.9, 0.999), description="AdamW's / Adam's (beta1, beta2); CAPT's Table 4 uses (0.9, 0.98)"
    )
    adam_epsilon: float = Field(default=1e-8, gt=0, description="AdamW's / Adam's epsilon; CAPT's Table 4 uses 1e-6")
    schedule: Literal["linear", "constant", "cosine", "polynomial", "warmup_stable_decay"] = Field(
        default="linear",
        description="after the warmup: linear decay to 0, constant, cosine (half a cosine to 0), polynomial "
        "(to train.lr_end with train.power) or warmup_stable_decay (alias wsd: constant, then a decay over "
        "train.decay_steps / decay_ratio); transformers' schedules of Hugging Face's lr_scheduler_type names",
    )
    lr_end: float = Field(
        default=1e-7, ge=0, description="the polynomial schedule's last learning rate (below train.lr)"
    )
    power: float = Field(default=1.0, gt=0, description="the polynomial schedule's power (1: linear to lr_end)")
    decay_ratio: float = Field(
        default=0.1, ge=0, le=1, description="warmup_stable_decay: share of the run's steps spent decaying"
    )
    decay_steps: int | None = Field(
        default=None, ge=0, description="warmup_stable_decay: decay steps; wins over decay_ratio"
    )
    decay_type: Literal["cosine", "linear", "1-sqrt"] = Field(
        default="cosine", description="warmup_stable_decay: the shape of the decay"
    )
    min_lr_ratio: float = Field(
        default=0.0, ge=0, le=1, description="warmup_stable_decay: the last learning rate, as a share of train.lr"
    )

    @field_validator("schedule", mode="before")
    @classmethod
    def _wsd(cls, value):
        """``wsd``: the short name of ``warmup_stable_decay``."""
        return "warmup_stable_decay" if value == "wsd" else value

    warmup_ratio: float = Field(
        default=0.0, ge=0, le=1, description="share of the run's steps spent warming the learning rate up from 0"
    )
    warmup_steps: int | None = Field(default=None, ge=0, description="warmup steps; wins over warmup_ratio")
    grad_clip: float | None = Field(
        default=1.0, gt=0, description="clip the gradient norm to this value; null: no clipping"
    )
    grad_accumulation: int = Field(
        default=1, gt=0, description="micro-batches of batch_size accumulated per optimiser step"
    )
    part_grad_norms: bool = Field(
        default=False,
        description="log grad_norm/<part>: the gradient norm of each weighted loss part alone (this process's, "
        "before clipping) on the logged steps, one extra backward pass per part there; not with cache_chunk or "
        "grad_accumulation > 1",
    )
    cache_chunk: int | None = Field(
        default=None,
        gt=0,
        description="cached gradients (GradCache): encode each batch in chunks of this many examples per process, "
        "so a large in-batch-negatives batch needs the memory of one chunk; same gradients, about +1/3 time; "
        "dropout masks are replayed. SimCSE-based recipes only (simcse-unsup, simcse-sup, gd); null: off",
    )
    mixed_precision: Literal["no", "fp16", "bf16", "auto"] = Field(
        default="auto", description="auto: bf16 on a GPU that supports it, else fp16 on GPU, no on CPU"
    )

    @field_validator("mixed_precision", mode="before")
    @classmethod
    def _yaml_no(cls, value):
        """YAML 1.1 reads an unquoted ``no`` (``mixed_precision: no``, ``--set train.mixed_precision=no``) as
        false: that is Accelerate's ``"no"``, not an error."""
        return "no" if value is False else value
    unpad: bool = Field(
        default=True,
        description="run BERT-family encoders on the real tokens of each batch, without its padding (same "
        "numbers and dropout masks as the padded forward, less work); other models always run padded",
    )
    gradient_checkpointing: bool = Field(
        default=False,
        description="recompute the encoder's activations in the backward pass (Hugging Face's "
        "gradient_checkpointing, use_reentrant=false): less memory, about a third more time, the same "
        "gradients; BERT-family encoders then take the padded forward (train.unpad does not apply)",
    )
    compile: bool = Field(
        default=False,
        description="torch.compile the method's encoder; off by default: on CPU the compilation took longer "
        "than it saved in short runs (see BENCHMARKS.md)",
    )
    seed: int | None = Field(default=None, ge=0, description="data order, views, dropout; default: seed")
    eval_every: Annotated[int, Field(gt=0)] | Literal["epoch"] | None = Field(
        default=None,
        description="evaluate every N optimiser steps, or `epoch`: at the end of every epoch (the step that takes "
        "an epoch's last batch); always at the last step",
    )
    eval_at_start: bool = Field(default=False, description="evaluate the starting weights, logged at step 0")
    overwrite: bool = Field(
        default=False, description="a fresh run may replace the run already in output_dir (else an error)"
    )
    save_every: Annotated[int, Field(gt=0)] | Literal["epoch"] | None = Field(
        default=None,
        description="checkpoint every N steps, or `epoch`: at the end of every epoch (as eval_every); always at the "
        "last step and on a stop",
    )

    @field_validator("eval_every", "save_every", mode="before")
    @classmethod
    def _steps_or_epoch(cls, value):
        """One message for a word other than ``epoch`` (instead of one per member of the union)."""
        if isinstance(value, str) and value != "epoch" and not value.strip().isdigit():
            raise ValueError("expected a number of steps or `epoch`")
        return value

    log_every: int = Field(default=10, gt=0, description="write a train_log.jsonl record every N steps")
    metric_for_best: str | None = Field(
        default=None,
        description="evaluation metric that selects best/ (e.g. score, stsb_dev_spearman); null: no selection, "
        "the last weights are reported",
    )
    greater_is_better: bool = Field(default=True, description="direction of metric_for_best")
    early_stopping_patience: int | None = Field(
        default=None, gt=0, description="stop after N evaluations without improvement of metric_for_best"
    )
    keep_last: int = Field(default=2, gt=0, description="checkpoints kept on disk")
    progress_bar: bool = Field(default=True, description="show a tqdm progress bar")
    report_to: list[Literal["tensorboard", "wandb"]] = Field(
        default_factory=list,
        description="trackers that also receive every log record, through Accelerate (install the extras: "
        "pip install 'contrastext[tensorboard]' / 'contrastext[wandb]'; one missing is a warning, not an "
        "error); train_log.jsonl is always written. TensorBoard writes into <output_dir>/tensorboard; W&B "
        "follows WANDB_PROJECT / WANDB_MODE",
    )
    on_nonfinite: Literal["stop", "skip"] = Field(
        default="stop", description="a NaN/inf loss or gradient: stop with an error naming the step, or skip the step"
    )

    @model_validator(mode="before")
    @classmethod
    def _report_to_forms(cls, data: Any) -> Any:
        """``report_to: tensorboard`` (one name) or ``none`` (the old ``train.tensorboard`` flag is a moved key,
        :data:`MOVED_KEYS`)."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        trackers = data.get("report_to")
        if trackers is None or trackers == "none":
            trackers = []
        elif isinstance(trackers, str):
            trackers = [trackers]
        data["report_to"] = trackers
        return data

    @model_validator(mode="after")
    def _needs_a_length(self) -> TrainSection:
        if self.max_steps is None and self.epochs is None:
            raise ValueError("set train.max_steps or train.epochs")
        return self

    @model_validator(mode="after")
    def _schedule_fits(self) -> TrainSection:
        """What the schedules refuse at the start of training, said before any model loads."""
        if self.schedule == "polynomial" and self.lr_end >= self.lr:
            raise ValueError(f"train.lr_end ({self.lr_end}) must be below train.lr ({self.lr}) for the polynomial "
                             "schedule")
        ratios = self.warmup_steps is None and self.decay_steps is None
        if self.schedule == "warmup_stable_decay" and ratios and self.warmup_ratio + self.decay_ratio > 1:
            raise ValueError(f"train.warmup_ratio ({self.warmup_ratio}) + train.decay_ratio ({self.decay_ratio}) "
                             "are more than the whole run")
        if self.part_grad_norms and (self.cache_chunk is not None or self.grad_accumulation > 1):
            raise ValueError("train.part_grad_norms measures one micro-batch's parts: not with train.cache_chunk or "
                             "train.grad_accumulation > 1")
        return self


class DataColumns(Section):
    """Which column of a user's file or dataset plays which role; roles not named are not read. Without
    `data.columns`, the sentence-transformers convention: every column but `label` / `score` is a text, in file
    order (text, pair, negative), and a `label` (classes) or else `score` (numbers) column is the target.
    See docs/DATA.md."""

    text: str | None = Field(default=None, description="the text (the anchor of a pair; the sentence of unsupervised recipes)")
    pair: str | None = Field(default=None, description="the second text: the positive of a pair, or the second sentence of a pair task")
    negative: str | None = Field(default=None, description="a hard negative (third text; supervised SimCSE)")
    label: str | None = Field(default=None, description="class labels: strings or integers, any number of classes")
    score: str | None = Field(default=None, description="a numeric target (regression on pairs)")


class DataSection(Section):
    """What to train on: ONE source, `task` (a registry task) or `path` (a file) or `dataset` (Hugging Face
    `datasets`). A source given with --set replaces the recipe file's; two at the same level are an error.
    Methods read the other fields that concern them. See docs/DATA.md."""

    task: str | None = Field(default=None, description="a registry task spec such as 'wiki1m' or 'nli-triplets:train'")
    tasks: list[str] = Field(default_factory=list, description="several task specs (multi-task)")
    path: str | None = Field(
        default=None,
        description="a data file: .csv (comma), .tsv (tab), .jsonl/.json (one object a line), each with a header "
        "or keys naming the columns; .txt (one sentence a line)",
    )
    dataset: str | None = Field(
        default=None,
        description="a Hugging Face dataset: a local save_to_disk folder, a folder (or file) of parquet / json / "
        "csv files, or a hub name (needs the network or the local cache)",
    )
    dataset_config: str | None = Field(default=None, description="the configuration (subset) name of data.dataset")
    split: str | None = Field(default=None, description="the training split of data.dataset (default train)")
    columns: DataColumns | None = Field(
        default=None, description="column roles of data.path / data.dataset: text, pair, negative, label, score"
    )
    label_names: list[str] | None = Field(
        default=None,
        description="the classes in id order (default: the training labels, sorted; integer labels numerically)",
    )
    eval_path: str | None = Field(
        default=None,
        description="fine-tuning on data.path: the labelled evaluation file (same columns); default: a seeded "
        "holdout of the training file (method_args.holdout, 0.2 unless set)",
    )
    eval_split: str | None = Field(
        default=None, description="fine-tuning on data.dataset: the evaluation split (default: a seeded holdout)"
    )

    @model_validator(mode="before")
    @classmethod
    def _label_names_as_text(cls, data: Any) -> Any:
        """``label_names: [0, 1, 2]`` (YAML integers) means the labels "0", "1", "2"."""
        if isinstance(data, dict) and isinstance(data.get("label_names"), list):
            names = data["label_names"]
            data = {**data, "label_names": [str(n) if isinstance(n, int | float) and not isinstance(n, bool) else n
                                            for n in names]}
        return data

    max_length: int = Field(
        default=32,
        gt=0,
        description="tokens per text in TRAINING batches (truncation); the saved model keeps its own max_seq_length",
    )
    limit: int | None = Field(default=None, gt=0, description="N training examples only (see data.limit_rows)")
    num_negatives: int | None = Field(
        default=None,
        ge=0,
        description="rows with a list-valued negative column (JSONL / datasets: query, pos: [...], neg: [...]): n, "
        "the negatives kept per row as negative_1 … negative_n (a row's first n; rows with fewer are dropped, as "
        "sentence-transformers' n-tuple format drops them); null: the fewest any row has, no row dropped. See "
        "docs/RETRIEVAL.md",
    )
    limit_rows: Literal["first", "random"] = Field(
        default="first",
        description="which N rows data.limit keeps: the first N of the file, or N drawn at random with the run's "
        "seed (in file order)",
    )
    few_shot: int | None = Field(
        default=None, gt=0, description="N training examples drawn, by the run's seed (see few_shot_sampling)"
    )
    few_shot_sampling: Literal["label_distribution", "per_class"] | None = Field(
        default=None,
        description="how few_shot draws: N in total following the training label distribution (Gunel et al. §4.1), "
        "or N of each class; None: the recipe's own (scl: label_distribution; reclaim and the fine-tunings: "
        "per_class)",
    )
    label_noise: float = Field(default=0.0, ge=0, lt=1, description="share of labels flipped")
    batch_sampler: Literal["batch_sampler", "no_duplicates"] = Field(
        default="batch_sampler",
        description="how training batches are formed (sentence-transformers' batch_sampler names): batch_sampler, a "
        "seeded permutation cut into batches; no_duplicates, batches in which no text appears twice across the "
        "row's columns (no false in-batch negatives), sentence-transformers' NoDuplicatesBatchSampler batch for "
        "batch; the recipes with in-batch negatives only (simcse-unsup, simcse-sup, mnrl, gd, capt's pre-training), "
        "not with train.group_by_length. See docs/DATA.md",
    )
    storage: Literal["memory", "columns"] = Field(
        default="memory",
        description="how the training rows of data.path / data.dataset are held: memory, Python objects (every file "
        "shape); columns, a memory-mapped column store (Arrow) converted once, streaming, into a cache folder "
        "($CONTRASTEXT_CACHE/columns) and read a batch at a time: bounded memory at 100M rows. Columns takes one text "
        "a column (pairs, triplets; not .txt sentences, list-valued or NLI rows), in mnrl, simcse-unsup, simcse-sup "
        "and gd, without data.limit or data.prompts. See docs/DATA.md",
    )
    prompts: str | dict[str, str] | None = Field(
        default=None,
        description="mnrl, simcse-unsup, simcse-sup, gd: text put before every training text, as "
        "sentence-transformers' training-args prompts: one string for every column, or {column: prompt} (the "
        "data's column names, or text / pair / negative for data without named columns). Saved with the model "
        "(config_sentence_transformers.json prompts; a string as prompt 'default', the default_prompt_name), so "
        "encode --prompt-name and sentence-transformers apply them too. See docs/RETRIEVAL.md",
    )
    # the multi-task schedule (one task per batch; method_args.pcgrad joins every task instead)
    task_sampling: Literal["sequential", "round_robin", "proportional"] = Field(
        default="proportional", description="multi-task batches: the order of the tasks' batches"
    )
    task_temperature: float = Field(default=1.0, gt=0, description="proportional: p_t ∝ (w_t·n_t)^(1/T)")
    task_weights: list[float] | None = Field(default=None, description="proportional: w_t, in data.tasks order")
    proportional_replacement: bool = Field(
        default=False, description="proportional: independent draws instead of shuffling the merged batches"
    )
    sequential_order: list[str] | None = Field(
        default=None, description="sequential: task order, all epochs of each (null: data.tasks order)"
    )
    round_robin_order: list[str] | None = Field(
        default=None, description="round_robin: task order within each epoch, repeats allowed (null: data.tasks)"
    )
    round_robin_unit: Literal["pass", "batch"] = Field(
        default="pass", description="round_robin: a whole pass of each entry, or one batch of each in turn"
    )


class NegativesSection(Section):
    """Online hard negatives from a kept bank (`mnrl`, `simcse-sup`; docs/methods/mnrl.md, "Online hard
    negatives"): with `source: bank`, every step appends to each anchor's in-batch candidates the `k` texts of a
    memory bank nearest to it, the bank holding one embedding per distinct text of the training rows' positive and
    negative columns (and of `corpus`), 4·dim bytes a row (1,536 at 384 dims). `source: none` (default): in-batch
    and in-row negatives only, as before."""

    source: Literal["none", "bank"] = Field(
        default="none",
        description="none: no bank; bank: k hard negatives per anchor from the bank (recipes mnrl and simcse-sup)",
    )
    k: int = Field(default=8, gt=0, description="bank negatives appended to each anchor's candidates")
    refresh: Literal["momentum", "reencode"] = Field(
        default="momentum",
        description="how the bank follows the encoder: momentum (RECLAIM's Eq. 7 on the rows of each step's "
        "batch, with their fresh embeddings) or reencode (every text encoded again every reencode_every steps; "
        "its time, amortised per step, is printed and in the run's summary)",
    )
    momentum: float = Field(
        default=0.5, ge=0, lt=1,
        description="ρ of the momentum refresh, row ← (1 − ρ)·fresh + ρ·row (RECLAIM's default, as reclaim's "
        "method_args.momentum)",
    )
    reencode_every: int = Field(default=1000, gt=0, description="refresh: reencode: optimiser steps between two "
                                "full encodings of the bank")
    search: str = Field(
        default="exact",
        description="the nearest-neighbour search over the bank, a registered search name: exact, faiss, ivf (a "
        "faiss IVF index kept across steps and updated in place; approximate, and rebuilt on a resume)",
    )
    search_nlist: int | None = Field(
        default=None, gt=0, description="search: ivf: inverted lists; null: 4·√N (4,000 at 1M bank rows)"
    )
    search_nprobe: int | None = Field(
        default=None, gt=0, description="search: ivf: lists scanned per query (more: higher recall, slower steps); "
        "null: 2048/√nlist (32 at 1M bank rows)",
    )
    absolute_margin: float | None = Field(
        default=None,
        description="sentence-transformers' mine_hard_negatives meaning: a candidate is dropped when its similarity "
        "to the anchor + absolute_margin exceeds the similarity of the anchor and its positive; null: off",
    )
    relative_margin: float | None = Field(
        default=None, ge=0, lt=1,
        description="sentence-transformers' meaning: a candidate is dropped when its similarity to the anchor "
        "exceeds positive − |positive|·relative_margin; null: off",
    )
    corpus: str | None = Field(
        default=None,
        description="a .txt file of extra texts to bank, one a line, as written (data.prompts does not apply to "
        "them; candidates only: refreshed by reencode, never by momentum); null: the training rows' positives and "
        "negatives only",
    )


class EvalSection(Section):
    """Development-set evaluation during training."""

    tasks: list[str] = Field(
        default_factory=list,
        description="evaluation specs: registry tasks ('stsb:dev'), files with a kind ('sts:my.csv', "
        "'classification:reviews.tsv', 'pairs:qa.jsonl@dev'), retrieval folders ('ir:my_beir_folder@dev'), columns "
        "named by role ('sts[text=a,pair=b,score=sim]:my.csv'); see docs/DATA.md and docs/RETRIEVAL.md",
    )
    batch_size: int = Field(default=64, gt=0, description="batch size of encoding during evaluation")
    limit: int | None = Field(default=None, gt=0, description="first N examples of each evaluation set only")


class TrainConfig(Section):
    """A whole run: which recipe, which model, where to write, and the sections above."""

    method: str = Field(
        description="the recipe to run, by its registry name (simcse-unsup, simcse-sup, mnrl, gd, scl, reclaim, capt, "
        "multitask, ...); `recipe:` is accepted for this key, which keeps its name for the recipes already written"
    )
    model: str = Field(
        description="starting model: a local folder, bundled:all-MiniLM-L6-v2, or a Hugging Face hub name"
    )
    output_dir: str = Field(description="where the run writes (config.yaml, train_log.jsonl, checkpoints/, best/, final/)")
    seed: int = Field(default=42, ge=0, description="seed of everything random: model initialisation, data, views")
    train: TrainSection
    data: DataSection = Field(default_factory=DataSection)
    eval: EvalSection = Field(default_factory=EvalSection)
    negatives: NegativesSection = Field(
        default_factory=NegativesSection,
        description="online hard negatives from a kept bank (mnrl, simcse-sup): the `negatives` section below",
    )
    method_args: dict[str, Any] = Field(default_factory=dict)

    @field_validator("output_dir")
    @classmethod
    def _a_named_folder(cls, value: str) -> str:
        if not value.strip():
            raise ValueError(EMPTY_OUTPUT)
        return value

    _source: str | None = PrivateAttr(default=None)
    _overridden: frozenset[str] = PrivateAttr(default=frozenset())

    @property
    def source(self) -> str | None:
        """The file this config was read from (None when built in code)."""
        return self._source

    @property
    def overridden_keys(self) -> frozenset[str]:
        """Dotted keys that came from ``--set``."""
        return self._overridden

    @property
    def length_from(self) -> Literal["max_steps", "epochs"]:
        """Which of ``train.max_steps`` / ``train.epochs`` sets the run's length.

        ``max_steps`` when it is set, else ``epochs``; but a recipe file's ``max_steps`` gives way to an
        ``epochs`` given with ``--set`` (the command line wins). Both given with ``--set``: ``max_steps``.
        """
        train = self.train
        if train.max_steps is None:
            return "epochs"
        given = self._overridden
        if train.epochs is not None and "train.epochs" in given and "train.max_steps" not in given:
            return "epochs"
        return "max_steps"

    @property
    def train_seed(self) -> int:
        """The seed of data order, views and dropout: ``train.seed``, else ``seed``."""
        return self.seed if self.train.seed is None else self.train.seed

    def method_args_as(self, model_cls: type[ModelT]) -> ModelT:
        """``method_args`` validated with a method's own model (see :func:`validate_method_args`)."""
        return validate_method_args(model_cls, self.method_args, self._source, self._overridden)


def load_config(path: str | os.PathLike, overrides: Iterable[str] = ()) -> TrainConfig:
    """Read a YAML config, apply dotted ``key=value`` overrides, validate everything but ``method_args``."""
    file = str(path)
    try:
        data = Path(path).read_bytes()
    except OSError as error:
        raise ConfigError(f"{file}: cannot read the config file ({error.strerror or error})") from error
    text = _decode(data, file)
    try:
        raw = read_yaml(text)
    except YamlLimitError as error:
        raise ConfigError(f"{file}:{error.line}: {error.text}") from None
    except yaml.YAMLError as error:
        raise ConfigError(f"{file}: not valid YAML: {error}") from error
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{file}: the top level must be a mapping of keys, got {type(raw).__name__}")
    overridden = apply_overrides(raw, overrides, file)
    recipe_key_as_method(raw, file, overridden)
    _empty_lists(raw, overridden)
    config = _validate(TrainConfig, raw, file, overridden, prefix="")
    config._source = file
    config._overridden = frozenset(overridden)
    return config


def recipe_key_as_method(raw: dict, file: str, overridden: set[str]) -> None:
    """``recipe: NAME`` is read as ``method: NAME`` (the recipe to run; ``method`` is the key the shipped recipes
    and saved configs write); both given is a ConfigError."""
    if "recipe" not in raw:
        return
    if "method" in raw:
        raise ConfigError(
            f"{_origin('recipe', file, overridden)}: recipe and method both name the recipe to run "
            f"({raw['recipe']!r}, {raw['method']!r}): keep one"
        )
    raw["method"] = raw.pop("recipe")
    if "recipe" in overridden:
        overridden.add("method")


def _empty_lists(raw: dict, overridden: Iterable[str]) -> None:
    """``--set eval.tasks=`` (an empty value, read as null) clears a list key, as ``eval.tasks=[]`` does; one
    value (``--set eval.tasks=stsb:dev``) is a list of one."""
    for key in overridden:
        parts = key.split(".")
        model: type[BaseModel] | None = TrainConfig
        for part in parts[:-1]:
            field = model.model_fields.get(part) if model is not None else None
            annotation = field.annotation if field is not None else None
            model = annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None
        field = model.model_fields.get(parts[-1]) if model is not None else None
        if field is None or get_origin(field.annotation) is not list:
            continue
        node = raw
        for part in parts[:-1]:
            node = node[part]
        value = node.get(parts[-1])
        if value is None:
            node[parts[-1]] = []
        elif isinstance(value, str) and get_args(field.annotation) == (str,):
            node[parts[-1]] = [value]  # a list of free text (task specs); fields with own forms keep them


def _decode(data: bytes, file: str) -> str:
    """The text of a config file; ConfigError naming the file and line when it is not valid UTF-8."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise ConfigError(f"{file}:{line}: not valid UTF-8 ({error.reason} at byte {error.start}); save it as UTF-8") from None


def parse_override(text: str) -> tuple[str, Any]:
    """``"train.max_steps=10"`` -> ``("train.max_steps", 10)``; the value is read as a YAML scalar or list."""
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or not key or any(not part for part in key.split(".")):
        raise ConfigError(f"--set {text!r}: expected KEY=VALUE with a dotted key, e.g. train.max_steps=10")
    parts = key.count(".") + 1
    if parts > MAX_SET_KEY_PARTS:
        raise ConfigError(
            f"--set {_short(key)}: the key has {parts} dotted parts; at most {MAX_SET_KEY_PARTS} are allowed"
        )
    try:
        parsed = read_yaml(value)
    except YamlLimitError as error:
        raise ConfigError(f"--set {_short(key)}: the value: {error}") from None
    except yaml.YAMLError:
        parsed = value  # not YAML: keep the text as a string
    if isinstance(parsed, str) and NUMBER.match(parsed.strip()):
        parsed = float(parsed)  # YAML 1.1 reads "1e-3" as text
    return key, parsed


def _short(key: str, limit: int = 60) -> str:
    """A key as an error line shows it: the first ``limit`` characters of a long one."""
    return key if len(key) <= limit else f"{key[:limit]}... ({len(key)} characters)"


def apply_overrides(raw: dict, overrides: Iterable[str], file: str) -> set[str]:
    """Set each dotted override into ``raw`` (creating sections); returns the dotted keys set."""
    overridden = set()
    for text in overrides:
        key, value = parse_override(text)
        node = raw
        parts = key.split(".")
        for depth, part in enumerate(parts[:-1]):
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                where = ".".join(parts[: depth + 1])
                raise ConfigError(
                    f"--set {text!r}: {where} is a value ({child!r}) in {file}, not a section with keys"
                )
            node = child
        node[parts[-1]] = value
        overridden.add(key)
    return overridden


def validate_method_args(
    model_cls: type[ModelT],
    raw: dict | None,
    file: str | os.PathLike | None,
    overridden: Collection[str] = (),
) -> ModelT:
    """Validate a method's ``method_args`` with its own pydantic model (which should forbid extra keys).

    Errors name ``method_args.<key>`` and the file, or the ``--set`` override the value came from.
    """
    raw = {} if raw is None else raw
    if not isinstance(raw, dict):
        raise ConfigError(f"{file or '<config>'}: method_args must be a mapping of keys, got {raw!r}")
    where = str(file) if file else "<config>"
    for key, value in _non_finite(raw, "method_args"):
        raise ConfigError(f"{_origin(key, where, overridden)}: {key}: expected a finite number, got {value!r}")
    return _validate(model_cls, raw, str(file) if file else "<config>", set(overridden), "method_args.")


def _non_finite(value: Any, key: str) -> Iterable[tuple[str, float]]:
    """``(dotted key, value)`` of every NaN or infinite float inside ``value`` (mappings and lists walked)."""
    if isinstance(value, float) and not math.isfinite(value):
        yield key, value
    elif isinstance(value, dict):
        for name, item in value.items():
            yield from _non_finite(item, f"{key}.{name}")
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from _non_finite(item, f"{key}.{index}")


MOVED_KEYS: dict[str, str] = {
    "train.tensorboard": "train.report_to (train.report_to: [tensorboard], or [] for none)",
}
"""Config keys that were removed or moved: ``old dotted key -> the key to set instead``. A config that still sets
one is a ConfigError naming the new key, so an old recipe gets a clear message. A recipe's ``method_args`` model
lists its own moved keys (relative to ``method_args``) in its ``moved_keys`` class variable."""


SAVED_KEY_MOVES: dict[str, str] = {
    "method_args.few_shot_sampling": "data.few_shot_sampling",
    **{
        f"method_args.{key}": f"data.{key}"
        for key in ("sequential_order", "round_robin_order", "round_robin_unit", "proportional_replacement")
    },
}
"""Keys that moved, as a config saved before the move (a checkpoint's config.yaml) holds them -> where they are
now. :func:`saved_under_current_names` applies them, so resuming an older checkpoint compares like with like."""


def saved_under_current_names(saved: dict) -> dict:
    """A config dict saved by an earlier version, with today's key names: each key of :data:`SAVED_KEY_MOVES` at its
    new place, and the ``data`` keys and the ``negatives`` section added since then at their defaults (what that run
    read)."""
    saved = {key: dict(value) if isinstance(value, dict) else value for key, value in saved.items()}
    for old, new in SAVED_KEY_MOVES.items():
        old_section, old_key = old.split(".")
        new_section, new_key = new.split(".")
        section = saved.get(old_section)
        if isinstance(section, dict) and old_key in section:
            target = saved.setdefault(new_section, {})
            if isinstance(target, dict):
                target.setdefault(new_key, section.pop(old_key))
    data = saved.get("data")
    if isinstance(data, dict):
        for key, value in DataSection().model_dump(mode="json").items():
            data.setdefault(key, value)
    saved.setdefault("negatives", NegativesSection().model_dump(mode="json"))  # saved before the section existed
    return saved


def check_moved_keys(raw: dict, moved: dict[str, str], file: str, overridden: Collection[str], prefix: str = "") -> None:
    """A ConfigError naming the new key for the first key of ``moved`` (dotted, relative to ``raw``) that ``raw``
    sets; ``prefix`` is the dotted path of ``raw`` in the config (``method_args.``)."""
    for old, new in moved.items():
        node: Any = raw
        for part in old.split("."):
            if not isinstance(node, dict) or part not in node:
                break
            node = node[part]
        else:
            key = prefix + old
            raise ConfigError(f"{_origin(key, file, overridden)}: {key}: this key was moved or removed; set {new}")


def registered(name: str, registry: Registry) -> str:
    """``name`` if ``registry`` holds it, else a ValueError listing the registered names (raised in a pydantic field
    validator, it becomes a ConfigError naming the key and the file, or the ``--set`` override)."""
    if name in registry:
        return name
    raise ValueError(registry.unknown_message(name))


def _validate(model_cls: type[ModelT], raw: dict, file: str, overridden: Collection[str], prefix: str):
    if model_cls is TrainConfig:
        check_moved_keys(raw, MOVED_KEYS, file, overridden)
    else:
        check_moved_keys(raw, getattr(model_cls, "moved_keys", {}), file, overridden, prefix)
    try:
        return model_cls.model_validate(raw)
    except ValidationError as error:
        known = config_keys(TrainConfig) + ([] if model_cls is TrainConfig else config_keys(model_cls, prefix))
        raise ConfigError(_describe(error, file, overridden, prefix, known)) from None


def _describe(
    error: ValidationError, file: str, overridden: Collection[str], prefix: str, known: Collection[str] = ()
) -> str:
    """One ``origin: key: what`` per error; an unknown key gets a did-you-mean (:mod:`.key_names`)."""
    lines = []
    for item in error.errors():
        key = prefix + ".".join(str(part) for part in item["loc"])
        key = key.rstrip(".") or "(top level)"
        kind = item["type"]
        if kind == "extra_forbidden":
            hint = suggest(key, known)
            what = f"unknown key; {hint}" if hint else "unknown key"
        elif kind == "missing":
            what = "required key is missing"
        else:
            what = f"{item['msg']} (got {item.get('input')!r})"
        origin = _origin(key, file, overridden)
        lines.append(f"{origin}: {key}: {what}")
    return "; ".join(lines)


def _origin(key: str, file: str, overridden: Collection[str]) -> str:
    for candidate in overridden:
        if key == candidate or key.startswith(candidate + ".") or candidate.startswith(key + "."):
            return f"--set {candidate} (over {file})"
    return file


def dump_config(config: TrainConfig) -> str:
    """The config as YAML text (what checkpoints store)."""
    return yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False)
