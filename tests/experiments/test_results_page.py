"""experiments/results_page.py: the RESULTS.md page from the sections each experiment wrote."""

from __future__ import annotations

from tests.experiments._scripts import load_experiment


def test_a_section_not_run_yet_says_so_and_links_superseded_sittings(tmp_path):
    page = load_experiment("results_page")
    (tmp_path / "multitask-first-sitting.md").write_text("## old\n", encoding="utf-8")
    (tmp_path / "simcse.md").write_text("## SimCSE\n\nsection ![plot](simcse.png)\n", encoding="utf-8")
    text = page.results_page(tmp_path)
    multitask = text[text.index("## multitask"):text.index("## SimCSE")]  # the page keeps EXPERIMENTS' order
    assert "Not run yet: `python experiments/multitask.py" in multitask
    assert "[multitask-first-sitting](results/multitask-first-sitting.md)" in multitask
    assert "![plot](results/simcse.png)" in text  # a written section's plot link points into docs/results
    assert "superseded" not in text[text.index("## SimCSE"):]
