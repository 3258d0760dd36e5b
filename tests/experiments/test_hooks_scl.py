"""experiments/hooks/scl.py: λ tuned per draw on validation, the gaps, the chance level, the recorded head, and
the SCL pages from partial records (tests/experiments/test_run.py renders them from the committed ones)."""

from __future__ import annotations

import pytest

from tests.experiments._scripts import load_experiment

run, specs, harness = load_experiment("run"), load_experiment("spec"), load_experiment("harness")
scl = run.load_hook("scl")


def _store(tmp_path, name: str, settings: dict[str, dict[int, tuple[float, float]]]):
    store = harness.RecordStore(name, tmp_path)
    for setting, draws in settings.items():
        for seed, (validation, test) in draws.items():
            store.add(setting, seed, {"recipe": "scl", "overrides": []},
                      {"validation_accuracy": validation, "test_accuracy": test, "best_step": 60 + seed},
                      harness.RunTiming(wall_s=30.0))
    return store


def test_lam_is_tuned_per_draw_on_validation_and_the_gap_follows(tmp_path):
    experiment = specs.load_spec("scl_few_shot")
    store = _store(tmp_path, "scl_few_shot", {  # (validation, test): the test accuracies would pick otherwise
        "n20/ce": {d: (60.0, 60.0) for d in (1, 2, 3, 4, 5)},
        "n20/ce+scl@0.1": {1: (70.0, 90.0), 2: (80.0, 61.0), 3: (60.0, 90.0), 4: (70.0, 62.0), 5: (70.0, 90.0)},
        "n20/ce+scl@0.5": {1: (75.0, 63.0), 2: (78.0, 90.0), 3: (65.0, 64.0), 4: (70.0, 90.0), 5: (99.0, 99.0)},
        "n20/ce+scl@0.9": {1: (72.0, 90.0), 2: (79.0, 90.0), 3: (65.0, 90.0), 4: (70.0, 90.0)},  # no draw 5
    })
    values = run.values_reader(experiment, store)
    assert values("n20/ce+scl@tuned", "lam") == {1: 0.5, 2: 0.1, 3: 0.5, 4: 0.1}  # ties → the smaller λ
    assert values("n20/ce+scl@tuned", "test_accuracy") == {1: 63.0, 2: 61.0, 3: 64.0, 4: 62.0}
    assert values("n20/ce+scl@tuned", "best_step") == {1: 61.0, 2: 62.0, 3: 63.0, 4: 64.0}  # the picked run's
    assert values("gap@n20", "test_accuracy") == {1: 3.0, 2: 1.0, 3: 4.0, 4: 2.0}
    assert values("gap@n20/ce+scl@0.9", "test_accuracy") == {d: 30.0 for d in (1, 2, 3, 4)}
    assert values("n20/ce", "test_accuracy") == store.values("n20/ce", "test_accuracy")
    found = {(t, b): stats for _, stats, t, b in run.comparisons(experiment, store)}
    assert found[("n20/ce+scl@tuned", "n20/ce")].n == 4
    assert found[("n20/ce+scl@tuned", "n20/ce")].delta == pytest.approx(2.5)


def test_the_chance_rule_and_the_recipes_split(data_root):
    assert scl.at_chance([50.9 + 3.0], 50.9) and scl.at_chance([40.0], 50.9)
    assert not scl.at_chance([50.9 + 3.1], 50.9) and not scl.at_chance([], 50.9) and not scl.at_chance([40.0], None)
    share, text = scl.chance("/nowhere")
    assert share is None and text.startswith("Chance level unknown")
    if not (data_root / "glue" / "SST-2" / "dev.tsv").exists():
        pytest.skip("SST-2 not under the data root")
    share, text = scl.chance(str(data_root))
    assert share == pytest.approx(100 * 222 / 436) and "214 of label 0, 222 of label 1" in text


@pytest.mark.parametrize("name", ["scl_few_shot", "scl_noise"])
def test_every_run_trains_the_recorded_linear_head_and_the_page_renders_partial_records(name, tmp_path):
    from contrastext import load_config, recipe_path
    from contrastext.runs.scl import SCLArgs

    experiment = specs.load_spec(name)
    args = run.build_parser(experiment).parse_args(["--results", str(tmp_path), "--runs", str(tmp_path / "runs")])
    for item in run.plan(experiment, args)[:8]:
        assert item.matches([s for s in item.overrides if s != "method_args.head=linear"])  # implied by a record
        config = load_config(recipe_path(item.recipe), item.overrides)
        method_args = config.method_args_as(SCLArgs)
        assert method_args.head == "linear" and method_args.seeds == [item.seed]
        assert method_args.lam == (0 if item.point["lam"] == 0 else item.point["lam"])
    prefix = "n20" if name == "scl_few_shot" else "p20"
    _store(tmp_path, name, {f"{prefix}/ce": {1: (70.0, 69.0), 2: (71.0, 70.0)}, f"{prefix}/ce+scl@0.5": {1: (72.0, 71.0)}})
    assert run.main([name, "--report-only", "--results", str(tmp_path)]) == 0
    page = (tmp_path / f"{name}.md").read_text(encoding="utf-8")
    assert "3/" in page and "nan" not in page and "| exploratory |" in page
