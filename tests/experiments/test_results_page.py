"""experiments/results_page.py: the RESULTS.md page from the sections each experiment wrote."""

from __future__ import annotations

from tests.experiments._scripts import load_experiment


def test_a_section_not_run_yet_says_so_and_links_superseded_sittings(tmp_path):
    page = load_experiment("results_page")
    (tmp_path / "multitask-first-sitting.md").write_text("## old\n", encoding="utf-8")
    (tmp_path / "simcse.md").write_text("## SimCSE\n\nsection ![plot](simcse.png)\n", encoding="utf-8")
    text = page.results_page(tmp_path)
    multitask = text[text.index("## multitask"):text.index("## SimCSE")]  # the page keeps EXPERIMENTS' order
    assert "Not run yet: `python experiments/run.py multitask" in multitask
    assert "[multitask-first-sitting](results/multitask-first-sitting.md)" in multitask
    assert "![plot](results/simcse.png)" in text  # a written section's plot link points into docs/results
    assert "superseded" not in text[text.index("## SimCSE"):]


def test_the_provenance_section_counts_the_records_that_carry_one(tmp_path):
    page = load_experiment("results_page")
    harness = load_experiment("harness")
    store = harness.RecordStore("simcse", tmp_path)
    store.records = [
        {"setting": "a", "seed": 1, "provenance": {"git_commit": "0123456789abcdef", "git_dirty": False,
                                                   "python": "3.11", "versions": {"torch": "2.13"},
                                                   "torch_threads": 1, "cpu_count": 2, "cpu_model": "x"}},
        {"setting": "a", "seed": 2},  # made before records carried one
    ]
    store.save()
    (tmp_path / "scl_noise.json").write_text("[]\n", encoding="utf-8")
    text = page.provenance_table(tmp_path)
    assert "| simcse | 2 | 1 | 0 | 0 | git 0123456789ab, Python 3.11, torch 2.13, 1 torch threads, 2 CPUs (x) |" in text
    assert "| scl_noise | 0 | 0 | 0 | 0 | none: made before the records carried one |" in text
