"""Every registered objective × every data shape of the recipes that take ``method_args.loss``: it trains one
step, or it is refused with a ConfigError naming ``method_args.loss`` before any model loads (issue 22: ``mnrl``
with ``loss=dcl`` on triplets, ``simcse-sup`` with ``loss=align_uniform``, died at step 1 with a TypeError
after the start evaluation).

The recipes: ``simcse-unsup`` and ``gd`` (single sentences, trained as dropout twins: pairs), ``simcse-sup`` and
``mnrl`` ((anchor, positive) pairs, or triplets with a negative column). Labelled data does not reach these
recipes (a label column is refused by the data reader), and the recipes on labelled data (scl, reclaim, capt's
fine-tuning) fix their objective. Which objective takes which shape is the objective's own ``pair`` (pairs:
``loss(anchors, positives)``) / ``takes_negatives`` (triplets: ``loss(anchors, positives, negatives)``),
checked against real calls in tests/objectives/test_registry.py; gd takes every registered objective as
simcse-unsup does (its knobs reach the objectives that take them, issue 20).
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from contrastext.errors import ConfigError
from contrastext.objectives.registry import OBJECTIVES, objective_names
from contrastext.runs.registry import get_recipe, run_recipe
from tests.cli.cli_runs import run
from tests.runs.recipe_runs import read_log, recipe_config, train_overrides

pytestmark = pytest.mark.usefixtures("single_torch_thread")

TOPICS = ["cats", "pizza", "rome", "guitars", "rain", "trains", "coffee", "chess"]
# recipe -> the data shapes it trains on (the file written for each, see data_file)
SHAPES = {"simcse-unsup": ["sentences"], "gd": ["sentences"], "simcse-sup": ["pairs", "triplets"],
          "mnrl": ["pairs", "triplets"]}  # fmt: skip
CASES = [(recipe, shape, name) for recipe, shapes in SHAPES.items() for shape in shapes for name in objective_names()]


def data_file(tmp_path: Path, shape: str) -> Path:
    """Sentences (.txt), (anchor, positive) pairs or (anchor, positive, negative) triplets (.csv), 8 rows."""
    if shape == "sentences":
        path = tmp_path / "sentences.txt"
        path.write_text("".join(f"a short text on {topic}\n" for topic in TOPICS))
        return path
    path = tmp_path / f"{shape}.csv"
    header = "anchor,positive,negative\n" if shape == "triplets" else "anchor,positive\n"
    rows = [f"what about {t},a short text on {t}" + (f",a text on {TOPICS[i - 1]}" if shape == "triplets" else "")
            for i, t in enumerate(TOPICS)]  # fmt: skip
    path.write_text(header + "\n".join(rows) + "\n")
    return path


def trains(recipe: str, shape: str, name: str) -> bool:
    """Whether the combination is expected to train: the objective takes the batch (triplets: with negatives)."""
    return OBJECTIVES[name].takes_negatives if shape == "triplets" else OBJECTIVES[name].pair


def config_for(recipe: str, shape: str, name: str, tmp_path: Path, model: str):
    extra = ["method_args.geometry=false", "method_args.gradients=false"] if recipe == "gd" else []
    return recipe_config(
        recipe, tmp_path / "run", model, *train_overrides(max_steps=1, epochs=None, batch_size=4, eval_every=None),
        f"data.path={data_file(tmp_path, shape)}", "eval.tasks=", f"method_args.loss={name}", *extra,
    )  # fmt: skip


@pytest.mark.parametrize(("recipe", "shape", "name"), [case for case in CASES if not trains(*case)],
                         ids=lambda value: str(value))  # fmt: skip
def test_a_combination_that_cannot_train_is_refused_before_the_model_loads(
    recipe, shape, name, tmp_path, no_model_loads
):
    config = config_for(recipe, shape, name, tmp_path, "/no/model/needed")
    with pytest.raises(ConfigError, match="method_args.loss") as refused:
        run_recipe(config)
    message = str(refused.value)
    assert name in message and "--set method_args.loss" in message
    if shape == "triplets" and OBJECTIVES[name].pair:  # a pair-only objective on hard negatives
        assert "column 'negative'" in message and "data.columns.text=anchor data.columns.pair=positive" in message
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(("recipe", "shape", "name"), [case for case in CASES if trains(*case)],
                         ids=lambda value: str(value))  # fmt: skip
def test_a_combination_that_fits_trains_one_step(recipe, shape, name, tmp_path, tiny_bert_path):
    config = config_for(recipe, shape, name, tmp_path, tiny_bert_path)
    spec = get_recipe(recipe)
    bundle = spec.build(config, config.method_args_as(spec.args_model), None)
    batch = bundle.method.collate(bundle.train_examples[:4])
    assert batch["views"] == (3 if shape == "triplets" else 2)
    loss = sum(bundle.method(batch).values())
    loss.backward()
    assert math.isfinite(loss.item())
    assert any(p.grad is not None for p in bundle.method.encoder.parameters())


@pytest.mark.parametrize("recipe", ["mnrl", "simcse-sup"])
def test_the_cli_refuses_a_pair_only_objective_on_triplets_in_one_line(recipe, tmp_path, capsys, no_model_loads):
    triplets = data_file(tmp_path, "triplets")
    sets = ["method_args.loss=dcl", f"data.path={triplets}", "model=/no/model/needed", f"output_dir={tmp_path / 'run'}",
            "train.max_steps=1", "eval.tasks="]  # fmt: skip
    code, out, err = run(["train", recipe, "--set", *sets], capsys)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ")
    assert "method_args.loss=dcl: DCL takes (anchor, positive) pairs only" in lines[0]
    assert f"column 'negative' of {triplets}" in lines[0]


def test_a_triplet_objective_on_triplets_trains_end_to_end(tmp_path, tiny_bert_path):
    """TripletMargin was refused by simcse-sup / mnrl as "not a pair objective"; on triplets it takes the batch."""
    summary = run_recipe(config_for("mnrl", "triplets", "triplet", tmp_path, tiny_bert_path))
    assert summary["last_step"] == 1
    assert math.isfinite(read_log(tmp_path / "run")[0]["loss/triplet"])
