"""``method_args.matryoshka_dims`` on the recipes that train on embedding pairs, end to end.

mnrl through the CLI with Matryoshka dims: one loss part per dim in the log, the total their weighted sum;
a dim wider than the model is one error line before anything is written; the other recipes of the SimCSE
method build the same wrapper.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from contrastext.objectives import InfoNCE
from contrastext.objectives.matryoshka import Matryoshka
from contrastext.runs.registry import get_recipe
from tests.cli.cli_runs import run
from tests.runs.recipe_runs import read_log, recipe_config

pytestmark = pytest.mark.usefixtures("single_torch_thread")

WIDTH = 32
TOPICS = ["cats", "pizza", "rome", "guitars", "rain", "trains", "coffee", "chess"]


@pytest.fixture(scope="module")
def st_model(make_st_model) -> str:
    """A tiny random BERT (width 32, one layer) saved as a sentence-transformers folder."""
    return make_st_model(num_layers=1, max_seq_length=64)


def pairs(tmp_path: Path) -> Path:
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(json.dumps({"anchor": f"about {t}", "positive": f"a text on {t}"}) + "\n" for t in TOPICS))
    return path


def train_argv(tmp_path: Path, model: str, *sets: str) -> list[str]:
    settings = [
        f"model={model}", f"data.path={pairs(tmp_path)}", f"output_dir={tmp_path / 'run'}", "train.max_steps=2",
        "train.epochs=null", "train.batch_size=4", "train.save_every=null", "train.progress_bar=false",
        "train.log_every=1", "train.eval_every=null", "eval.tasks=[]", *sets,
    ]  # fmt: skip
    return ["train", "mnrl", *[part for item in settings for part in ("--set", item)]]


def test_mnrl_with_matryoshka_dims_logs_one_part_per_dim(tmp_path, capsys, st_model):
    argv = train_argv(tmp_path, st_model, "method_args.matryoshka_dims=[8,32,16]",
                      "method_args.matryoshka_weights=[0.25,1,0.5]")  # fmt: skip
    code, out, err = run(argv, capsys)
    assert code == 0, err
    records = [record for record in read_log(tmp_path / "run") if "loss/infonce_32" in record]
    assert [record["step"] for record in records] == [1, 2]
    for record in records:
        assert "loss/infonce" not in record
        parts = {dim: record[f"loss/infonce_{dim}"] for dim in (32, 16, 8)}
        assert record["loss"] == pytest.approx(parts[32] + 0.5 * parts[16] + 0.25 * parts[8], rel=1e-5)
    assert (tmp_path / "run" / "final" / "encoder").is_dir()


def test_a_dim_wider_than_the_model_is_one_error_line_and_nothing_is_written(tmp_path, capsys, st_model):
    code, out, err = run(train_argv(tmp_path, st_model, "method_args.matryoshka_dims=[64,16]"), capsys)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --set method_args.matryoshka_dims"), err
    assert "64 is wider than the model's embeddings (32 dims)" in lines[0]
    assert not (tmp_path / "run").exists() or not any((tmp_path / "run").iterdir())


def test_the_full_width_left_out_is_said(tmp_path, capsys, st_model, data_root):
    config = recipe_config("mnrl", tmp_path, st_model, f"data.path={pairs(tmp_path)}", "eval.tasks=[]",
                           "method_args.matryoshka_dims=[16,8]")  # fmt: skip
    spec = get_recipe("mnrl")
    method = spec.build(config, config.method_args_as(spec.args_model), data_root).method
    assert "full width 32 is not among method_args.matryoshka_dims [16, 8]" in capsys.readouterr().out
    assert method.loss_weights == {"infonce_16": 1.0, "infonce_8": 1.0}


@pytest.mark.parametrize(("recipe", "loss"), [("simcse-sup", "infonce"), ("simcse-unsup", "dcl")])
def test_the_other_pair_recipes_wrap_their_objective(recipe, loss, tmp_path, st_model, data_root):
    config = recipe_config(recipe, tmp_path, st_model, f"data.path={pairs(tmp_path)}", "eval.tasks=[]",
                           f"method_args.loss={loss}", "method_args.matryoshka_dims=[32,8]",
                           *(["data.columns.text=anchor"] if recipe == "simcse-unsup" else []))  # fmt: skip
    spec = get_recipe(recipe)
    method = spec.build(config, config.method_args_as(spec.args_model), data_root).method
    assert isinstance(method.loss, Matryoshka) and method.loss.dims == (32, 8)
    assert type(method.loss.objective).__name__ == {"infonce": "InfoNCE", "dcl": "DCL"}[loss]
    batch = method.collate(method_examples(recipe))
    parts = method(batch)
    assert set(parts) == {f"{loss}_32", f"{loss}_8"} and all(torch.isfinite(value) for value in parts.values())


def method_examples(recipe: str):
    from contrastext.data.examples import Example

    if recipe == "simcse-unsup":
        return [Example((f"about {t}",)) for t in TOPICS[:4]]
    return [Example((f"about {t}", f"a text on {t}")) for t in TOPICS[:4]]


def test_the_mnrl_loss_with_dims_is_matryoshka_of_infonce(tmp_path, st_model, data_root):
    config = recipe_config("mnrl", tmp_path, st_model, f"data.path={pairs(tmp_path)}", "eval.tasks=[]",
                           "method_args.matryoshka_dims=[32,16]")  # fmt: skip
    spec = get_recipe("mnrl")
    loss = spec.build(config, config.method_args_as(spec.args_model), data_root).method.loss
    generator = torch.Generator().manual_seed(0)
    a, p = (torch.randn(4, WIDTH, generator=generator) for _ in range(2))
    torch.testing.assert_close(loss(a, p), Matryoshka(InfoNCE(temperature=0.05), [32, 16])(a, p))
