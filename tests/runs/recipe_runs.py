"""Helpers for the end-to-end recipe tests: load a recipe with overrides, read a run's training log.

Each test module keeps its own speed overrides (steps, batch size, limits) and builds its ``train.*`` part with ``train_overrides``.
"""

from __future__ import annotations

import json
from pathlib import Path

from contrastext.training.config import load_config

RECIPES = Path(__file__).resolve().parents[2] / "recipes"

# No checkpoints, progress bar or TensorBoard; one log record per step.
QUIET = {"save_every": None, "log_every": 1, "progress_bar": False, "report_to": []}


def override_value(value: object) -> str:
    """A Python value as the right-hand side of a ``key=value`` override (None -> null, bools lower-case)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def train_overrides(**settings: object) -> list[str]:
    """``train.<key>=<value>`` overrides for ``QUIET`` and then ``settings``: a short, quiet run."""
    return [f"train.{key}={override_value(value)}" for key, value in {**QUIET, **settings}.items()]


def recipe_config(recipe: str, output_dir: Path, model: str, *overrides: str):
    """``recipes/<recipe>.yaml`` with ``output_dir``, ``model`` and then ``overrides`` applied in order."""
    return load_config(RECIPES / f"{recipe}.yaml", [f"output_dir={output_dir}", f"model={model}", *overrides])


def read_log(folder: Path) -> list[dict]:
    """The records of ``folder/train_log.jsonl``, one per logged step."""
    return [json.loads(line) for line in (folder / "train_log.jsonl").read_text().splitlines()]
