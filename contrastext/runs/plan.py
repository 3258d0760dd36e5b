"""A run's plan, printed before anything loads: its stages, each with its length, examples, evaluation and seeds.

Every recipe prints it (:func:`~contrastext.runs.registry.run_recipe`, main process only), so a user sees up
front what ``--set train.max_steps=3 data.limit=256`` reaches: with ``--set``, ``train.max_steps`` /
``train.epochs`` / ``data.limit`` / ``eval.limit`` reach every stage (CAPT's fine-tunings, multitask's SimCSE
pre-step, SCL's seeds) unless the stage's own key is given with ``--set`` too
(:func:`~contrastext.runs.stages.stage_length`, :func:`~contrastext.runs.stages.stage_limit`).

The plan is read from the stages' configs, before any data is loaded: a stage whose length is given in epochs
says so (its steps follow from the number of rows, known once the data is read), and a limit is printed as a
limit (a file with fewer rows gives fewer). It holds no time estimate: nothing measured before the run says
how long a step takes on this machine.

Example::

    plan: 2 stages, 6 trainings
      pretrain: 3 steps, the first 256 examples of wiki1m, eval stsb:dev (first 64 of each), seed 42
      finetune-sst2: 3 steps, the first 256 examples of sst2, eval sst2:dev (first 64 of each), seeds 42, 43, 44, 45, 46
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from contrastext.runtime.processes import is_main_process
from contrastext.training.config import TrainConfig


@dataclass(frozen=True)
class StagePlan:
    """One stage of a run as planned: its config (length, data, evaluation) and the seeds it is trained with.

    ``source`` names the stage's data when its ``data`` section does not (a recipe's default task, multitask's
    ``simcse_task``); ``examples`` / ``evaluation`` replace the whole description where the config cannot give
    it (the pre-step's texts of the multi-task rows; the multi-task heads' dev sets).
    """

    name: str
    config: TrainConfig
    seeds: tuple[int, ...]
    source: str | None = None
    examples: str | None = None
    evaluation: str | None = None


def single_stage(config: TrainConfig, source: str | None = None) -> list[StagePlan]:
    """The plan of a one-stage recipe: the run's own config and seed."""
    return [StagePlan("train", config, (config.seed,), source=source)]


def length_text(config: TrainConfig) -> str:
    """``"3 steps"``, or ``"2 epochs"`` (the steps follow from the data), as :attr:`TrainConfig.length_from` says."""
    train = config.train
    if config.length_from == "max_steps":
        return f"{train.max_steps} step{'s' if train.max_steps != 1 else ''}"
    return f"{train.epochs:g} epoch{'s' if train.epochs != 1 else ''} (steps follow from the rows)"


def source_text(config: TrainConfig, source: str | None = None) -> tuple[str, bool]:
    """``(the data's name, whether it is several tasks)``: ``source`` when given, else the data section's."""
    data = config.data
    if source is not None:
        return source, False
    keys = ("path", "dataset", "task")  # a source given with --set replaces the recipe file's
    for key in sorted(keys, key=lambda key: f"data.{key}" not in config.overridden_keys):
        if getattr(data, key):
            return str(getattr(data, key)), False
    if data.tasks:
        return ", ".join(data.tasks), len(data.tasks) > 1
    return "the recipe's default data", False


def examples_text(config: TrainConfig, source: str | None = None) -> str:
    """How many training rows, of what: ``data.few_shot``, ``data.limit`` (first or random) or all of them."""
    data = config.data
    name, several = source_text(config, source)
    of = f"of each of {name}" if several else f"of {name}"
    which = "the first" if data.limit_rows == "first" else "a random"
    if data.few_shot is not None:
        drawn = f" (drawn from {which} {data.limit})" if data.limit is not None else ""
        return f"{data.few_shot} few-shot examples {of}{drawn}"
    if data.limit is not None:
        return f"{which} {data.limit} examples {of}"
    return f"all examples {of}"


def evaluation_text(config: TrainConfig) -> str:
    """The evaluation sets (``eval.tasks``) and ``eval.limit``."""
    if not config.eval.tasks:
        return "no evaluation"
    return f"eval {', '.join(config.eval.tasks)}{limit_note(config)}"


def limit_note(config: TrainConfig) -> str:
    """`` (first N of each)`` under ``eval.limit``, else nothing."""
    return f" (first {config.eval.limit} of each)" if config.eval.limit is not None else ""


def seeds_text(seeds: Sequence[int]) -> str:
    return f"seed {seeds[0]}" if len(seeds) == 1 else f"seeds {', '.join(str(seed) for seed in seeds)}"


def plan_lines(stages: Sequence[StagePlan]) -> list[str]:
    """The printed plan: a header (stages, trainings) and one line per stage."""
    trainings = sum(len(stage.seeds) for stage in stages)
    header = f"plan: {len(stages)} stage{'s' if len(stages) != 1 else ''}, {trainings} training{'s' if trainings != 1 else ''}"
    lines = [header]
    for stage in stages:
        parts = [
            length_text(stage.config),
            stage.examples or examples_text(stage.config, stage.source),
            stage.evaluation or evaluation_text(stage.config),
            seeds_text(stage.seeds),
        ]
        lines.append(f"  {stage.name}: {', '.join(parts)}")
    return lines


def print_plan(stages: Sequence[StagePlan]) -> None:
    """Print :func:`plan_lines` on the main process (under a launcher, the others print nothing)."""
    if is_main_process():
        print("\n".join(plan_lines(stages)), flush=True)
