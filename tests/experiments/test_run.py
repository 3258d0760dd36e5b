"""experiments/run.py over every spec in experiments/specs/ (issue 25, item 1): the plan, the configs, the
records, the cost model, the page and the plots, from the committed records; and one real run."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from tests.experiments._scripts import load_experiment

run, specs, harness = load_experiment("run"), load_experiment("spec"), load_experiment("harness")
RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results"
SPECS = sorted(path.stem for path in specs.SPECS_DIR.glob("*.yaml"))
FACTOR = 2.5  # as tests/experiments/test_cost.py: a recorded run's wall time within 2.5× of its reference


def _args(experiment, tmp_path, *extra):
    return run.build_parser(experiment).parse_args(["--results", str(tmp_path), "--runs", str(tmp_path / "runs"),
                                                    *extra])


@pytest.fixture(params=SPECS)
def experiment(request):
    return specs.load_spec(request.param)


def test_the_plan_is_unique_and_every_run_loads_a_valid_config(experiment, tmp_path):
    from contrastext import load_config, recipe_path

    runs = run.plan(experiment, _args(experiment, tmp_path))
    assert len({(r.name, r.seed) for r in runs}) == len(runs) > 0
    assert len({r.output_dir for r in runs}) == len(runs)
    for item in runs:
        config = load_config(recipe_path(item.recipe), item.overrides)
        assert str(tmp_path / "runs") in str(config.output_dir)
        assert item.reference_seconds() > 0


def test_the_committed_records_are_the_plans_runs_and_within_the_cost_model(experiment, tmp_path):
    store = harness.RecordStore(experiment.name, RESULTS)
    runs = {(r.name, r.seed): r for r in run.plan(experiment, _args(experiment, tmp_path))}
    assert run.mismatched(store, list(runs.values())) == []
    ratios = {key: store.get(*key)["wall_s"] / item.reference_seconds() for key, item in runs.items() if store.has(*key)}
    outside = {key: round(ratio, 2) for key, ratio in ratios.items() if not 1 / FACTOR <= ratio <= FACTOR}
    assert len(ratios) >= min(10, len(runs)) and not outside  # gd_mechanism: one run
    assert 0.5 <= statistics.median(ratios.values()) <= 2.0


def test_the_page_and_plots_render_from_the_committed_records(experiment, tmp_path):
    for path in RESULTS.glob("*.json"):
        (tmp_path / path.name).write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    assert run.main([experiment.name, "--report-only", "--results", str(tmp_path)]) == 0
    page = (tmp_path / f"{experiment.name}.md").read_text(encoding="utf-8")
    assert f"python experiments/run.py {experiment.name}" in page and "primary" in page
    for setting in harness.RecordStore(experiment.name, tmp_path).settings():
        assert f"`{setting}`" in page
    for figure in experiment.plots:
        assert (tmp_path / figure.file).stat().st_size > 10_000
    line = run.summary(experiment, harness.RecordStore(experiment.name, tmp_path))
    declared = run.primary_verdict(experiment, tmp_path) is not None  # retrieval, gd_mechanism: none
    assert ("primary `" in line["verdict"]) == declared and line["numbers"]


def test_a_stand_in_setting_pairs_with_every_seed(tmp_path):
    experiment = specs.load_spec("simcse")
    store = harness.RecordStore("simcse", tmp_path)
    timing = harness.RunTiming([0.1], [0.1], 1.0)
    store.add("before/cls", 0, {}, {"avg3_spearman": 70.0}, timing)
    for seed, value in ((1, 71.0), (2, 73.0)):
        store.add("unsup/cls", seed, {}, {"avg3_spearman": value}, timing)
    values = run.values_reader(experiment, store)
    assert values("before/cls", "avg3_spearman") == {1: 70.0, 2: 70.0}
    found = {(t, b, d.metric): stats for d, stats, t, b in run.comparisons(experiment, store)}
    stats = found[("unsup/cls", "before/cls", "avg3_spearman")]
    assert stats.n == 2 and stats.delta == pytest.approx(2.0)


def test_comparisons_render_over_their_grid_with_their_floor_checks(tmp_path):
    experiment = specs.load_spec("multitask")
    found = {(t, d.metric): d for d, _, t, _ in run.comparisons(experiment, harness.RecordStore("multitask", tmp_path))}
    assert len(found) == 16 and found[("proportional-simcse", "sts_pearson")].direction == -1
    assert found[("proportional-simcse", "mean")].direction == 1 and found[("sequential", "mean")].margin is None
    assert found[("proportional+pcgrad", "mean")].margin == 2.0 and found[("sequential", "sts_pearson")].floor_task is None
    assert run.floor_checks(found[("sequential", "sst_accuracy")]) == [
        ("sequential", "sst_accuracy", "sst5", "accuracy"), ("proportional", "sst_accuracy", "sst5", "accuracy")]
    assert {(s, k, t) for s, k, t, _ in run.floor_checks(found[("round_robin", "mean")])} == {
        (s, k, t) for s in ("round_robin", "proportional") for k, t in (("sst_accuracy", "sst5"), ("quora_accuracy", "quora"))}
    figure = specs.Plot(kind="paired_delta", file="x.png", title="", comparisons=["* − mlm/*"])
    assert run.plots._chosen(figure, [("mask/rte", "mlm/rte"), ("mask/rte", "mask-fixed/rte")]) == [("mask/rte", "mlm/rte")]


def test_a_record_lacking_an_implied_override_still_matches(tmp_path):
    experiment = specs.load_spec("reclaim")
    plain = next(r for r in run.plan(experiment, _args(experiment, tmp_path)) if r.name == "sst2/plain")
    assert plain.overrides[-1] == "method_args.head=linear" and plain.matches(plain.overrides)
    assert plain.matches(plain.overrides[:-1]) and not plain.matches(plain.overrides[:-2])


def test_a_spec_error_names_the_file_and_the_key(tmp_path):
    text = (specs.SPECS_DIR / "simcse.yaml").read_text(encoding="utf-8")
    bad = tmp_path / "simcse.yaml"
    bad.write_text(text.replace("seeds: [1, 2, 3]", "seeds: [one]"), encoding="utf-8")
    with pytest.raises(specs.SpecError, match=r"^error: .*simcse.yaml: seeds.0: "):
        specs.load_spec(bad)
    bad.write_text(text.replace("metric: avg3_spearman,", "metric: \"{{ nothing }}\","), encoding="utf-8")
    with pytest.raises(specs.SpecError, match=r"comparisons.0: .nothing. is undefined"):
        specs.load_spec(bad)
    bad.write_text(text + "\nplots: [\n", encoding="utf-8")
    with pytest.raises(specs.SpecError, match=r"simcse.yaml:\d+: not valid YAML"):
        specs.load_spec(bad)
    assert run.main(["no-such-experiment"]) == 2


def test_records_made_with_other_sizes_stop_a_run_and_change_no_file(tmp_path, capsys):
    store = harness.RecordStore("simcse", tmp_path)
    store.add("unsup/cls", 1, {"overrides": ["seed=1", "train.max_steps=7"]}, {}, harness.RunTiming())
    before = store.path.read_bytes()
    assert run.main(["simcse", "--results", str(tmp_path), "--runs", str(tmp_path / "runs")]) == 2
    assert "error: " in capsys.readouterr().err and store.path.read_bytes() == before
    assert not (tmp_path / "simcse.md").exists()


@pytest.mark.slow
def test_one_real_run_records_its_resolved_config_and_data_hashes(tmp_path, data_root):
    """A 2-step unsupervised SimCSE run through the runner: the record's metrics, and the provenance holds the
    run's fully resolved config and the SHA-256 of its data file (issue 25, item 9)."""
    experiment = specs.load_spec("simcse")
    args = _args(experiment, tmp_path, "--seeds", "1", "--unsup-steps", "2", "--unsup-batch-size", "4",
                 "--eval-limit", "8", "--train-limit", "16", "--data-root", str(data_root))
    runs = {(r.name, r.seed): r for r in run.plan(experiment, args)}
    config, metrics, inputs = run.run_one(runs, args, "unsup/cls", 1)
    assert metrics["last_step"] == metrics["selected_step"] == 2 and metrics["avg3_spearman"] is not None
    assert inputs["resolved_config"]["train"]["max_steps"] == 2
    hashed = [found for entry in inputs["data"].values() for found in entry["fingerprint"].get("files", {}).values()]
    assert set(inputs["data"]) == {f"data_root/{item}" for item in experiment.data}
    assert hashed and all(len(found["sha256"]) == 64 for found in hashed)
    assert not runs[("unsup/cls", 1)].output_dir.exists()
    store = harness.RecordStore("simcse", tmp_path)
    record = store.add("unsup/cls", 1, config, metrics, harness.RunTiming(), inputs)
    saved = json.loads(store.path.read_text(encoding="utf-8"))[0]["provenance"]
    assert saved["config"]["train"]["max_steps"] == 2 and saved["data"] == record["provenance"]["data"]
