"""experiments/hooks/multitask.py: the seeded shuffle of the training files, the records' metric names, the page's
command and floors."""

from __future__ import annotations

from types import SimpleNamespace

from tests.experiments._scripts import load_experiment

run, specs, harness = load_experiment("run"), load_experiment("spec"), load_experiment("harness")
hook = run.load_hook("multitask")


def test_prepare_shuffles_the_training_files_and_the_page_keeps_the_data_root_given(tmp_path):
    source = tmp_path / "data"
    (source / "minbert").mkdir(parents=True)
    (source / "nli").mkdir()
    for name in hook.SHUFFLED_FILES:
        rows = "".join(f"{i}\tid{i}\ttext {i}\t{i % 5}\n" for i in range(50))
        (source / name).write_text("\tid\tsentence\tsentiment\n" + rows)
    (source / "nli" / "snli_devtest_for_simcse.csv").write_text("sent0,sent1,hard_neg\na,b,c\n")
    experiment = specs.load_spec("multitask")
    args = run.build_parser(experiment).parse_args(["--data-root", str(source), "--runs", str(tmp_path / "runs"),
                                                    "--results", str(tmp_path / "results")])
    prepared = hook.prepare(args)
    target = tmp_path / "runs" / "multitask" / "data"
    assert prepared.data_root == str(target) and args.data_root == str(source)  # the page keeps the root given
    for name in hook.SHUFFLED_FILES:
        original = (source / name).read_text().splitlines()
        shuffled = (target / name).read_text().splitlines()
        assert shuffled[0] == original[0] and sorted(shuffled[1:]) == sorted(original[1:])
        assert shuffled[1:] != original[1:]
    assert (target / "nli" / "snli_devtest_for_simcse.csv").is_symlink()
    before = (target / hook.SHUFFLED_FILES[0]).read_text()
    hook.prepare(args)  # idempotent
    assert (target / hook.SHUFFLED_FILES[0]).read_text() == before


def test_metrics_keep_the_records_names():
    summary = {"metrics": {"minbert-sst_dev_accuracy": 31.0, "minbert-quora_dev_accuracy": 65.0,
                           "minbert-sts_dev_pearson": 51.0, "mean": 49.0}, "last_step": 96,
               "report": {"tasks": {"minbert-sst": {"n_train": 400, "n_eval": 1101}}}}
    found = hook.metrics(SimpleNamespace(), summary, SimpleNamespace())
    assert (found["sst_accuracy"], found["quora_accuracy"], found["sts_pearson"]) == (31.0, 65.0, 51.0)
    assert found["steps"] == 96 and found["n_train"] == {"minbert-sst": 400}


def test_the_page_names_settings_at_chance_and_on_the_floor(tmp_path):
    experiment = specs.load_spec("multitask")
    store = harness.RecordStore("multitask", tmp_path)
    settings = experiment.settings[0].grid["variant"]
    for setting in settings:
        for seed in experiment.seeds:
            sts = (-1) ** seed * 4.0 if setting != "proportional" else 40.0 + seed
            quora = 60.0 if setting == "sequential" else 70.0
            metrics = {"sst_accuracy": 33.0 + seed, "quora_accuracy": quora, "sts_pearson": sts, "steps": 96}
            metrics["mean"] = (metrics["sst_accuracy"] + quora + sts) / 3
            store.add(setting, seed, {}, metrics, harness.RunTiming(wall_s=100.0))
    page = run.report(experiment, store, run.build_parser(experiment).parse_args(["--results", str(tmp_path)]))
    assert "**At chance:** `sequential`, `round_robin`, `proportional+pcgrad`, `proportional-simcse`" in page
    assert "On the floor here: `sequential` Quora acc 60.0." in page and "25/25 runs" in page
