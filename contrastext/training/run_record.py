"""A run's record of what produced it: ``<output_dir>/provenance.json``, beside ``config.yaml``.

``config.yaml`` is the fully resolved config (every key of :class:`~contrastext.training.config.TrainConfig`,
defaults included; it stays a loadable config, so nothing else is written into it). ``provenance.json`` adds
the rest::

    {"config_file": "config.yaml",
     "method_args": {...},            # the recipe's method_args resolved by its own model (defaults included)
     "sessions": [                    # one per train() of this folder: the first run, then each --resume
       {"provenance": {...},          # contrastext.runtime.provenance: commit, dirty flag, versions, threads,
                                      # CPU, the data files' fingerprints (SHA-256), CPU and wall time at start
        "start_step": 0,
        "end": {"step": 100, "cpu_time_s": ..., "wall_time_s": ..., "session_cpu_s": ..., "session_wall_s": ...,
                "preempted": false}}]}

A session stopped by a crash keeps ``"end": null``. Only the main process writes it (atomically).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from contrastext.runtime.provenance import process_times, provenance
from contrastext.training.checkpoint import atomic_write_text

RECORD_NAME = "provenance.json"
CONFIG_NAME = "config.yaml"


def read_record(output_dir: str | Path) -> dict | None:
    """The folder's ``provenance.json`` (None when there is none or it cannot be read)."""
    path = Path(output_dir) / RECORD_NAME
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def _write(output_dir: Path, record: dict) -> None:
    atomic_write_text(output_dir / RECORD_NAME, json.dumps(record, indent=1, default=str) + "\n")


class RunRecord:
    """Writes one session of ``provenance.json``: :meth:`start` when the run is accepted, :meth:`end` when it
    stops (finished or preempted)."""

    def __init__(self, output_dir: str | Path, method_args: dict | None = None) -> None:
        self.output_dir = Path(output_dir)
        self.method_args = method_args
        self._started: dict | None = None
        self._clock = time.perf_counter()

    def start(self, step: int, data: dict | None, fresh: bool) -> None:
        """A new session: the provenance now (``data``: the fingerprints the run took at its start). A fresh run
        starts the record anew; a resumed one appends to the sessions already recorded."""
        previous = None if fresh else read_record(self.output_dir)
        sessions = list(previous.get("sessions", [])) if previous else []
        self._started = provenance(data=data)
        self._clock = time.perf_counter()
        sessions.append({"provenance": self._started, "start_step": step, "end": None})
        method_args = self.method_args if self.method_args is not None else (previous or {}).get("method_args")
        record = {"config_file": CONFIG_NAME, "method_args": method_args, "sessions": sessions}
        _write(self.output_dir, record)

    def end(self, step: int, preempted: bool = False) -> None:
        """The session's end: the step, the process's CPU and wall time, and the session's own."""
        if self._started is None:
            return
        record = read_record(self.output_dir)
        if not record or not record.get("sessions"):
            return
        now = process_times()
        record["sessions"][-1]["end"] = {
            "step": step,
            **now,
            "session_cpu_s": round(now["cpu_time_s"] - self._started["cpu_time_s"], 3),
            "session_wall_s": round(time.perf_counter() - self._clock, 3),
            "preempted": preempted,
        }
        _write(self.output_dir, record)
