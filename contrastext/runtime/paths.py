"""Outputs never written over inputs: an output path may not equal, or lie inside, any input of the command.

Checked by every command before any model loads (``encode``, ``eval``, ``train``): the texts being encoded, the
model folder being read, the data files of a run. Paths are compared with symbolic links resolved, so a link to
an input is that input.

Example::

    >>> check_apart("texts.txt", "--output", [("--input", "texts.txt")])  # texts.txt exists
    ConfigError: --output texts.txt is the input file (--input) texts.txt: writing there would destroy it; give
    --output a path outside every input
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from contrastext.errors import ConfigError


def local_input(value: str | os.PathLike | None) -> Path | None:
    """``value`` as a path when it names something on this machine (a hub model name does not), else None."""
    if value is None or str(value) == "":
        return None
    path = Path(value).expanduser()
    return path if os.path.lexists(path) else None


def check_apart(
    output: str | os.PathLike, option: str, inputs: Iterable[tuple[str, str | os.PathLike | None]]
) -> None:
    """ConfigError when ``output`` (given as ``option``) is, or lies inside, one of ``inputs`` ((what, path)).

    Inputs that do not exist here (a hub model name, a missing file) are skipped: their own check names them."""
    target = Path(os.path.realpath(Path(output).expanduser()))
    for what, value in inputs:
        source = local_input(value)
        if source is None:
            continue
        real = Path(os.path.realpath(source))
        kind = "folder" if real.is_dir() else "file"
        if target == real:
            where = "is"
        elif target.is_relative_to(real):
            where = "lies inside"
        else:
            continue
        raise ConfigError(
            f"{option} {output} {where} the input {kind} ({what}) {value}: writing there would destroy it; "
            f"give {option} a path outside every input"
        )


def nearest_existing(path: Path) -> Path:
    """``path`` or its closest existing parent (the folder a new path would be created in)."""
    path = Path(os.path.abspath(path))
    while not os.path.lexists(path) and path != path.parent:
        path = path.parent
    return path


def weights_bytes(model: str | os.PathLike | None) -> int:
    """The size of a local model folder's weight files (0 for a hub name, or no weights found)."""
    folder = local_input(model)
    if folder is None or not folder.is_dir():
        return 0
    return sum(
        file.stat().st_size for file in folder.rglob("*") if file.suffix in (".safetensors", ".bin") and file.is_file()
    )


def check_writable_space(folder: str | os.PathLike, option: str, needed: int) -> None:
    """ConfigError unless ``folder`` (or the parent it would be created in) is a writable folder with at least
    ``needed`` bytes free: a read-only disk or a full one is named before the work, not after it."""
    existing = nearest_existing(Path(folder))
    if not existing.is_dir():
        return  # a path under a file: named by the caller's own check
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(f"{option} {folder}: cannot write in {existing} (read-only folder or filesystem)")
    try:
        statistics = os.statvfs(existing)
    except OSError:
        return
    if statistics.f_flag & os.ST_RDONLY:
        raise ConfigError(f"{option} {folder}: cannot write in {existing} (read-only filesystem)")
    free = statistics.f_bavail * statistics.f_frsize
    if free < needed:
        raise ConfigError(
            f"{option} {folder}: {free / 2**20:.1f} MiB free on its disk, a checkpoint of this model needs about "
            f"{needed / 2**20:.1f} MiB; free space or choose another output folder"
        )
