"""experiments/multitask.py without training: overrides load, the plan, the report, the plot, the summary."""

from __future__ import annotations

import pytest

from tests.experiments._scripts import load_experiment


@pytest.fixture(scope="module")
def script():
    return load_experiment("multitask")


@pytest.fixture
def args(script, tmp_path):
    return script.build_parser().parse_args(["--results", str(tmp_path / "results"), "--runs", str(tmp_path / "runs")])


def fake_record(setting: str, seed: int, shift: float) -> tuple[dict, dict]:
    metrics = {
        "sst_accuracy": 40.0 + shift + 0.3 * seed,
        "quora_accuracy": 75.0 + shift - 0.2 * seed,
        "sts_pearson": 80.0 + shift + 0.1 * seed,
        "leaderboard_mean": 80.0,
        "steps": 96,
    }
    metrics["mean"] = (metrics["sst_accuracy"] + metrics["quora_accuracy"] + metrics["sts_pearson"]) / 3
    return {"recipe": "multitask", "overrides": []}, metrics


def fill(script, store, settings, seeds):
    harness = script.harness
    shifts = {"proportional": 0.0, "sequential": -3.0, "round_robin": -1.0, "proportional+pcgrad": -0.5,
              "proportional-simcse": 0.2}
    for setting in settings:
        for seed in seeds:
            config, metrics = fake_record(setting, seed, shifts[setting] + 0.05 * seed * (setting == "sequential"))
            timing = harness.RunTiming(load_before=[1.0, 1.0, 1.0], load_after=[1.2, 1.0, 1.0], wall_s=140.0)
            store.add(setting, seed, config, metrics, timing)


def test_every_run_overrides_load_and_validate(script, args):
    from contrastext.runs.recipes import recipe_path
    from contrastext.runs.registry import get_recipe, parse_method_args
    from contrastext.training.config import load_config

    spec = get_recipe("multitask")
    for setting in script.SETTINGS:
        config = load_config(recipe_path(script.RECIPE), script.overrides(setting, 1, args))
        method_args = parse_method_args(spec, config)  # unknown method_args keys fail here
        assert config.train.epochs == 2 and config.train.max_steps is None
        assert config.train.metric_for_best is None and config.data.limit == 400
        assert config.data.max_length == 64 and config.eval.limit == 1101
        assert method_args.simcse_steps == 30
        # the heads train at their own lr and the STS head starts at the mean score (the first sitting's fix)
        assert (config.train.lr, config.train.head_lr) == (5e-5, 1e-3)
        assert method_args.score_bias_init == "label_mean"
        if setting == "proportional+pcgrad":
            assert method_args.pcgrad and config.train.batch_size == 8
        else:
            assert not method_args.pcgrad and config.train.batch_size == 32
        assert method_args.simcse == ("none" if setting == "proportional-simcse" else "supervised")
        expected = {"sequential": "sequential", "round_robin": "round_robin"}.get(setting, "proportional")
        assert config.data.task_sampling == expected


def test_plan_at_defaults(script, args):
    runs = script.plan(args)
    assert len(runs) == 25 and len(set(runs)) == 25
    assert {s for s, _ in runs} == set(script.SETTINGS) and {seed for _, seed in runs} == {1, 2, 3, 4, 5}
    assert [script.steps_of(s, args) for s in script.SETTINGS] == [96, 72, 120, 100, 96]
    assert args.budget_minutes == script.TARGET_MINUTES


