"""A resumed run must be the run it continues: ``--resume`` with a changed config is refused, naming the keys.

Only keys that cannot change what the resumed steps compute are free to differ (:data:`SAFE_RESUME_KEYS`):
how long to go on (``train.max_steps``), how often to evaluate, save and log, the progress bar, where the
run lies. Everything else (learning rate, batch size, data, method arguments, seed, ...) must match the
checkpoint's ``config.yaml``; otherwise the run would be half one config and half another.

``--resume-from CHECKPOINT`` (Hugging Face's ``resume_from_checkpoint=path``) continues a checkpoint of another
run into a new folder: :func:`resume_source` finds the checkpoint (a ``checkpoints/step-N`` folder, or a run
folder: its latest intact one) and :func:`check_resume_from` refuses, before any model loads, a changed config
(the same rule) and a new folder that is, or lies inside, the checkpoint's run folder, or that holds the
checkpoint: nothing is written over an input.

A resume also checks what it reads (issue 21, item 3): the checkpoint's ``trainer_state.json`` by its schema and
the run's plan (:func:`check_resume_state`), and the data against the fingerprints the checkpoint recorded
(:func:`check_resume_data`): a changed data file is refused naming it, unless the resume runs under
:func:`~contrastext.runtime.fingerprint.allow_data_change` (``--resume-allow-data-change``).

Example::

    >>> changed_keys(saved_yaml, config)
    [('train.lr', 3e-05, 0.001)]
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import yaml

from contrastext.errors import ConfigError, ContrastextError, MissingDataError
from contrastext.runtime.fingerprint import data_change_allowed, data_changes, data_fingerprints
from contrastext.runtime.yaml_reader import read_yaml
from contrastext.training.checkpoint import (
    CHECKPOINTS_DIR,
    FINGERPRINT_FILE,
    STATE_FILE,
    latest_intact_checkpoint,
    read_data_fingerprint,
    read_trainer_state,
    verify_checkpoint,
)
from contrastext.training.config import TrainConfig, saved_under_current_names

logger = logging.getLogger("contrastext.training")
ALLOW_DATA_CHANGE_FLAG = "--resume-allow-data-change"

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
    saved = _flatten(saved_under_current_names(read_yaml(saved_config_text) or {}))  # a checkpoint from before a key moved
    current = _flatten(config.model_dump(mode="json"))
    keys = sorted(set(saved) | set(current))
    return [
        (key, saved.get(key), current.get(key))
        for key in keys
        if key not in SAFE_RESUME_KEYS and saved.get(key) != current.get(key)
    ]


def check_resume_config(saved_config_text: str, config: TrainConfig, checkpoint: str, flag: str = "--resume") -> None:
    """Refuse to resume ``checkpoint`` with a config that differs in keys outside :data:`SAFE_RESUME_KEYS`."""
    try:
        changes = changed_keys(saved_config_text, config)
    except yaml.YAMLError as error:
        raise ConfigError(f"{flag}: the config.yaml of {checkpoint} cannot be read: {error}") from None
    if not changes:
        return
    shown = ", ".join(f"{key} ({old!r} -> {new!r})" for key, old, new in changes)
    raise ConfigError(
        f"{flag}: the config differs from the one {checkpoint} was trained with in {shown}; resume with the "
        f"same settings (only {', '.join(sorted(SAFE_RESUME_KEYS))} may change), or start a fresh run in "
        "another folder (or with train.overwrite=true)"
    )


def data_inputs(config: TrainConfig) -> list[tuple[str, str | None]]:
    """The data a run reads from local paths, fingerprinted at its start: ``data.path``, ``data.dataset`` (a
    file or a folder; a hub name is left out) and ``data.eval_path``."""
    data = config.data
    return [("data.path", data.path), ("data.dataset", data.dataset), ("data.eval_path", data.eval_path)]


def planned_steps(config: TrainConfig) -> int | None:
    """The run's length when the config alone gives it (``train.max_steps`` sets it); None when it depends on
    the data (``train.epochs``), which only the trainer knows."""
    return config.train.max_steps if config.length_from == "max_steps" else None


def check_resume_state(checkpoint: Path, config: TrainConfig) -> None:
    """The checkpoint's ``trainer_state.json`` against its schema and the plan
    (:func:`~contrastext.training.checkpoint.read_trainer_state`): cheap, before any model loads."""
    read_trainer_state(Path(checkpoint) / STATE_FILE, planned_steps(config))


def check_resume_data(checkpoint: Path, config: TrainConfig, flag: str = "--resume", announce: bool = True) -> None:
    """Compare the data the run reads now with the fingerprints ``checkpoint`` recorded (sizes and hashes decide;
    a new modification time alone is the same data). A change is a ConfigError naming the key and the file,
    unless :func:`~contrastext.runtime.fingerprint.data_change_allowed`; then, with ``announce``, a warning says
    the data changed and the run goes on. A checkpoint without fingerprints (saved before they existed) gets a
    warning that the data could not be verified (with ``announce``)."""
    recorded = read_data_fingerprint(checkpoint)
    if recorded is None:
        if announce:
            logger.warning("%s: %s holds no %s (saved before data fingerprints existed): the training data could "
                           "not be verified", flag, checkpoint, FINGERPRINT_FILE)
        return
    changes = data_changes(recorded, data_fingerprints(data_inputs(config)))
    if not changes:
        return
    if not data_change_allowed():
        raise ConfigError(
            f"{flag}: the training data changed since {checkpoint} was saved: {'; '.join(changes)}; resume on the "
            f"data the run was trained on, or give {ALLOW_DATA_CHANGE_FLAG} to continue on the new data"
        )
    if announce:
        logger.warning("%s: the training data changed since %s was saved (%s); continuing on the new data "
                       "(%s)", flag, checkpoint, "; ".join(changes), ALLOW_DATA_CHANGE_FLAG)


RESUME_FROM = "--resume-from"


def resume_source(path: str | os.PathLike) -> Path:
    """The checkpoint folder ``--resume-from PATH`` continues: PATH itself when it is a checkpoint (it holds
    ``trainer_state.json``), else, for a run folder, its latest intact checkpoint; MissingDataError otherwise."""
    path = Path(path)
    if not path.is_dir():
        raise MissingDataError(f"{RESUME_FROM}: no checkpoint or run folder at {path}")
    if (path / STATE_FILE).is_file():
        try:
            return verify_checkpoint(path, checksums=False)
        except ContrastextError as error:
            raise MissingDataError(f"{RESUME_FROM}: {error}") from None
    folder = latest_intact_checkpoint(path) if (path / CHECKPOINTS_DIR).is_dir() else None
    if folder is None:
        raise MissingDataError(
            f"{RESUME_FROM}: {path} is neither a checkpoint (a {CHECKPOINTS_DIR}/step-N folder) nor a run folder "
            f"holding a complete checkpoint"
        )
    return folder


def run_folder_of(checkpoint: Path) -> Path:
    """The run a checkpoint belongs to (``<run>/checkpoints/step-N``); a checkpoint lying elsewhere is its own."""
    checkpoint = Path(checkpoint).resolve()
    return checkpoint.parent.parent if checkpoint.parent.name == CHECKPOINTS_DIR else checkpoint


def resumes_in_place(checkpoint: str | os.PathLike, output_dir: str | os.PathLike) -> bool:
    """Whether ``checkpoint`` is one of ``output_dir``'s own (a resume in place, not into a new folder)."""
    return run_folder_of(Path(checkpoint)) == Path(output_dir).resolve()


