"""Smoke test of bench/information_retrieval.py: the generated BEIR data (distinct texts, 1–3 relevant documents a
query) reads the same through our reader and the ST arm's, and a tiny run (300 documents, 20 queries, the random
tiny encoder) writes its block with the same cosine_ndcg@10 on both arms.

The arms run in this process (``child_process.run_child`` replaced by a call of the script's ``main`` with the
child's arguments), so the test takes seconds, not two interpreter and library start-ups;
tests/bench/test_child_process.py covers the child process itself.
"""

from __future__ import annotations

import pytest

from tests.bench._scripts import loaded_bench, run_arms_in_process


@pytest.fixture(scope="module")
def bench():
    with loaded_bench("information_retrieval") as module:
        yield module


@pytest.fixture
def in_process_arms(bench, monkeypatch):
    """Run each arm's worker command in this process."""
    run_arms_in_process(bench, monkeypatch)


def test_the_data_is_distinct_texts_with_one_to_three_relevant_documents(bench, data_root, tmp_path):
    from contrastext.data.readers.beir import read_beir

    corpus = bench.make_corpus(bench.wiki_sentences(data_root), 30_000)  # more documents than wiki1m sentences
    assert len(set(corpus)) == len(corpus) == 30_000
    queries, relevant = bench.make_queries(corpus, 200)
    assert (queries, relevant) == bench.make_queries(corpus, 200)  # the same in every process
    assert all(1 <= len(rows) <= 3 and len(set(rows)) == len(rows) for rows in relevant)
    bench.write_beir(tmp_path / "beir", corpus[:500], queries[:5], [[row % 500 for row in rows] for rows in relevant[:5]])
    ours = read_beir(tmp_path / "beir")
    st_queries, st_corpus, st_relevant = bench.read_beir_dicts(tmp_path / "beir")
    assert ours.queries == st_queries and ours.corpus == st_corpus and ours.relevant_docs == st_relevant


def test_a_tiny_run_writes_its_block_with_the_same_ndcg_on_both_arms(bench, in_process_arms, tmp_path, capsys):
    output = tmp_path / "BENCHMARKS.md"
    output.write_text("# Benchmarks\n\n## Another section\n\nkept\n")
    code = bench.main(["--corpus-size", "300", "--queries", "20", "--output", str(output)])
    assert code == 0
    text = output.read_text()
    assert "kept" in text and bench.BEGIN_MARKER in text and bench.END_MARKER in text
    rows = [line for line in text.splitlines() if line.startswith(("| contrastext", "| ST "))]
    assert len(rows) == 2
    ndcgs = {row.split("|")[6].strip() for row in rows}
    assert len(ndcgs) == 1 and 0 < float(ndcgs.pop()) <= 1
    assert "Same cosine_ndcg@10 on both sides: yes" in text and "RANDOMLY initialised" in text
