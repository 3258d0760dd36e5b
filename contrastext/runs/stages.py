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
import logging
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from contrastext.data.examples import Example
from contrastext.runtime.processes import is_main_process, rank_and_world_size
from contrastext.runtime.seeding import set_seed
from contrastext.training.config import TrainConfig
from contrastext.training.method import Method

METRICS_FILE = "metrics.json"
CLASSIFIER_DIR = "classifier"  # <output_dir>/classifier: the best weights as a Hugging Face classifier
CLASSIFIERS_DIR = "classifiers"  # <output_dir>/classifiers/<task>: a multi-task method's exportable heads
CARD_DATA_KEYS = ("task", "tasks", "path", "dataset", "columns", "split", "limit", "few_shot", "max_length")
"""The ``data`` keys a model card lists (those set), besides ``label_noise`` when it is not 0."""

logger = logging.getLogger("contrastext.runs")

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
    method_args: dict | None = None  # the resolved method_args (defaults included), kept in provenance.json


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


# The run's size: given with --set, each reaches every stage of a multi-stage recipe (CAPT's fine-tunings,
# multitask's SimCSE pre-step, SCL's seeds), unless the stage's own key (method_args.finetune_steps, ...) is
# given with --set too. A stage's own key from the recipe file gives way to the run's key from --set.
RUN_SIZE_KEYS = ("train.max_steps", "train.epochs", "data.limit", "eval.limit")


def run_length(config: TrainConfig) -> dict[str, Any] | None:
    """The run's length when ``train.max_steps`` or ``train.epochs`` came from ``--set``, as a stage's ``train``
    update (``{"max_steps": n, "epochs": None}`` or ``{"epochs": e, "max_steps": None}``, the one that
    :attr:`TrainConfig.length_from` says decides); None when neither came from ``--set``."""
    given = config.overridden_keys
    if "train.max_steps" not in given and "train.epochs" not in given:
        return None
    if config.length_from == "max_steps":
        return {"max_steps": config.train.max_steps, "epochs": None}
    return {"epochs": config.train.epochs, "max_steps": None}


def stage_length(config: TrainConfig, own: dict[str, Any], *own_keys: str) -> dict[str, Any]:
    """A stage's length: ``own`` (its ``train`` update from ``method_args.<own_keys>``), unless the run's length
    came from ``--set`` (:func:`run_length`) and none of ``method_args.<own_keys>`` did."""
    run = run_length(config)
    if run is None or any(f"method_args.{key}" in config.overridden_keys for key in own_keys):
        return own
    return run


def stage_limit(
    config: TrainConfig, own_key: str, own_value: int | None, run_key: Literal["data.limit", "eval.limit"]
) -> int | None:
    """A stage's row limit: ``own_value`` (``method_args.<own_key>``), unless ``run_key`` (``data.limit`` or
    ``eval.limit``) came from ``--set`` and ``method_args.<own_key>`` did not: then the run's value."""
    given = config.overridden_keys
    if f"method_args.{own_key}" in given or run_key not in given:
        return own_value
    return config.data.limit if run_key == "data.limit" else config.eval.limit


def seeded_build(build: Callable[..., MethodBundle], config: TrainConfig, args, data_root: Path | None) -> MethodBundle:
    """``build(config, args, data_root)`` after seeding with the run's seed, so the parameters a method
    initialises when it is built (projection MLPs, heads, critics, memory banks) are the same for the same seed.
    The bundle keeps ``args`` dumped (every key, defaults included) for the run's ``provenance.json``."""
    set_seed(config.train_seed)
    bundle = build(config, args, data_root)
    if isinstance(bundle, MethodBundle) and bundle.method_args is None and isinstance(args, BaseModel):
        bundle.method_args = args.model_dump(mode="json")
    return bundle


