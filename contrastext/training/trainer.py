"""The training loop, on Hugging Face Accelerate. It knows the ``Method`` contract and nothing else.

One optimiser step = ``train.grad_accumulation`` micro-batches of ``train.batch_size`` examples (global:
each process collates its slice). For every micro-batch the trainer

1. takes the next batch of the epoch's seeded order (:mod:`contrastext.data.sampling`),
2. gives the method a generator seeded by ``(seed, epoch, batch, process)`` and calls ``method.collate``,
3. calls ``method(batch) -> {part: loss}``, weights the parts (:func:`total_loss`) and back-propagates;

then clips the gradient norm, steps AdamW and the schedule, calls ``method.after_step()``, logs, evaluates
every ``eval_every`` steps (keeping the best weights by ``metric_for_best``, stopping early after
``early_stopping_patience`` evaluations without improvement) and checkpoints every ``save_every`` steps.
``eval_every`` / ``save_every`` set to ``epoch``: at the end of every epoch instead, i.e. the optimiser step
whose micro-batches take an epoch's last batch (:meth:`Trainer._epoch_ended`).

What the main process prints (above the progress bar, with ``tqdm.write``): ``world size N (backend, device)``
once per process (the first training of the process), and one line per evaluation, e.g.
``eval step 20/100: stsb_dev_spearman=0.7321 (best 0.7410 at step 10)``: the headline metric is
``metric_for_best`` (else ``score``, else the first metric), its best so far by ``greater_is_better``. Every
``train_log.jsonl`` record holds ``world_size``, and so does :class:`TrainResult` (hence ``metrics.json``).

Because batch order and views depend only on ``(seed, epoch, batch)`` and checkpoints hold the global RNG
states (dropout), a resumed run ends with exactly the weights of an uninterrupted one (on CPU).

Example::

    >>> trainer = Trainer(method, examples, load_config("recipes/simcse-unsup.yaml"), evaluator=sts_dev)
    >>> result = trainer.train()                 # or train(resume=True) after a crash
    >>> result.best_metric, result.best_model_dir
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from accelerate import Accelerator
from accelerate.state import AcceleratorState
from accelerate.utils import DistributedDataParallelKwargs, broadcast_object_list, send_to_device
from tqdm.auto import tqdm

from contrastext.data.examples import Example
from contrastext.errors import ConfigError, ContrastextError, CorruptFileError, MissingDataError
from contrastext.runtime.fingerprint import data_fingerprints
from contrastext.runtime.lock import run_lock
from contrastext.runtime.processes import describe_world, is_main_process
from contrastext.runtime.run_log import LOG_NAME, read_log
from contrastext.runtime.seeding import make_generator, set_seed
from contrastext.runtime.signals import PreemptionWatch, TrainingPreempted
from contrastext.training.batch_sampling import make_batch_sampler
from contrastext.training.checkpoint import (
    STATE_FILE,
    TrainerState,
    atomic_write_text,
    checkpoint_name,
    clean_stale_temporaries,
    latest_checkpoint,
    latest_intact_checkpoint,
    load_checkpoint,
    prune_checkpoints,
    save_checkpoint,
    save_method_state,
    verify_checkpoint,
    write_folder_atomically,
)
from contrastext.training.config import TrainConfig, dump_config
from contrastext.training.divergence import TOTAL, check_finite_step, check_finite_weights, nonfinite_reason
from contrastext.training.grad_cache import check_cache_chunk, trainer_step
from contrastext.training.logging import RunLogger
from contrastext.training.method import Method, total_loss
from contrastext.training.resume_check import (
    RESUME_FROM,
    check_new_folder,
    check_resume_config,
    check_resume_data,
    check_resume_state,
    data_inputs,
    resumes_in_place,
    run_folder_of,
)
from contrastext.training.run_record import RunRecord
from contrastext.training.schedules import optimizer_from_config, scheduler_from_config

logger = logging.getLogger("contrastext.training")
Evaluator = Callable[[Method], dict[str, float]]
_ANNOUNCED_WORLDS: set[str] = set()  # the world-size lines this process has printed (once each)


@dataclass
class TrainResult:
    """What a training produced and where it lies."""

    output_dir: Path
    last_step: int
    best_metric: float | None = None
    best_step: int | None = None
    best_checkpoint: Path | None = None  # folder with the best method.safetensors
    best_model_dir: Path | None = None  # the best encoder, exported with encoder.save
    final_model_dir: Path | None = None  # the last encoder, exported with encoder.save
    last_checkpoint: Path | None = None
    log_path: Path | None = None
    stopped_early: bool = False
    last_metrics: dict[str, float] = field(default_factory=dict)
    last_metrics_step: int | None = None  # the step whose weights last_metrics scored
    start_metrics: dict[str, float] = field(default_factory=dict)  # with train.eval_at_start
    world_size: int = 1  # how many processes trained


def resolve_mixed_precision(setting: str) -> str:
    """``auto`` -> bf16 on a CUDA GPU that supports it, fp16 on other CUDA GPUs, ``no`` without CUDA."""
    cuda = torch.cuda.is_available()
    if setting == "auto":
        if not cuda:
            return "no"
        return "bf16" if torch.cuda.is_bf16_supported() else "fp16"
    if setting == "fp16" and not cuda:
        raise ConfigError("train.mixed_precision=fp16 needs a CUDA GPU; use 'no', 'bf16' or 'auto'")
    return setting


def forget_other_precision(mixed_precision: str) -> None:
    """Let this run use ``mixed_precision`` after an earlier run of the process used another one.

    Accelerate keeps one ``AcceleratorState`` per process and refuses an ``Accelerator`` whose mixed precision
    differs from the first one's ("AcceleratorState has already been initialized and cannot be changed"), so a
    second training in the same process (a notebook, a script that trains twice) with another
    ``train.mixed_precision`` failed. That state is cleared then; the process group (``PartialState``) is kept.
    """
    state = AcceleratorState._shared_state
    if state and state.get("_mixed_precision", mixed_precision) != mixed_precision:
        AcceleratorState._reset_state()


@dataclass
class _Run:
    """Everything one call of :meth:`Trainer.train` works with, passed between its named steps."""

    accelerator: Accelerator
    model: torch.nn.Module  # the method as Accelerate wraps it (DDP with several processes)
    method: Method
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    log: RunLogger
    state: TrainerState
    result: TrainResult
    total_steps: int
    last_checkpoint: Path | None = None
    stream: Iterator[tuple[int, int, list[int]]] | None = None
    skipped_nonfinite: int = 0  # steps dropped under train.on_nonfinite=skip
    headline_best: tuple[int, float] | None = None  # (step, value) of the printed metric without metric_for_best
    epochs_done: int = 0  # epochs whose last batch has been trained on
    epoch_ended: bool = False  # the step just taken finished an epoch (eval_every / save_every = epoch)
    data_fingerprint: dict | None = None  # of the data inputs at the start, written into every checkpoint
    part_grad_norms: dict[str, float] = field(default_factory=dict)  # train.part_grad_norms: this step's, to log

    def __post_init__(self) -> None:
        self.best_folder = self.result.output_dir / "best"

    @property
    def main(self) -> bool:
        return self.accelerator.is_main_process

    @property
    def is_last(self) -> bool:
        return self.state.step == self.total_steps


def part_gradient_norms(model: torch.nn.Module, parts: dict, weights: dict[str, float] | None) -> dict[str, float]:
    """The norm of each weighted loss part's gradient alone, over the trainable parameters (``autograd.grad``
    with the graph kept for the step's own backward; a part weighted 0, or with no gradient, is 0)."""
    parameters = [p for p in model.parameters() if p.requires_grad]
    norms = {}
    for name, value in parts.items():
        weight = (weights or {}).get(name, 1.0)
        if not weight or not value.requires_grad:
            norms[name] = 0.0
            continue
        grads = torch.autograd.grad(weight * value, parameters, retain_graph=True, allow_unused=True)
        found = [g.detach().float().norm() for g in grads if g is not None]
        norms[name] = float(torch.linalg.vector_norm(torch.stack(found))) if found else 0.0
    return norms


