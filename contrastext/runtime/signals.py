"""SIGTERM during training (a cluster preempting the job): finish the step, save a checkpoint, then stop.

:class:`PreemptionWatch` is a context manager the trainer holds around its loop. While it is held, the first
SIGTERM only sets :attr:`PreemptionWatch.requested` (and prints one line saying so); the trainer looks at it
at each step boundary, saves a checkpoint and raises :class:`TrainingPreempted`, which the command line turns
into one line (where the checkpoint is, and the command that resumes it) and exit code
:data:`PREEMPTED_EXIT_CODE` (143, 128 + SIGTERM, what a shell reports for a process SIGTERM ended). A second
SIGTERM raises ``SystemExit(143)`` at once, without a checkpoint (files being written are atomic, so the last
complete checkpoint stays the latest).

SIGINT (Ctrl-C) is left as it is (``KeyboardInterrupt``). The handler is installed only in the main thread
(Python allows no other), and the previous handler is put back when the block ends, so a library user's own
handler is replaced only while a training runs.

Example::

    >>> with PreemptionWatch() as watch:
    ...     for step in steps:
    ...         train_one(step)
    ...         if watch.requested:
    ...             save(); raise TrainingPreempted(step, folder)
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from pathlib import Path

PREEMPTED_EXIT_CODE = 128 + signal.SIGTERM
"""The exit code of ``contrastext train`` stopped by SIGTERM (after its checkpoint, or at once on a second one)."""


class TrainingPreempted(BaseException):  # noqa: N818 - an interruption, like KeyboardInterrupt, not an error
    """Training stopped on SIGTERM at ``step``, after saving ``checkpoint`` (resume with ``--resume``).

    A ``BaseException``, as ``KeyboardInterrupt``: a stop asked for from outside, which ``except Exception``
    blocks must not swallow."""

    def __init__(self, step: int, total_steps: int, checkpoint: Path | None, output_dir: Path) -> None:
        self.step, self.total_steps, self.checkpoint, self.output_dir = step, total_steps, checkpoint, output_dir
        super().__init__(f"stopped by SIGTERM at step {step} of {total_steps}: checkpoint saved in {checkpoint}")


def _say(text: str) -> None:
    """One line on stderr, written with ``os.write`` (safe inside a signal handler, unlike ``print``)."""
    with contextlib.suppress(OSError):  # stderr closed: nothing to tell
        os.write(2, (text + "\n").encode())


class PreemptionWatch:
    """While held (``with``), SIGTERM asks the training to stop at its next step boundary; see the module.

    ``announce``: print the line saying so (under a launcher, the main process only)."""

    def __init__(self, announce: bool = True) -> None:
        self.announce = announce
        self.requested = False
        self.installed = False
        self._previous = None

    def _handle(self, signum, frame) -> None:
        if self.requested:
            _say("SIGTERM again: exiting now, without a new checkpoint")
            raise SystemExit(PREEMPTED_EXIT_CODE)
        self.requested = True
        if self.announce:
            _say("SIGTERM: saving a checkpoint at the end of this step, then stopping (SIGTERM again exits at once)")

    def __enter__(self) -> PreemptionWatch:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGTERM, self._handle)
            self.installed = True
        return self

    def __exit__(self, *exc_info) -> None:
        if self.installed:
            signal.signal(signal.SIGTERM, self._previous if self._previous is not None else signal.SIG_DFL)
            self.installed = False