def test_report_plot_and_summary_partial_and_full(script, args, tmp_path):
    harness = script.harness
    store = harness.RecordStore(script.NAME, tmp_path / "results")
    empty = script.report(store, args)
    assert empty.startswith("## CS224N multi-task BERT")
    assert "not enough seeds" in empty and "**Verdict:**" in empty
    fill(script, store, ["proportional", "sequential"], [1, 2])
    fill(script, store, ["round_robin"], [1])
    partial = script.report(store, args)
    assert "not enough seeds (1)" in partial and "–" in partial
    assert script.summary(store)["verdict"].startswith("partial: 5/25")
    script.plot(store, tmp_path / "results" / "multitask.png")
    assert (tmp_path / "results" / "multitask.png").stat().st_size > 1000

    fill(script, store, script.SETTINGS, script.SEEDS)
    text = script.report(store, args)
    for needle in ("0.537 on SST", "**Verdict:**", "![", "python experiments/multitask.py", "Exp 15", "95 % CI"):
        assert needle in text
    assert text.count("**Verdict:**") == len(script.VERDICTS)
    assert "`sequential` vs `proportional` on mean" in text and "→ reproduced" in text
    assert "**At chance:**" not in text and "no evidence" not in text
    summary = script.summary(store)
    assert set(summary) == {"paper", "claim", "verdict", "numbers"}
    assert not summary["verdict"].startswith("partial") and "sequential: reproduced" in summary["verdict"]
    path = harness.write_report(store, text)
    assert path.read_text().startswith("## CS224N")
    script.plot(store, tmp_path / "results" / "multitask.png")


def test_prepare_data_root_shuffles_the_training_files(script, tmp_path):
    source = tmp_path / "data"
    (source / "minbert").mkdir(parents=True)
    (source / "nli").mkdir()
    for name in script.SHUFFLED_FILES:
        rows = "".join(f"{i}\tid{i}\ttext {i}\t{i % 5}\n" for i in range(50))
        (source / name).write_text("\tid\tsentence\tsentiment\n" + rows)
    (source / "nli" / "snli_devtest_for_simcse.csv").write_text("sent0,sent1,hard_neg\na,b,c\n")
    target = script.prepare_data_root(source, tmp_path / "derived")
    for name in script.SHUFFLED_FILES:
        original = (source / name).read_text().splitlines()
        shuffled = (target / name).read_text().splitlines()
        assert shuffled[0] == original[0] and sorted(shuffled[1:]) == sorted(original[1:])
        assert shuffled[1:] != original[1:]
    assert (target / "nli" / "snli_devtest_for_simcse.csv").is_symlink()
    again = script.prepare_data_root(source, tmp_path / "derived")  # idempotent
    assert (again / script.SHUFFLED_FILES[0]).read_text() == (target / script.SHUFFLED_FILES[0]).read_text()


def test_floor_guard_flags_settings_whose_sts_head_scores_at_random(script, args, tmp_path):
    """STS Pearson near 0 (untrained heads): the report says "At chance", every verdict says no evidence,
    the summary leads with it; one setting above the floor is named alone."""
    harness = script.harness
    store = harness.RecordStore(script.NAME, tmp_path / "results")
    timing = harness.RunTiming(load_before=[1.0, 1.0, 1.0], load_after=[1.0, 1.0, 1.0], wall_s=100.0)
    for setting in script.SETTINGS:
        for seed in script.SEEDS:
            config, metrics = fake_record(setting, seed, -3.0 if setting == "sequential" else 0.0)
            metrics["sts_pearson"] = (-1) ** seed * 4.0 + (2.0 if setting == "round_robin" else 0.0)
            store.add(setting, seed, config, metrics, timing)
    assert all(script.at_chance(store, setting) for setting in script.SETTINGS)
    text = script.report(store, args)
    assert "**At chance:** every setting" in text
    verdicts = [line for line in text.splitlines() if line.startswith("**Verdict:**")]
    assert len(verdicts) == len(script.VERDICTS) and all("no evidence either way" in line for line in verdicts)
    assert script.summary(store)["verdict"].startswith("at chance")

    above = harness.RecordStore(script.NAME, tmp_path / "above")
    fill(script, above, script.SETTINGS, script.SEEDS)
    for seed in script.SEEDS:  # sequential alone at chance
        record = next(r for r in above.records if r["setting"] == "sequential" and r["seed"] == seed)
        record["metrics"]["sts_pearson"] = 9.0
    assert [s for s in script.SETTINGS if script.at_chance(above, s)] == ["sequential"]
    assert "**At chance:** `sequential`" in script.report(above, args)