def check_output_dir_is_free(config: TrainConfig) -> None:
    """Refuse a fresh run in a folder that holds a run (a log or checkpoints, at any depth: stages write into
    subfolders) unless ``train.overwrite``. Cheap: callers run it before loading any model."""
    output_dir = Path(config.output_dir)
    if config.train.overwrite or not output_dir.is_dir():
        return
    previous = next(output_dir.rglob(LOG_NAME), None) or latest_checkpoint(output_dir)
    if previous is not None:
        raise ConfigError(
            f"{output_dir} already holds a run ({previous}): resume it with --resume, choose another "
            "output folder, or set train.overwrite=true to replace it"
        )


def apply_speed_settings(method: Method, unpad: bool, compile: bool, gradient_checkpointing: bool = False) -> None:
    """``train.unpad``, ``train.compile`` and ``train.gradient_checkpointing`` applied to the method's encoder.

    ``unpad`` sets the encoder's ``unpad`` switch (``MethodEncoder.unpad``: a ``TextEncoder``'s packed forward);
    ``compile`` compiles the encoder in place (``nn.Module.compile``: attributes, ``state_dict`` and ``save``
    unchanged) with dynamic shapes, since every batch has its own length; ``gradient_checkpointing`` calls the
    method's :meth:`~contrastext.training.method.Method.enable_gradient_checkpointing` before that.
    """
    encoder = method.encoder
    encoder.unpad = unpad
    if gradient_checkpointing:
        method.enable_gradient_checkpointing()
        if unpad:
            logger.info("train.gradient_checkpointing: the encoder takes the padded forward (train.unpad does "
                        "not apply with gradient checkpointing)")
    if compile:
        encoder.compile(dynamic=True)


