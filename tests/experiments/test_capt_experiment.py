"""experiments/capt.py without training: overrides load, the plan, the report, the plot and the summary."""

from __future__ import annotations

import sys

import pytest

from tests.experiments._scripts import load_experiment

capt = load_experiment("capt")
harness = sys.modules["harness"]


def timing() -> harness.RunTiming:
    return harness.RunTiming(load_before=[0.5, 0.5, 0.5], load_after=[0.7, 0.6, 0.5], wall_s=12.0)


def fabricate(store, args, seeds=(1, 2, 3), tasks=("sst2", "mrpc", "rte"), pretrain=True, skip=()):
    """Records with a small, seed-dependent gain of mask over mlm."""
    if pretrain:
        for variant in capt.VARIANTS:
            store.add(f"pretrain/{variant}", 0, {"sizes": capt.sizes(args, "pretrain"), "overrides": []},
                      {"stsb_dev_spearman_start": 82.0, "stsb_dev_spearman": 75.0, "steps": 300.0,
                       "loss_mlm": 2.1, "loss_capt": 30.0 if variant != "mlm" else 250.0, "grad_norm": 12.0},
                      timing())
    bonus = {"none": 0.0, "mlm": -1.0, "mask": 0.5, "shuffle": 0.0, "mask-fixed": 0.2}
    base = {"sst2": 85.0, "mrpc": 72.0, "rte": 58.0}
    for seed in seeds:
        for task in tasks:
            for variant in capt.ORDER:
                if (variant, task, seed) in skip:
                    continue
                value = base[task] + bonus[variant] + 0.3 * seed + (0.1 * seed if variant == "mask" else 0.0)
                store.add(f"{variant}/{task}", seed, {"sizes": capt.sizes(args, "finetune"), "overrides": []},
                          {"accuracy": value, "f1": value + 5 if task == "mrpc" else None, "mcc": 30.0,
                           "n_train": 1000.0, "n_eval": 100.0}, timing())


def test_plan_at_defaults():
    args = capt.parse_args([])
    plan = capt.plan(args)
    pretrain = [p for p in plan if p[0].startswith("pretrain/")]
    assert pretrain == [(f"pretrain/{v}", 0) for v in ("mlm", "mask", "shuffle", "mask-fixed")]
    tuned = [p for p in plan if not p[0].startswith("pretrain/")]
    assert len(tuned) == 5 * 3 * 5
    assert {s for s, _ in tuned} == {f"{v}/{t}" for v in capt.ORDER for t in ("sst2", "mrpc", "rte")}
    assert {seed for _, seed in tuned} == {1, 2, 3, 4, 5}
    assert plan[:4] == pretrain  # pre-trainings first
    assert len(set(plan)) == len(plan)


def test_every_override_list_loads():
    from contrastext.runs.capt import CAPTArgs
    from contrastext.runs.recipes import recipe_path
    from contrastext.training.config import load_config

    args = capt.parse_args([])
    for variant in capt.VARIANTS:
        config = load_config(recipe_path(capt.RECIPE), capt.pretrain_overrides(args, variant, "/tmp/x"))
        method_args = config.method_args_as(CAPTArgs)
        assert method_args.finetune_task is None
        assert config.train.max_steps == 300 and config.train.batch_size == 32 and config.data.max_length == 64
        if variant == "mlm":
            assert method_args.capt_weight == 0 and method_args.corruption == "token_mask"
        else:
            assert method_args.capt_weight == 1
        assert method_args.corruption == ("shuffle" if variant == "shuffle" else "token_mask")
        assert method_args.temperature == ("fixed" if variant == "mask-fixed" else "inverted_triangle")
        if variant == "mask-fixed":
            assert method_args.fixed_temperature == 0.1
    for task in capt.TASKS:
        config = load_config(
            recipe_path(capt.RECIPE), capt.finetune_overrides(args, task, 3, "bundled:all-MiniLM-L6-v2", "/tmp/y")
        )
        method_args = config.method_args_as(CAPTArgs)
        assert method_args.finetune_task == task and method_args.finetune_steps == 100
        assert method_args.finetune_batch_size == 16 and config.seed == 3 and config.data.max_length == 128


