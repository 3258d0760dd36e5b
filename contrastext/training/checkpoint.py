"""Atomic checkpoints: a run killed at any moment resumes from its last complete checkpoint.

A checkpoint is a folder ``<output_dir>/checkpoints/step-000600/`` holding

- ``method.safetensors``: ``method.state_dict()`` (encoder, heads, critics, queues, banks; shared tensors
  stored once, via ``safetensors.torch.save_model``),
- ``optimizer.pt``, ``scheduler.pt``: their ``state_dict()``,
- ``rng.pt``: Python, NumPy and torch (CPU, CUDA) generator states,
- ``trainer_state.json``: step, epoch, batch index inside the epoch, best metric, early-stopping count,
- ``config.yaml``: the run's configuration,
- ``manifest.json``: the size and SHA-256 of every other file, written last.

It is written into a temporary folder beside its final place, every file and the folder are fsync-ed,
and then it is renamed into place; only then is the ``latest`` pointer file rewritten (also through a
temporary file and ``os.replace``). A crash leaves either the old or the new checkpoint, never half of one.

Files damaged after the fact (a disk filling up, a copy cut short, a bit flip) are caught by the manifest:
:func:`verify_checkpoint` checks it (sizes only for :func:`is_complete`, which stays cheap), and
:func:`latest_intact_checkpoint` falls back to the newest checkpoint that verifies, with a warning for each
one skipped. :func:`clean_stale_temporaries` removes the temporary folders a killed run leaves behind.

Example::

    >>> save_checkpoint(folder, method, optimizer, scheduler, TrainerState(step=600), config_text)
    >>> clean_stale_temporaries(output_dir)
    >>> state = load_checkpoint(latest_intact_checkpoint(output_dir), method, optimizer, scheduler)
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import pickle
import re
import shutil
import uuid
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_model, save_model
from torch import nn

from contrastext.errors import ContrastextError, CorruptFileError, MissingDataError
from contrastext.runtime.seeding import capture_rng_state, restore_rng_state

METHOD_FILE = "method.safetensors"
STATE_FILE = "trainer_state.json"
MANIFEST_FILE = "manifest.json"
LATEST_FILE = "latest"
CHECKPOINTS_DIR = "checkpoints"
REQUIRED_FILES = (METHOD_FILE, STATE_FILE, "optimizer.pt", "rng.pt")
"""Files without which a checkpoint cannot be resumed (``scheduler.pt``, ``scaler.pt`` are optional)."""

TEMPORARY_PREFIX = ".contrastext-tmp."
TEMPORARY_NAME = re.compile(r"^\.contrastext-tmp\.(?P<name>.+)\.[0-9a-f]{32}\.(?P<kind>tmp|old)$")
"""Names of the temporaries of :func:`write_folder_atomically` / :func:`atomic_write_text`
(``.contrastext-tmp.NAME.<hex>.tmp``) and of the folder a replaced one is moved to (``...NAME.<hex>.old``): the
project's prefix, so that a user's file that merely looks like a temporary (``.X.<hex>.tmp``) is never cleaned."""


def temporary_path(final: Path, kind: str = "tmp") -> Path:
    """A fresh temporary beside ``final``, named as :data:`TEMPORARY_NAME` matches."""
    return final.with_name(f"{TEMPORARY_PREFIX}{final.name}.{uuid.uuid4().hex}.{kind}")

logger = logging.getLogger("contrastext.training")


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
    temporary = temporary_path(path)
    try:
        with temporary.open("w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    finally:  # a failed write (disk full) leaves no half-written temporary
        temporary.unlink(missing_ok=True)
    fsync_path(path.parent)


def _replace_folder(temporary: Path, final: Path) -> None:
    """Rename a finished folder into place, moving an older one of the same name out of the way first."""
    if final.exists():
        old = temporary_path(final, "old")
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
    try:
        missing, unexpected = load_model(method, str(path), strict=False, device=str(device))
    except (SafetensorError, OSError) as error:
        raise CorruptFileError(path, None, f"cannot read the method weights ({_first_line(error)})") from None
    if missing or unexpected:
        raise MissingDataError(
            f"{path} does not match {type(method).__name__}: missing {sorted(missing)[:5]}, "
            f"unexpected {sorted(unexpected)[:5]}"
        )


DISK_FULL_TEXTS = ("os error 28", "No space left on device", "file write failed")
READ_ONLY_TEXTS = ("os error 30", "Read-only file system")


def disk_error(error: BaseException, path: Path) -> OSError | None:
    """``error`` as the OSError of a full or read-only disk (errno ENOSPC / EROFS, naming ``path``) when it is one,
    else None. Writers that are not Python's own (safetensors, ``torch.save``) report these as their own errors;
    ``torch.save``'s ``file write failed`` counts as a full disk only when under 16 MiB are left."""
    if isinstance(error, OSError):
        return error if error.errno in (errno.ENOSPC, errno.EROFS, errno.EDQUOT) else None
    text = str(error)
    if any(marker in text for marker in READ_ONLY_TEXTS):
        return OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
    if any(marker in text for marker in DISK_FULL_TEXTS[:2]) or (
        DISK_FULL_TEXTS[2] in text and shutil.disk_usage(path.parent).free < 16 * 2**20
    ):
        return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
    return None


