"""contrastext: robust and efficient contrastive learning of text representations.

The public API: every name below is importable from ``contrastext`` itself, whatever module it lives in::

    from contrastext import TextEncoder, load_config, make_objective, recipe_path, run_recipe

    config = load_config(recipe_path("simcse-unsup"), ["train.max_steps=10", "output_dir=runs/try"])
    summary = run_recipe(config)                          # what `contrastext train simcse-unsup` does
    encoder = TextEncoder.load(summary["final_model_dir"])
    loss = make_objective("infonce", temperature=0.05)   # any registered objective, on embeddings

The names are imported lazily (PEP 562): ``import contrastext`` loads this file only, and the first use of a name
imports the module that defines it (torch and transformers come with the first model, loss or recipe). So the
command line and ``import contrastext`` stay fast, and tools that only read ``__version__`` pay nothing.

Groups (see ``__all__``):

- recipes: :func:`run_recipe`, :func:`recipe_names`, :func:`get_recipe`, :func:`recipe_path`,
  :func:`load_config`, :class:`TrainConfig`;
- models: :class:`TextEncoder`;
- parts, by registry name: :func:`make_objective`, :func:`objective_names`, :class:`Objective`,
  :func:`make_view`, :func:`make_search`; the registries themselves (``OBJECTIVES``, ``VIEWS``, ``SEARCHES``,
  ``TASKS``, ``RECIPES``) to list names or ``register`` a part of one's own;
- data: :class:`Example`, :func:`load_task`, :func:`get_task`, :func:`task_names`;
- training a Method of one's own: :class:`Method` (the contract), :class:`Trainer`;
- evaluation: :func:`evaluate_tasks` (what ``contrastext eval`` runs), :func:`evaluate_sts`;
- other libraries' trainers: :class:`ContrastextLoss` (any objective as a sentence-transformers loss);
- runs: :func:`read_log` (a run's train_log.jsonl), :func:`set_seed`;
- errors: :class:`ContrastextError` and the kinds users meet (``contrastext.errors`` has them all).
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a few ms; type checkers read it as theirs)
__version__ = "0.1.0"

__all__ = [  # the public names, grouped as in the docstring; each one is a key of _LAZY below
    "__version__",
    "run_recipe",
    "recipe_names",
    "get_recipe",
    "RECIPES",
    "recipe_path",
    "load_config",
    "TrainConfig",
    "TextEncoder",
    "make_objective",
    "objective_names",
    "OBJECTIVES",
    "Objective",
    "make_view",
    "VIEWS",
    "make_search",
    "SEARCHES",
    "Example",
    "load_task",
    "get_task",
    "task_names",
    "TASKS",
    "Method",
    "Trainer",
    "evaluate_tasks",
    "evaluate_sts",
    "ContrastextLoss",
    "read_log",
    "set_seed",
    "ContrastextError",
    "ConfigError",
    "DataFormatError",
    "MissingDataError",
    "UnknownNameError",
]

# name -> the module that defines it (imported on first use of the name)
_LAZY: dict[str, str] = {
    # recipes
    "run_recipe": "contrastext.runs.registry",
    "recipe_names": "contrastext.runs.registry",
    "get_recipe": "contrastext.runs.registry",
    "RECIPES": "contrastext.runs.registry",
    "recipe_path": "contrastext.runs.recipes",
    "load_config": "contrastext.training.config",
    "TrainConfig": "contrastext.training.config",
    # models
    "TextEncoder": "contrastext.models.encoder",
    # parts, by registry name
    "make_objective": "contrastext.objectives.registry",
    "objective_names": "contrastext.objectives.registry",
    "OBJECTIVES": "contrastext.objectives.registry",
    "Objective": "contrastext.objectives.base",
    "make_view": "contrastext.data.views",
    "VIEWS": "contrastext.data.views",
    "make_search": "contrastext.negatives.search",
    "SEARCHES": "contrastext.negatives.search",
    # data
    "Example": "contrastext.data.examples",
    "load_task": "contrastext.data.tasks",
    "get_task": "contrastext.data.tasks",
    "task_names": "contrastext.data.tasks",
    "TASKS": "contrastext.data.tasks",
    # training a Method of one's own
    "Method": "contrastext.training.method",
    "Trainer": "contrastext.training.trainer",
    # evaluation
    "evaluate_tasks": "contrastext.evaluation.suite",
    "evaluate_sts": "contrastext.evaluation.sts",
    # other libraries' trainers
    "ContrastextLoss": "contrastext.integrations.sentence_transformers",
    # runs
    "read_log": "contrastext.runtime.run_log",
    "set_seed": "contrastext.runtime.seeding",
    # errors
    "ContrastextError": "contrastext.errors",
    "ConfigError": "contrastext.errors",
    "DataFormatError": "contrastext.errors",
    "MissingDataError": "contrastext.errors",
    "UnknownNameError": "contrastext.errors",
}


if TYPE_CHECKING:  # what IDEs and type checkers see; at run time __getattr__ imports each name on first use
    from typing import Any

    from contrastext.data.examples import Example
    from contrastext.data.tasks import TASKS, get_task, load_task, task_names
    from contrastext.data.views import VIEWS, make_view
    from contrastext.errors import (
        ConfigError,
        ContrastextError,
        DataFormatError,
        MissingDataError,
        UnknownNameError,
    )
    from contrastext.evaluation.sts import evaluate_sts
    from contrastext.evaluation.suite import evaluate_tasks
    from contrastext.integrations.sentence_transformers import ContrastextLoss
    from contrastext.models.encoder import TextEncoder
    from contrastext.negatives.search import SEARCHES, make_search
    from contrastext.objectives.base import Objective
    from contrastext.objectives.registry import OBJECTIVES, make_objective, objective_names
    from contrastext.runs.recipes import recipe_path
    from contrastext.runs.registry import RECIPES, get_recipe, recipe_names, run_recipe
    from contrastext.runtime.run_log import read_log
    from contrastext.runtime.seeding import set_seed
    from contrastext.training.config import TrainConfig, load_config
    from contrastext.training.method import Method
    from contrastext.training.trainer import Trainer


def __getattr__(name: str) -> Any:
    """Import a public name's module on first use (PEP 562); any other name is an AttributeError."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'contrastext' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # the next lookup is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
