"""Keep what the user's model is unless asked (issue 9, item 2).

A sentence-transformers model (here a tiny one shaped like all-MiniLM-L6-v2: mean pooling, normalised,
``max_seq_length`` 128) keeps its pooling, normalisation and length unless a recipe says otherwise; when the
model changes shape a ``model: ...`` line says so; ``data.max_length`` truncates training batches only.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contrastext.data.examples import Example
from contrastext.errors import ConfigError
from contrastext.models.encoder import TextEncoder
from contrastext.runs.encoders import build_encoder
from contrastext.runs.gd import GDArgs
from contrastext.runs.registry import get_recipe
from contrastext.runs.simcse import SimCSESupArgs, SimCSEUnsupArgs
from contrastext.training.config import load_config
from tests.cli.cli_runs import run
from tests.runs.recipe_runs import RECIPES, recipe_config

pytestmark = pytest.mark.usefixtures("single_torch_thread")

MODEL_LENGTH = 128
TRAIN_LENGTH = 16


@pytest.fixture(scope="module")
def st_model(make_st_model) -> str:
    """A tiny random BERT saved as a sentence-transformers folder: mean pooling, Normalize, max length 128."""
    return make_st_model(num_layers=2, max_seq_length=MODEL_LENGTH)


def triplets(tmp_path: Path) -> Path:
    path = tmp_path / "triplets.csv"
    rows = [f"question {i} about cats and their habits,answer {i} on cats,unrelated text {i}\n" for i in range(12)]
    path.write_text("sent0,sent1,hard_neg\n" + "".join(rows))
    return path


def train(recipe: str, model: str, tmp_path: Path, capsys, *overrides: str) -> tuple[int, str, str]:
    sets = [
        f"model={model}", f"data.path={triplets(tmp_path)}", f"output_dir={tmp_path / 'run'}",
        "train.max_steps=2", "train.epochs=null", "train.batch_size=4", "train.save_every=null",
        "train.progress_bar=false", "train.log_every=1", "eval.tasks=[]", "train.metric_for_best=null",
        f"data.max_length={TRAIN_LENGTH}", *overrides,
    ]  # fmt: skip
    return run(["train", recipe, *[part for item in sets for part in ("--set", item)]], capsys)


def saved_length(folder: Path) -> int:
    return json.loads((folder / "sentence_bert_config.json").read_text())["max_seq_length"]


def test_args_default_to_the_model_and_the_paper_recipes_say_theirs():
    for args in (SimCSEUnsupArgs(), SimCSESupArgs(), GDArgs()):
        assert (args.pooling, args.mlp) == (None, None)
    for recipe, mlp in (("simcse-unsup", "train"), ("simcse-sup", "always"), ("gd", "train")):
        config = load_config(RECIPES / f"{recipe}.yaml")
        args = config.method_args_as(get_recipe(recipe).args_model)
        assert (args.pooling, args.mlp) == ("cls", mlp), recipe


def test_the_paper_recipe_prints_how_it_changes_the_model(tmp_path, capsys, st_model):
    code, out, err = train("simcse-sup", st_model, tmp_path, capsys)
    assert code == 0, err
    assert "model: pooling mean -> cls, + new SimCSE MLP (kept at inference)" in out
    final = tmp_path / "run" / "final" / "encoder"
    assert saved_length(final) == MODEL_LENGTH  # not data.max_length
    encoder = TextEncoder.load(final)
    assert (encoder.pooling, encoder.normalize, encoder.max_seq_length) == ("cls", True, MODEL_LENGTH)
    assert encoder.projection is not None and encoder.projection_at_inference


def test_left_unset_the_model_is_kept_and_nothing_is_printed(tmp_path, capsys, st_model):
    code, out, err = train(
        "simcse-sup", st_model, tmp_path, capsys, "method_args.pooling=null", "method_args.mlp=null"
    )
    assert code == 0, err
    assert "model:" not in out
    encoder = TextEncoder.load(tmp_path / "run" / "final" / "encoder")
    assert (encoder.pooling, encoder.normalize, encoder.projection) == ("mean", True, None)
    assert encoder.max_seq_length == MODEL_LENGTH


def test_training_batches_are_cut_at_data_max_length_only(tmp_path, st_model, data_root, capsys):
    config = recipe_config(
        "simcse-sup", tmp_path, st_model, f"data.path={triplets(tmp_path)}", f"data.max_length={TRAIN_LENGTH}",
        "eval.tasks=[]",
    )  # fmt: skip
    spec = get_recipe("simcse-sup")
    method = spec.build(config, config.method_args_as(spec.args_model), data_root).method
    encoder = method.encoder
    assert (encoder.train_max_length, encoder.max_seq_length) == (TRAIN_LENGTH, MODEL_LENGTH)
    long = " ".join(["word"] * 300)
    batch = method.collate([Example((long, long, long)), Example(("a", "b", "c"))])
    assert batch["input_ids"].shape[1] == TRAIN_LENGTH
    assert encoder.tokenize([long])["input_ids"].shape[1] == MODEL_LENGTH  # what encode() sees
    assert "model: pooling mean -> cls" in capsys.readouterr().out


def test_every_change_is_named(tmp_path, st_model, capsys):
    config = recipe_config("mnrl", tmp_path, st_model, "eval.tasks=[]")
    build_encoder(config, pooling="cls", projection="mlp", projection_at_inference=False)
    assert capsys.readouterr().out.strip() == "model: pooling mean -> cls, + new SimCSE MLP (training only)"
    build_encoder(config, normalize=False, max_seq_length=64)
    assert capsys.readouterr().out.strip() == "model: normalize on -> off, max_seq_length 128 -> 64"
    build_encoder(config)
    assert capsys.readouterr().out == ""


def test_a_training_length_above_the_model_limit_names_data_max_length(tmp_path, st_model):
    config = recipe_config("mnrl", tmp_path, st_model, "eval.tasks=[]", "data.max_length=600")
    with pytest.raises(ConfigError, match=r"data\.max_length: .*600 is above the model's position limit"):
        build_encoder(config)
