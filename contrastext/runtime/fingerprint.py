"""Fingerprints of a run's data files: a resumed run must read the data the checkpoint was trained on.

A file's fingerprint is its size, its modification time, and a SHA-256: of the whole file when it is at most
2 MiB, else of its first and of its last MiB. A folder (a ``datasets`` folder) is fingerprinted file by file,
over its data files (hidden files and the ``cache-*.arrow`` files ``datasets`` writes beside them left out).

**How two fingerprints are compared** (:func:`data_changes`): by size and hashes only. The modification time is
recorded and shown, but it never decides: a file copied back, touched or restored from a backup with the same
bytes is the same data. Limit: a large file changed only between its first and its last MiB, keeping its size,
is not seen (a full hash of a 1 GB corpus at every resume was judged too slow).

Example::

    >>> recorded = data_fingerprints([("data.path", "pairs.csv")])
    >>> data_changes(recorded, data_fingerprints([("data.path", "pairs.csv")]))
    []
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

MIB = 2**20
FULL_HASH_LIMIT = 2 * MIB
"""Files up to this size are hashed whole; larger ones by their first and last MiB."""


def file_fingerprint(path: str | os.PathLike) -> dict:
    """``{"size", "mtime", "sha256"}`` (whole file, at most 2 MiB) or ``{"size", "mtime", "sha256_head",
    "sha256_tail"}`` (the first and the last MiB) of a regular file."""
    path = Path(path)
    status = path.stat()
    record: dict = {"size": status.st_size, "mtime": status.st_mtime}
    with path.open("rb") as handle:
        if status.st_size <= FULL_HASH_LIMIT:
            record["sha256"] = hashlib.sha256(handle.read()).hexdigest()
        else:
            record["sha256_head"] = hashlib.sha256(handle.read(MIB)).hexdigest()
            handle.seek(status.st_size - MIB)
            record["sha256_tail"] = hashlib.sha256(handle.read(MIB)).hexdigest()
    return record


def _is_data_file(path: Path, folder: Path) -> bool:
    parts = path.relative_to(folder).parts
    hidden = any(part.startswith(".") for part in parts)
    cache = path.name.startswith("cache-") and path.suffix == ".arrow"  # written by datasets' map, not data
    return path.is_file() and not hidden and not cache


def fingerprint(path: str | os.PathLike) -> dict:
    """The fingerprint of a file, or of a folder's data files (``{"files": {relative path: fingerprint}}``)."""
    path = Path(path)
    if path.is_dir():
        files = sorted(item for item in path.rglob("*") if _is_data_file(item, path))
        return {"files": {item.relative_to(path).as_posix(): file_fingerprint(item) for item in files}}
    return file_fingerprint(path)


def data_fingerprints(inputs: Iterable[tuple[str, str | os.PathLike | None]]) -> dict[str, dict]:
    """``{key: {"path", "fingerprint"}}`` for each ``(key, path)`` that names a local file or folder (a hub
    dataset name, or None, is left out)."""
    recorded = {}
    for key, value in inputs:
        if value is None or str(value) == "":
            continue
        path = Path(value).expanduser()
        if path.is_file() or path.is_dir():
            recorded[key] = {"path": str(value), "fingerprint": fingerprint(path)}
    return recorded


HASH_KEYS = ("size", "sha256", "sha256_head", "sha256_tail")


def _same_content(old: dict, new: dict) -> bool:
    return all(old.get(key) == new.get(key) for key in HASH_KEYS)


def _file_changes(name: str, old: dict, new: dict) -> list[str]:
    if "files" in old or "files" in new:
        old_files, new_files = old.get("files", {}), new.get("files", {})
        changes = []
        for relative in sorted(set(old_files) | set(new_files)):
            where = f"{name}/{relative}"
            if relative not in new_files:
                changes.append(f"{where} was removed")
            elif relative not in old_files:
                changes.append(f"{where} was added")
            else:
                changes.extend(_file_changes(where, old_files[relative], new_files[relative]))
        return changes
    if _same_content(old, new):
        return []
    if old.get("size") != new.get("size"):
        return [f"{name} changed ({old.get('size')} -> {new.get('size')} bytes)"]
    return [f"{name} changed (same size, other content)"]


def data_changes(recorded: dict[str, dict], current: dict[str, dict]) -> list[str]:
    """One phrase per data input whose content differs between ``recorded`` and ``current``
    (:func:`data_fingerprints`), naming the key and the file; [] when the data is the same. Sizes and hashes
    decide; modification times are ignored."""
    changes = []
    for key in sorted(set(recorded) | set(current)):
        old, new = recorded.get(key), current.get(key)
        if old is None:
            changes.append(f"{key} {new['path']} was not read by the checkpoint's run")
        elif new is None:
            changes.append(f"{key} {old['path']} is no longer read (or no longer exists)")
        else:
            changes.extend(f"{key}: {change}" for change in _file_changes(new["path"], old["fingerprint"],
                                                                           new["fingerprint"]))
    return changes


_ALLOW_DATA_CHANGE: contextvars.ContextVar[bool] = contextvars.ContextVar("allow_data_change", default=False)


def data_change_allowed() -> bool:
    """Whether a resume may continue on changed data (``--resume-allow-data-change``) in this context."""
    return _ALLOW_DATA_CHANGE.get()


@contextlib.contextmanager
def allow_data_change(allowed: bool = True) -> Iterator[None]:
    """Within the block, a resume on changed data continues with a line instead of being refused."""
    token = _ALLOW_DATA_CHANGE.set(bool(allowed))
    try:
        yield
    finally:
        _ALLOW_DATA_CHANGE.reset(token)
