"""The recipe registry: names, lazy specs, model resolution and its errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from contrastext.errors import ConfigError, UnknownNameError
from contrastext.models.names import resolve_model
from contrastext.runs.registry import RECIPES as RECIPE_REGISTRY
from contrastext.runs.registry import RunSpec, get_recipe, recipe_names
from contrastext.training.config import load_config

RECIPES = Path(__file__).resolve().parents[2] / "recipes"


def test_unknown_recipe_lists_the_known_ones():
    with pytest.raises(UnknownNameError) as error:
        get_recipe("simcse-unsupervised")
    message = str(error.value)
    assert "simcse-unsupervised" in message and message.startswith("unknown recipe 'simcse-unsupervised'")
    for name in RECIPE_REGISTRY.names():
        assert name in message


@pytest.mark.parametrize("name", RECIPE_REGISTRY.names())
def test_specs_are_found_by_name(name):
    spec = get_recipe(name)
    assert isinstance(spec, RunSpec) and spec.name == name
    assert name in recipe_names() and RECIPE_REGISTRY.get(name) is spec


@pytest.mark.parametrize("recipe", ["simcse-unsup", "simcse-sup", "gd"])
def test_recipes_validate_with_their_method_args(recipe):
    config = load_config(RECIPES / f"{recipe}.yaml")
    spec = get_recipe(config.method)
    assert config.method == recipe and config.model == "bundled:all-MiniLM-L6-v2"
    config.method_args_as(spec.args_model)  # no error


def test_bundled_model_resolves_to_the_package_folder(minilm_path):
    assert resolve_model("bundled:all-MiniLM-L6-v2") == minilm_path
    assert resolve_model(minilm_path) == minilm_path
    assert resolve_model("sentence-transformers/all-mpnet-base-v2") == "sentence-transformers/all-mpnet-base-v2"


def test_unknown_bundled_model_lists_the_bundled_ones():
    with pytest.raises(UnknownNameError, match="bundled:all-MiniLM-L6-v2"):
        resolve_model("bundled:bert-base-uncased")


def test_a_wrongly_typed_method_arg_names_the_override(tmp_path):
    config = load_config(RECIPES / "gd.yaml", ["method_args.loss=hinge"])
    with pytest.raises(ConfigError, match=r"--set method_args\.loss .*gd\.yaml.*method_args\.loss"):
        config.method_args_as(get_recipe("gd").args_model)


def test_every_shipped_recipe_is_package_data_and_validates():
    """Each recipe in the package folder loads by name and validates with its method's arguments."""
    from contrastext.runs.recipes import RECIPES_DIR, recipe_path, shipped_recipe_names

    names = shipped_recipe_names()
    assert set(names) >= {"simcse-unsup", "simcse-sup", "gd", "scl", "reclaim", "capt", "capt-continued", "multitask"}
    for name in names:
        path = recipe_path(name)
        assert path.parent == RECIPES_DIR and recipe_path(f"{name}.yaml") == path
        config = load_config(path)
        config.method_args_as(get_recipe(config.method).args_model)
    assert (RECIPES.resolve() == RECIPES_DIR), "recipes/ at the top must link to the package's recipes"


def test_a_fresh_run_into_a_used_folder_is_refused_before_any_model_is_loaded(tmp_path, data_root):
    """The check comes first: the model named here does not even exist, and the run in a stage subfolder counts."""
    from contrastext.runs.registry import run_recipe

    (tmp_path / "seed-1").mkdir()
    (tmp_path / "seed-1" / "train_log.jsonl").write_text('{"step": 1, "loss": 1.0}\n')
    config = load_config(RECIPES / "simcse-unsup.yaml", [f"output_dir={tmp_path}", "model=/no/such/model"])
    with pytest.raises(ConfigError, match="already holds a run"):
        run_recipe(config, data_root=data_root)
