"""``data.batch_sampler: no_duplicates`` per recipe: taken by the recipes whose loss uses the batch's other rows as
negatives, refused (one error line, before any model loads) by the others; an mnrl run on pairs with repeated
anchors trains on batches without them."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from contrastext.errors import ConfigError
from contrastext.runs.registry import RECIPES, check_batch_sampler_fits, get_recipe, run_recipe
from contrastext.training.config import load_config
from tests.cli.cli_runs import run

SHIPPED = Path(__file__).resolve().parents[2] / "recipes"
IN_BATCH_NEGATIVES = {"simcse-unsup", "simcse-sup", "mnrl", "gd", "capt"}


def test_the_recipes_with_in_batch_negatives_take_it():
    assert {name for name in RECIPES.names() if get_recipe(name).in_batch_negatives} == IN_BATCH_NEGATIVES
    for name in IN_BATCH_NEGATIVES:
        config = load_config(SHIPPED / f"{name}.yaml", ["data.batch_sampler=no_duplicates"])
        check_batch_sampler_fits(get_recipe(name), config)  # no error


@pytest.mark.parametrize("recipe", sorted(set(RECIPES.names()) - IN_BATCH_NEGATIVES))
def test_a_recipe_without_in_batch_negatives_refuses_it_before_any_model_loads(recipe, tmp_path, data_root):
    config = load_config(SHIPPED / f"{recipe}.yaml", ["data.batch_sampler=no_duplicates", "model=/no/such/model",
                                                      f"output_dir={tmp_path / 'run'}"])
    with pytest.raises(ConfigError) as error:
        run_recipe(config, data_root=data_root)
    message = str(error.value)
    assert message.startswith(f"--set data.batch_sampler (over {SHIPPED / recipe}.yaml): ")
    assert f"{recipe} takes no in-batch negatives" in message and "gd, mnrl, simcse-sup, simcse-unsup" in message
    assert not (tmp_path / "run").exists()  # nothing written


def test_capt_s_fine_tuning_stage_goes_back_to_the_default_sampler():
    from contrastext.runs.capt import finetune_config

    config = load_config(SHIPPED / "capt.yaml", ["data.batch_sampler=no_duplicates"])
    args = config.method_args_as(get_recipe("capt").args_model)
    assert finetune_config(config, args).data.batch_sampler == "batch_sampler"


def test_the_cli_names_the_key_on_one_line(capsys, tmp_path):
    code, out, err = run(["train", "scl", "--set", "data.batch_sampler=no_duplicates", "--output",
                          str(tmp_path / "run")], capsys)
    assert code == 2 and err.count("\n") == 1 and err.startswith("error: --set data.batch_sampler")
    assert "Traceback" not in err


@pytest.mark.usefixtures("single_torch_thread")
def test_mnrl_trains_on_batches_without_repeated_anchors(tmp_path, capsys, make_st_model):
    """12 topics, each anchor in 3 rows: batches of 6 without duplicates exist; the run completes, records the key."""
    model = make_st_model(num_layers=1, max_seq_length=32)
    topics = ["cats", "pizza", "rome", "guitars", "rain", "trains", "coffee", "chess", "gardens", "rivers", "bikes", "tea"]
    rows = [f"what about {topic},text {k} on {topic}\n" for topic in topics for k in range(3)]
    data = tmp_path / "pairs.csv"
    data.write_text("anchor,positive\n" + "".join(rows))
    output = tmp_path / "run"
    sets = [f"model={model}", f"data.path={data}", "data.batch_sampler=no_duplicates", "train.max_steps=3",
            "train.epochs=null", "train.batch_size=6", "train.eval_every=null", "train.save_every=null",
            "train.progress_bar=false", "train.metric_for_best=null", "eval.tasks=[]"]
    code, out, err = run(["train", "mnrl", "--output", str(output), *[p for s in sets for p in ("--set", s)]], capsys)
    assert code == 0, err
    assert yaml.safe_load((output / "config.yaml").read_text())["data"]["batch_sampler"] == "no_duplicates"
    assert (output / "final" / "encoder").is_dir()
