"""The run log: one JSON object per logged step in ``train_log.jsonl``, and TensorBoard when installed.

A record holds ``step``, ``epoch``, ``loss`` (the weighted total), ``loss/<part>`` for every loss part,
``lr``, ``samples_per_s``, ``grad_norm`` and, when the step was evaluated, ``eval/<metric>``.
Each line is flushed at once, so other processes (``contrastext plot``, tests) can follow a live run.
On resume, :meth:`RunLogger.truncate_after` drops the lines written after the checkpoint.

Example::

    >>> logger = RunLogger("runs/simcse")
    >>> logger.log({"step": 10, "epoch": 0, "loss": 1.2, "loss/infonce": 1.2, "lr": 3e-5})
    >>> read_log("runs/simcse/train_log.jsonl")[0]["loss"]
    1.2
"""

from __future__ import annotations

import json
import logging
import math
import os
from pathlib import Path

from contrastext.runtime.run_log import LOG_NAME, read_log

logger = logging.getLogger("contrastext.training")


def _clean(value):
    """JSON has no NaN or infinity: write them as null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


class RunLogger:
    """Appends records to ``<output_dir>/train_log.jsonl`` and mirrors scalars to TensorBoard."""

    def __init__(self, output_dir: str | os.PathLike, tensorboard: bool = True, enabled: bool = True) -> None:
        self.path = Path(output_dir) / LOG_NAME
        self.enabled = enabled
        self.writer = None
        if not enabled:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if tensorboard:
            self.writer = self._tensorboard(Path(output_dir) / "tensorboard")

    @staticmethod
    def _tensorboard(folder: Path):
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:
            logger.info("TensorBoard is not installed: logging to %s only", LOG_NAME)
            return None
        return SummaryWriter(log_dir=str(folder))

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
        if self.writer is not None:
            for key, value in record.items():
                if key != "step" and isinstance(value, int | float) and not isinstance(value, bool):
                    self.writer.add_scalar(key, value, record["step"])
            self.writer.flush()

    def truncate_after(self, step: int) -> None:
        """Drop the records of steps after ``step`` (written after the checkpoint a run resumes from)."""
        if not self.enabled or not self.path.is_file():
            return
        kept = [record for record in read_log(self.path) if record["step"] <= step]
        temporary = self.path.with_suffix(".jsonl.tmp")
        temporary.write_text("".join(json.dumps(record) + "\n" for record in kept), encoding="utf-8")
        os.replace(temporary, self.path)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None
