"""experiments/verdicts.py: the committed records under the declared primaries and issue 25's statistics."""

from __future__ import annotations

import math

import pytest

from tests.experiments._scripts import harness, load_experiment

specs = load_experiment("spec")

verdicts = load_experiment("verdicts")


@pytest.fixture(scope="module")
def primaries():
    return {primary["experiment"]: (row, p, word) for primary, row, p, word in verdicts.primary_rows(harness.RESULTS_DIR)}


def test_one_declared_primary_per_experiment():
    floors, declared = verdicts.load_primaries()
    assert sorted(p["experiment"] for p in declared) == sorted(verdicts.EXPERIMENTS)
    assert {"sst2", "mrpc", "rte", "sst5", "quora"} <= set(floors)
    assert floors["mrpc"].all_positive_f1 == pytest.approx(81.2) and floors["rte"].majority == pytest.approx(52.7)


def _rows(name: str) -> list:
    return verdicts.comparison_rows(specs.load_spec(name), harness.RecordStore(name, harness.RESULTS_DIR))


def test_scl_n20_per_draw_tuning_keeps_the_reviews_figures_as_an_exploratory_row():
    row = next(r for r in _rows("scl_few_shot") if r.label == "n20/ce+scl@tuned − n20/ce")
    assert row.stats.n == 10 and row.stats.delta == pytest.approx(1.65, abs=0.005)
    assert (row.stats.low, row.stats.high) == pytest.approx((-0.02, 3.32), abs=0.005)
    assert row.stats.t_p == pytest.approx(0.052, abs=0.0005)


def test_floor_and_unit_rules_on_the_records(primaries, monkeypatch):
    row, _, word = primaries["multitask"]
    assert word == "no evidence (floor)" and "sequential" in row.floor and "62.5" in row.floor
    row, _, word = primaries["capt"]  # from scratch: 3 pre-training seeds, the MLM + CAPT read-outs at the majority rate
    assert word == "no evidence (floor)" and "scratch/mask/sst2" in row.floor and not row.note and row.stats.n >= 3
    floors, declared = verdicts.load_primaries()
    continued = {"treatment": "mask/sst2", "baseline": "mlm/sst2", "unit": {"t": "pretrain/mask", "b": "pretrain/mlm"}}
    declared = [{**d, **continued} if d["experiment"] == "capt" else d for d in declared]
    monkeypatch.setattr(verdicts, "load_primaries", lambda path=None: (floors, declared))
    row, p, word = next((r, p, w) for d, r, p, w in verdicts.primary_rows(harness.RESULTS_DIR) if d["experiment"] == "capt")
    assert "1 independent unit" in row.note and word == "inconclusive" and p == 1.0  # continued: one pre-training an arm


def test_holm_over_seven_and_only_four_verdict_words(primaries):
    assert len(primaries) == 7
    assert all(word in ("reproduced", "opposite", "inconclusive", "no evidence (floor)")
               for _, _, word in primaries.values())
    smallest = min(row.stats.p for row, _, _ in primaries.values() if not row.note and row.stats.n)
    assert min(p for _, p, _ in primaries.values()) == pytest.approx(min(1.0, 7 * smallest))


def test_comparison_rows_flag_floors_and_caveats_and_the_table_labels_only_the_primary():
    rows = _rows("reclaim")
    rte = next(r for r in rows if r.label.startswith("rte/"))
    assert rte.floor and "52.7" in rte.floor and "permutation p cannot go below 0.0625" in rte.note
    assert "all-positive 81.2" in next(r for r in rows if r.label.startswith("mrpc/")).floor
    similar = [r for r in _rows("multitask") if r.margin]
    assert similar and all(r.tost is not None and 0 <= r.tost <= 1 for r in similar)
    assert all(not math.isnan(r.stats.delta) for name in verdicts.EXPERIMENTS for r in _rows(name) if r.stats.n)
    table = verdicts.comparison_table(specs.load_spec("reclaim"), harness.RecordStore("reclaim", harness.RESULTS_DIR))
    assert table.count("**primary: ") == 1 and "| off the floor | **primary: inconclusive**" in table
    assert "rte/top100 52.3 < majority 52.7 + 3" in table


def test_the_section_leads_with_the_primaries():
    text = verdicts.section(harness.RESULTS_DIR)
    assert text.startswith("## Verdicts: one primary comparison per paper")
    assert text.index("| scl_few_shot |") < text.index("### How a verdict is made")
    assert "old rule" not in text


def test_a_bad_primary_or_floor_is_one_error_naming_it(tmp_path):
    text = (specs.SPECS_DIR / "simcse.yaml").read_text(encoding="utf-8")
    path = tmp_path / "simcse.yaml"
    path.write_text(text.replace("  treatment: sup/cls\n", ""), encoding="utf-8")
    with pytest.raises(specs.SpecError, match=r"simcse.yaml: primary.treatment: Field required"):
        specs.load_spec(path)
    path.write_text(text.replace("  test: paired-t+permutation", "  test: tost"), encoding="utf-8")
    with pytest.raises(specs.SpecError, match=r"margin is needed by test: tost"):
        specs.load_spec(path)
    floors = tmp_path / "floors.yaml"
    floors.write_text("sst2: {majority: 50.9}\n", encoding="utf-8")  # multitask's floors name sst5 and quora
    with pytest.raises(verdicts.ConfigError, match=r"error: experiments/specs/multitask.yaml: primary.floors.0.task 'sst5'"):
        verdicts.load_primaries(floors)
