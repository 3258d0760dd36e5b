"""One training stage of a recipe, and the helpers every protocol shares.

A recipe is one stage (SimCSE, gd, RECLAIM) or several (SCL's seeds, CAPT's pre-train → fine-tune,
multitask's SimCSE pre-step → multi-task training). Each stage is a :class:`MethodBundle` trained by
:func:`run_training`; protocols derive each stage's config with :func:`stage_config` and write their
summary with :func:`write_summary` (on the main process only).

Example::

    >>> pre = stage_config(config, "pretrain")                                   # same settings, own folder
    >>> tune = stage_config(config, "finetune-sst2", train={"max_steps": 200, **NO_EVAL_OR_SAVE})
    >>> summary = run_training(tune, seeded_build(build, tune, args, data_root))
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contrastext.data.examples import Example
from contrastext.runtime.processes import is_main_process
from contrastext.runtime.seeding import set_seed
from contrastext.training.config import TrainConfig
from contrastext.training.method import Method

METRICS_FILE = "metrics.json"

# A stage that only trains: no evaluation, no checkpoint selection, no intermediate checkpoints.
NO_EVAL_OR_SAVE: dict[str, Any] = {
    "eval_every": None,
    "save_every": None,
    "metric_for_best": None,
    "early_stopping_patience": None,
}


@dataclass
class MethodBundle:
    """Everything one training stage needs: the method, its data and how to evaluate it."""

    method: Method
    train_examples: list[Example]
    evaluator: Callable[[Method], dict[str, float]] | None
    final_report: Callable[[Method], dict] | None = None
    batch_sampler: Any = None  # optional: a sampler with ``batches(epoch)`` (multi-task sampling)


def stage_config(
    config: TrainConfig,
    subfolder: str | None = None,
    *,
    train: dict[str, Any] | None = None,
    data: dict[str, Any] | None = None,
    eval: dict[str, Any] | None = None,  # noqa: A002 - the config section's name
    **top: Any,
) -> TrainConfig:
    """A copy of ``config`` for one stage: section keys replaced, written under ``<output_dir>/<subfolder>``.

    A stage given ``max_steps`` runs exactly that many steps (its ``epochs`` are dropped unless given too).
    """
    update: dict[str, Any] = dict(top)
    if train:
        train = dict(train)
        if "max_steps" in train and "epochs" not in train:
            train["epochs"] = None
        update["train"] = config.train.model_copy(update=train)
    if data:
        update["data"] = config.data.model_copy(update=data)
    if eval:
        update["eval"] = config.eval.model_copy(update=eval)
    if subfolder is not None:
        update["output_dir"] = str(Path(config.output_dir) / subfolder)
    return config.model_copy(update=update)


def seeded_build(build: Callable[..., MethodBundle], config: TrainConfig, args, data_root: Path | None) -> MethodBundle:
    """``build(config, args, data_root)`` after seeding with the run's seed, so the parameters a method
    initialises when it is built (projection MLPs, heads, critics, memory banks) are the same for the same seed."""
    set_seed(config.train_seed)
    return build(config, args, data_root)


def write_summary(folder: str | Path, payload: dict, name: str = METRICS_FILE) -> Path:
    """Write ``payload`` as ``<folder>/<name>`` (JSON) on the main process; returns the path either way."""
    path = Path(folder) / name
    if is_main_process():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(payload, indent=2, sort_keys=True, default=str) + "\n", encoding="utf-8")
    return path


def finished_summary(folder: str | Path) -> dict | None:
    """The ``metrics.json`` of a stage that already finished in ``folder`` (None when there is none)."""
    path = Path(folder) / METRICS_FILE
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def run_training(config: TrainConfig, bundle: MethodBundle, resume: bool = False) -> dict:
    """One stage: build the Trainer, train, evaluate the best checkpoint, write metrics.json.

    Returns (and writes to ``<output_dir>/metrics.json``) ``{"method", "output_dir", "metric_for_best",
    "best_metric", "best_step", "last_step", "best_model_dir", "final_model_dir", "log_path", "metrics",
    "start_metrics", "report"}``: ``metrics`` is the evaluator's result on the best weights (the last weights
    when no checkpoint was ever best), ``report`` the bundle's ``final_report`` on them. After the run the
    method holds the best weights.
    """
    from contrastext.training.checkpoint import load_method_state
    from contrastext.training.trainer import Trainer

    trainer = Trainer(
        bundle.method, bundle.train_examples, config, evaluator=bundle.evaluator, batch_sampler=bundle.batch_sampler
    )
    result = trainer.train(resume=resume)
    reuse = result.best_step is not None and result.best_step == result.last_step and result.last_metrics
    if not reuse and result.best_checkpoint is not None:
        load_method_state(bundle.method, result.best_checkpoint)
    bundle.method.eval()
    if reuse:  # the last evaluation was of the best weights: no need to evaluate them again
        metrics = dict(result.last_metrics)
    else:
        metrics = dict(bundle.evaluator(bundle.method)) if bundle.evaluator is not None else {}
    report = dict(bundle.final_report(bundle.method)) if bundle.final_report is not None else {}
    summary = {
        "method": config.method,
        "output_dir": str(config.output_dir),
        "metric_for_best": config.train.metric_for_best,
        "best_metric": result.best_metric,
        "last_step": result.last_step,
        "best_step": result.best_step,
        "best_model_dir": _optional_str(result.best_model_dir),
        "final_model_dir": _optional_str(result.final_model_dir),
        "log_path": _optional_str(result.log_path),
        "metrics": metrics,
        "start_metrics": dict(result.start_metrics),
        "report": report,
    }
    write_summary(config.output_dir, summary)
    return summary


def _optional_str(value) -> str | None:
    return None if value is None else str(value)