def write_summary(folder: str | Path, payload: dict, name: str = METRICS_FILE) -> Path:
    """Write ``payload`` as ``<folder>/<name>`` (JSON) on the main process; returns the path either way.

    The file holds ``world_size``: the payload's own (a stage's, from its trainer), else this process group's.
    """
    path = Path(folder) / name
    if is_main_process():
        payload = {"world_size": rank_and_world_size()[1], **payload}
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(payload, indent=2, sort_keys=True, default=str) + "\n", encoding="utf-8")
    return path


def finished_summary(folder: str | Path) -> dict | None:
    """The ``metrics.json`` of a stage that already finished in ``folder`` (None when there is none)."""
    path = Path(folder) / METRICS_FILE
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def run_training(config: TrainConfig, bundle: MethodBundle, resume: bool | str | Path = False) -> dict:
    """One stage: build the Trainer, train, evaluate the best checkpoint, write metrics.json.

    ``resume``: True continues the latest checkpoint in ``output_dir``; a checkpoint folder continues that one
    (another run's: into ``output_dir``, see :meth:`~contrastext.training.trainer.Trainer.train`).

    Returns (and writes to ``<output_dir>/metrics.json``) ``{"method", "output_dir", "metric_for_best",
    "best_metric", "best_step", "last_step", "best_model_dir", "final_model_dir", "log_path", "metrics",
    "start_metrics", "report", "world_size"}``: ``metrics`` is the evaluator's result on the best weights (the last weights
    when no checkpoint was ever best), ``report`` the bundle's ``final_report`` on them. After the run the
    method holds the best weights.

    Exports (:func:`export_outputs`, main process), as the method's ``classifier_export`` says
    (:class:`~contrastext.training.method.Method`): a method with ``export_classifier`` (SCL, RECLAIM, CAPT's
    fine-tuning) writes those weights as a Hugging Face classifier in ``<output_dir>/classifier``
    (``classifier_dir`` in the summary; ``classifier_error`` says why when its pooling has no exact export), a
    multi-task method its exportable heads in ``classifiers/<task>`` (``classifier_dirs``,
    ``classifiers_not_exported``); the README.md model cards of ``best/encoder``, ``final/encoder`` are rewritten
    with the recipe, the data and the metrics.
    """
    from contrastext.training.checkpoint import load_method_state
    from contrastext.training.trainer import Trainer

    trainer = Trainer(
        bundle.method, bundle.train_examples, config, evaluator=bundle.evaluator, batch_sampler=bundle.batch_sampler,
        method_args=getattr(bundle, "method_args", None),
    )
    result = trainer.train(resume=resume)
    # The last evaluation scored the final weights; they are the weights to report when they were the best or
    # when no checkpoint was ever best (metric_for_best null): no need to evaluate them again.
    final_scored = bool(result.last_metrics) and result.last_metrics_step == result.last_step
    best_is_final = result.best_step == result.last_step or result.best_checkpoint is None
    reuse = final_scored and best_is_final
    if not reuse and result.best_checkpoint is not None:
        load_method_state(bundle.method, result.best_checkpoint)
    bundle.method.eval()
    if reuse:
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
        "world_size": result.world_size,
    }
    if is_main_process():
        summary.update(export_outputs(config, bundle.method, summary, dict(result.last_metrics)))
    write_summary(config.output_dir, summary)
    return summary