def check_new_folder(checkpoint: Path, output_dir: str | os.PathLike) -> None:
    """Refuse a new folder that is, or lies inside, the checkpoint's run folder, or that holds the checkpoint."""
    source, new = run_folder_of(checkpoint), Path(output_dir).resolve()
    if new.is_relative_to(source):
        raise ConfigError(
            f"{RESUME_FROM}: the output folder {output_dir} is, or lies inside, the run folder of {checkpoint} "
            f"({source}); choose another --output (the source run is never written to), or use --resume to "
            "continue that run in its own folder"
        )
    if Path(checkpoint).resolve().is_relative_to(new):
        raise ConfigError(
            f"{RESUME_FROM}: the checkpoint {checkpoint} lies inside the output folder {output_dir}; choose an "
            "output folder that does not hold it"
        )


def check_resume_from(config: TrainConfig, path: str | os.PathLike) -> Path:
    """``--resume-from PATH`` into ``config.output_dir``: the checkpoint folder to continue, after refusing a new
    folder that overlaps the source (:func:`check_new_folder`), a config that differs from the checkpoint's
    outside :data:`SAFE_RESUME_KEYS`, an invalid trainer state and changed data (unless allowed). Cheap: reads the
    checkpoint's small files and hashes at most 2 MiB per data file; loads no model."""
    checkpoint = resume_source(path)
    check_new_folder(checkpoint, config.output_dir)
    saved = checkpoint / "config.yaml"
    if saved.is_file():
        check_resume_config(saved.read_text(encoding="utf-8"), config, str(checkpoint), flag=RESUME_FROM)
    check_resume_state(checkpoint, config)
    check_resume_data(checkpoint, config, flag=RESUME_FROM, announce=False)
    return checkpoint
