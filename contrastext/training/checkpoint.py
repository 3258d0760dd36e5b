"""Atomic checkpoints: a run killed at any moment resumes from its last complete checkpoint.

A checkpoint is a folder ``<output_dir>/checkpoints/step-000600/`` holding

- ``method.safetensors``: ``method.state_dict()`` (encoder, heads, critics, queues, banks; shared tensors
  stored once, via ``safetensors.torch.save_model``),
- ``optimizer.pt``, ``scheduler.pt``: their ``state_dict()``,
- ``rng.pt``: Python, NumPy and torch (CPU, CUDA) generator states,
- ``trainer_state.json``: step, epoch, batch index inside the epoch, best metric, early-stopping count,
- ``config.yaml``: the run's configuration.

It is written into a temporary folder beside its final place, every file and the folder are fsync-ed,
and then it is renamed into place; only then is the ``latest`` pointer file rewritten (also through a
temporary file and ``os.replace``). A crash leaves either the old or the new checkpoint, never half of one.

Example::

    >>> save_checkpoint(folder, method, optimizer, scheduler, TrainerState(step=600), config_text)
    >>> state = load_checkpoint(latest_checkpoint(output_dir), method, optimizer, scheduler)
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import torch
from safetensors.torch import load_model, save_model
from torch import nn

from contrastext.errors import MissingDataError
from contrastext.runtime.seeding import capture_rng_state, restore_rng_state

METHOD_FILE = "method.safetensors"
STATE_FILE = "trainer_state.json"
LATEST_FILE = "latest"
CHECKPOINTS_DIR = "checkpoints"


@dataclass
class TrainerState:
    """Where training stands: enough to continue exactly where it stopped."""

    step: int = 0  # optimiser steps done
    epoch: int = 0  # epoch of the next batch
    batch_index: int = 0  # batches of that epoch already consumed
    samples_seen: int = 0
    best_metric: float | None = None
    best_step: int | None = None
    evals_without_improvement: int = 0
    stopped_early: bool = False

    @classmethod
    def from_dict(cls, raw: dict) -> TrainerState:
        known = {field.name for field in fields(cls)}
        return cls(**{key: value for key, value in raw.items() if key in known})


def fsync_path(path: Path) -> None:
    """Flush a file's or a folder's contents to disk."""
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same folder, fsync, then ``os.replace``."""
    path = Path(path)
    temporary = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    with temporary.open("w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)
    fsync_path(path.parent)


def _replace_folder(temporary: Path, final: Path) -> None:
    """Rename a finished folder into place, moving an older one of the same name out of the way first."""
    if final.exists():
        old = final.with_name(f".{final.name}.{uuid.uuid4().hex}.old")
        os.replace(final, old)
        os.replace(temporary, final)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(temporary, final)
    fsync_path(final.parent)


def save_method_state(method: nn.Module, folder: Path) -> Path:
    """``method.state_dict()`` as ``folder/method.safetensors`` (shared tensors stored once)."""
    path = Path(folder) / METHOD_FILE
    save_model(method, str(path))
    return path


def load_method_state(method: nn.Module, path: str | os.PathLike) -> None:
    """Load ``method.safetensors`` (or a folder holding it) into ``method``, strictly."""
    path = Path(path)
    if path.is_dir():
        path = path / METHOD_FILE
    if not path.is_file():
        raise MissingDataError(f"no method weights at {path}")
    device = next((tensor.device for tensor in method.state_dict().values()), torch.device("cpu"))
    missing, unexpected = load_model(method, str(path), strict=False, device=str(device))
    if missing or unexpected:
        raise MissingDataError(
            f"{path} does not match {type(method).__name__}: missing {sorted(missing)[:5]}, "
            f"unexpected {sorted(unexpected)[:5]}"
        )


def write_folder_atomically(final: Path, write) -> Path:
    """Call ``write(temporary_folder)``, fsync what it wrote, rename the folder to ``final``."""
    final = Path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    temporary = final.with_name(f".{final.name}.{uuid.uuid4().hex}.tmp")
    temporary.mkdir()
    try:
        write(temporary)
        for file in sorted(temporary.rglob("*")):
            fsync_path(file)
        fsync_path(temporary)
        _replace_folder(temporary, final)
    finally:
        if temporary.exists():
            shutil.rmtree(temporary, ignore_errors=True)
    return final


def checkpoint_name(step: int) -> str:
    return f"step-{step:06d}"


def save_checkpoint(
    output_dir: str | os.PathLike,
    method: nn.Module,
    optimizer,
    scheduler,
    state: TrainerState,
    config_text: str,
    scaler=None,
) -> Path:
    """Write the checkpoint of ``state.step`` atomically and point ``latest`` at it; returns its folder."""
    checkpoints = Path(output_dir) / CHECKPOINTS_DIR

    def write(folder: Path) -> None:
        save_method_state(method, folder)
        torch.save(optimizer.state_dict(), folder / "optimizer.pt")
        torch.save(scheduler.state_dict(), folder / "scheduler.pt")
        torch.save(capture_rng_state(), folder / "rng.pt")
        if scaler is not None:  # fp16 loss scaling
            torch.save(scaler.state_dict(), folder / "scaler.pt")
        (folder / STATE_FILE).write_text(json.dumps(asdict(state), indent=2) + "\n", encoding="utf-8")
        (folder / "config.yaml").write_text(config_text, encoding="utf-8")

    folder = write_folder_atomically(checkpoints / checkpoint_name(state.step), write)
    atomic_write_text(checkpoints / LATEST_FILE, folder.name + "\n")
    return folder


def latest_checkpoint(output_dir: str | os.PathLike) -> Path | None:
    """The folder ``latest`` points at, if it is complete; else the newest complete one; else None."""
    checkpoints = Path(output_dir) / CHECKPOINTS_DIR
    pointer = checkpoints / LATEST_FILE
    if pointer.is_file():
        folder = checkpoints / pointer.read_text(encoding="utf-8").strip()
        if is_complete(folder):
            return folder
    candidates = sorted(path for path in checkpoints.glob("step-*") if is_complete(path))
    return candidates[-1] if candidates else None


def is_complete(folder: Path) -> bool:
    return all((folder / name).is_file() for name in (METHOD_FILE, STATE_FILE, "optimizer.pt", "rng.pt"))


def load_checkpoint(
    folder: str | os.PathLike, method: nn.Module, optimizer, scheduler, scaler=None
) -> TrainerState:
    """Restore method, optimiser, scheduler, loss scaler and global RNG states; returns the trainer state."""
    folder = Path(folder)
    if not is_complete(folder):
        raise MissingDataError(
            f"{folder} is not a complete checkpoint (expected {METHOD_FILE}, {STATE_FILE}, ...)"
        )
    load_method_state(method, folder)
    optimizer.load_state_dict(torch.load(folder / "optimizer.pt", weights_only=True))
    scheduler.load_state_dict(torch.load(folder / "scheduler.pt", weights_only=True))
    if scaler is not None and (folder / "scaler.pt").is_file():
        scaler.load_state_dict(torch.load(folder / "scaler.pt", weights_only=True))
    restore_rng_state(torch.load(folder / "rng.pt", weights_only=True))
    return TrainerState.from_dict(json.loads((folder / STATE_FILE).read_text(encoding="utf-8")))


def prune_checkpoints(output_dir: str | os.PathLike, keep_last: int) -> None:
    """Delete all but the ``keep_last`` newest checkpoints (never the one ``latest`` points at)."""
    checkpoints = Path(output_dir) / CHECKPOINTS_DIR
    keep = latest_checkpoint(output_dir)
    folders = sorted(path for path in checkpoints.glob("step-*") if path.is_dir())
    for folder in folders[: max(len(folders) - keep_last, 0)]:
        if folder != keep:
            shutil.rmtree(folder, ignore_errors=True)
