"""What every bench script shares: where the data is, how to start ``contrastext``, round-robin clocks, the
"Run conditions" lines of a report and its publication (``markdown_block``), the process's resident-set peak,
the ``--bank-sizes``-style list type and the hidden options of a bench's worker processes.

The scripts import it from beside them (bench/ is not a package)::

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import common

Nothing here imports torch at module level: a script's ``--help`` and its parent process stay light.
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

import markdown_block

REPO = Path(__file__).resolve().parents[1]
MIB = 2**20


# ------------------------------------------------------------------------------------------------ set-up


def default_data_root() -> Path:
    """``$CONTRASTEXT_DATA``, else ``../shared/data`` beside the clone."""
    return Path(os.environ.get("CONTRASTEXT_DATA", REPO.parent / "shared" / "data"))


def contrastext_command() -> list[str]:
    """The ``contrastext`` command of this interpreter's environment (``python -m contrastext`` without one)."""
    script = Path(sys.executable).with_name("contrastext")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "contrastext"]


def int_list(minimum: int = 1) -> Callable[[str], list[int]]:
    """argparse type: comma-separated integers, each at least ``minimum`` (``_`` allowed: ``1_000_000``)."""

    def parse(text: str) -> list[int]:
        try:
            values = [int(value.replace("_", "")) for value in text.split(",") if value.strip()]
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected comma-separated integers like 64,256; got {text!r}") from None
        if not values or min(values) < minimum:
            raise argparse.ArgumentTypeError(f"expected integers >= {minimum} like 64,256; got {text!r}")
        return values

    return parse


# ------------------------------------------------------------------------------------------------ clocks


def synchronize(device) -> None:
    """Wait for the device's queued work before a clock or memory reading (CUDA runs asynchronously; nothing
    to wait for on the CPU). ``device``: a ``torch.device`` or its name."""
    if str(device).startswith("cuda"):
        import torch

        torch.cuda.synchronize(device)


def round_robin_times(
    runs: dict[str, Callable[[], object]], rounds: int, device="cpu", warmup: int = 0, progress: bool = False
) -> dict[str, list[float]]:
    """Seconds of each run per timed round: every run once a round, the order reversed every round (warm-up
    rounds included), the device synchronised around each clock reading. The first ``warmup`` rounds are not
    timed; ``progress`` prints each reading to stderr."""
    times: dict[str, list[float]] = {name: [] for name in runs}
    for index in range(warmup + rounds):
        for name in list(runs) if index % 2 == 0 else list(reversed(runs)):
            synchronize(device)
            start = time.perf_counter()
            runs[name]()
            synchronize(device)
            if index < warmup:
                continue
            times[name].append(time.perf_counter() - start)
            if progress:
                print(f"  round {index - warmup + 1}/{rounds} {name}: {times[name][-1]:.2f} s", file=sys.stderr,
                      flush=True)
    return times


def median_times(runs: dict[str, Callable[[], object]], rounds: int, device="cpu", warmup: int = 0) -> dict[str, float]:
    """The median seconds of each run over :func:`round_robin_times`' timed rounds."""
    return {name: statistics.median(values) for name, values in round_robin_times(runs, rounds, device, warmup).items()}


def add_worker_options(parser: argparse.ArgumentParser) -> None:
    """The hidden ``--worker ARM`` and ``--result FILE`` of a bench that runs each arm in a fresh process of its own
    script: the parent passes them, the child measures its arm and writes its JSON result to FILE."""
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--result", default=None, help=argparse.SUPPRESS)


# ---------------------------------------------------------------------------------------------- memory


def reset_peak_rss() -> bool:
    """Reset this process's VmHWM (peak resident set) to its current RSS (Linux >= 4.0); False when not possible."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def status_mib(field_name: str) -> float:
    """A size field of /proc/self/status (``VmRSS``, ``VmHWM``, ...) in MiB; NaN when absent."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field_name + ":"):
            return int(line.split()[1]) * 1024 / MIB
    return float("nan")


# ---------------------------------------------------------------------------------------------- report


def publish_report(report: str, args: argparse.Namespace, script: str, section: str) -> None:
    """Print ``report`` and, with ``--output FILE``, replace ``bench/<script>``'s marked block of FILE with it
    (under ``--section-suffix``; appended under ``section`` when FILE lacks the block)."""
    print(report)
    if args.output is not None:
        markdown_block.write_script_block(args.output, report, script, section, args.section_suffix)


def hardware(device: str) -> str:
    """``CPU only, N cores`` or ``<GPU name> (cuda:N), N CPU cores``."""
    if not device.startswith("cuda"):
        return f"CPU only, {os.cpu_count()} cores"
    import torch

    return f"{torch.cuda.get_device_name(torch.device(device))} ({device}), {os.cpu_count()} CPU cores"


def run_conditions(
    script: str,
    argv: Sequence[str],
    device: str,
    load_before: tuple[float, ...],
    versions: str,
    details: Sequence[str] = (),
    load_note: str = "",
) -> list[str]:
    """The "Run conditions" section of a report: date and machine, ``versions`` (library versions, threads),
    the 1-minute load average before / now (`` load_note`` after it), the command, then ``details`` (one
    bullet each)."""
    return [
        "### Run conditions",
        "",
        f"- date: {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}; machine: {platform.machine()}, "
        f"{hardware(device)}",
        f"- {versions}",
        f"- 1-minute load average before / after: {load_before[0]:.1f} / {os.getloadavg()[0]:.1f}"
        + (f" {load_note}" if load_note else ""),
        f"- command: `{' '.join(['python', f'bench/{script}', *map(shlex.quote, argv)])}`",
        *(f"- {detail}" for detail in details),
    ]
