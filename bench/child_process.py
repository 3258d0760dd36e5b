"""Run one bench arm as a child process: wall time, ``ru_maxrss``, output, and a kill after a timeout.

``resource.getrusage(RUSAGE_CHILDREN)`` is the maximum over every child waited for so far, so it cannot tell the
arms of one bench apart; :func:`run_child` waits for its child with ``os.wait4``, whose ``rusage`` is that child's
own. Even so, Linux's ``ru_maxrss`` of a child is at least the parent's resident set at the fork (``exec`` keeps
the larger of the old and the new address space's high-water marks), so a bench parent that holds torch or its
data floors every arm's figure: the benches report the peak that each worker reads from its own ``VmHWM``
(``/proc/self/status``, the new address space's high-water mark since ``exec``) at its end, and ``ru_maxrss``
(``peak_rss_mib`` here) is only an upper bound. The child's stdout and stderr go to files (no pipe to fill up while
the parent waits), and a child still running after ``timeout`` seconds is killed (``timed_out``).

Example::

    done = run_child([sys.executable, "-c", "print(1)"], timeout=60)
    done.seconds, done.peak_rss_mib, done.stdout        # (0.03, 9.1, '1\\n')
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

KIB_PER_MIB = 1024


@dataclass(frozen=True)
class ChildResult:
    """A finished (or killed) child: exit status, wall seconds, ``ru_maxrss`` in MiB (an upper bound: see the
    module docstring), its output."""

    returncode: int
    seconds: float
    peak_rss_mib: float
    stdout: str
    stderr: str
    timed_out: bool


def run_child(command: Sequence[str], timeout: float, env: Mapping[str, str] | None = None) -> ChildResult:
    """Run ``command``, wait for it (killed after ``timeout`` s) and return its :class:`ChildResult`."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        start = time.perf_counter()
        process = subprocess.Popen(list(command), stdout=out, stderr=err, env=None if env is None else dict(env))
        killed = threading.Event()

        def kill() -> None:
            killed.set()
            process.kill()

        timer = threading.Timer(timeout, kill)
        timer.start()
        try:
            _, status, usage = os.wait4(process.pid, 0)
        finally:
            timer.cancel()
        seconds = time.perf_counter() - start
        process.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait again
        out.seek(0)
        err.seek(0)
        return ChildResult(process.returncode, seconds, usage.ru_maxrss / KIB_PER_MIB, out.read(), err.read(),
                           killed.is_set())


def run_worker(script: str, arm: str, result: Path, worker_args: Sequence[str], threads: int,
               timeout: float) -> dict:  # fmt: skip
    """``script --worker ARM --result RESULT WORKER_ARGS --threads N`` as a child with ``threads`` threads (OpenMP,
    MKL; tokenizers not parallel): the worker's JSON plus ``wall`` (its seconds), or ``{"timeout": True}`` past
    ``timeout``; a failed worker stops the bench with the end of its stderr."""
    command = [sys.executable, script, "--worker", arm, "--result", str(result), *worker_args, "--threads",
               str(threads)]
    environment = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads),
                   "TOKENIZERS_PARALLELISM": "false"}
    done = run_child(command, timeout, environment)
    if done.timed_out:
        return {"timeout": True}
    if done.returncode != 0:
        raise SystemExit(f"{arm} failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    return {**json.loads(Path(result).read_text()), "wall": done.seconds}


def round_robin(arms: Sequence[str], rounds: int, run_arm: Callable[[str, int], dict]) -> dict[str, list[dict]]:
    """``run_arm(arm, round_index)`` for every arm ``rounds`` times, the order reversed every other round; an arm
    that timed out is not run again. Each result is printed to stderr (without its ``negatives``)."""
    results: dict[str, list[dict]] = {arm: [] for arm in arms}
    for round_index in range(rounds):
        for arm in arms if round_index % 2 == 0 else list(reversed(arms)):
            if results[arm] and results[arm][-1].get("timeout"):
                continue
            results[arm].append(run_arm(arm, round_index))
            shown = {key: value for key, value in results[arm][-1].items() if key != "negatives"}
            print(f"  round {round_index + 1}/{rounds} {arm}: {shown}", file=sys.stderr, flush=True)
    return results


def median(runs: list[dict], key: str) -> float:
    """The median of ``key`` over an arm's runs."""
    return statistics.median(run[key] for run in runs)


def finished(runs: list[dict]) -> bool:
    """An arm ran and never timed out."""
    return bool(runs) and not any(run.get("timeout") for run in runs)
