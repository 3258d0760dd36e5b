"""The run log: one JSON object per logged step in ``train_log.jsonl``, mirrored to the trackers asked for.

A record holds ``step``, ``epoch``, ``loss`` (the weighted total), ``loss/<part>`` for every loss part,
``lr``, ``samples_per_s``, ``grad_norm`` and, when the step was evaluated, ``eval/<metric>``.
Each line is flushed at once, so other processes (``contrastext plot``, tests) can follow a live run.
On resume, :meth:`RunLogger.truncate_after` drops the lines written after the checkpoint.

The JSONL file is the source of truth. ``train.report_to`` (``tensorboard``, ``wandb``) adds trackers, built
with Accelerate's tracker classes (``accelerate.tracking``): every numeric field of every record goes to each
of them at the record's step, and the flattened config is stored as the run's hyper-parameters. A tracker
whose package is missing is a one-line warning naming the extra to install; the run goes on with the JSONL
log. TensorBoard writes into ``<output_dir>/tensorboard/``; Weights & Biases uses the project
``$WANDB_PROJECT`` (default ``contrastext``), writes its files under ``<output_dir>`` and follows
``$WANDB_MODE`` (``offline`` or ``disabled`` keep it off the network).

Example::

    >>> logger = RunLogger("runs/simcse", report_to=["tensorboard"])
    >>> logger.log({"step": 10, "epoch": 0, "loss": 1.2, "loss/infonce": 1.2, "lr": 3e-5})
    >>> read_log("runs/simcse/train_log.jsonl")[0]["loss"]
    1.2
"""

from __future__ import annotations

import importlib.util
import json
import logging
import math
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from contrastext.runtime.run_log import LOG_NAME, read_log
from contrastext.training.checkpoint import temporary_path

logger = logging.getLogger("contrastext.training")

TENSORBOARD_FOLDER = "tensorboard"
WANDB_DEFAULT_PROJECT = "contrastext"

# tracker name -> (the modules that provide it, the pip extra that installs it)
TRACKER_PACKAGES: dict[str, tuple[tuple[str, ...], str]] = {
    "tensorboard": (("tensorboard", "tensorboardX"), "tensorboard"),
    "wandb": (("wandb",), "wandb"),
}


def _clean(value):
    """JSON has no NaN or infinity: write them as null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def tracker_installed(name: str) -> bool:
    """Whether a package providing tracker ``name`` can be imported."""
    modules, _ = TRACKER_PACKAGES[name]
    return any(importlib.util.find_spec(module) is not None for module in modules)


def flatten_config(config: Mapping[str, Any], prefix: str = "") -> dict[str, bool | int | float | str | None]:
    """A nested config as ``{"train.lr": 3e-05, ...}`` with scalar values (lists as their JSON text), the form
    trackers take as hyper-parameters."""
    flat: dict[str, bool | int | float | str | None] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten_config(value, name + "."))
        elif value is None or isinstance(value, bool | int | float | str):
            flat[name] = value
        else:
            flat[name] = json.dumps(value, default=str)
    return flat


def make_tracker(name: str, output_dir: Path):
    """Accelerate's tracker ``name``, started (Accelerate >= 1.2 separates construction and ``start``)."""
    from accelerate import tracking

    run_name = output_dir.resolve().name or "run"
    if name == "tensorboard":
        tracker = tracking.TensorBoardTracker(TENSORBOARD_FOLDER, output_dir)  # -> <output_dir>/tensorboard
    elif name == "wandb":
        project = os.environ.get("WANDB_PROJECT", WANDB_DEFAULT_PROJECT)
        tracker = tracking.WandBTracker(project, name=run_name, dir=str(output_dir))
    else:  # the config's Literal keeps other names out
        raise ValueError(f"unknown tracker {name!r}")
    if hasattr(tracker, "start"):
        tracker.start()
    return tracker


class RunLogger:
    """Appends records to ``<output_dir>/train_log.jsonl`` and mirrors numeric fields to the trackers."""

    def __init__(
        self,
        output_dir: str | os.PathLike,
        report_to: Iterable[str] = (),
        enabled: bool = True,
        config: Mapping[str, Any] | None = None,
        tensorboard: bool | None = None,
    ) -> None:
        """``tensorboard`` is the old flag: True adds it to ``report_to``, False removes it."""
        report_to = [name for name in report_to if not (tensorboard is False and name == "tensorboard")]
        if tensorboard:
            report_to.append("tensorboard")
        self.path = Path(output_dir) / LOG_NAME
        self.enabled = enabled
        self.trackers: list = []
        if not enabled:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        for name in dict.fromkeys(report_to):  # in order, once each
            if not tracker_installed(name):
                extra = TRACKER_PACKAGES[name][1]
                logger.warning(
                    "train.report_to asks for %s, but it is not installed: nothing is sent to it, the run logs to "
                    "%s only (pip install 'contrastext[%s]')",
                    name,
                    self.path,
                    extra,
                )
                continue
            tracker = make_tracker(name, self.path.parent)
            if config is not None:
                tracker.store_init_configuration(flatten_config(config))
            self.trackers.append(tracker)

    def log(self, record: dict) -> None:
        """Append one record (must hold ``step``)."""
        if not self.enabled:
            return
        if "step" not in record:
            raise ValueError("a log record needs a 'step'")
        line = json.dumps({key: _clean(value) for key, value in record.items()}, sort_keys=False)
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(line + "\n")
            handle.flush()
        if self.trackers:
            scalars = {
                key: value
                for key, value in record.items()
                if key != "step" and isinstance(value, int | float) and not isinstance(value, bool)
            }
            for tracker in self.trackers:
                tracker.log(scalars, step=record["step"])

    def truncate_after(self, step: int) -> None:
        """Drop the records of steps after ``step`` (written after the checkpoint a run resumes from)."""
        if not self.enabled or not self.path.is_file():
            return
        kept = [record for record in read_log(self.path) if record["step"] <= step]
        temporary = temporary_path(self.path)
        temporary.write_text("".join(json.dumps(record) + "\n" for record in kept), encoding="utf-8")
        os.replace(temporary, self.path)

    def close(self) -> None:
        """Finish every tracker (flush and close TensorBoard's writer, end the W&B run)."""
        trackers, self.trackers = self.trackers, []
        for tracker in trackers:
            tracker.finish()
