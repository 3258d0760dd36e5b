"""One run per output folder: a lock file holding the pid and the host of the run that writes there.

:func:`run_lock` is taken by :func:`contrastext.runs.registry.run_recipe` (``contrastext train``, with or
without ``--resume`` / ``--resume-from``) before anything is written in the output folder, at the run's top
folder (the stages of a multi-stage run write in subfolders under that one lock), and released when the run
ends, also on an error or a KeyboardInterrupt.

- The lock is ``OUTPUT/.contrastext.lock``, JSON ``{"pid", "host", "started"}``, created atomically (written
  under a temporary name, then hard-linked to its name: it never exists half-written).
- Held by a live process on this host: refused (:class:`FolderLockedError`, naming the pid and the host).
- Held by a pid that no longer runs on this host (a killed run): taken over, with a warning saying so.
- Held by another host: respected, since this host cannot tell whether that run lives; the message names the
  file to delete once that run is known to be gone (no age limit: a long run on a shared disk stays safe).
- Held by this very process (nested calls): taken again, and released by the outermost holder only.

Example::

    >>> with run_lock("runs/simcse"):
    ...     train()
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

from contrastext.errors import ConfigError

LOCK_NAME = ".contrastext.lock"
logger = logging.getLogger("contrastext.runs")
_held: dict[Path, int] = {}  # folders this process holds -> nesting depth


class FolderLockedError(ConfigError):
    """The output folder is in use by another run (its lock names a live pid, or another host)."""


def _host() -> str:
    return socket.gethostname()


def pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists on this host (one of another user counts as alive)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def read_lock(folder: str | os.PathLike) -> dict | None:
    """The lock's ``{"pid", "host", "started"}``, None without a lock, ``{}`` for an unreadable one."""
    path = Path(folder) / LOCK_NAME
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {}
    return raw if isinstance(raw, dict) else {}


def _create(path: Path) -> bool:
    """Create the lock atomically with its content; False when one exists already."""
    record = {"pid": os.getpid(), "host": _host(), "started": time.time()}
    temporary = path.with_name(f".contrastext-tmp-lock-{uuid.uuid4().hex}")
    temporary.write_text(json.dumps(record), encoding="utf-8")
    try:
        os.link(temporary, path)
        return True
    except FileExistsError:
        return False
    finally:
        temporary.unlink(missing_ok=True)


def _refusal(folder: Path, holder: dict) -> FolderLockedError:
    pid, host = holder.get("pid"), holder.get("host")
    if host == _host():
        return FolderLockedError(
            f"{folder} is in use by another run (pid {pid} on this host, {host}); wait for it to end or choose "
            "another output folder"
        )
    return FolderLockedError(
        f"{folder} is in use by a run on another host (pid {pid} on {host}); wait for it to end or choose "
        f"another output folder (delete {folder / LOCK_NAME} only if that run is gone)"
    )


def acquire(folder: str | os.PathLike) -> bool:
    """Take ``folder``'s lock (creating the folder); True when this call created the folder.

    Raises :class:`FolderLockedError` when a live run, or a run on another host, holds it."""
    folder = Path(folder).resolve()
    if folder in _held:
        _held[folder] += 1
        return False
    created = not folder.exists()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / LOCK_NAME
    for _ in range(3):  # a lock that vanished between two looks (its run just ended) is tried again
        if _create(path):
            _held[folder] = 1
            return created
        holder = read_lock(folder)
        if holder is None:
            continue
        pid, host = holder.get("pid"), holder.get("host")
        stale = host == _host() and isinstance(pid, int) and not pid_alive(pid)
        if not stale and holder:
            if created:
                _remove_if_empty(folder)
            raise _refusal(folder, holder)
        if not holder and time.time() - _mtime(path) < 60:
            raise FolderLockedError(f"{folder} has an unreadable lock {path}; delete it if no run uses the folder")
        logger.warning(
            "taking over the lock of %s: pid %s on this host (%s) is no longer running", folder, pid, host
        )
        path.unlink(missing_ok=True)
    raise FolderLockedError(f"{folder}: could not take the lock {path}")


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _remove_if_empty(folder: Path) -> None:
    with contextlib.suppress(OSError):
        folder.rmdir()


def release(folder: str | os.PathLike, created: bool = False) -> None:
    """Drop this process's hold on ``folder``; the lock file goes with the outermost hold (and the folder too
    when this run created it and left nothing in it: a refused run changes nothing on disk)."""
    folder = Path(folder).resolve()
    depth = _held.get(folder, 0)
    if depth > 1:
        _held[folder] = depth - 1
        return
    _held.pop(folder, None)
    holder = read_lock(folder)
    if holder and holder.get("pid") == os.getpid() and holder.get("host") == _host():
        (folder / LOCK_NAME).unlink(missing_ok=True)
    if created:
        _remove_if_empty(folder)


@contextlib.contextmanager
def run_lock(folder: str | os.PathLike) -> Iterator[Path]:
    """Hold ``folder``'s lock for the ``with`` block (see the module's docstring)."""
    created = acquire(folder)
    try:
        yield Path(folder)
    finally:
        release(folder, created)
