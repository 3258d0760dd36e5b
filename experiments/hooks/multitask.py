"""Multi-task BERT's hook (experiments/specs/multitask.yaml): the seeded shuffle of the training files and the
per-task metric names of the records."""

from __future__ import annotations

import argparse
import random
from pathlib import Path

SHUFFLED_FILES = ("minbert/ids-sst-train.csv", "minbert/sts-train.csv")
DATA_SHUFFLE_SEED = 0
# The records' names of the final evaluation's per-task scores (×100).
METRIC_KEYS = {"sst_accuracy": "minbert-sst_dev_accuracy", "quora_accuracy": "minbert-quora_dev_accuracy",
               "sts_pearson": "minbert-sts_dev_pearson"}


def prepare_data_root(source: Path, target: Path, seed: int = DATA_SHUFFLE_SEED) -> Path:
    """``target`` mirrors ``source`` with symlinks, except seeded line shuffles (header kept) of SHUFFLED_FILES.

    ``data.limit`` keeps the first rows of a training file; the minBERT SST train file is ordered (few very
    negative sentences at its head), so its first rows are no sample. One row per line in both files.
    """
    source, target = Path(source).resolve(), Path(target)
    for path in sorted(source.rglob("*")):
        relative = path.relative_to(source)
        destination = target / relative
        if path.is_dir() or str(relative) in SHUFFLED_FILES:
            continue
        destination.parent.mkdir(parents=True, exist_ok=True)
        if not destination.is_symlink() and not destination.exists():
            destination.symlink_to(path)
    for relative in SHUFFLED_FILES:
        original = source / relative
        if not original.exists():
            raise FileNotFoundError(f"{original}: the minBERT file this experiment trains on is missing")
        lines = original.read_text(encoding="utf-8").splitlines(keepends=True)
        header, rows = lines[0], lines[1:]
        random.Random(seed).shuffle(rows)
        destination = target / relative
        destination.parent.mkdir(parents=True, exist_ok=True)
        text = header + "".join(row if row.endswith("\n") else row + "\n" for row in rows)
        if not destination.exists() or destination.read_text(encoding="utf-8") != text:
            destination.write_text(text, encoding="utf-8")
    return target


def prepare(args: argparse.Namespace) -> argparse.Namespace:
    """The runs read ``<runs>/multitask/data``: the data root with the SST and STS train files shuffled (seed 0)."""
    derived = prepare_data_root(Path(args.data_root), Path(args.runs) / "multitask" / "data")
    return argparse.Namespace(**{**vars(args), "data_root": str(derived)})


def metrics(run, summary: dict, args: argparse.Namespace) -> dict:
    """The per-task scores under the records' names, the steps and the rows trained and evaluated per task."""
    raw, tasks = summary["metrics"], (summary.get("report") or {}).get("tasks", {})
    found = {ours: float(raw[theirs]) for ours, theirs in METRIC_KEYS.items()}
    return {**found, "steps": summary.get("last_step"),
            "n_train": {task: info.get("n_train") for task, info in tasks.items()},
            "n_eval": {task: info.get("n_eval") for task, info in tasks.items()}}

