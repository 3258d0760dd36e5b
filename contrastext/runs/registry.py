"""The recipe registry: a recipe's name (``method:`` in its YAML) -> the :class:`RunSpec` that builds (and
optionally runs) it.

``RECIPES`` is a :class:`~contrastext.runtime.registry.Registry`, the one shape of every registry of the library:
tasks (``TASKS``, :mod:`contrastext.data.tasks`), views (``VIEWS``, :mod:`contrastext.data.views`), searches
(``SEARCHES``, :mod:`contrastext.negatives.search`), objectives (``OBJECTIVES``,
:mod:`contrastext.objectives.registry`) and these recipes. Each answers ``names()``, ``name in``, ``get(name)``
(UnknownNameError ``unknown recipe 'x'; known recipes: ...``), ``check(name, key)`` (a ConfigError naming the
config key) and ``register(name, entry)``; the ones that build parts also ``make(name, **kwargs)``.

Each recipe's entry is a lazy ``"contrastext.runs.<family>:<attribute>"`` naming the RunSpec its family's module
(``contrastext/runs/<family>.py``) defines: the module is imported when one of its recipes is asked for, so a
broken or slow recipe never costs the others anything. A RunSpec holds:

- ``build(config, args, data_root) -> MethodBundle``: the method, its training examples, an evaluator and an
  optional final report (:mod:`contrastext.runs.stages`);
- ``run(config, args, data_root, resume) -> dict`` (optional): protocols of more than one stage (several
  seeds, pre-train then fine-tune, a pre-step) call :func:`~contrastext.runs.stages.run_training` per stage;
- ``plan(config, args) -> list[StagePlan]`` (optional; default one stage): the stages that :func:`run_recipe`
  prints before it runs them (:mod:`contrastext.runs.plan`);
- ``protocol`` (optional, :class:`~contrastext.runs.protocol.Protocol`): the paper settings printed when the
  recipe runs on a user's data, and the presets of ``method_args.preset`` (``scl``, ``reclaim``).

Example::

    >>> config = load_config(recipe_path("simcse-unsup"), ["train.max_steps=10"])
    >>> summary = run_recipe(config, data_root=Path("../shared/data"))
    >>> summary["metrics"]["stsb_dev_spearman"]
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel

from contrastext.errors import ConfigError, ContrastextError
from contrastext.runs.plan import StagePlan, print_plan, single_stage
from contrastext.runs.protocol import Protocol, apply_preset, print_protocol, protocol_lines
from contrastext.runs.stages import MethodBundle, run_training, seeded_build
from contrastext.runtime.fingerprint import allow_data_change as allow_data_change_context
from contrastext.runtime.lock import run_lock
from contrastext.runtime.paths import check_apart, check_writable_space, weights_bytes
from contrastext.runtime.processes import is_main_process
from contrastext.runtime.registry import Registry
from contrastext.training.batch_sampling import NO_DUPLICATES, check_batch_sampler, key_origin
from contrastext.training.config import TrainConfig
from contrastext.training.resume_check import RESUME_FROM, check_resume_from
from contrastext.training.trainer import check_output_dir_is_free, check_resume_matches


@dataclass(frozen=True)
class RunSpec:
    """How a recipe's ``method:`` name becomes a run."""

    name: str
    args_model: type[BaseModel]
    build: Callable[..., MethodBundle]
    run: Callable[..., dict] | None = None
    plan: Callable[..., list[StagePlan]] | None = None  # (config, args) -> the stages; default: one stage
    protocol: Protocol | None = None  # the paper's settings shown on a user's data, and method_args.preset's presets
    in_batch_negatives: bool = False  # its loss takes the batch's other rows as negatives: data.batch_sampler may
    # be no_duplicates (a repeated text would be a false negative); refused for the others (check_batch_sampler_fits)
    takes_prompts: bool = False  # reads data.prompts (runs/prompts.py); the other recipes refuse it (check_prompts_taken)
    takes_negatives: bool = False  # reads the negatives: section (runs/bank_negatives.py); else check_negatives_taken


