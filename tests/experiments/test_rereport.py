"""experiments/rereport.py: the committed records under the declared primaries and the new statistics."""

from __future__ import annotations

import math

import pytest

from tests.experiments._scripts import harness, load_experiment

rereport = load_experiment("rereport")


@pytest.fixture(scope="module")
def primaries():
    return {primary["experiment"]: (row, p, word) for primary, row, p, word in rereport.primary_rows(harness.RESULTS_DIR)}


def test_one_declared_primary_per_experiment():
    floors, declared = rereport.load_primaries()
    assert sorted(p["experiment"] for p in declared) == sorted(rereport.EXPERIMENTS)
    assert {"sst2", "mrpc", "rte", "sst5", "quora"} <= set(floors)
    assert floors["mrpc"].all_positive_f1 == pytest.approx(81.2) and floors["rte"].majority == pytest.approx(52.7)


def test_scl_n20_per_draw_tuning_keeps_the_reviews_figures_as_an_exploratory_row():
    _, declared = rereport.load_primaries()
    rows = rereport.exploratory_rows(harness.RESULTS_DIR, declared)
    row = next(r for r in rows if r.experiment == "scl_few_shot" and r.label == "n20/ce+scl@tuned − n20/ce")
    assert row.stats.n == 10 and row.stats.delta == pytest.approx(1.65, abs=0.005)
    assert (row.stats.low, row.stats.high) == pytest.approx((-0.02, 3.32), abs=0.005)
    assert row.stats.t_p == pytest.approx(0.052, abs=0.0005) and row.old == "reproduced"


def test_floor_and_unit_rules_on_the_records(primaries, monkeypatch):
    row, _, word = primaries["multitask"]
    assert word == "no evidence (floor)" and "sequential" in row.floor and "62.5" in row.floor
    row, _, word = primaries["capt"]  # from scratch: 3 pre-training seeds, the MLM + CAPT read-outs at the majority rate
    assert word == "no evidence (floor)" and "scratch/mask/sst2" in row.floor and not row.note and row.stats.n >= 3
    floors, declared = rereport.load_primaries()
    continued = {"treatment": "mask/sst2", "baseline": "mlm/sst2", "unit": {"t": "pretrain/mask", "b": "pretrain/mlm"}}
    declared = [{**d, **continued} if d["experiment"] == "capt" else d for d in declared]
    monkeypatch.setattr(rereport, "load_primaries", lambda path=None: (floors, declared))
    row, p, word = next((r, p, w) for d, r, p, w in rereport.primary_rows(harness.RESULTS_DIR) if d["experiment"] == "capt")
    assert "1 independent unit" in row.note and word == "inconclusive" and p == 1.0  # continued: one pre-training an arm


def test_holm_over_seven_and_only_four_verdict_words(primaries):
    assert len(primaries) == 7
    assert all(word in ("reproduced", "opposite", "inconclusive", "no evidence (floor)")
               for _, _, word in primaries.values())
    smallest = min(row.stats.p for row, _, _ in primaries.values() if not row.note and row.stats.n)
    assert min(p for _, p, _ in primaries.values()) == pytest.approx(min(1.0, 7 * smallest))


def test_exploratory_rows_leave_out_the_primaries_and_flag_floors():
    _, declared = rereport.load_primaries()
    rows = rereport.exploratory_rows(harness.RESULTS_DIR, declared)
    labels = {(r.experiment, r.label, r.metric) for r in rows}
    assert not any(label.startswith("n20-rule/ce+scl@rule") for _, label, _ in labels)  # the primary
    rte = next(r for r in rows if r.experiment == "reclaim" and r.label.startswith("rte/"))
    assert rte.floor and "52.7" in rte.floor
    mrpc = next(r for r in rows if r.experiment == "reclaim" and r.label.startswith("mrpc/"))
    assert "all-positive 81.2" in mrpc.floor
    similar = [r for r in rows if r.margin]
    assert similar and all(r.tost is not None and 0 <= r.tost <= 1 for r in similar)
    assert all(not math.isnan(r.stats.delta) for r in rows if r.stats.n)  # n 0: a setting not run yet


def test_the_section_says_which_verdicts_change():
    text = rereport.section(harness.RESULTS_DIR)
    assert text.startswith("## The existing records under the new statistics\n")
    assert "scl_few_shot primary" in text and "(**changes**)" in text
    assert "### Exploratory comparisons" in text and "| exploratory |" in text


def test_a_bad_primary_or_floor_is_one_error_naming_it(tmp_path):
    specs = load_experiment("spec")
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
    with pytest.raises(rereport.ConfigError, match=r"error: experiments/specs/multitask.yaml: primary.floors.0.task 'sst5'"):
        rereport.load_primaries(floors)
