"""experiments/hooks/capt.py: CAPT's irreducible logic (the task average, the pre-trained weights' place, the
seeded fine-tuning stage), without training; the plan, the records and the page are tests/experiments/test_run.py's."""

from __future__ import annotations

from tests.experiments._scripts import load_experiment

run, specs, harness = load_experiment("run"), load_experiment("spec"), load_experiment("harness")
hook = run.load_hook("capt")


def _plan(tmp_path):
    experiment = specs.load_spec("capt")
    args = run.build_parser(experiment).parse_args(["--results", str(tmp_path), "--runs", str(tmp_path / "runs")])
    return experiment, {(r.name, r.seed): r for r in run.plan(experiment, args)}


def test_the_average_needs_every_task_of_a_seed_and_its_rows_check_every_tasks_floor(tmp_path):
    experiment = specs.load_spec("capt")
    store = harness.RecordStore("capt", tmp_path)
    for seed in (1, 2):
        for task, value in (("sst2", 80.0), ("mrpc", 70.0), ("rte", 54.0)):
            for variant in ("mask", "mlm"):
                if (variant, task, seed) != ("mask", "rte", 2):
                    store.add(f"{variant}/{task}", seed, {}, {"accuracy": value + seed}, harness.RunTiming())
    values = run.values_reader(experiment, store)
    assert values("mask/avg", "accuracy") == {1: 69.0}
    assert values("mlm/avg", "accuracy") == {1: 69.0, 2: 70.0}
    found = {(t, b): (declared, stats) for declared, stats, t, b in run.comparisons(experiment, store)}
    assert found[("mask/avg", "mlm/avg")][1].n == 1 and found[("mask/sst2", "mlm/sst2")][1].n == 2
    assert run.floor_checks(found[("mask/rte", "mlm/rte")][0]) == [("mask/rte", "accuracy", "rte", "accuracy"),
                                                                   ("mlm/rte", "accuracy", "rte", "accuracy")]
    checks = run.floor_checks(found[("mask/avg", "mlm/avg")][0])
    assert found[("mask/avg", "mlm/avg")][0].floor_task is None and len(checks) == 6
    assert ("mlm/mrpc", "accuracy", "mrpc", "accuracy") in checks


def test_a_finetuning_loads_its_variants_cached_encoder_and_records_match_any_runs_folder(tmp_path):
    _, runs = _plan(tmp_path)
    finetune, pretrain = runs[("mask/rte", 4)], runs[("pretrain/mask", 0)]
    assert "model=<runs>/pretrained/mask/encoder" in finetune.overrides
    assert hook._weights(finetune, "mask") == hook._weights(pretrain, "mask") == tmp_path / "runs/capt/pretrained/mask"
    moved = [item.replace(str(tmp_path / "runs"), "/elsewhere/runs/experiments") for item in finetune.overrides]
    assert run.comparable(moved) == finetune.comparable()  # a record made with another --runs
    assert runs[("none/rte", 4)].overrides[1] == "model=bundled:all-MiniLM-L6-v2"
    assert hook._cached(pretrain, "mask", pretrain.comparable()) is None  # nothing pre-trained yet


def test_the_finetuning_stage_gets_the_seeded_draw(tmp_path):
    from contrastext import load_config, recipe_path
    from contrastext.runs.capt import CAPTArgs, finetune_config
    from contrastext.runs.stages import stage_config

    _, runs = _plan(tmp_path)
    finetune = runs[("mask/rte", 4)]
    config = load_config(recipe_path(finetune.recipe), finetune.overrides)
    stage = stage_config(finetune_config(config, config.method_args_as(CAPTArgs), 4), data={"few_shot": 1000})
    assert stage.data.few_shot == 1000 and stage.data.task == "rte" and stage.train.max_steps == 100
    assert stage.train_seed == 4 and stage.eval.tasks == ["rte:dev"]
    for variant in ("mlm", "mask", "shuffle", "mask-fixed"):
        pretrain = runs[(f"pretrain/{variant}", 0)]
        args = load_config(recipe_path(pretrain.recipe), pretrain.overrides).method_args_as(CAPTArgs)
        assert args.finetune_task is None and args.capt_weight == (0 if variant == "mlm" else 1)
        assert args.corruption == ("shuffle" if variant == "shuffle" else "token_mask")
        assert args.temperature == ("fixed" if variant == "mask-fixed" else "inverted_triangle")
