"""Smoke test of bench/mining.py: the (query, positive) rows come from the shared files in the documented order,
the overlap is measured as documented, and a tiny run (300 pairs, the random tiny encoder, ours against ST's
exact and faiss mining) writes its block with every arm's negatives equal to ours.

The arms run in this process (``child_process.run_child`` replaced by a call of the script's ``main`` with the
child's arguments), so the test takes seconds; tests/bench/test_child_process.py covers the child process itself.
"""

from __future__ import annotations

import importlib.util

import pytest

from tests.bench._scripts import loaded_bench, run_arms_in_process


@pytest.fixture(scope="module")
def bench():
    with loaded_bench("mining") as module:
        yield module


@pytest.fixture
def in_process_arms(bench, monkeypatch):
    """Run each arm's worker command in this process."""
    run_arms_in_process(bench, monkeypatch)


def test_the_pairs_come_from_the_question_files_first(bench, data_root):
    pairs = bench.make_pairs(data_root, 1000)
    assert len(pairs) == 1000 and pairs == bench.make_pairs(data_root, 1000)
    assert pairs[0] == bench.question_pairs(data_root)[0] and all(query != positive for query, positive in pairs)
    sources = len(bench.question_pairs(data_root)) + len(bench.nli_pairs(data_root))
    extended = bench.make_pairs(data_root, sources + 50)  # past the real pairs: wiki1m (sentence, part of it)
    assert set(extended[-1][1].split()) <= set(extended[-1][0].split())
    with pytest.raises(SystemExit, match="--pairs"):
        bench.make_pairs(data_root, 10_000_000)


def test_the_overlap_counts_their_negatives_found_by_us_over_the_shared_queries(bench):
    ours = {"q1": ["a", "b"], "q2": ["c", "d"], "q3": ["e"]}
    theirs = {"q1": ["a", "x"], "q2": ["c", "d"], "q4": ["f"]}
    assert bench.overlap(ours, theirs) == (3 / 4, 2)


def test_a_tiny_run_writes_its_block_with_the_same_negatives_on_every_arm(bench, in_process_arms, tmp_path, capsys):
    output = tmp_path / "BENCHMARKS.md"
    output.write_text("# Benchmarks\n\n## Another section\n\nkept\n")
    arms = "ours,st,st-faiss" if importlib.util.find_spec("faiss") else "ours,st"
    code = bench.main(["--pairs", "300", "--arms", arms, "--output", str(output)])
    assert code == 0
    text = output.read_text()
    assert "kept" in text and bench.BEGIN_MARKER in text and bench.END_MARKER in text
    rows = [line for line in text.splitlines() if line.startswith(("| contrastext", "| ST "))]
    assert len(rows) == len(arms.split(","))
    assert all("| 100.00% | 0 |" in row for row in rows)
    assert len({row.split("|")[5] for row in rows}) == 1  # the same number of rows written