RECIPES: Registry[RunSpec] = Registry(
    "recipe",
    {
        "simcse-unsup": "contrastext.runs.simcse:UNSUP_SPEC",
        "simcse-sup": "contrastext.runs.simcse:SUP_SPEC",
        "gd": "contrastext.runs.gd:SPEC",
        "mnrl": "contrastext.runs.mnrl:SPEC",
        "scl": "contrastext.runs.scl:SPEC",
        "reclaim": "contrastext.runs.reclaim:SPEC",
        "capt": "contrastext.runs.capt:SPEC",
        "multitask": "contrastext.runs.multitask:SPEC",
    },
)
"""Recipe name -> its RunSpec, lazily imported (a new recipe family: its module and one line per recipe here)."""


def recipe_names() -> list[str]:
    """The registered recipe names, sorted."""
    return RECIPES.names()


def get_recipe(name: str) -> RunSpec:
    """The RunSpec of the recipe ``name`` (its module imported now); UnknownNameError lists the known recipes."""
    return RECIPES.get(name)


def parse_method_args(spec: RunSpec, config: TrainConfig) -> BaseModel:
    """Validate the recipe's ``method_args`` with the method's own pydantic model (unknown keys are errors,
    named with the file or the ``--set`` override they came from)."""
    return config.method_args_as(spec.args_model)


def check_prompts_taken(spec: RunSpec, config: TrainConfig) -> None:
    """A ConfigError naming ``data.prompts`` when the recipe does not read it (nothing set is ignored)."""
    if config.data.prompts is None or spec.takes_prompts:
        return
    takers = [name for name in recipe_names() if get_recipe(name).takes_prompts]
    raise ConfigError(
        f"{config.source or '<config>'}: data.prompts: {spec.name} does not read prompts; the recipes that do: "
        f"{', '.join(takers)}"
    )


def check_negatives_taken(spec: RunSpec, config: TrainConfig) -> None:
    """A ConfigError naming ``negatives.source`` when it asks for a bank and the recipe does not take one."""
    if config.negatives.source == "none" or spec.takes_negatives:
        return
    takers = [name for name in recipe_names() if get_recipe(name).takes_negatives]
    raise ConfigError(
        f"{key_origin(config, 'negatives.source')}: negatives.source={config.negatives.source}: {spec.name} takes no "
        f"bank negatives; the recipes that do: {', '.join(takers)}"
    )


def resolve_preset(spec: RunSpec, config: TrainConfig) -> tuple[TrainConfig, dict]:
    """``method_args.preset`` applied (:func:`contrastext.runs.protocol.apply_preset`): the config the run
    uses and ``{key: (paper value, preset value)}`` of the keys the preset set."""
    parse_method_args(spec, config)  # a bad preset name (or any key) is named before anything changes
    return apply_preset(config, spec.protocol, spec.args_model)


def check_batch_sampler_fits(spec: RunSpec, config: TrainConfig) -> None:
    """``data.batch_sampler: no_duplicates`` for a recipe whose loss takes the batch's other rows as negatives
    (``RunSpec.in_batch_negatives``), and not with ``train.group_by_length``; else a ConfigError before any model
    loads. The labelled recipes (scl, reclaim: the labels say which rows are positives; multitask and the
    classifiers: no row is compared with another) have no in-batch negative that a repeated text would falsify."""
    check_batch_sampler(config)
    if config.data.batch_sampler != NO_DUPLICATES or spec.in_batch_negatives:
        return
    accepting = [name for name in RECIPES.names() if RECIPES.get(name).in_batch_negatives]
    raise ConfigError(
        f"{key_origin(config, 'data.batch_sampler')}: data.batch_sampler=no_duplicates: {spec.name} takes no "
        f"in-batch negatives, so a text repeated in a batch is no false negative; it applies to {', '.join(accepting)}"
    )


CHECKPOINT_FACTOR = 3
"""A checkpoint's size over the model's weight files (weights + AdamW's two moments), for the space check."""


