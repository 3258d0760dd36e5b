"""Multi-task BERT: sentiment (SST-5), paraphrase (Quora) and similarity (STS) on one encoder.

After the CS224N default final project and the report "Robust embeddings using contrastive and multiple
negatives on BERT". One encoder; each sentence's ``[CLS]`` vector goes through a shared layer
``h = tanh(W·cls + b)``; then one head per task:

- a single-text task (SST-5, kind ``single``): ``logits = W_s · dropout(h)``, part = cross-entropy;
- a pair-class task (Quora, kind ``pair``): :class:`~contrastext.models.heads.PairHead` on (h₁, h₂) with
  features ``[h₁; h₂; h₁ − h₂]`` taken in both orders and averaged (``symmetric``), cross-entropy;
- a scored-pair task (STS, kind ``regression``/``sts``): the same pair head with one output, mean squared
  error against the 0–5 score.

Each training step draws one task's batch (``data.task_sampling``: ``sequential`` task after task,
``round_robin`` one batch each in turn, ``proportional`` MT-DNN's P(task i) ∝ (wᵢ·nᵢ)^(1/T) with
``data.task_weights`` wᵢ and ``data.task_temperature`` T; :class:`~contrastext.data.sampling.MultiTaskBatchSampler`).
The parts are named after the tasks and weighted by ``method_args.loss_weights``.

With ``method_args.pcgrad: true`` every step instead holds ``train.batch_size`` examples of EVERY task
(:class:`JointTaskBatchSampler`) and the shared parameters (encoder + shared layer) follow PCGrad (Yu et al.
2020, :mod:`contrastext.methods.pcgrad`): the trainer only calls ``total.backward()``, so ``forward``
computes each task's gradient itself (``torch.autograd.grad``), projects the conflicting ones and returns
the task losses DETACHED (for the log) plus a part ``pcgrad`` whose value is 0 and whose gradient is the
projected sum (:func:`~contrastext.methods.pcgrad.pcgrad_surrogate`). Single process only.

Optional SimCSE pre-step (``method_args.simcse_steps``): that many unsupervised SimCSE steps (dropout
twins, InfoNCE τ = ``simcse_temperature``) on the distinct training sentences of all tasks, before the
multi-task training (``<output_dir>/simcse-prestep``).

Evaluation (``method -> metrics``): ``<task>_accuracy`` for class tasks, ``<task>_pearson`` for scored
pairs (fractions, not ×100), and ``mean`` = the course leaderboard's overall score, the mean over tasks
of accuracy and of the Pearson r mapped to [0, 1] as (r + 1) / 2. Quora has no train file here (only
``minbert/quora-dev.csv``): tasks in ``method_args.holdout_tasks`` train on their dev split minus a fixed,
seeded ``holdout`` share and are evaluated on that share (reported in the final report).

Example::

    >>> config = load_config("recipes/multitask.yaml", ["train.max_steps=30", "data.task_sampling=round_robin"])
    >>> summary = run_recipe(config, data_root=Path("../shared/data"))
    >>> summary["metrics"]["mean"]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from pydantic import BaseModel, ConfigDict, Field
from torch import Tensor, nn

from contrastext.data.collate import labels_tensor, tokenize
from contrastext.data.examples import Example
from contrastext.data.sampling import MultiTaskBatchSampler, RandomBatchSampler
from contrastext.errors import ConfigError
from contrastext.evaluation.metrics import accuracy, pearson
from contrastext.methods.base import Method
from contrastext.methods.pcgrad import pcgrad_surrogate
from contrastext.methods.registry import MethodBundle, MethodSpec, resolve_model, run_training, seeded_build
from contrastext.models.heads import ClassificationHead, PairHead
from contrastext.models.projection import DenseLayer
from contrastext.training.seeding import derive_seed

DEFAULT_TASKS = ("minbert-sst", "minbert-quora", "minbert-sts")
CLASS_KINDS = ("single", "pair")
SCORE_KINDS = ("regression", "sts")
ENCODER_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


class MultitaskArgs(BaseModel):
    """``method_args`` of the ``multitask`` recipe (see docs/methods/multitask.md)."""

    model_config = ConfigDict(extra="forbid")

    pooling: str = Field(default="cls", description="the sentence vector the heads read")
    shared_layer: bool = Field(default=True, description="a dense tanh layer shared by every head")
    head_dropout: float = Field(default=0.1, ge=0, lt=1)
    pair_parts: list[str] = Field(default_factory=lambda: ["u", "v", "diff"], description="PairHead features")
    symmetric_pairs: bool = Field(default=True, description="average the pair head over both orders")
    loss_weights: dict[str, float] = Field(default_factory=dict, description="task name -> loss weight (1.0)")
    pcgrad: bool = Field(default=False, description="every task each step, PCGrad on the shared parameters")
    holdout_tasks: list[str] = Field(default_factory=lambda: ["minbert-quora"], description="train on dev minus holdout")
    holdout: float = Field(default=0.2, gt=0, lt=1, description="share of the dev split held out for evaluation")
    holdout_seed: int = Field(default=0, ge=0)
    simcse_steps: int = Field(default=0, ge=0, description="unsupervised SimCSE steps before multi-task training")
    simcse_lr: float = Field(default=3e-5, gt=0)
    simcse_batch_size: int = Field(default=64, gt=1)
    simcse_temperature: float = Field(default=0.05, gt=0)


@dataclass(frozen=True)
class TaskExample(Example):
    """An :class:`Example` that knows which task (index into the run's task list) it belongs to."""

    task: int = -1


@dataclass
class MultitaskData:
    """The run's tasks, training examples (all tasks, concatenated in task order) and evaluation sets."""

    tasks: list[Any]  # contrastext.data.tasks.Task
    train: list[TaskExample]
    sizes: list[int]
    eval: dict[str, list[Example]]
    description: dict = field(default_factory=dict)


def load_multitask_data(config, args: MultitaskArgs, data_root: Path | None) -> MultitaskData:
    """Each task's training split (or dev minus holdout) and evaluation split, ``data.limit`` / ``eval.limit``."""
    from contrastext.data.tasks import get_task, holdout_split, load_task

    if config.eval.tasks:
        raise ConfigError(
            f"{config.source or '<config>'}: eval.tasks: multitask evaluates each of data.tasks on its dev split "
            "(or its holdout); leave eval.tasks empty"
        )
    specs = list(config.data.tasks) or list(DEFAULT_TASKS)
    tasks, train, sizes, evaluation, description = [], [], [], {}, {}
    for index, spec in enumerate(specs):
        name, _, split = spec.partition(":")
        task = get_task(name)
        if task.kind not in CLASS_KINDS + SCORE_KINDS:
            raise ConfigError(
                f"{config.source or '<config>'}: data.tasks: {task.name} has kind {task.kind!r}; multitask needs "
                f"labelled tasks of kind {', '.join(CLASS_KINDS + SCORE_KINDS)}"
            )
        if task.name in evaluation:
            raise ConfigError(f"{config.source or '<config>'}: data.tasks: {task.name} is given twice")
        if task.name in args.holdout_tasks:
            rows = load_task(task, data_root, split="dev").examples
            rows_train, rows_eval = holdout_split(rows, args.holdout, args.holdout_seed)
            where = f"{task.name}:dev minus a {args.holdout:.0%} holdout (seed {args.holdout_seed})"
            eval_where = f"{task.name}:dev {args.holdout:.0%} holdout (seed {args.holdout_seed}, {len(rows_eval)} rows)"
        else:
            rows_train = load_task(task, data_root, split=split or "train").examples
            rows_eval = load_task(task, data_root, split="dev").examples
            where, eval_where = f"{task.name}:{split or 'train'}", f"{task.name}:dev"
        rows_train = [row for row in rows_train if row.label is not None][: config.data.limit]
        rows_eval = [row for row in rows_eval if row.label is not None][: config.eval.limit]
        if not rows_train or not rows_eval:
            raise ConfigError(f"{where}: no labelled examples to train or evaluate on")
        tasks.append(task)
        train.extend(TaskExample(row.texts, row.label, row.source, task=index) for row in rows_train)
        sizes.append(len(rows_train))
        evaluation[task.name] = list(rows_eval)
        description[task.name] = {"train": where, "eval": eval_where, "n_train": len(rows_train),
                                  "n_eval": len(rows_eval)}
    return MultitaskData(tasks, train, sizes, evaluation, description)


class JointTaskBatchSampler:
    """Every batch holds ``batch_size`` examples of EACH task (for PCGrad); shorter tasks wrap around.

    ``batches(epoch)`` is a pure function of (seed, epoch), like the trainer's other samplers; an epoch
    has as many batches as the task with the most.
    """

    def __init__(self, task_sizes: Sequence[int], batch_size: int, seed: int, drop_last: bool = True) -> None:
        self.samplers = [
            RandomBatchSampler(size, batch_size, derive_seed(seed, task), drop_last)
            for task, size in enumerate(task_sizes)
        ]
        self.offsets = np.concatenate([[0], np.cumsum(task_sizes)[:-1]]).astype(int).tolist()

    def batches(self, epoch: int) -> list[list[int]]:
        per_task = [
            [[offset + index for index in batch] for batch in sampler.batches(epoch)]
            for offset, sampler in zip(self.offsets, self.samplers, strict=True)
        ]
        count = max(len(batches) for batches in per_task)
        return [[i for batches in per_task for i in batches[k % len(batches)]] for k in range(count)]

    def __len__(self) -> int:
        return len(self.batches(0))


class MultitaskMethod(Method):
    """Encoder + shared layer + one head per task; parts named after the tasks (plus ``pcgrad``)."""

    def __init__(self, encoder, tasks: Sequence[Any], max_length: int, args: MultitaskArgs | None = None):
        super().__init__()
        args = args or MultitaskArgs()
        self.encoder = encoder
        self.max_length = max_length
        self.task_names = [task.name for task in tasks]
        self.task_kinds = {task.name: task.kind for task in tasks}
        unknown = sorted(set(args.loss_weights) - set(self.task_names))
        if unknown:
            raise ConfigError(f"method_args.loss_weights: unknown task(s) {unknown}; tasks: {self.task_names}")
        width = encoder.hidden_size
        self.shared = DenseLayer(width, width, activation="tanh") if args.shared_layer else nn.Identity()
        heads = {}
        for task in tasks:
            if task.kind == "single":
                heads[task.name] = ClassificationHead(width, task.num_labels, dropout=args.head_dropout)
            else:
                labels = task.num_labels if task.kind == "pair" else 1
                heads[task.name] = PairHead(width, labels, parts=tuple(args.pair_parts),
                                            symmetric=args.symmetric_pairs, dropout=args.head_dropout)
        self.heads = nn.ModuleDict(heads)
        self.loss_weights = {name: float(args.loss_weights.get(name, 1.0)) for name in self.task_names}
        self.pcgrad = args.pcgrad

    # ------------------------------------------------------------------------------------ batches
    def collate(self, examples: list[Example]) -> dict:
        """``{task name: {"first": tokens, "second": tokens (pairs), "labels"}}`` for the tasks present."""
        batch: dict[str, dict] = {}
        for index, name in enumerate(self.task_names):
            rows = [example for example in examples if getattr(example, "task", None) == index]
            if rows:
                batch[name] = self.tokenize_task(name, rows, with_labels=True)
        if sum(len(entry["labels"]) for entry in batch.values()) != len(examples):
            raise ValueError("multitask collate needs TaskExample rows whose task indexes the method's tasks")
        return batch

    def tokenize_task(self, name: str, rows: Sequence[Example], with_labels: bool = False) -> dict:
        kind = self.task_kinds[name]
        entry = {"first": self._tokens([row.texts[0] for row in rows])}
        if kind != "single":
            entry["second"] = self._tokens([row.texts[1] for row in rows])
        if with_labels:
            entry["labels"] = labels_tensor(rows, torch.float32 if kind in SCORE_KINDS else torch.long)
        return entry

    def _tokens(self, texts: list[str]) -> dict[str, Tensor]:
        encoded = tokenize(self.encoder.tokenizer, texts, self.max_length, special_tokens_mask=False)
        return {key: encoded[key] for key in ENCODER_INPUTS if key in encoded}

    # ------------------------------------------------------------------------------------ outputs
    def features(self, tokens: dict[str, Tensor]) -> Tensor:
        """The shared layer over the encoder's pooled vector."""
        return self.shared(self.encoder(**tokens).pooled)

    def outputs(self, name: str, entry: dict) -> Tensor:
        """Logits (class tasks) or scores (scored pairs) of one task's entry."""
        first = self.features(entry["first"])
        if self.task_kinds[name] == "single":
            return self.heads[name](first)
        scores = self.heads[name](first, self.features(entry["second"]))
        return scores.squeeze(-1) if self.task_kinds[name] in SCORE_KINDS else scores

    def task_loss(self, name: str, entry: dict) -> Tensor:
        outputs = self.outputs(name, entry)
        if self.task_kinds[name] in SCORE_KINDS:
            return F.mse_loss(outputs.float(), entry["labels"].float())
        return F.cross_entropy(outputs.float(), entry["labels"])

    def forward(self, batch: dict) -> dict[str, Tensor]:
        losses = {name: self.task_loss(name, entry) for name, entry in batch.items()}
        if not (self.pcgrad and self.training and torch.is_grad_enabled()):
            return losses
        shared = [p for p in [*self.encoder.parameters(), *self.shared.parameters()] if p.requires_grad]
        specific = [p for p in self.heads.parameters() if p.requires_grad]
        weighted = [losses[name] * self.loss_weights[name] for name in losses]
        surrogate = pcgrad_surrogate(weighted, shared, specific, generator=self.generator)
        return {**{name: loss.detach() for name, loss in losses.items()}, "pcgrad": surrogate}

    @torch.no_grad()
    def predict(self, name: str, examples: Sequence[Example], batch_size: int = 64) -> np.ndarray:
        """Class ids or scores of one task's examples, in order, in eval mode."""
        was_training = self.training
        self.eval()
        device = next(self.parameters()).device
        predictions = []
        try:
            for start in range(0, len(examples), batch_size):
                entry = self.tokenize_task(name, examples[start : start + batch_size])
                entry = {part: {k: v.to(device) for k, v in tokens.items()} for part, tokens in entry.items()}
                outputs = self.outputs(name, entry).float()
                predictions.append(outputs if self.task_kinds[name] in SCORE_KINDS else outputs.argmax(dim=-1))
        finally:
            self.train(was_training)
        return torch.cat(predictions).cpu().numpy()


def make_evaluator(evaluation: dict[str, list[Example]], kinds: dict[str, str], batch_size: int = 64) -> Callable:
    """``method -> {"<task>_accuracy" | "<task>_pearson", "mean"}``, ×100 like every score of the library;
    ``mean`` is the course leaderboard's overall score: the accuracies and Pearson r mapped to (r + 1) / 2."""

    def evaluate(method: MultitaskMethod) -> dict[str, float]:
        metrics, normalised = {}, []
        for name, examples in evaluation.items():
            predictions = method.predict(name, examples, batch_size=batch_size)
            labels = [example.label for example in examples]
            if kinds[name] in SCORE_KINDS:
                r = pearson(predictions, labels)
                metrics[f"{name}_pearson"] = 100 * float(r)
                normalised.append(100 * (r + 1) / 2)
            else:
                value = accuracy(predictions, labels)
                metrics[f"{name}_accuracy"] = 100 * float(value)
                normalised.append(100 * value)
        metrics["mean"] = float(np.mean(normalised))
        return metrics

    return evaluate


# ---------------------------------------------------------------------------------------------- running
def build_encoder(config, args: MultitaskArgs):
    from contrastext.models.encoder import TextEncoder

    return TextEncoder.from_pretrained(
        resolve_model(config.model), pooling=args.pooling, max_seq_length=config.data.max_length
    )


def build(config, args: MultitaskArgs, data_root: Path | None) -> MethodBundle:
    """The method, all tasks' training examples (in task order) and the evaluator; see :func:`batch_sampler`."""
    data = load_multitask_data(config, args, data_root)
    method = MultitaskMethod(build_encoder(config, args), data.tasks, config.data.max_length, args)
    evaluator = make_evaluator(data.eval, method.task_kinds, batch_size=config.eval.batch_size)
    description = {"tasks": data.description, "sampling": "joint+pcgrad" if args.pcgrad else config.data.task_sampling}
    return MethodBundle(method, data.train, evaluator, final_report=lambda _method: description)


def task_sizes(examples: Sequence[TaskExample]) -> list[int]:
    """Examples per task, checking they are concatenated in task order (what the samplers assume)."""
    tasks = [example.task for example in examples]
    if tasks != sorted(tasks):
        raise ValueError("multitask training examples must be concatenated in task order")
    return [tasks.count(index) for index in range(max(tasks) + 1)]


def batch_sampler(config, args: MultitaskArgs, task_sizes: Sequence[int]):
    """Joint batches (PCGrad) or one task per batch ordered by ``data.task_sampling``."""
    train, data = config.train, config.data
    if args.pcgrad:
        return JointTaskBatchSampler(task_sizes, train.batch_size, config.train_seed, train.drop_last)
    return MultiTaskBatchSampler(
        task_sizes,
        train.batch_size,
        data.task_sampling,
        config.train_seed,
        temperature=data.task_temperature,
        weights=data.task_weights,
        drop_last=train.drop_last,
    )


def simcse_prestep(config, args: MultitaskArgs, encoder, examples: Sequence[Example], resume: bool) -> None:
    """A few unsupervised SimCSE steps on the distinct training sentences (encoder trained in place)."""
    from contrastext.methods.simcse import SimCSE
    from contrastext.objectives.infonce import InfoNCE
    from contrastext.training.trainer import Trainer

    sentences = list(dict.fromkeys(text for example in examples for text in example.texts))
    train = config.train.model_copy(
        update={"max_steps": args.simcse_steps, "epochs": None, "lr": args.simcse_lr,
                "batch_size": args.simcse_batch_size, "warmup_ratio": 0.0, "warmup_steps": None,
                "eval_every": None, "save_every": None, "metric_for_best": None, "early_stopping_patience": None}
    )
    pre_config = config.model_copy(update={"train": train, "output_dir": str(Path(config.output_dir) / "simcse-prestep")})
    method = SimCSE(encoder, InfoNCE(temperature=args.simcse_temperature), config.data.max_length,
                    supervised=False, gather=False)
    Trainer(method, [Example((sentence,)) for sentence in sentences], pre_config).train(resume=resume)


def run(config, args: MultitaskArgs, data_root: Path | None, resume: bool = False) -> dict:
    """(SimCSE pre-step,) then multi-task training with the task sampler; best weights' metrics in metrics.json."""
    bundle = seeded_build(build, config, args, data_root)
    if args.simcse_steps:
        simcse_prestep(config, args, bundle.method.encoder, bundle.train_examples, resume)
    bundle.batch_sampler = batch_sampler(config, args, task_sizes(bundle.train_examples))
    return run_training(config, bundle, resume=resume)


SPEC = MethodSpec(name="multitask", args_model=MultitaskArgs, build=build, run=run)
