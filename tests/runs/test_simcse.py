"""SimCSE (unsupervised and supervised) end to end for 3 steps on slices of wiki1m / NLI triplets."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from contrastext.data.examples import Example
from contrastext.errors import ConfigError, DataFormatError
from contrastext.methods.simcse import SimCSE
from contrastext.objectives.infonce import InfoNCE
from contrastext.runs.registry import get_recipe, run_recipe
from contrastext.runs.simcse import SimCSESupArgs, SimCSEUnsupArgs, build_sup, build_unsup
from contrastext.runs.stages import run_training
from tests.runs.recipe_runs import read_log, recipe_config, train_overrides

FAST = [
    *train_overrides(max_steps=3, epochs=None, batch_size=8, lr="1e-3", eval_every=3),
    "data.limit=48",
    "eval.limit=40",
]


def config_for(recipe: str, tmp_path: Path, model: str, *overrides: str):
    return recipe_config(recipe, tmp_path, model, *FAST, *overrides)


def test_limit_rows_random_draws_the_sentences_with_the_seed(tmp_path, data_root):
    from contrastext.runs.data import load_training_data

    def sentences(*overrides):
        config = config_for("simcse-unsup", tmp_path, "unused-model", *overrides)
        return [e.texts for e in load_training_data(config, data_root, default_task="wiki1m").examples]

    first, drawn = sentences(), sentences("data.limit_rows=random")
    assert len(first) == len(drawn) == 48 and first != drawn
    assert drawn == sentences("data.limit_rows=random") != sentences("data.limit_rows=random", "seed=7")


def encoder_weights(method) -> dict[str, torch.Tensor]:
    return {name: tensor.detach().clone() for name, tensor in method.encoder.state_dict().items()}


@pytest.mark.parametrize("recipe", ["simcse-unsup", "simcse-sup"])
def test_three_steps_log_finite_parts_change_weights_and_evaluate(recipe, tmp_path, tiny_bert_path, data_root):
    config = config_for(recipe, tmp_path, tiny_bert_path)
    spec = get_recipe(recipe)
    bundle = spec.build(config, config.method_args_as(spec.args_model), data_root)
    before = encoder_weights(bundle.method)

    summary = run_training(config, bundle, resume=False)

    records = read_log(tmp_path)
    assert [record["step"] for record in records] == [1, 2, 3]
    assert all(math.isfinite(record["loss/infonce"]) for record in records)
    after = encoder_weights(bundle.method)
    changed = [name for name in before if not torch.equal(before[name], after[name])]
    assert any("projection" in name for name in changed) and any("backbone" in name for name in changed)
    assert math.isfinite(summary["metrics"]["stsb_dev_spearman"])
    assert records[-1]["eval/stsb_dev_spearman"] == summary["metrics"]["stsb_dev_spearman"]
    assert Path(summary["best_model_dir"], "modules.json").is_file()
    assert json.loads((tmp_path / "metrics.json").read_text())["metrics"] == summary["metrics"]


def test_unsup_uses_the_mlp_in_training_only_and_sup_keeps_it(tmp_path, tiny_bert_path, data_root):
    unsup = config_for("simcse-unsup", tmp_path / "u", tiny_bert_path, "eval.tasks=[]")
    sup = config_for("simcse-sup", tmp_path / "s", tiny_bert_path, "eval.tasks=[]")
    unsup_encoder = build_unsup(unsup, unsup.method_args_as(SimCSEUnsupArgs), data_root).method.encoder
    sup_encoder = build_sup(sup, sup.method_args_as(SimCSESupArgs), data_root).method.encoder
    assert unsup_encoder.pooling == sup_encoder.pooling == "cls"
    assert unsup_encoder.projection is not None and not unsup_encoder.projection_at_inference
    assert sup_encoder.projection is not None and sup_encoder.projection_at_inference


def test_dropout_twins_are_the_same_tokens_with_different_dropout(tmp_path, tiny_bert_path, data_root):
    config = config_for("simcse-unsup", tmp_path, tiny_bert_path, "eval.tasks=[]")
    method = build_unsup(config, config.method_args_as(SimCSEUnsupArgs), data_root).method
    examples = [Example(("a first sentence",)), Example(("another, longer sentence here",))]
    batch = method.collate(examples)
    assert batch["views"] == 2 and batch["input_ids"].shape[0] == 4
    assert torch.equal(batch["input_ids"][:2], batch["input_ids"][2:])
    method.train()
    anchors, positives = method.embed_views(batch)
    assert not torch.allclose(anchors, positives)  # two dropout masks
    assert math.isfinite(method(batch)["infonce"].item())


def test_hard_negatives_enter_the_logits(tmp_path, tiny_bert_path, data_root):
    config = config_for("simcse-sup", tmp_path, tiny_bert_path, "eval.tasks=[]", "method_args.hard_negative_weight=1.0")
    bundle = build_sup(config, config.method_args_as(SimCSESupArgs), data_root)
    method = bundle.method
    method.eval()  # no dropout: the same batch gives the same embeddings
    batch = method.collate(bundle.train_examples[:6])
    assert batch["views"] == 3
    with torch.no_grad():
        anchors, positives, negatives = method.embed_views(batch)
        loss = method(batch)["infonce"]
        expected = InfoNCE(0.05, hard_negative_weight=1.0)(anchors, positives, negatives)
        unweighted = InfoNCE(0.05)(anchors, positives, negatives)
        in_batch_only = InfoNCE(0.05)(anchors, positives)
    assert torch.allclose(loss, expected)
    assert not torch.allclose(loss, unweighted) and not torch.allclose(unweighted, in_batch_only)


def test_sup_rejects_a_batch_mixing_pairs_and_triplets(tmp_path, tiny_bert_path, data_root):
    config = config_for("simcse-sup", tmp_path, tiny_bert_path, "eval.tasks=[]")
    method = build_sup(config, config.method_args_as(SimCSESupArgs), data_root).method
    examples = [Example(("a", "b", "c"), source="x.csv:2"), Example(("a", "b"), source="x.csv:3")]
    with pytest.raises(DataFormatError, match="x.csv:3"):
        method.collate(examples)


def test_unknown_method_arg_names_the_key_and_the_file(tmp_path, tiny_bert_path, data_root):
    config = config_for("simcse-unsup", tmp_path, tiny_bert_path, "method_args.hard_negative_weight=1.0")
    with pytest.raises(ConfigError, match=r"method_args\.hard_negative_weight.*unknown key") as error:
        run_recipe(config, data_root)
    assert "simcse-unsup.yaml" in str(error.value)


def test_the_method_is_a_simcse_method_with_one_part(tmp_path, tiny_bert_path, data_root):
    config = config_for("simcse-unsup", tmp_path, tiny_bert_path, "eval.tasks=[]")
    bundle = build_unsup(config, config.method_args_as(SimCSEUnsupArgs), data_root)
    assert isinstance(bundle.method, SimCSE) and bundle.method.loss_weights == {"infonce": 1.0}
    assert len(bundle.train_examples) == 48 and bundle.evaluator is None


def test_same_seed_same_run_including_the_randomly_initialised_mlp(tmp_path, tiny_bert_path, data_root):
    """run_recipe seeds before building, so the MLP's initialisation (and every loss) repeats."""
    runs = []
    for name in ("a", "b"):
        config = config_for("simcse-unsup", tmp_path / name, tiny_bert_path, "train.eval_every=null")
        run_recipe(config, data_root)
        runs.append([record["loss"] for record in read_log(tmp_path / name)])
    assert runs[0] == runs[1]


