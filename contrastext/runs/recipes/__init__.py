"""The recipes shipped with the package: one YAML per paper setting, found by name or by path.

``contrastext train simcse-unsup`` works from an installed package; ``contrastext train my.yaml`` reads a
file. In a source checkout, ``recipes/`` at the top is a link to this folder.

Example::

    >>> recipe_path("simcse-unsup").name
    'simcse-unsup.yaml'
    >>> shipped_recipe_names()[:3]
    ['capt', 'capt-continued', 'gd']
"""

from __future__ import annotations

import os
from pathlib import Path

from contrastext.errors import UnknownNameError

RECIPES_DIR = Path(__file__).resolve().parent


def shipped_recipe_names() -> list[str]:
    """The names of the shipped recipes (their file names without ``.yaml``)."""
    return sorted(path.stem for path in RECIPES_DIR.glob("*.yaml"))


def recipe_path(recipe: str | os.PathLike) -> Path:
    """An existing file path as it is; else a shipped recipe's name (``simcse-unsup`` or ``simcse-unsup.yaml``)."""
    path = Path(recipe).expanduser()
    if path.is_file():
        return path
    name = path.name[: -len(".yaml")] if path.name.endswith(".yaml") else path.name
    if path.parent == Path(".") and name in shipped_recipe_names():
        return RECIPES_DIR / f"{name}.yaml"
    raise UnknownNameError(
        f"no recipe file at {recipe} and no shipped recipe of that name; shipped recipes: {', '.join(shipped_recipe_names())}"
    )