def train_inputs(config: TrainConfig) -> list[tuple[str, str | None]]:
    """What a run reads (key, path): the model, the data file or dataset, the evaluation files."""
    from contrastext.evaluation.task_specs import parse_eval_spec

    inputs = [("model", config.model), ("data.path", config.data.path), ("data.dataset", config.data.dataset),
              ("data.eval_path", config.data.eval_path)]
    for text in config.eval.tasks:
        try:
            spec = parse_eval_spec(text)
        except ContrastextError:
            continue  # a bad spec is named by its own check
        if spec.is_file:
            inputs.append(("eval.tasks", str(spec.task.path)))
    return inputs


def check_train_output(config: TrainConfig) -> None:
    """The output folder is a folder (or can be one), is not, nor lies inside, any input of the run
    (:func:`~contrastext.runtime.paths.check_apart`), is writable and has room for one checkpoint (estimated
    from a local model's weight files): a ConfigError before anything loads or is written."""
    output = Path(config.output_dir)
    check_apart(output, "--output", train_inputs(config))
    if output.exists() and not output.is_dir():
        raise ConfigError(f"--output {output} is an existing file, not a folder; choose another --output")
    # A checkpoint holds the method's weights and AdamW's two moments (about 3x the model's weight files).
    check_writable_space(output, "--output", CHECKPOINT_FACTOR * weights_bytes(config.model))


def run_recipe(
    config: TrainConfig, data_root: Path | None = None, resume: bool = False, resume_from: str | Path | None = None,
    allow_data_change: bool = False,
) -> dict:
    """Validate ``method_args``, apply ``method_args.preset``, print the run's plan (:mod:`contrastext.runs.plan`)
    and, on a user's data, the paper settings in force (:mod:`contrastext.runs.protocol`), and run the recipe:
    the method's own ``run`` or one stage.

    ``data_root`` None means ``$CONTRASTEXT_DATA`` (see :func:`contrastext.data.root.resolve_data_root`).
    ``resume_from`` (a checkpoint folder, or a run folder: its latest checkpoint) continues that checkpoint into
    ``config.output_dir``, a free folder apart from the source (:func:`check_resume_from`); one-stage recipes only.
    """
    spec = get_recipe(config.method)
    config, preset = resolve_preset(spec, config)
    args = parse_method_args(spec, config)
    check_prompts_taken(spec, config)
    check_negatives_taken(spec, config)
    check_batch_sampler_fits(spec, config)
    if resume and resume_from is not None:
        raise ConfigError(f"--resume and {RESUME_FROM} together: --resume continues the run in its own output "
                          f"folder, {RESUME_FROM} continues a checkpoint into a new one; give one of them")
    if resume_from is not None and spec.run is not None:
        raise ConfigError(
            f"{RESUME_FROM}: {spec.name} runs several stages (pre-steps, fine-tunings or seeds, each in its own "
            f"subfolder), which {RESUME_FROM} does not continue; use --resume in the run's own output folder"
        )
    check_train_output(config)  # before the lock (which creates the folder) and before any model loads
    # One run per folder: the lock at the run's top folder, before anything is written (every stage's subfolder
    # lies under it); only the main process takes it (under a launcher every process runs this).
    lock = run_lock(config.output_dir) if is_main_process() else contextlib.nullcontext()
    with lock, allow_data_change_context(allow_data_change):  # a resume on changed data: a line, not a refusal
        return _run_locked(spec, config, args, preset, data_root, resume, resume_from)


def _run_locked(spec: RunSpec, config: TrainConfig, args, preset, data_root, resume, resume_from) -> dict:
    if resume:
        check_resume_matches(config)  # before any model is loaded
    else:
        if resume_from is not None:  # the source checked first: the new folder must not overlap it
            resume_from = check_resume_from(config, resume_from)
        check_output_dir_is_free(config)  # before any model is loaded or anything is written
    print_plan(spec.plan(config, args) if spec.plan is not None else single_stage(config))
    print_protocol(protocol_lines(spec.name, spec.protocol, config, args, preset))
    if spec.run is not None:
        return spec.run(config, args, data_root, resume)
    return run_training(config, seeded_build(spec.build, config, args, data_root), resume=resume_from or resume)