@pytest.mark.parametrize("metric_for_best", ["stsb_dev_spearman", "null"])
def test_the_final_weights_are_evaluated_once_when_they_are_the_ones_reported(
    metric_for_best, tmp_path, tiny_bert_path, data_root
):
    """The trainer always scores the last step; with no checkpoint selection (or the last step best) the stage
    reports that evaluation instead of scoring the same weights a second time."""
    config = config_for("simcse-unsup", tmp_path, tiny_bert_path, f"train.metric_for_best={metric_for_best}")
    spec = get_recipe("simcse-unsup")
    bundle = spec.build(config, config.method_args_as(spec.args_model), data_root)
    calls = []
    evaluator = bundle.evaluator
    bundle.evaluator = lambda method: calls.append(1) or evaluator(method)

    summary = run_training(config, bundle, resume=False)

    assert len(calls) == 1  # eval_every = max_steps = 3: one evaluation, at the last step
    last = [r for r in read_log(tmp_path) if "eval/stsb_dev_spearman" in r][-1]
    assert summary["metrics"]["stsb_dev_spearman"] == last["eval/stsb_dev_spearman"]


def test_one_source_per_knob_and_any_registered_objective():
    """The recipe's knobs reach every objective whose constructor takes them and are refused in loss_args; the
    objective's other arguments come from loss_args (issue 20)."""
    from contrastext.objectives import DCL
    from contrastext.runs.simcse import make_pair_objective
    from contrastext.training.config import validate_method_args

    infonce = make_pair_objective(SimCSESupArgs(temperature=0.1, symmetric=True, hard_negative_weight=0.5))
    assert isinstance(infonce, InfoNCE) and (infonce.temperature, infonce.symmetric) == (0.1, True)
    dcl = make_pair_objective(SimCSEUnsupArgs(loss="dcl", temperature=0.2))  # no symmetric: DCL does not take it
    assert isinstance(dcl, DCL) and dcl.temperature == 0.2
    for key in ("temperature", "symmetric", "hard_negative_weight"):
        with pytest.raises(ConfigError, match=rf"simcse-sup.yaml: method_args.loss_args: .*set method_args.{key} "):
            validate_method_args(SimCSESupArgs, {"loss_args": {key: 1}}, "simcse-sup.yaml")
    with pytest.raises(ConfigError, match=r"method_args.loss: .*unknown objective 'infonse'.*did you mean 'infonce'"):
        validate_method_args(SimCSEUnsupArgs, {"loss": "infonse"}, "simcse-unsup.yaml")