def write_folder_atomically(final: Path, write) -> Path:
    """Call ``write(temporary_folder)``, fsync what it wrote, rename the folder to ``final``."""
    final = Path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    temporary = temporary_path(final)
    temporary.mkdir()
    try:
        write(temporary)
        for file in sorted(temporary.rglob("*")):
            fsync_path(file)
        fsync_path(temporary)
        _replace_folder(temporary, final)
    except Exception as error:
        disk = disk_error(error, final)
        if disk is None or disk is error:
            raise
        raise disk from error
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
        write_manifest(folder)

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
    """Every required file is there, and every file has the size its manifest records (a cheap check)."""
    try:
        verify_checkpoint(folder, checksums=False)
    except ContrastextError:
        return False
    return True


# ----------------------------------------------------------------------------------------------- manifest


def _first_line(error: BaseException) -> str:
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[0] if lines else type(error).__name__


def file_sha256(path: Path) -> str:
    """The SHA-256 of a file's bytes, as hex."""
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def write_manifest(folder: str | os.PathLike) -> Path:
    """Record the size and SHA-256 of every file of ``folder`` (its sub-folders too) in ``manifest.json``."""
    folder = Path(folder)
    files = {
        path.relative_to(folder).as_posix(): {"size": path.stat().st_size, "sha256": file_sha256(path)}
        for path in sorted(folder.rglob("*"))
        if path.is_file() and path.name != MANIFEST_FILE
    }
    path = folder / MANIFEST_FILE
    path.write_text(json.dumps({"format": 1, "files": files}, indent=2) + "\n", encoding="utf-8")
    return path


def read_manifest(folder: str | os.PathLike) -> dict[str, dict] | None:
    """``{relative path: {"size", "sha256"}}`` of a checkpoint; None for one saved before manifests existed."""
    path = Path(folder) / MANIFEST_FILE
    if not path.is_file():
        return None
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
        files = manifest["files"]
        if not isinstance(files, dict) or not all(
            isinstance(entry, dict) and isinstance(entry.get("size"), int) for entry in files.values()
        ):
            raise ValueError("malformed file entries")
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as error:
        raise CorruptFileError(path, None, f"unreadable checkpoint manifest ({_first_line(error)})") from None
    return files


