"""The paper's protocol on a user's data: which of a recipe's paper settings are in force, and presets.

A recipe such as ``scl`` carries its paper's protocol (Gunel et al.'s few-shot settings: 20 examples, 10 draws,
lr 1e-5 constant, λ 0.1). Run on a user's file or dataset (``data.path`` / ``data.dataset`` instead of the
recipe's benchmark ``data.task``) those settings still apply, and nothing would say so. So:

- :func:`protocol_lines`: one short block, printed by :func:`~contrastext.runs.registry.run_recipe` (main
  process only, after the plan, before any model loads) when the run reads a user's data or a preset other
  than ``paper`` is chosen: each paper setting in force as ``key=value  (paper §x)``, and how to change them.
  Keys given with ``--set`` are the user's own and are left out.
- :func:`apply_preset`: ``method_args.preset`` (``paper``, the default: the recipe as its paper has it;
  ``practical``: the recipe's :attr:`~contrastext.runs.registry.RunSpec.presets` entry, a small documented
  set of keys that learns on a user's file in a few hundred steps). A preset's keys replace the recipe
  file's values; a key given with ``--set`` wins over the preset. ``contrastext config show`` marks the
  keys a preset set (origin ``preset practical``).

Example (``contrastext train scl --set data.path=reviews.csv``)::

    scl on your data (data.path) keeps the paper's protocol (Gunel et al., ICLR 2021), method_args.preset=paper:
      data.few_shot=20                                   (paper §4.1: N examples in total)
      ...
    override with --set KEY=VALUE; --set method_args.preset=practical sets data.few_shot=null ... (docs/methods/scl.md)
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from contrastext.errors import ConfigError
from contrastext.runtime.processes import is_main_process
from contrastext.training.config import TrainConfig

PAPER = "paper"


@dataclass(frozen=True)
class PaperSetting:
    """One setting of a recipe's paper protocol: its dotted key and where the paper gives it (``"paper §4.1"``,
    ``"not given by the paper"``), printed beside its value."""

    key: str
    where: str


@dataclass(frozen=True)
class Protocol:
    """A recipe's paper (``"Gunel et al., ICLR 2021"``), its settings that matter on a user's data, its presets
    (name -> dotted key -> value; ``paper`` is the recipe as it is) and the page that documents them."""

    paper: str
    settings: tuple[PaperSetting, ...]
    presets: Mapping[str, Mapping[str, Any]]
    docs: str


def is_given(key: str, overridden: Collection[str]) -> bool:
    """Whether ``key`` (or a section above it) was given with ``--set``."""
    return any(key == given or key.startswith(given + ".") for given in overridden)


def preset_name(config: TrainConfig) -> str:
    """``method_args.preset`` (validated by the method's args model), ``paper`` when absent."""
    return str(config.method_args.get("preset") or PAPER)


def apply_preset(
    config: TrainConfig, protocol: Protocol | None, args_model: type[BaseModel]
) -> tuple[TrainConfig, dict[str, tuple[Any, Any]]]:
    """``(config with the chosen preset's keys set, {key: (value before, value set)} of the keys it set)``.

    ``paper`` (the default) changes nothing. A preset's key given with ``--set`` keeps the ``--set`` value.
    The result is a copy; ``config.yaml`` of the run records the values used (and ``method_args.preset``).
    """
    name = preset_name(config)
    if name == PAPER or protocol is None:
        return config, {}
    if name not in protocol.presets:
        raise ConfigError(
            f"{config.source or '<config>'}: method_args.preset={name!r}: known presets: "
            f"{', '.join([PAPER, *protocol.presets])}"
        )
    applied = {
        key: value for key, value in protocol.presets[name].items() if not is_given(key, config.overridden_keys)
    }
    before = config.method_args_as(args_model)
    replaced = {key: (setting_value(config, before, key), value) for key, value in applied.items()}
    result = config.model_copy(deep=True)
    for key, value in applied.items():
        section, _, field = key.partition(".")
        try:
            if section == "method_args":
                result.method_args[field] = value
            else:
                setattr(getattr(result, section), field, value)
        except ValidationError as error:
            raise ConfigError(
                f"{config.source or '<config>'}: method_args.preset={name}: {key}={value!r} does not fit the "
                f"rest of the config: {error.errors()[0]['msg']}"
            ) from None
    return result, replaced


def is_user_data(config: TrainConfig) -> str | None:
    """``"data.path"`` / ``"data.dataset"`` when the run reads a user's data (as the run chooses its source:
    a ``--set`` source replaces the recipe file's), else None."""
    from contrastext.data.sources import SOURCE_KEYS, choose_source

    data = config.data
    try:
        chosen = choose_source(
            {key: getattr(data, key) for key in SOURCE_KEYS}, config.overridden_keys, config.source or "<config>"
        )
    except ConfigError:
        return None  # two sources: the run says so itself when it reads them
    return f"data.{chosen}" if chosen in ("path", "dataset") else None


def value_text(value: Any) -> str:
    """A value as ``--set`` reads it back: ``1e-05``, ``constant``, ``[1, 2]``, ``null``."""
    text = yaml.safe_dump(value, default_flow_style=True, width=10**9).strip()
    return text.removesuffix("...").strip()


def setting_value(config: TrainConfig, args: BaseModel, key: str) -> Any:
    """The value in force of a dotted key (``method_args.*`` read from the validated ``args``)."""
    section, _, field = key.partition(".")
    return getattr(args if section == "method_args" else getattr(config, section), field)


def protocol_lines(
    method: str,
    protocol: Protocol | None,
    config: TrainConfig,
    args: BaseModel,
    applied: Mapping[str, tuple[Any, Any]],
) -> list[str]:
    """The block :func:`print_protocol` prints; empty on the recipe's own benchmark data under ``paper``."""
    if protocol is None:
        return []
    source = is_user_data(config)
    name = preset_name(config)
    if source is None and name == PAPER:
        return []
    where = f"{method} on your data ({source})" if source else method
    given = config.overridden_keys
    if name == PAPER:
        settings = [setting for setting in protocol.settings if not is_given(setting.key, given)]
        if not settings:
            return []
        lines = [f"{where} keeps the paper's protocol ({protocol.paper}), method_args.preset=paper:"]
        width = max(len(f"{s.key}={value_text(setting_value(config, args, s.key))}") for s in settings)
        for setting in settings:
            pair = f"{setting.key}={value_text(setting_value(config, args, setting.key))}"
            lines.append(f"  {pair.ljust(width)}  ({setting.where})")
        others = [preset for preset in protocol.presets if preset != PAPER]
        choices = "".join(
            f"; --set method_args.preset={preset} sets "
            + " ".join(f"{key}={value_text(value)}" for key, value in protocol.presets[preset].items())
            for preset in others
        )
        lines.append(f"override with --set KEY=VALUE{choices} ({protocol.docs})")
        return lines
    lines = [f"{where}: method_args.preset={name} replaces the paper's protocol ({protocol.paper}):"]
    pairs = [f"{key}={value_text(value)}" for key, (_, value) in applied.items()]
    width = max((len(pair) for pair in pairs), default=0)
    for (key, (paper_value, _)), pair in zip(applied.items(), pairs, strict=True):
        paper = next((s.where for s in protocol.settings if s.key == key), None)
        note = f"instead of {value_text(paper_value)}: {paper}" if paper else f"instead of the recipe's {value_text(paper_value)}"
        lines.append(f"  {pair.ljust(width)}  ({note})")
    kept = [key for key in protocol.presets[name] if key not in applied]
    if kept:
        lines.append(f"  kept from --set: {', '.join(kept)}")
    lines.append(f"the paper's settings: --set method_args.preset=paper; any key: --set KEY=VALUE ({protocol.docs})")
    return lines


def print_protocol(lines: list[str]) -> None:
    """Print the block on the main process (under a launcher the others print nothing)."""
    if lines and is_main_process():
        print("\n".join(lines), flush=True)
