"""The run's size reaches every stage (issue 22, item 1): ``--set train.max_steps`` / ``train.epochs`` /
``data.limit`` / ``eval.limit`` set CAPT's fine-tunings, multitask's SimCSE pre-step and SCL's seeds, unless the
stage's own key is given with ``--set`` too; every run prints its plan first; every shipped recipe finishes a
``--set train.max_steps=3 data.limit=256 eval.limit=64`` run with at most 3 steps in every stage."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

import contrastext.cli.train_command  # noqa: F401  (registers the command until cli/__init__ imports it)
from contrastext.runs import capt, multitask, scl
from contrastext.runs.capt import CAPTArgs
from contrastext.runs.multitask import MultitaskArgs
from contrastext.runs.plan import plan_lines
from contrastext.runs.recipes import recipe_path, shipped_recipe_names
from contrastext.runs.scl import SCLArgs
from contrastext.training.config import load_config
from tests.cli.cli_runs import run

SHORT = ["train.max_steps=3", "data.limit=256", "eval.limit=64"]


def config_of(recipe: str, *overrides: str):
    return load_config(recipe_path(recipe), ["output_dir=/tmp/unused", *overrides])


def test_capt_finetunings_take_the_runs_size_unless_their_own_keys_are_set():
    config = config_of("capt", *SHORT)
    tuned = capt.finetune_config(config, config.method_args_as(CAPTArgs), 43)
    assert tuned.length_from == "max_steps" and tuned.train.max_steps == 3
    assert tuned.data.limit == 256 and tuned.eval.limit == 64 and tuned.seed == 43

    own = config_of("capt", *SHORT, "method_args.finetune_steps=7", "method_args.finetune_limit=32",
                    "method_args.finetune_eval_limit=16")
    tuned = capt.finetune_config(own, own.method_args_as(CAPTArgs))
    assert (tuned.train.max_steps, tuned.data.limit, tuned.eval.limit) == (7, 32, 16)

    recipe_only = config_of("capt")  # nothing from --set: the recipe's fine-tuning length (500), no limits
    tuned = capt.finetune_config(recipe_only, recipe_only.method_args_as(CAPTArgs))
    assert (tuned.train.max_steps, tuned.data.limit, tuned.eval.limit) == (500, None, None)

    epochs = config_of("capt", "train.epochs=2")  # --set epochs beats the recipe's max_steps, in every stage
    tuned = capt.finetune_config(epochs, epochs.method_args_as(CAPTArgs))
    assert tuned.length_from == "epochs" and tuned.train.epochs == 2 and tuned.train.max_steps is None


def test_multitask_prestep_takes_the_runs_length_unless_its_own_is_set():
    config = config_of("multitask", *SHORT)
    pre = multitask.prestep_config(config, config.method_args_as(MultitaskArgs))
    assert pre.length_from == "max_steps" and pre.train.max_steps == 3 and pre.data.limit == 256

    own = config_of("multitask", *SHORT, "method_args.simcse_steps=5")
    assert multitask.prestep_config(own, own.method_args_as(MultitaskArgs)).train.max_steps == 5
    own = config_of("multitask", *SHORT, "method_args.simcse_epochs=2")
    pre = multitask.prestep_config(own, own.method_args_as(MultitaskArgs))
    assert pre.length_from == "epochs" and pre.train.epochs == 2

    recipe_only = config_of("multitask")  # the report's 100 epochs on SNLI
    pre = multitask.prestep_config(recipe_only, recipe_only.method_args_as(MultitaskArgs))
    assert pre.length_from == "epochs" and pre.train.epochs == 100


def test_the_plan_names_each_stage_with_its_steps_examples_and_seeds():
    config = config_of("capt", *SHORT)
    lines = plan_lines(capt.plan(config, config.method_args_as(CAPTArgs)))
    assert lines[0] == "plan: 2 stages, 6 trainings"
    assert lines[1].startswith("  pretrain: 3 steps, the first 256 examples of wiki1m, eval stsb:dev (first 64 of each)")
    assert lines[2].startswith("  finetune-sst2: 3 steps, the first 256 examples of sst2")
    assert lines[2].endswith("seeds 42, 43, 44, 45, 46")

    config = config_of("multitask", *SHORT)
    lines = plan_lines(multitask.plan(config, config.method_args_as(MultitaskArgs)))
    assert lines[1].startswith("  simcse-prestep: 3 steps, the first 256 examples of nli-triplets, no evaluation")
    assert lines[2].startswith("  multitask: 3 steps, the first 256 examples of each of minbert-sst, minbert-quora")

    config = config_of("scl", *SHORT)
    lines = plan_lines(scl.plan(config, config.method_args_as(SCLArgs)))
    assert lines[1].startswith("  seed-<s>: 3 steps, 20 few-shot examples of sst2 (drawn from the first 256), eval "
                               "sst2:dev (first 64 of each), split into validation and test, seeds 1, 2, 3")
    config = config_of("scl", "train.max_steps=null", "train.epochs=2")
    lines = plan_lines(scl.plan(config, config.method_args_as(SCLArgs)))
    assert lines[0] == "plan: 1 stage, 10 trainings"
    assert lines[1].startswith("  seed-<s>: 2 epochs (steps follow from the rows), 20 few-shot examples of sst2")


def logged_steps(output: Path) -> dict[str, int]:
    """Each stage folder (one holding a train_log.jsonl) -> the last step it logged."""
    steps = {}
    for log in sorted(output.rglob("train_log.jsonl")):
        records = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
        steps[str(log.parent.relative_to(output))] = max(record["step"] for record in records)
    return steps


@pytest.mark.slow
@pytest.mark.parametrize("recipe", shipped_recipe_names())
def test_every_recipe_runs_short_in_every_stage(recipe, tmp_path, make_tiny_bert, data_root, capsys):
    """The issue's short run on each shipped recipe, on a tiny BERT (CAPT from scratch reads only its
    vocabulary): it prints its plan, and no stage trains more than 3 steps."""
    model = make_tiny_bert(hidden_size=64)  # 64 wide: BERT's pooler, which multitask's `pooling: pooler` reads
    quiet = ["train.progress_bar=false", "train.report_to=none", "train.save_every=null", f"model={model}"]
    if recipe == "capt":  # from scratch: a 2-layer backbone instead of the paper's 6 x 256 (20 s less)
        quiet += ["method_args.backbone.hidden_size=64", "method_args.backbone.num_hidden_layers=2",
                  "method_args.backbone.num_attention_heads=2", "method_args.backbone.intermediate_size=128"]
    sets = [argument for value in (*SHORT, *quiet) for argument in ("--set", value)]
    output = tmp_path / recipe
    start = time.monotonic()
    code, stdout, stderr = run(["train", recipe, *sets, "-o", str(output), "--data-root", str(data_root)], capsys)
    elapsed = time.monotonic() - start
    assert code == 0, stderr
    plan = [line for line in stdout.splitlines() if line.startswith("plan: ")]
    assert len(plan) == 1, stdout
    steps = logged_steps(output)
    assert steps and all(0 < step <= 3 for step in steps.values()), steps
    expected = {"capt": 6, "capt-continued": 6, "scl": 10, "multitask": 2}.get(recipe, 1)
    assert len(steps) == expected, steps
    assert elapsed < 300, f"{recipe} took {elapsed:.0f} s"  # the bound on 2 cores