def verify_checkpoint(folder: str | os.PathLike, checksums: bool = True) -> Path:
    """Check a checkpoint folder against its manifest; returns the folder, else raises naming the bad file.

    MissingDataError when the folder or a required file is missing; CorruptFileError when a file's size
    (or, with ``checksums``, its SHA-256) differs from the manifest. A checkpoint written before manifests
    existed is checked for its required files only.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise MissingDataError(f"no checkpoint folder at {folder}")
    missing = [name for name in REQUIRED_FILES if not (folder / name).is_file()]
    if missing:
        raise MissingDataError(f"{folder} is not a complete checkpoint (missing {', '.join(missing)})")
    for name, entry in (read_manifest(folder) or {}).items():
        path = folder / name
        if not path.is_file():
            raise CorruptFileError(path, None, "missing: the checkpoint's manifest lists it")
        size = path.stat().st_size
        if size != entry["size"]:
            raise CorruptFileError(path, None, f"{size} bytes, the manifest recorded {entry['size']}: truncated or damaged")
        if checksums and "sha256" in entry and file_sha256(path) != entry["sha256"]:
            raise CorruptFileError(path, None, "its SHA-256 differs from the manifest's: the file is damaged")
    return folder


def _step_of(folder: Path) -> int:
    match = re.fullmatch(r"step-(\d+)", folder.name)
    return int(match[1]) if match else -1


def _resume_candidates(output_dir: str | os.PathLike) -> list[Path]:
    """Checkpoints to try, in order: the one ``latest`` points at, then the older ones, newest first.

    Without a readable pointer, every ``step-*`` folder, newest first. Folders newer than the pointer's are
    not candidates (a branch abandoned by resuming from an older checkpoint, or one the pointer never reached).
    """
    checkpoints = Path(output_dir) / CHECKPOINTS_DIR
    folders = sorted((path for path in checkpoints.glob("step-*") if path.is_dir()), key=_step_of, reverse=True)
    pointer = checkpoints / LATEST_FILE
    try:
        target = checkpoints / pointer.read_text(encoding="utf-8").strip() if pointer.is_file() else None
    except (OSError, UnicodeDecodeError):
        target = None
    if target is None or not target.is_dir() or target.parent != checkpoints:
        return folders
    return [target, *(folder for folder in folders if _step_of(folder) < _step_of(target))]


def latest_intact_checkpoint(output_dir: str | os.PathLike) -> Path | None:
    """The newest checkpoint that passes :func:`verify_checkpoint` (checksums included), or None.

    Starts at the one ``latest`` points at; each checkpoint skipped because it is incomplete or damaged is
    logged as a warning naming the bad file. What ``Trainer.train(resume=True)`` should resume from.
    """
    for folder in _resume_candidates(output_dir):
        try:
            return verify_checkpoint(folder)
        except ContrastextError as error:
            logger.warning("skipping checkpoint %s: %s", folder.name, error)
    return None


def clean_stale_temporaries(output_dir: str | os.PathLike) -> list[Path]:
    """Remove what a killed run left half-done in ``output_dir`` and its ``checkpoints/``; returns the paths.

    - ``.contrastext-tmp.NAME.<hex>.tmp`` folders and files (an atomic write, or a log rewrite, that never
      finished): deleted;
    - ``.contrastext-tmp.NAME.<hex>.old`` (a folder moved aside to be replaced): put back as ``NAME`` when
      ``NAME`` is missing (the kill came between the two renames), else deleted.

    Only names with the project's prefix are touched: a user's ``.X.<hex>.tmp`` stays.

    Call it at the start of a run and of a resume, before anything else writes there (one writer only).
    """
    touched = []
    output_dir = Path(output_dir)
    for folder in (output_dir, output_dir / CHECKPOINTS_DIR):
        if not folder.is_dir():
            continue
        for path in sorted(folder.iterdir()):
            match = TEMPORARY_NAME.match(path.name)
            if match and match["kind"] == "old" and not (folder / match["name"]).exists():
                os.replace(path, folder / match["name"])
                logger.warning("restored %s from %s, left by an interrupted replacement", match["name"], path.name)
            elif match:
                _remove(path)
                logger.warning("removed %s, left by an interrupted write", path)
            else:
                continue
            touched.append(path)
    return touched


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


# ----------------------------------------------------------------------------------------------- loading


def _torch_load(path: Path):
    """``torch.load(weights_only=True)`` of a checkpoint part; CorruptFileError naming it when unreadable."""
    try:
        return torch.load(path, weights_only=True)
    except (pickle.UnpicklingError, EOFError, RuntimeError, OSError, ValueError) as error:
        raise CorruptFileError(path, None, f"cannot read the checkpoint file ({_first_line(error)})") from None


def load_checkpoint(
    folder: str | os.PathLike, method: nn.Module, optimizer, scheduler, scaler=None
) -> TrainerState:
    """Restore method, optimiser, scheduler, loss scaler and global RNG states; returns the trainer state.

    The folder is verified against its manifest first (:func:`verify_checkpoint`), so a damaged file is a
    one-line error naming it, not a traceback from half-way through the restore.
    """
    folder = Path(folder)
    if not is_complete(folder):
        raise MissingDataError(
            f"{folder} is not a complete checkpoint (expected {METHOD_FILE}, {STATE_FILE}, ...)"
        )
    verify_checkpoint(folder)
    try:
        state = TrainerState.from_dict(json.loads((folder / STATE_FILE).read_text(encoding="utf-8")))
    except (UnicodeDecodeError, ValueError, TypeError, AttributeError) as error:
        raise CorruptFileError(folder / STATE_FILE, None, f"unreadable trainer state ({_first_line(error)})") from None
    load_method_state(method, folder)
    optimizer.load_state_dict(_torch_load(folder / "optimizer.pt"))
    scheduler.load_state_dict(_torch_load(folder / "scheduler.pt"))
    if scaler is not None and (folder / "scaler.pt").is_file():
        scaler.load_state_dict(_torch_load(folder / "scaler.pt"))
    restore_rng_state(_torch_load(folder / "rng.pt"))
    return state


def prune_checkpoints(output_dir: str | os.PathLike, keep_last: int) -> None:
    """Delete all but the ``keep_last`` newest checkpoints (never the one ``latest`` points at)."""
    checkpoints = Path(output_dir) / CHECKPOINTS_DIR
    keep = latest_checkpoint(output_dir)
    folders = sorted(path for path in checkpoints.glob("step-*") if path.is_dir())
    for folder in folders[: max(len(folders) - keep_last, 0)]:
        if folder != keep:
            shutil.rmtree(folder, ignore_errors=True)
