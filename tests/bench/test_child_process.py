"""bench/child_process.py: a child's wall time, its ru_maxrss (at least what it allocated), its output, and the
kill after the timeout."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import child_process  # noqa: E402

ALLOCATE = "b = bytearray(200 * 2**20); b[::4096] = b'x' * len(b[::4096]); print('done')"


def test_the_peak_rss_covers_what_the_child_allocated_and_its_output_is_read():
    big = child_process.run_child([sys.executable, "-c", ALLOCATE], timeout=60)
    small = child_process.run_child([sys.executable, "-c", "import sys; print('hi', file=sys.stderr)"], timeout=60)
    assert big.returncode == 0 and big.stdout == "done\n" and not big.timed_out
    assert big.peak_rss_mib > 200
    assert small.stderr == "hi\n" and small.peak_rss_mib > 0
    assert 0 < small.seconds < 60


def test_a_child_past_its_timeout_is_killed():
    done = child_process.run_child([sys.executable, "-c", "import time; time.sleep(30)"], timeout=0.5)
    assert done.timed_out and done.returncode != 0 and done.seconds < 10


def test_a_failing_child_gives_its_exit_status():
    done = child_process.run_child([sys.executable, "-c", "raise SystemExit(3)"], timeout=60)
    assert done.returncode == 3 and not done.timed_out
