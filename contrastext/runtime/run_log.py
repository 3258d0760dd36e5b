"""Reading a run's log: ``train_log.jsonl``, one JSON object per logged step.

A neutral reader (it knows the file, not the trainer that writes it), so that plots, comparisons and
experiments read logs without importing :mod:`contrastext.training`. The writer is
:class:`contrastext.training.logging.RunLogger`.

Example::

    >>> read_log("runs/simcse/train_log.jsonl")[0]["loss"]
    1.2
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from contrastext.errors import DataFormatError, MissingDataError

LOG_NAME = "train_log.jsonl"


def read_log(path: str | os.PathLike) -> list[dict]:
    """The records of a JSONL log; a line that is not a JSON object is an error naming file and line."""
    path = Path(path)
    if not path.is_file():
        raise MissingDataError(f"no training log at {path}")
    records = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                raise DataFormatError(path, number, f"not valid JSON ({error.msg})") from None
            if not isinstance(record, dict):
                raise DataFormatError(path, number, "expected a JSON object per line")
            records.append(record)
    return records
