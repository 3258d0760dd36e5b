"""``contrastext config show``: the effective config of a recipe with ``--set`` overrides, each value with its origin.

Prints YAML (every key, defaults included, ``method_args`` with the method's own defaults) where each value
carries a comment saying where it came from: ``recipe`` (the file), ``--set``, ``--output``, ``preset <name>`` (a key ``method_args.preset`` set, see
:mod:`contrastext.runs.protocol`) or ``default``.
A training source of the file that a ``--set`` source replaces (see docs/DATA.md) is shown as null, with the
``--set`` key that replaced it. Nothing is loaded or written: the same validation as ``train`` runs first.

Example::

    contrastext config show simcse-unsup --set train.max_steps=100 train.schedule=cosine
    contrastext config show my-recipe.yaml --output runs/mine
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import Any

import typer
import yaml

from contrastext.cli import app
from contrastext.cli.train_command import OutputOption, RecipeArgument, SetOption, SetValuesCommand
from contrastext.runtime.yaml_reader import read_yaml

config_app = typer.Typer(
    name="config",
    help="Show the effective config of a recipe: every key, its value and where the value came from.",
    no_args_is_help=True,
)
app.add_typer(config_app, name="config")

COMMENT_COLUMN = 44  # origins line up here (or one space after a longer line)


def value_origins(
    effective: dict, raw: dict, overridden: Collection[str], output_given: bool = False
) -> dict[str, str]:
    """``dotted key -> origin`` for every leaf of ``effective`` (a mapping is walked; a list is one leaf):
    ``--set`` when the key or a section above it was given with ``--set``, ``--output`` for ``output_dir``
    when ``--output`` was given, ``recipe`` when the file sets it, else ``default``."""
    origins: dict[str, str] = {}

    def walk(node: dict, raw_node: Any, prefix: str) -> None:
        for key, value in node.items():
            dotted = prefix + str(key)
            in_file = isinstance(raw_node, dict) and key in raw_node
            if isinstance(value, dict) and value:
                walk(value, raw_node.get(key) if in_file else None, dotted + ".")
                continue
            if any(dotted == given or dotted.startswith(given + ".") for given in overridden):
                origins[dotted] = "--set"
            elif dotted == "output_dir" and output_given:
                origins[dotted] = "--output"
            else:
                origins[dotted] = "recipe" if in_file else "default"

    walk(effective, raw, "")
    return origins


def render(effective: dict, origins: dict[str, str]) -> list[str]:
    """YAML lines of ``effective``, each leaf followed by ``# <origin>``."""
    lines: list[str] = []

    def scalar(value: Any) -> str:
        text = yaml.safe_dump(value, default_flow_style=True, width=10**9, allow_unicode=True).strip()
        return text.removesuffix("\n...").removesuffix("...").strip()

    def walk(node: dict, prefix: str, depth: int) -> None:
        for key, value in node.items():
            dotted = prefix + str(key)
            head = "  " * depth + f"{key}:"
            if isinstance(value, dict) and value:
                lines.append(head)
                walk(value, dotted + ".", depth + 1)
                continue
            line = f"{head} {scalar(value)}"
            lines.append(f"{line.ljust(COMMENT_COLUMN - 1)} # {origins.get(dotted, 'default')}")

    walk(effective, "", 0)
    return lines


def effective_config(recipe: Path, overrides: list[str], output: Path | None) -> tuple[str, list[str]]:
    """(the recipe file, the lines of :func:`render`) after the validation ``train`` does."""
    from contrastext.cli.train_command import prepare
    from contrastext.data.sources import SOURCE_KEYS, choose_source
    from contrastext.runs.recipes import recipe_path
    from contrastext.runs.registry import get_recipe, parse_method_args, resolve_preset

    file = recipe_path(recipe)
    config = prepare(recipe, overrides, output)
    spec = get_recipe(config.method)
    config, preset = resolve_preset(spec, config)  # as the run applies method_args.preset
    raw = read_yaml(Path(file).read_text(encoding="utf-8")) or {}
    if isinstance(raw, dict) and "recipe" in raw:  # read as method: (training/config.recipe_key_as_method)
        raw["method"] = raw["recipe"]
    effective = config.model_dump(mode="json")
    effective["method_args"] = parse_method_args(spec, config).model_dump(mode="json")
    overridden = config.overridden_keys
    origins = value_origins(effective, raw, overridden, output_given=output is not None)
    name = config.method_args.get("preset")
    for key in preset:
        origins[key] = f"preset {name}"
    data = effective["data"]
    chosen = choose_source({key: data.get(key) for key in SOURCE_KEYS}, overridden, str(file))
    for key in SOURCE_KEYS:  # as the run reads it: a --set source replaces the file's
        if key != chosen and data.get(key) is not None:
            data[key] = None
            origins[f"data.{key}"] = f"recipe, replaced by --set data.{chosen}"
    unused = "epochs" if config.length_from == "max_steps" else "max_steps"
    if effective["train"].get(unused) is not None:
        origins[f"train.{unused}"] += f", not used: train.{config.length_from} sets the length"
    header = [
        f"# effective config of {file}" + (f" with --set {' '.join(overrides)}" if overrides else ""),
        "# origins: recipe (the file), --set, --output, preset <name> (method_args.preset), default (not in the "
        "file); every key: docs/CONFIG.md",
        f"# run length: train.{config.length_from}",
    ]
    return str(file), header + render(effective, origins)


@config_app.command("show", cls=SetValuesCommand)
def show_command(
    recipe: RecipeArgument, overrides: SetOption = None, output: OutputOption = None
) -> None:
    """Print the effective config (YAML) of RECIPE with the --set overrides: every key, defaults and the recipe's
    method_args included, each value followed by its origin (recipe, --set, --output, default).

    It validates as `contrastext train` does and loads nothing. Example:
    contrastext config show simcse-unsup --set train.max_steps=100 train.schedule=cosine
    """
    _, lines = effective_config(recipe, list(overrides or []), output)
    typer.echo("\n".join(lines))
