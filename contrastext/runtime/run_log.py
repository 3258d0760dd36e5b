"""Reading a run's log: ``train_log.jsonl``, one JSON object per logged step.

A neutral reader (it knows the file, not the trainer that writes it), so that plots, comparisons and
experiments read logs without importing :mod:`contrastext.training`. The writer is
:class:`contrastext.training.logging.RunLogger`.

A run killed while appending leaves a torn last line (no final newline): it is dropped with a warning, so
``--resume`` and ``plot`` still work. Any other bad line is an error naming the file and line.

Example::

    >>> read_log("runs/simcse/train_log.jsonl")[0]["loss"]
    1.2
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from contrastext.errors import DataFormatError, MissingDataError

LOG_NAME = "train_log.jsonl"

logger = logging.getLogger("contrastext.runtime")


def _parse_line(raw: bytes) -> dict:
    """One log line as a JSON object; ValueError (with the reason) when it is not one."""
    try:
        record = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as error:
        raise ValueError(f"not valid UTF-8 ({error.reason} at byte {error.start})") from None
    except json.JSONDecodeError as error:
        raise ValueError(f"not valid JSON ({error.msg})") from None
    if not isinstance(record, dict):
        raise ValueError("expected a JSON object per line")
    return record


def _read_lines(path: Path) -> list[bytes]:
    try:
        return path.read_bytes().split(b"\n")
    except OSError as error:
        raise DataFormatError(path, None, f"cannot read the log ({error.strerror or error})") from None


def read_log(path: str | os.PathLike) -> list[dict]:
    """The records of a JSONL log; a line that is not a JSON object is an error naming file and line.

    The exception is a torn last line: bytes after the last newline that do not parse (the writer ends every
    record with a newline, so those are a record cut short by a kill). It is dropped with a warning.
    """
    path = Path(path)
    if not path.is_file():
        raise MissingDataError(f"no training log at {path}")
    lines = _read_lines(path)
    records = []
    for index, raw in enumerate(lines):
        if not raw.strip():
            continue
        try:
            records.append(_parse_line(raw))
        except ValueError as error:
            if index != len(lines) - 1:  # a complete line (it has its newline): a real error
                raise DataFormatError(path, index + 1, str(error)) from None
            logger.warning(
                "%s:%d: dropped a torn last line (%s, no final newline): the run was stopped while writing it",
                path,
                index + 1,
                error,
            )
    return records
