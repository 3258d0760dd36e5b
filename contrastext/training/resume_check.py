"""A resumed run must be the run it continues: ``--resume`` with a changed config is refused, naming the keys.

Only keys that cannot change what the resumed steps compute are free to differ (:data:`SAFE_RESUME_KEYS`):
how long to go on (``train.max_steps``), how often to evaluate, save and log, the progress bar, where the
run lies. Everything else (learning rate, batch size, data, method arguments, seed, ...) must match the
checkpoint's ``config.yaml``; otherwise the run would be half one config and half another.

Example::

    >>> changed_keys(saved_yaml, config)
    [('train.lr', 3e-05, 0.001)]
"""

from __future__ import annotations

from typing import Any

import yaml

from contrastext.errors import ConfigError
from contrastext.training.config import TrainConfig

SAFE_RESUME_KEYS = frozenset(
    {
        "output_dir",
        "train.max_steps",
        "train.eval_every",
        "train.save_every",
        "train.log_every",
        "train.keep_last",
        "train.progress_bar",
        "train.report_to",
        "train.tensorboard",  # the older spelling of report_to, in checkpoints saved before it
        "train.overwrite",
        "train.eval_at_start",
        "train.unpad",  # the packed forward computes the padded one's numbers, with the same dropout masks
        "train.compile",  # the compiled encoder computes the same numbers
        "train.gradient_checkpointing",  # recomputed activations (and dropout masks): the same gradients
        "train.early_stopping_patience",
        "eval.batch_size",
    }
)


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict) and value:
        flat: dict[str, Any] = {}
        for key, item in value.items():
            flat.update(_flatten(item, f"{prefix}{key}."))
        return flat
    return {prefix.rstrip("."): value}


def changed_keys(saved_config_text: str, config: TrainConfig) -> list[tuple[str, Any, Any]]:
    """``(dotted key, checkpoint's value, current value)`` of every key that differs, safe keys left out."""
    saved = _flatten(yaml.safe_load(saved_config_text) or {})
    current = _flatten(config.model_dump(mode="json"))
    keys = sorted(set(saved) | set(current))
    return [
        (key, saved.get(key), current.get(key))
        for key in keys
        if key not in SAFE_RESUME_KEYS and saved.get(key) != current.get(key)
    ]


def check_resume_config(saved_config_text: str, config: TrainConfig, checkpoint: str) -> None:
    """Refuse to resume ``checkpoint`` with a config that differs in keys outside :data:`SAFE_RESUME_KEYS`."""
    changes = changed_keys(saved_config_text, config)
    if not changes:
        return
    shown = ", ".join(f"{key} ({old!r} -> {new!r})" for key, old, new in changes)
    raise ConfigError(
        f"--resume: the config differs from the one {checkpoint} was trained with in {shown}; resume with the "
        f"same settings (only {', '.join(sorted(SAFE_RESUME_KEYS))} may change), or start a fresh run in "
        "another folder (or with train.overwrite=true)"
    )