def card_details(config: TrainConfig, summary: dict, method: Method | None = None) -> dict[str, Any]:
    """What a model card says about the run (:mod:`contrastext.models.model_card`'s ``details``): the base model,
    the recipe, the training data and settings, and the final metrics of the weights (best ones, plus the test
    metrics of a report that has them)."""
    data: dict[str, Any] = {}
    section = config.data.model_dump()  # the data keys a card shows, as far as the data section has them
    for key in CARD_DATA_KEYS:
        value = section.get(key)
        if value not in (None, [], {}, ""):
            data[key] = value if not isinstance(value, dict) else json.dumps(value, sort_keys=True)
    if section.get("label_noise"):
        data["label_noise"] = section["label_noise"]
    report = summary.get("report") or {}
    data.update({key: value for key, value in report.items() if isinstance(value, int | float | str) and key not in data})
    metrics = {**summary.get("metrics", {}), **(report.get("test_metrics") or {})}
    train = config.train
    training = {
        "lr": train.lr,
        "batch_size": train.batch_size,
        "max_steps": train.max_steps,
        "epochs": train.epochs,
        "seed": config.seed,
        "steps trained": summary.get("last_step"),
        "world size": summary.get("world_size"),  # processes that trained (torchrun / accelerate launch)
    }
    if method is not None and method.loss_weights:
        training["loss weights"] = json.dumps(dict(method.loss_weights), sort_keys=True)
    training.update({f"method_args.{key}": value for key, value in sorted(config.method_args.items())
                     if not isinstance(value, dict | list) or len(str(value)) < 80})
    best_step = summary.get("best_step")
    selected = config.train.metric_for_best
    note = (f"Metrics of the best weights (step {best_step}, selected by `{selected}`)." if best_step is not None
            else f"Metrics of the last weights (step {summary.get('last_step')}).")
    return {
        "base_model": config.model,
        "recipe": config.method,
        "recipe_file": config.source,
        "output_dir": str(config.output_dir),
        "data": data,
        "metrics": metrics,
        "metrics_note": note,
        "training": {key: value for key, value in training.items() if value is not None},
    }


def export_outputs(config: TrainConfig, method: Method, summary: dict, last_metrics: dict | None = None) -> dict:
    """The classifier export(s) of a finished stage and the rewritten model cards; the summary keys they add."""
    from contrastext.errors import ConfigError
    from contrastext.models.encoder import TextEncoder
    from contrastext.models.model_card import encoder_card, encoder_facts, write_card
    from contrastext.training.checkpoint import write_folder_atomically

    details = card_details(config, summary, method)
    added: dict[str, Any] = {}
    output_dir = Path(config.output_dir)
    if method.classifier_export == "one":
        try:
            folder = write_folder_atomically(
                output_dir / CLASSIFIER_DIR, lambda temporary: method.export_classifier(temporary, card=details)
            )
            added["classifier_dir"] = str(folder)
        except ConfigError as error:
            shutil.rmtree(output_dir / CLASSIFIER_DIR, ignore_errors=True)  # never an older run's export in its place
            logger.warning("no Hugging Face classifier exported: %s", error)
            added.update(classifier_dir=None, classifier_error=str(error))
    elif method.classifier_export == "per_task":
        exported: dict[str, Any] = {}

        def write(temporary: Path) -> None:
            done, skipped = method.export_classifiers(temporary, card=details)
            exported.update(done=done, skipped=skipped)

        folder = write_folder_atomically(output_dir / CLASSIFIERS_DIR, write)
        if not exported["done"]:
            shutil.rmtree(folder, ignore_errors=True)
        added["classifier_dirs"] = {name: str(output_dir / CLASSIFIERS_DIR / name) for name in exported["done"]}
        added["classifiers_not_exported"] = dict(exported["skipped"])
        for name, why in exported["skipped"].items():
            logger.warning("no Hugging Face classifier exported for task %s: %s", name, why)
    if isinstance(method.encoder, TextEncoder):  # a sentence-transformers folder with a README.md model card
        facts = encoder_facts(method.encoder)
        best, final = summary.get("best_model_dir"), summary.get("final_model_dir")
        if best and Path(best).is_dir():
            write_card(best, encoder_card(facts, details))
        if final and Path(final).is_dir():
            last = {**details, "metrics": dict(last_metrics or {}),
                    "metrics_note": f"Metrics of the last weights (step {summary.get('last_step')})."}
            write_card(final, encoder_card(facts, last))
    return added


def _optional_str(value) -> str | None:
    return None if value is None else str(value)