def check_resume_matches(config: TrainConfig) -> None:
    """Refuse ``--resume`` with a config that differs from the latest checkpoint's (keys named), an invalid
    ``trainer_state.json`` (schema, a step past ``train.max_steps``) or changed data (unless allowed), before any
    model is loaded. Cheap: reads small files and hashes at most 2 MiB per data file; the trainer checks again
    the checkpoint it really resumes."""
    folder = latest_checkpoint(Path(config.output_dir))
    saved = folder / "config.yaml" if folder is not None else None
    if saved is not None and saved.is_file():
        check_resume_config(saved.read_text(encoding="utf-8"), config, str(folder))
    if folder is None:
        return
    try:
        check_resume_state(folder, config)
        check_resume_data(folder, config, announce=False)
    except CorruptFileError:
        if verify_quietly(folder):
            raise  # intact by its manifest, yet invalid: forged or written wrong
        # damaged after the fact: the trainer skips it with a warning and resumes an older intact checkpoint


def verify_quietly(folder: Path) -> bool:
    """Whether ``folder`` passes :func:`verify_checkpoint` (sizes and SHA-256 against its manifest)."""
    try:
        verify_checkpoint(folder)
    except ContrastextError:
        return False
    return True


class Trainer:
    """Trains a :class:`~contrastext.training.method.Method` on a list of examples (see module docstring).

    ``batch_sampler`` (optional) is any object with ``batches(epoch) -> list[list[int]]`` that is a pure
    function of the epoch, e.g. :class:`~contrastext.data.sampling.MultiTaskBatchSampler`.

    ``method_args`` (optional): the recipe's method_args as its own model resolved them (defaults included),
    kept in the run's ``provenance.json`` (:mod:`contrastext.training.run_record`) beside ``config.yaml``.
    """

    def __init__(
        self,
        method: Method,
        train_examples: Sequence[Example],
        config: TrainConfig,
        evaluator: Evaluator | None = None,
        batch_sampler=None,
        method_args: dict | None = None,
    ) -> None:
        if not train_examples:
            raise ConfigError(
                f"{config.source or '<config>'}: no training examples (check data.task / data.path)"
            )
        self.method = method
        # a list, or a sequence read a batch at a time (data.storage: columns), kept as it is
        self.examples = train_examples if isinstance(train_examples, Sequence) else list(train_examples)
        self.config = config
        self.evaluator = evaluator
        self.output_dir = Path(config.output_dir)
        self.seed = config.train_seed
        self.batch_sampler = batch_sampler or self._default_sampler()
        self.record = RunRecord(self.output_dir, method_args)  # provenance.json (run_record.py)
        check_cache_chunk(method, config)  # train.cache_chunk needs a method with cached gradients

    def _default_sampler(self):
        """``data.batch_sampler`` / ``train.group_by_length`` (:mod:`contrastext.training.batch_sampling`)."""
        return make_batch_sampler(self.config, self.examples, self.seed)

    def total_steps(self) -> int:
        """Optimiser steps of the run: ``max_steps`` or what ``epochs`` give, as ``TrainConfig.length_from``
        says (``max_steps`` when set, unless only ``epochs`` came from ``--set``); the other is not used."""
        train = self.config.train
        if self.config.length_from == "max_steps":
            if train.epochs is not None:
                logger.info("train.max_steps=%d sets the length; train.epochs=%s is not used",
                            train.max_steps, train.epochs)
            return train.max_steps
        per_epoch = len(self.batch_sampler.batches(0))
        steps = int(train.epochs * per_epoch // train.grad_accumulation)
        if train.max_steps is not None:
            logger.info("train.epochs=%s (--set) sets the length; train.max_steps=%d is not used",
                        train.epochs, train.max_steps)
        if steps < 1:
            raise ConfigError(
                f"{self.config.source or '<config>'}: train.epochs={train.epochs} gives no optimiser step "
                f"({len(self.examples)} examples, batch_size {train.batch_size}, "
                f"grad_accumulation {train.grad_accumulation})"
            )
        return steps

    # ----------------------------------------------------------------------------------------------
    def _stream(self, epoch: int, index: int) -> Iterator[tuple[int, int, list[int]]]:
        """(epoch, batch index, example indices) from a position onwards, epoch after epoch."""
        while True:
            batches = self.batch_sampler.batches(epoch)
            if not batches:
                raise ConfigError("the batch sampler returned no batch for an epoch")
            while index < len(batches):
                yield epoch, index, batches[index]
                index += 1
            epoch, index = epoch + 1, 0

    def train(self, resume: bool | str | os.PathLike = False) -> TrainResult:
        """Run the training; ``resume=True`` continues from the latest checkpoint (or a given folder).

        A given checkpoint folder of another run (``resume_from_checkpoint``) continues into ``output_dir``, which
        must not hold a run (unless ``train.overwrite``) nor overlap that run; the run's log up to the checkpoint
        and its ``best/`` are copied (:func:`adopt_history`); the source is only read.

        The main process holds ``output_dir``'s lock (:mod:`contrastext.runtime.lock`) for the whole run: a second
        run into the folder is refused naming this one's pid (a run of :func:`~contrastext.runs.registry.run_recipe`
        holds it already, at its top folder).

        SIGTERM while it trains (:class:`~contrastext.runtime.signals.PreemptionWatch`, main thread only, the
        previous handler put back at the end) finishes the step, saves a checkpoint (main process) and raises
        :class:`~contrastext.runtime.signals.TrainingPreempted`; ``train(resume=True)`` continues from it."""
        main = is_main_process()
        with run_lock(self.output_dir) if main else nullcontext(), PreemptionWatch(announce=main) as watch:
            return self._train(resume, watch)

    def _train(self, resume, watch: PreemptionWatch | None = None) -> TrainResult:
        run = self._prepare(resume)
        self._evaluate_start(run)
        progress = tqdm(
            total=run.total_steps,
            initial=run.state.step,
            disable=not (run.main and self.config.train.progress_bar),
            desc="train",
        )
        window = _Window()
        while run.state.step < run.total_steps and not run.state.stopped_early:
            parts, samples, grad_norm = self._step(run)
            run.state.step += 1
            run.state.samples_seen += samples
            run.method.after_step()
            run.epoch_ended = self._epoch_ended(run)
            window.add(parts, samples)
            progress.update(1)
            rate = window.rate()  # before evaluation and checkpointing
            shown = {("loss" if k == TOTAL else k): f"{v:.4f}" for k, v in parts.items()}
            progress.set_postfix({**shown, "samples/s": f"{rate:.1f}"})
            metrics = self._evaluate_if_due(run)
            if self._log_if_due(run, window, rate, grad_norm, metrics):
                window = _Window()
            if self._checkpoint_if_due(run):
                window.restart_clock()
            if watch is not None and self._stop_requested(run, watch):
                progress.close()
                self._stop_preempted(run)
        progress.close()
        return self._finish(run)

    def _stop_requested(self, run: _Run, watch: PreemptionWatch) -> bool:
        """Whether a process got SIGTERM; under a launcher every process learns it at the same step (one small
        all-reduce per step), so they all stop together."""
        requested = watch.requested
        if run.accelerator.num_processes > 1:
            flag = torch.tensor([1.0 if requested else 0.0], device=run.accelerator.device)
            requested = bool(run.accelerator.reduce(flag, "sum").item() > 0)
        return requested

    def _stop_preempted(self, run: _Run) -> None:
        """SIGTERM: save this step's checkpoint (unless it was just saved), close the log, raise TrainingPreempted."""
        folder = run.last_checkpoint
        if folder is None or folder.name != checkpoint_name(run.state.step):
            self._save_checkpoint(run)
        if run.main:
            self.record.end(run.state.step, preempted=True)
        run.accelerator.wait_for_everyone()
        run.log.close()
        checkpoint = self.output_dir / "checkpoints" / checkpoint_name(run.state.step)
        raise TrainingPreempted(run.state.step, run.total_steps, checkpoint, self.output_dir)

    # ----------------------------------------------------------------------------------------------
    def _prepare(self, resume) -> _Run:
        """Accelerator, optimiser and schedule; the output folder claimed (before anything is written in it),
        the config written, the state fresh or resumed, and the method told how many steps there are."""
        train = self.config.train
        elsewhere = resume not in (False, True) and not resumes_in_place(resume, self.output_dir)
        if elsewhere:  # another run's checkpoint into a new folder: never one that overlaps that run
            check_new_folder(Path(resume), self.output_dir)
        mixed_precision = resolve_mixed_precision(train.mixed_precision)
        forget_other_precision(mixed_precision)
        accelerator = Accelerator(
            cpu=not torch.cuda.is_available(),
            mixed_precision=mixed_precision,
            # Methods may leave parameters out of a step's graph (the unused BERT pooler under [CLS] pooling,
            # a projection used at training only, a task head absent from a batch): DDP must not wait for them.
            kwargs_handlers=[DistributedDataParallelKwargs(find_unused_parameters=True)],
        )
        main = accelerator.is_main_process
        if main:
            announce_world(accelerator)
        total_steps = self.total_steps()
        method = self.method
        method.train()
        apply_speed_settings(method, train.unpad, train.compile, train.gradient_checkpointing)
        optimizer = optimizer_from_config(method, train)
        scheduler = scheduler_from_config(optimizer, train, total_steps)
        model, optimizer = accelerator.prepare(method, optimizer)
        method = accelerator.unwrap_model(model)
        run_log = RunLogger(
            self.output_dir, report_to=train.report_to, enabled=main, config=self.config.model_dump(mode="json")
        )
        if not resume or elsewhere:
            self._claim_output_dir(run_log)
        if main:
            clean_stale_temporaries(self.output_dir)
        state = self._start(resume, method, optimizer, scheduler, accelerator.scaler, run_log, total_steps)
        if main:  # only once the run is accepted: a refused run changes nothing on disk
            self.output_dir.mkdir(parents=True, exist_ok=True)
            atomic_write_text(self.output_dir / "config.yaml", dump_config(self.config))
        method.on_train_start(total_steps)
        result = TrainResult(output_dir=self.output_dir, last_step=state.step, log_path=run_log.path,
                             world_size=accelerator.num_processes)
        run = _Run(accelerator, model, method, optimizer, scheduler, run_log, state, result, total_steps)
        if main:  # recorded at the start, written into every checkpoint, compared by a resume
            run.data_fingerprint = data_fingerprints(data_inputs(self.config))
            self.record.start(state.step, run.data_fingerprint, fresh=not resume or elsewhere)
        run.stream = self._stream(state.epoch, state.batch_index)
        if self._by_epoch():
            run.epochs_done = self._completed_epochs(state)
        return run

    def _by_epoch(self) -> bool:
        return "epoch" in (self.config.train.eval_every, self.config.train.save_every)

    def _completed_epochs(self, state: TrainerState) -> int:
        """Epochs whose last batch has been trained on, from the position of the next batch."""
        finished = state.batch_index >= len(self.batch_sampler.batches(state.epoch))
        return state.epoch + (1 if finished else 0)

    def _epoch_ended(self, run: _Run) -> bool:
        """Whether the step just taken finished an epoch (only worked out when ``epoch`` cadences ask for it)."""
        if not self._by_epoch():
            return False
        done = self._completed_epochs(run.state)
        ended, run.epochs_done = done > run.epochs_done, done
        return ended

    def _due(self, every: int | str | None, run: _Run) -> bool:
        """An ``eval_every`` / ``save_every`` cadence: every N steps, or ``epoch``: the step that ended one."""
        if every == "epoch":
            return run.epoch_ended
        return bool(every) and run.state.step % every == 0

    def _evaluate_start(self, run: _Run) -> None:
        """With ``train.eval_at_start``, the starting point for the curves: logged at step 0, never a
        candidate for the best checkpoint."""
        if run.state.step != 0 or not self.config.train.eval_at_start or self.evaluator is None:
            return
        start_metrics = self._evaluate(run.method, run.accelerator)
        run.log.log({"step": 0, "epoch": 0, "world_size": run.accelerator.num_processes,
                     **{f"eval/{k}": v for k, v in start_metrics.items()}})
        run.result.start_metrics = start_metrics
        if run.main and self.config.train.progress_bar:
            tqdm.write("step 0 (start): " + ", ".join(f"{k}={v:.4f}" for k, v in start_metrics.items()))

    def _evaluate_if_due(self, run: _Run) -> dict[str, float]:
        """Evaluate every ``eval_every`` steps (or epoch) and at the last step; export the weights when best."""
        train = self.config.train
        due = self._due(train.eval_every, run) or run.is_last
        if self.evaluator is None or not due:
            return {}
        metrics = self._evaluate(run.method, run.accelerator)
        run.result.last_metrics = metrics
        run.result.last_metrics_step = run.state.step
        if self._update_best(metrics, run.state) and run.main:
            check_finite_weights(run.method, run.state.step, "best/")
            self._export_best(run.method, run.best_folder, run.state)
            run.result.best_checkpoint = run.best_folder
        if run.main and metrics:
            tqdm.write(self._evaluation_line(run, metrics))
        return metrics

    def _evaluation_line(self, run: _Run, metrics: dict[str, float]) -> str:
        """``eval step S/T: <headline>=V (best B at step s)``: the headline metric is ``metric_for_best`` (its best
        is the trainer's), else ``score``, else the first metric (its best tracked here)."""
        train, state = self.config.train, run.state
        name = next(key for key in (train.metric_for_best, "score", *metrics) if key in metrics)
        value = metrics[name]
        if name == train.metric_for_best and state.best_step is not None:
            best_step, best = state.best_step, state.best_metric
        else:
            previous = run.headline_best
            better = previous is None or (value > previous[1] if train.greater_is_better else value < previous[1])
            run.headline_best = (state.step, value) if better else previous
            best_step, best = run.headline_best
        return f"eval step {state.step}/{run.total_steps}: {name}={value:.4f} (best {best:.4f} at step {best_step})"

    def _logs_step(self, run: _Run, step: int) -> bool:
        """Whether ``step`` is logged whatever its evaluation: every ``log_every`` steps, and the last."""
        return step % self.config.train.log_every == 0 or step == run.total_steps

    def _log_if_due(self, run: _Run, window: _Window, rate: float, grad_norm, metrics: dict) -> bool:
        """Write the window's means every ``log_every`` steps (and on evaluations, the last step, a stop)."""
        state = run.state
        if not (state.step % self.config.train.log_every == 0 or metrics or run.is_last or state.stopped_early):
            return False
        record = {
            "step": state.step,
            "epoch": state.epoch,
            "world_size": run.accelerator.num_processes,
            **window.summary(rate),
            "lr": run.scheduler.get_last_lr()[0],
        }
        if self.config.train.head_lr is not None:  # the heads' groups come after the encoder's
            record["head_lr"] = run.scheduler.get_last_lr()[-1]
        if grad_norm is not None:
            record["grad_norm"] = grad_norm
        if run.part_grad_norms:  # measured on this step (train.part_grad_norms)
            record.update({f"grad_norm/{name}": value for name, value in run.part_grad_norms.items()})
            run.part_grad_norms = {}
        if run.skipped_nonfinite:
            record["skipped_nonfinite"] = run.skipped_nonfinite
        record.update({f"eval/{name}": value for name, value in metrics.items()})
        run.log.log(record)
        return True

    def _checkpoint_if_due(self, run: _Run) -> bool:
        """Save a checkpoint every ``save_every`` steps (or epoch), at the last step and on an early stop."""
        train, state = self.config.train, run.state
        if not (self._due(train.save_every, run) or run.is_last or state.stopped_early):
            return False
        self._save_checkpoint(run)
        return True

    def _save_checkpoint(self, run: _Run) -> None:
        """The checkpoint of this step (main process; the others wait), with the data fingerprint; older ones
        pruned to ``train.keep_last``."""
        run.accelerator.wait_for_everyone()
        check_finite_weights(run.method, run.state.step, "the checkpoint")
        if run.main:
            run.last_checkpoint = save_checkpoint(
                self.output_dir,
                run.method,
                run.optimizer,
                run.scheduler,
                run.state,
                dump_config(self.config),
                scaler=run.accelerator.scaler,
                data_fingerprint=run.data_fingerprint,
            )
            prune_checkpoints(self.output_dir, self.config.train.keep_last)

    def _finish(self, run: _Run) -> TrainResult:
        """Close the log, fill in the result and export the final encoder."""
        run.log.close()
        run.accelerator.wait_for_everyone()
        result, state = run.result, run.state
        result.last_step = state.step
        result.best_metric, result.best_step = state.best_metric, state.best_step
        result.stopped_early = state.stopped_early
        result.last_checkpoint = run.last_checkpoint or latest_checkpoint(self.output_dir)
        if run.best_folder.is_dir() and state.best_step is not None:
            result.best_checkpoint = run.best_folder
            encoder_dir = run.best_folder / "encoder"
            result.best_model_dir = encoder_dir if encoder_dir.is_dir() else None
        if run.main:
            check_finite_weights(run.method, state.step, "final/")
            final = self.output_dir / "final"
            write_folder_atomically(final, lambda folder: run.method.encoder.save(folder / "encoder"))
            result.final_model_dir = final / "encoder"
            self.record.end(state.step)
        return result

    # ----------------------------------------------------------------------------------------------
    def _start(
        self, resume, method, optimizer, scheduler, scaler, run_log: RunLogger, total_steps: int | None = None
    ) -> TrainerState:
        """A fresh state (and seeds), or the one of the checkpoint to resume from (RNG states last), after checking
        its data fingerprints against the data read now and its trainer state against ``total_steps``."""
        if not resume:
            set_seed(self.seed)
            return TrainerState()
        if resume is True:
            folder = latest_intact_checkpoint(self.output_dir)
            if folder is None:
                logger.warning("no checkpoint in %s: starting from scratch", self.output_dir)
                run_log.truncate_after(-1)  # the log of steps that no checkpoint kept would repeat them
                set_seed(self.seed)
                return TrainerState()
        else:
            folder = Path(resume)
            if not folder.is_dir():
                raise MissingDataError(f"no checkpoint folder at {folder}")
        saved_config = folder / "config.yaml"
        if saved_config.is_file():
            flag = "--resume" if resumes_in_place(folder, self.output_dir) else RESUME_FROM
            check_resume_config(saved_config.read_text(encoding="utf-8"), self.config, str(folder), flag=flag)
        check_resume_data(folder, self.config, flag="--resume" if resumes_in_place(folder, self.output_dir)
                          else RESUME_FROM)
        state = load_checkpoint(folder, method, optimizer, scheduler, scaler, total_steps=total_steps)
        if run_log.enabled and not resumes_in_place(folder, self.output_dir):
            adopt_history(run_folder_of(folder), self.output_dir, state)
        run_log.truncate_after(state.step)
        logger.info("resuming from %s (step %d)", folder, state.step)
        return state

    def _claim_output_dir(self, run_log: RunLogger) -> None:
        """A fresh run: refuse to mix with a run already in ``output_dir`` unless ``train.overwrite``."""
        previous = latest_checkpoint(self.output_dir) or (run_log.path if run_log.path.exists() else None)
        if previous is None:
            return
        check_output_dir_is_free(self.config)
        if run_log.enabled:  # the main process clears the old run
            for name in ("checkpoints", "best", "final"):
                shutil.rmtree(self.output_dir / name, ignore_errors=True)
            run_log.truncate_after(-1)

    def _step(self, run: _Run):
        """One optimiser step over ``grad_accumulation`` micro-batches; returns (mean parts, samples, norm)."""
        train = self.config.train
        model, method, optimizer, accelerator, state = run.model, run.method, run.optimizer, run.accelerator, run.state
        rank, world = accelerator.process_index, accelerator.num_processes
        sums: dict[str, float] = {}
        samples = 0
        for micro in range(train.grad_accumulation):
            epoch, index, indices = next(run.stream)
            mine = indices[rank::world]
            take = getattr(self.examples, "take", None)  # a column store reads a batch's rows at once
            local = take(mine) if take is not None else [self.examples[i] for i in mine]
            samples += len(indices)
            method.set_generator(make_generator(self.seed, epoch, index, rank))
            batch = send_to_device(method.collate(local), accelerator.device)
            is_last = micro == train.grad_accumulation - 1
            sync = accelerator.no_sync(model) if not is_last and world > 1 else nullcontext()
            with sync:
                if train.cache_chunk is not None:  # GradCache: chunked embedding, gradients averaged at the end
                    parts, loss = trainer_step(model, method, batch, train.cache_chunk, accelerator,
                                               train.grad_accumulation, last_micro_batch=is_last)
                else:
                    parts = model(batch)
                    loss = total_loss(parts, method.loss_weights)
                    if train.part_grad_norms and self._logs_step(run, state.step + 1):
                        run.part_grad_norms = part_gradient_norms(model, parts, method.loss_weights)
                    accelerator.backward(loss / train.grad_accumulation)
            for name, value in {**parts, TOTAL: loss}.items():  # kept on the device: no sync per part
                sums[name] = sums.get(name, 0.0) + value.detach().float().reshape(()) / train.grad_accumulation
            state.epoch, state.batch_index = epoch, index + 1
        # The norm is needed to catch a non-finite gradient: without clipping it is measured, never applied.
        max_norm = train.grad_clip if train.grad_clip is not None else float("inf")
        norm = torch.as_tensor(accelerator.clip_grad_norm_(model.parameters(), max_norm))
        # One transfer to the host per step, for the parts, the total and the norm together (the non-finite
        # check and the progress bar need them at every step).
        values = torch.stack([*sums.values(), norm.to(device=loss.device, dtype=torch.float32)]).tolist()
        sums, grad_norm = dict(zip(sums, values[:-1], strict=True)), values[-1]
        scaled = accelerator.scaler is not None  # fp16: the loss scaler handles infinite gradients itself
        if nonfinite_reason(sums, grad_norm, check_gradient=not scaled) is not None:
            if train.on_nonfinite == "stop":
                check_finite_step(state.step + 1, sums, grad_norm, check_gradient=not scaled)
            optimizer.zero_grad(set_to_none=True)  # skip: drop this step's gradients, no optimiser step
            run.skipped_nonfinite += 1
            logger.warning("step %d: non-finite loss or gradient, step skipped (train.on_nonfinite=skip)",
                           state.step + 1)
            return sums, samples, grad_norm
        optimizer.step()
        if not accelerator.optimizer_step_was_skipped:
            run.scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        return sums, samples, (grad_norm if train.grad_clip is not None else None)

    def _evaluate(self, method, accelerator) -> dict[str, float]:
        metrics: dict[str, float] = {}
        if accelerator.is_main_process:
            method.eval()
            metrics = {name: float(value) for name, value in self.evaluator(method).items()}
            method.train()
        if accelerator.num_processes > 1:
            metrics = broadcast_object_list([metrics])[0]
        return metrics

    def _update_best(self, metrics: dict[str, float], state: TrainerState) -> bool:
        """Record the metric; True when it is the best so far. Counts evaluations for early stopping."""
        train = self.config.train
        name = train.metric_for_best
        if name is None or not metrics:
            return False
        if name not in metrics:
            raise ConfigError(
                f"{self.config.source or '<config>'}: train.metric_for_best={name!r} is not among the "
                f"evaluator's metrics: {', '.join(sorted(metrics))}"
            )
        value = metrics[name]
        best = state.best_metric
        improved = best is None or (value > best if train.greater_is_better else value < best)
        if improved:
            state.best_metric, state.best_step, state.evals_without_improvement = value, state.step, 0
            return True
        state.evals_without_improvement += 1
        patience = train.early_stopping_patience
        if patience is not None and state.evals_without_improvement >= patience:
            state.stopped_early = True
            logger.info(
                "early stopping at step %d: %s did not improve for %d evaluations", state.step, name, patience
            )
        return False

    def _export_best(self, method, folder: Path, state: TrainerState) -> None:
        """Best weights (method state + the encoder's own folder when it can ``save``), atomically."""

        def write(temporary: Path) -> None:
            save_method_state(method, temporary)
            (temporary / STATE_FILE).write_text(json.dumps(asdict(state), indent=2) + "\n", encoding="utf-8")
            method.encoder.save(temporary / "encoder")

        write_folder_atomically(folder, write)


def adopt_history(source: Path, output_dir: Path, state: TrainerState) -> None:
    """Resuming another run's checkpoint into ``output_dir``: copy what that run wrote up to the checkpoint's step,
    so the new folder reads as the uninterrupted run would: its log (records up to the step; ``plot`` draws the
    whole curve) and its ``best/`` when that still holds the checkpoint's best step (else a warning: the best
    weights of the source are newer than the checkpoint, and only a better evaluation fills ``best/``).
    The source is only read."""
    output_dir.mkdir(parents=True, exist_ok=True)
    log = source / LOG_NAME
    if log.is_file():
        kept = [record for record in read_log(log) if record["step"] <= state.step]
        atomic_write_text(output_dir / LOG_NAME, "".join(json.dumps(record) + "\n" for record in kept))
    if state.best_step is None:
        return
    best = source / "best"
    try:
        best_step = json.loads((best / STATE_FILE).read_text(encoding="utf-8")).get("best_step")
    except (OSError, ValueError, AttributeError):
        best_step = None
    if best_step == state.best_step:
        write_folder_atomically(output_dir / "best", lambda folder: shutil.copytree(best, folder, dirs_exist_ok=True))
    else:
        logger.warning(
            "%s does not hold the checkpoint's best weights (step %s): %s/best is written only when an evaluation "
            "beats them", best, state.best_step, output_dir,
        )


def announce_world(accelerator: Accelerator) -> None:
    """Print ``world size N (backend, device)`` (:func:`~contrastext.runtime.processes.describe_world`) the first
    time this process trains with that world; the caller prints on the main process only."""
    device = accelerator.device
    shown = device.type
    if device.type == "cuda":
        shown = f"cuda: {torch.cuda.get_device_name(device)}"
    line = describe_world(accelerator.num_processes, accelerator.state.backend, shown)
    if line not in _ANNOUNCED_WORLDS:
        _ANNOUNCED_WORLDS.add(line)
        tqdm.write(line)


class _Window:
    """Loss parts and throughput averaged over the steps since the last log line."""

    def __init__(self) -> None:
        self.sums: dict[str, float] = {}
        self.steps = 0
        self.samples = 0
        self.start = time.perf_counter()

    def add(self, parts: dict[str, float], samples: int) -> None:
        for name, value in parts.items():
            self.sums[name] = self.sums.get(name, 0.0) + value
        self.steps += 1
        self.samples += samples

    def rate(self) -> float:
        return self.samples / max(time.perf_counter() - self.start, 1e-9)

    def restart_clock(self) -> None:
        self.start, self.samples = time.perf_counter(), 0

    def summary(self, rate: float) -> dict[str, float]:
        means = {name: value / max(self.steps, 1) for name, value in self.sums.items()}
        record = {"loss": means.pop(TOTAL, float("nan"))}
        record.update({f"loss/{name}": value for name, value in means.items()})
        record["samples_per_s"] = rate
        return record
