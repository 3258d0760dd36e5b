"""bench/common.py: the helpers every bench script shares (list arguments, round-robin clocks, run conditions)."""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture(scope="module")
def common():
    sys.path.insert(0, str(BENCH))  # common imports markdown_block from beside it, as the scripts do
    try:
        spec = importlib.util.spec_from_file_location("bench_common", BENCH / "common.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.path.remove(str(BENCH))


def test_int_list_reads_commas_and_underscores_and_refuses_small_values(common):
    assert common.int_list()("64, 256,1_000_000") == [64, 256, 1_000_000]
    with pytest.raises(argparse.ArgumentTypeError, match="comma-separated integers"):
        common.int_list()("64,x")
    with pytest.raises(argparse.ArgumentTypeError, match=">= 2"):
        common.int_list(minimum=2)("1,300")
    with pytest.raises(argparse.ArgumentTypeError):
        common.int_list()("")


def test_round_robin_reverses_the_order_every_round_and_skips_the_warmup(common):
    calls = []
    runs = {"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}
    times = common.round_robin_times(runs, rounds=2, warmup=1)
    assert calls == ["a", "b", "b", "a", "a", "b"]
    assert {name: len(values) for name, values in times.items()} == {"a": 2, "b": 2}
    medians = common.median_times(runs, rounds=3)
    assert set(medians) == {"a", "b"} and all(value >= 0 for value in medians.values())


def test_run_conditions_name_the_command_and_the_load(common):
    lines = common.run_conditions("objectives.py", ["--quick", "a b"], "cpu", (1.5,), "torch x", ["float32"],
                                  load_note="(shared)")
    assert lines[:2] == ["### Run conditions", ""]
    assert "CPU only" in lines[2] and lines[3] == "- torch x"
    assert lines[4].startswith("- 1-minute load average before / after: 1.5 / ") and lines[4].endswith(" (shared)")
    assert lines[5] == "- command: `python bench/objectives.py --quick 'a b'`"
    assert lines[6] == "- float32"


def test_peak_rss_reads_the_process_status(common):
    assert common.status_mib("VmRSS") > 0
    assert common.status_mib("NoSuchField") != common.status_mib("NoSuchField")  # NaN
