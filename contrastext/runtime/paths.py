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
