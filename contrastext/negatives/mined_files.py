"""Writing mined rows: a CSV, TSV or JSONL file, or a Hugging Face ``datasets`` folder, whole or not at all.

The kind follows the output path: ``.csv`` (comma, CSV quoting), ``.tsv`` (TAB, CSV quoting), ``.jsonl`` (one JSON
object a line), anything else a ``save_to_disk`` folder (one ``Dataset``, read as the ``train`` split). Each has a
header / keys naming the columns, so ``contrastext train mnrl --set data.path=<file>`` (or ``data.dataset=<folder>``)
reads a triplet output as it is: anchor, positive, negative in that order.

Everything is written under a temporary name beside the target (``.contrastext-tmp.NAME.<hex>.tmp``) and renamed
into place at the end: a failure leaves nothing half-written. An existing folder is never replaced.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import uuid
from collections.abc import Sequence
from pathlib import Path

from contrastext.errors import ConfigError

FILE_KINDS: dict[str, str] = {".csv": "csv", ".tsv": "tsv", ".jsonl": "jsonl"}


def output_kind(path: str | os.PathLike) -> str:
    """``csv``, ``tsv``, ``jsonl`` (by suffix) or ``dataset`` (any other path: a ``save_to_disk`` folder)."""
    return FILE_KINDS.get(Path(path).suffix.lower(), "dataset")


def check_output(path: str | os.PathLike, option: str = "--output") -> str:
    """The kind of ``path``; ConfigError when it cannot be written as that kind (checked before any work)."""
    path = Path(path)
    kind = output_kind(path)
    if kind == "dataset" and path.exists():
        raise ConfigError(f"{option} {path}: already exists; give a new folder for the dataset (or a .csv, .tsv or "
                          ".jsonl file)")  # fmt: skip
    if kind != "dataset" and path.is_dir():
        raise ConfigError(f"{option} {path}: is a folder; give a file path ending in {kind}")
    return kind


def _temporary(target: Path) -> Path:
    return target.with_name(f".contrastext-tmp.{target.name}.{uuid.uuid4().hex}.tmp")


def _table_bytes(columns: Sequence[str], rows: Sequence[tuple], kind: str) -> bytes:
    buffer = io.StringIO(newline="")
    if kind == "jsonl":
        for row in rows:
            buffer.write(json.dumps(dict(zip(columns, row, strict=True)), ensure_ascii=False) + "\n")
    else:
        writer = csv.writer(buffer, delimiter="\t" if kind == "tsv" else ",", lineterminator="\n")
        writer.writerow(columns)
        writer.writerows(rows)
    return buffer.getvalue().encode("utf-8")


def write_rows(path: str | os.PathLike, columns: Sequence[str], rows: Sequence[tuple]) -> str:
    """Write ``rows`` (tuples in ``columns`` order) to ``path`` as its kind; returns the kind."""
    target = Path(path)
    kind = check_output(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = _temporary(target)
    try:
        if kind == "dataset":
            import datasets

            table = {name: [row[i] for row in rows] for i, name in enumerate(columns)}
            datasets.Dataset.from_dict(table).save_to_disk(str(temporary))
            os.rename(temporary, target)
        else:
            temporary.write_bytes(_table_bytes(columns, rows, kind))
            os.replace(temporary, target)
    except OSError as error:
        raise ConfigError(f"--output {path}: cannot write ({error.strerror or error})") from None
    finally:
        if temporary.is_dir():
            shutil.rmtree(temporary, ignore_errors=True)
        elif temporary.exists():
            temporary.unlink()
    return kind
