"""Atomic checkpoints: a run killed at any moment resumes from its last complete checkpoint.

A checkpoint is a folder ``<output_dir>/checkpoints/step-000600/`` holding

- ``method.safetensors``: ``method.state_dict()`` (encoder, heads, critics, queues, banks; shared tensors
  stored once, via ``safetensors.torch.save_model``),
- ``optimizer.pt``, ``scheduler.pt``: their ``state_dict()``,
- ``rng.pt``: Python, NumPy and torch (CPU, CUDA) generator states,
- ``trainer_state.json``: step, epoch, batch index inside the epoch, best metric, early-stopping count
  (validated on reading by :class:`TrainerStateRecord`: types, ranges, a step no greater than the run's plan),
- ``config.yaml``: the run's configuration,
- ``data_fingerprint.json``: the fingerprints of the run's data files (:mod:`contrastext.runtime.fingerprint`),
  compared on resume; absent from checkpoints saved before fingerprints existed,
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
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from safetensors import SafetensorError
from safetensors.torch import load_model, save_model
from torch import nn

from contrastext.errors import ContrastextError, CorruptFileError, MissingDataError
from contrastext.runtime.seeding import capture_rng_state, restore_rng_state

METHOD_FILE = "method.safetensors"
STATE_FILE = "trainer_state.json"
FINGERPRINT_FILE = "data_fingerprint.json"
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


class TrainerStateRecord(BaseModel):
    """The schema of ``trainer_state.json``: every field typed strictly (``"three"``, ``3.0`` or ``true`` is not
    a step) and in range; unknown keys are ignored (a newer version may add some)."""

    model_config = ConfigDict(strict=True, extra="ignore")

    step: int = Field(0, ge=0)
    epoch: int = Field(0, ge=0)
    batch_index: int = Field(0, ge=0)
    samples_seen: int = Field(0, ge=0)
    best_metric: float | None = Field(None, allow_inf_nan=False)
    best_step: int | None = Field(None, ge=0)
    evals_without_improvement: int = Field(0, ge=0)
    stopped_early: bool = False

    @model_validator(mode="after")
    def _best_before_now(self) -> TrainerStateRecord:
        if self.best_step is not None and self.best_step > self.step:
            raise ValueError(f"best_step {self.best_step} lies after step {self.step}")
        if (self.best_step is None) != (self.best_metric is None):
            raise ValueError("best_metric and best_step must be given together")
        return self


def _schema_reason(error: ValidationError) -> str:
    first = error.errors()[0]
    key = ".".join(str(part) for part in first["loc"])
    given = first.get("input")
    shown = "" if isinstance(given, dict) else f" (found {given!r})"
    where = f"key '{key}': " if key else ""
    return f"{where}{first['msg']}{shown}"


def read_trainer_state(path: str | os.PathLike, total_steps: int | None = None) -> TrainerState:
    """``trainer_state.json`` validated by :class:`TrainerStateRecord`; with ``total_steps`` (the run's plan), a
    step beyond it is refused too. A checkpoint folder named ``step-N`` must hold step N. CorruptFileError naming
    the file and the key otherwise (a forged or damaged state never reaches the trainer)."""
    path = Path(path)
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise CorruptFileError(path, None, f"unreadable trainer state ({_first_line(error)})") from None
    if not isinstance(raw, dict):
        raise CorruptFileError(path, None, f"the trainer state must be a JSON object, found {type(raw).__name__}")
    try:
        record = TrainerStateRecord.model_validate(raw)
    except ValidationError as error:
        raise CorruptFileError(path, None, f"invalid trainer state: {_schema_reason(error)}") from None
    named = _step_of(path.parent)
    if path.parent.parent.name == CHECKPOINTS_DIR and named >= 0 and named != record.step:
        raise CorruptFileError(
            path, None, f"invalid trainer state: key 'step' is {record.step} but the checkpoint is {path.parent.name}"
        )
    if total_steps is not None and record.step > total_steps:
        raise CorruptFileError(
            path, None, f"invalid trainer state: key 'step' is {record.step}, beyond the run's {total_steps} planned "
            "steps (train.max_steps / train.epochs); a checkpoint of this run cannot be past its end"
        )
    return TrainerState(**record.model_dump())


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
    data_fingerprint: dict | None = None,
) -> Path:
    """Write the checkpoint of ``state.step`` atomically and point ``latest`` at it; returns its folder.

    ``data_fingerprint`` (:func:`contrastext.runtime.fingerprint.data_fingerprints` of the run's data inputs) is
    stored as ``data_fingerprint.json``, for a resume to compare with the data it reads."""
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
        if data_fingerprint is not None:
            (folder / FINGERPRINT_FILE).write_text(json.dumps(data_fingerprint, indent=2) + "\n", encoding="utf-8")
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


def read_data_fingerprint(folder: str | os.PathLike) -> dict | None:
    """The ``data_fingerprint.json`` of a checkpoint; None for one saved before fingerprints existed."""
    path = Path(folder) / FINGERPRINT_FILE
    if not path.is_file():
        return None
    try:
        recorded = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(recorded, dict) or not all(
            isinstance(entry, dict) and isinstance(entry.get("path"), str) and isinstance(entry.get("fingerprint"), dict)
            for entry in recorded.values()
        ):
            raise ValueError("expected {key: {path, fingerprint}}")
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise CorruptFileError(path, None, f"unreadable data fingerprint ({_first_line(error)})") from None
    return recorded


def check_rng_state(state, path: Path) -> None:
    """``rng.pt`` holds what :func:`~contrastext.runtime.seeding.capture_rng_state` writes, with the shapes this
    machine's generators take; CorruptFileError naming the file and the key otherwise."""

    def refuse(key: str, what: str) -> CorruptFileError:
        return CorruptFileError(path, None, f"invalid RNG state: key '{key}' {what}")

    if not isinstance(state, dict):
        raise CorruptFileError(path, None, f"invalid RNG state: expected a mapping, found {type(state).__name__}")
    for key in ("python", "numpy", "torch", "cuda"):
        if key not in state:
            raise refuse(key, "is missing")
    reference = torch.get_rng_state()
    cpu = state["torch"]
    if not isinstance(cpu, torch.Tensor) or cpu.dtype != reference.dtype or cpu.shape != reference.shape:
        found = f"{cpu.dtype} {tuple(cpu.shape)}" if isinstance(cpu, torch.Tensor) else type(cpu).__name__
        raise refuse("torch", f"must be a {reference.dtype} tensor of shape {tuple(reference.shape)} (found {found})")
    numpy_state = state["numpy"]
    key = numpy_state.get("key") if isinstance(numpy_state, dict) else None
    if not isinstance(key, torch.Tensor) or key.shape != (624,):
        raise refuse("numpy.key", "must be a tensor of 624 words (MT19937)")
    if not isinstance(numpy_state.get("pos"), int) or not 0 <= numpy_state["pos"] <= 624:
        raise refuse("numpy.pos", f"must be an integer in [0, 624] (found {numpy_state.get('pos')!r})")
    python = state["python"]
    internal = python.get("internal") if isinstance(python, dict) else None
    if not isinstance(internal, list) or len(internal) != 625 or not all(isinstance(word, int) for word in internal):
        raise refuse("python.internal", "must be a list of 625 integers (Python's Mersenne Twister)")
    if not isinstance(state["cuda"], list | tuple) or not all(
        isinstance(item, torch.Tensor) and item.dtype == torch.uint8 for item in state["cuda"]
    ):
        raise refuse("cuda", "must be a list of uint8 tensors")


def _load_part(path: Path, load) -> None:
    """``load(torch_load(path))`` (an optimiser's or scheduler's ``load_state_dict``); a part that does not fit the
    run (another parameter count, a malformed state) is a CorruptFileError naming the file."""
    try:
        load(_torch_load(path))
    except (ValueError, KeyError, TypeError, IndexError, RuntimeError) as error:
        raise CorruptFileError(path, None, f"does not fit this run ({_first_line(error)})") from None


def load_checkpoint(
    folder: str | os.PathLike, method: nn.Module, optimizer, scheduler, scaler=None, total_steps: int | None = None
) -> TrainerState:
    """Restore method, optimiser, scheduler, loss scaler and global RNG states; returns the trainer state.

    The folder is verified against its manifest first (:func:`verify_checkpoint`), so a damaged file is a
    one-line error naming it, not a traceback from half-way through the restore. The manifest only says the
    files are the ones written with it (a re-hashed manifest passes), so every part is checked on its own too,
    before anything is restored: ``trainer_state.json`` by its schema (:func:`read_trainer_state`, with the
    run's ``total_steps``), ``rng.pt`` by its shapes (:func:`check_rng_state`), the scheduler's step count
    against the trainer's step.
    """
    folder = Path(folder)
    if not is_complete(folder):
        raise MissingDataError(
            f"{folder} is not a complete checkpoint (expected {METHOD_FILE}, {STATE_FILE}, ...)"
        )
    verify_checkpoint(folder)
    state = read_trainer_state(folder / STATE_FILE, total_steps)
    rng = _torch_load(folder / "rng.pt")
    check_rng_state(rng, folder / "rng.pt")
    scheduler_path = folder / "scheduler.pt"
    scheduler_state = _torch_load(scheduler_path)
    taken = scheduler_state.get("last_epoch") if isinstance(scheduler_state, dict) else None
    if isinstance(taken, int) and taken > state.step:
        raise CorruptFileError(
            folder / STATE_FILE, None, f"invalid trainer state: key 'step' is {state.step} but {scheduler_path.name} "
            f"has taken {taken} steps"
        )
    load_method_state(method, folder)
    _load_part(folder / "optimizer.pt", optimizer.load_state_dict)
    _load_part(scheduler_path, lambda _: scheduler.load_state_dict(scheduler_state))
    if scaler is not None and (folder / "scaler.pt").is_file():
        _load_part(folder / "scaler.pt", scaler.load_state_dict)
    restore_rng_state(rng)
    return state


def prune_checkpoints(output_dir: str | os.PathLike, keep_last: int) -> None:
    """Delete all but the ``keep_last`` newest checkpoints (never the one ``latest`` points at)."""
    checkpoints = Path(output_dir) / CHECKPOINTS_DIR
    keep = latest_checkpoint(output_dir)
    folders = sorted(path for path in checkpoints.glob("step-*") if path.is_dir())
    for folder in folders[: max(len(folders) - keep_last, 0)]:
        if folder != keep:
            shutil.rmtree(folder, ignore_errors=True)
