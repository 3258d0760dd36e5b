"""Every bench script's ``--help`` prints (argparse formats each option's help with %-substitution)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.mark.parametrize(
    "script",
    ["ans_profile", "encode", "grad_cache_memory", "objectives", "reclaim_overhead", "train_simcse", "no_duplicates_sampler"],
)
def test_every_bench_script_prints_its_help(script):
    """A bare % in one option's help ("random 80%") crashed reclaim_overhead's --help."""
    done = subprocess.run([sys.executable, str(BENCH / f"{script}.py"), "--help"], capture_output=True, text=True)
    assert done.returncode == 0 and "usage:" in done.stdout, done.stderr[-2000:]