def test_finetune_stage_gets_the_seeded_draw():
    from contrastext.runs.capt import CAPTArgs, finetune_config
    from contrastext.runs.recipes import recipe_path
    from contrastext.runs.stages import stage_config
    from contrastext.training.config import load_config

    args = capt.parse_args([])
    config = load_config(recipe_path(capt.RECIPE), capt.finetune_overrides(args, "rte", 4, "m", "/tmp/z"))
    stage = stage_config(finetune_config(config, config.method_args_as(CAPTArgs), 4), data={"few_shot": 1000})
    assert stage.data.few_shot == 1000 and stage.data.task == "rte" and stage.train.max_steps == 100
    assert stage.train_seed == 4 and stage.eval.tasks == ["rte:dev"]


def test_report_plot_and_summary_full(tmp_path):
    args = capt.parse_args(["--results", str(tmp_path)])
    store = harness.RecordStore(capt.NAME, tmp_path)
    fabricate(store, args, seeds=(1, 2, 3, 4, 5))
    text = capt.report(store, args)
    assert text.startswith("## CAPT:")
    assert "corrpution noise" in text  # quoted verbatim, the paper's typo included
    assert text.count("**Verdict:**") == 12
    assert "89.5" in text and "96.5" in text and "88.0" in text
    assert "![" in text and "capt.png" in text and "python experiments/capt.py" in text
    assert "not enough seeds" not in text
    mask_vs_mlm = capt.comparison(store, "mask", "mlm", "avg")
    assert mask_vs_mlm.verdict == "reproduced" and len(mask_vs_mlm.seeds) == 5
    path = capt.plot(store, args, tmp_path / "capt.png")
    assert path.stat().st_size > 0
    result = capt.summary(store, args)
    assert set(result) >= {"paper", "claim", "verdict", "numbers"}
    assert "partial" not in result["verdict"] and "reproduced" in result["verdict"]
    harness.write_report(store, text)
    assert (tmp_path / "capt.md").is_file()


def test_report_and_plot_partial(tmp_path):
    args = capt.parse_args(["--results", str(tmp_path)])
    store = harness.RecordStore(capt.NAME, tmp_path)
    fabricate(store, args, seeds=(1,), tasks=("sst2",), pretrain=False)
    text = capt.report(store, args)
    assert "not enough seeds" in text and "–" in text and "Partial:" in text
    capt.plot(store, args, tmp_path / "capt.png")
    assert capt.summary(store, args)["verdict"].startswith("partial: ")


def test_average_needs_every_task_of_a_seed(tmp_path):
    args = capt.parse_args([])
    store = harness.RecordStore(capt.NAME, tmp_path)
    fabricate(store, args, seeds=(1, 2), pretrain=False, skip={("mask", "rte", 2)})
    assert set(capt.task_values(store, "mask/avg", "accuracy")) == {1}
    assert set(capt.task_values(store, "mlm/avg", "accuracy")) == {1, 2}


def test_sizes_mismatch_is_refused(tmp_path):
    args = capt.parse_args([])
    store = harness.RecordStore(capt.NAME, tmp_path)
    fabricate(store, args, seeds=(1,), pretrain=True)
    capt.check_sizes(store, args)
    with pytest.raises(ValueError, match="sizes"):
        capt.check_sizes(store, capt.parse_args(["--pretrain-steps", "10"]))


def test_command_names_non_default_sizes():
    args = capt.parse_args(["--seeds", "2", "--finetune-steps", "7", "--keep-weights"])
    extra = capt.extra_options(args)
    assert "--seeds 2" in extra and "--finetune-steps 7" in extra and "--keep-weights" in extra
    assert capt.extra_options(capt.parse_args([])) == ""
