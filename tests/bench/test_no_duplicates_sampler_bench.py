"""Smoke test of bench/no_duplicates_sampler.py: a tiny run (600 rows, ours against sentence-transformers' plain
sampler, the ``frequent`` regime) writes its block into a markdown file and finds the same batches on both arms."""

from __future__ import annotations

import pytest

from tests.bench._scripts import loaded_bench


@pytest.fixture(scope="module")
def bench():
    with loaded_bench("no_duplicates_sampler") as module:
        yield module


def test_the_regimes_repeat_what_they_say(bench):
    repeated = bench.make_rows(3000, "repeated")
    assert len({anchor for anchor, _ in repeated}) == 1000 and len({positive for _, positive in repeated}) == 3000
    frequent = bench.make_rows(3000, "frequent")
    share = sum(anchor == frequent[0][0] or anchor.startswith("a frequent") for anchor, _ in frequent) / 3000
    assert 0.03 < share < 0.08
    assert bench.make_rows(3000, "frequent") == frequent  # the same rows in every process


def test_a_small_run_writes_its_block_and_both_arms_give_the_same_batches(bench, tmp_path, capsys):
    output = tmp_path / "BENCHMARKS.md"
    output.write_text("# Benchmarks\n\n## Another section\n\nkept\n")
    code = bench.main(["--rows", "600", "--batch-size", "16", "--rounds", "1", "--regimes", "frequent",
                       "--arms", "ours,st", "--output", str(output)])
    assert code == 0
    text = output.read_text()
    assert "kept" in text and bench.BEGIN_MARKER in text and bench.END_MARKER in text
    rows = [line for line in text.splitlines() if line.startswith("| frequent |")]
    assert len(rows) == 2 and all("| 37 | yes |" in row for row in rows)  # 600 // 16 batches, the same on both
