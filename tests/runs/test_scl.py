"""SCL end to end on small slices of real GLUE data: parts, few-shot + noise draws, seeds summary."""

from __future__ import annotations

import json
import math
import statistics

import pytest
import torch

from contrastext.errors import ConfigError
from contrastext.methods.scl import SCLArgs, SCLMethod
from contrastext.objectives.supcon import SupCon
from contrastext.runs.registry import get_run_spec, run_recipe
from contrastext.runs.scl import build
from contrastext.runs.stages import run_training
from tests.runs.recipe_runs import read_log, recipe_config, train_overrides

FAST = [
    *train_overrides(max_steps=3, batch_size=8, lr="1e-4", warmup_ratio=0, eval_every=None),
    "data.max_length=32",
    "eval.limit=24",
]


def fast_config(tmp_path, model_path, *overrides: str):
    return recipe_config("scl", tmp_path, model_path, *FAST, *overrides)


def test_seeds_few_shot_and_noise_give_a_mean_std_summary(tmp_path, tiny_bert_path, data_root):
    config = fast_config(
        tmp_path,
        tiny_bert_path,
        "data.limit=300",
        "data.few_shot=4",
        "data.label_noise=0.25",
        "method_args.seeds=[1, 2]",
    )
    result = run_recipe(config, data_root=data_root)

    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["seeds"] == [1, 2]
    per_seed = [json.loads((tmp_path / f"seed-{s}" / "metrics.json").read_text()) for s in (1, 2)]
    scores = [run["metrics"]["score"] for run in per_seed]
    entry = summary["summary"]["score"]
    assert entry["mean"] == pytest.approx(statistics.fmean(scores))
    assert entry["std"] == pytest.approx(statistics.stdev(scores))
    assert "±" in entry["text"] and result["metrics"]["score"] == pytest.approx(entry["mean"])
    for seed, run in zip((1, 2), per_seed, strict=True):
        report = run["report"]
        assert report["draw_seed"] == seed and report["n_train"] == 8 and report["labels_flipped"] == 2
        log = read_log(tmp_path / f"seed-{seed}")
        assert [record["step"] for record in log] == [1, 2, 3]
        for record in log:
            assert math.isfinite(record["loss/ce"]) and math.isfinite(record["loss/supcon"])


def test_pair_task_trains_and_changes_parameters(tmp_path, tiny_bert_path, data_root):
    config = fast_config(tmp_path, tiny_bert_path, "data.task=mrpc", "eval.tasks=[mrpc:dev]", "data.few_shot=4")
    args = get_run_spec("scl").args_model.model_validate({"lam": 0.9, "temperature": 0.3})
    bundle = build(config, args, data_root)
    before = {name: value.detach().clone() for name, value in bundle.method.named_parameters()}
    summary = run_training(config, bundle)
    after = dict(bundle.method.named_parameters())
    assert not torch.equal(before["head.linear.weight"], after["head.linear.weight"])
    changed = [name for name in before if name.startswith("encoder.") and not torch.equal(before[name], after[name])]
    assert changed, "no encoder parameter changed"
    assert summary["metrics"]["score"] == summary["metrics"]["mrpc_dev_f1"]  # MRPC's metric is F1
    assert bundle.method.loss_weights == pytest.approx({"ce": 0.1, "supcon": 0.9})


def test_parts_are_ce_and_supcon_on_the_cls_vector(tmp_path, minilm_path, data_root):
    config = fast_config(tmp_path, minilm_path, "data.limit=200", "data.few_shot=4")
    bundle = build(config, SCLArgs(), data_root)
    method = bundle.method.eval()  # no dropout: parts are reproducible
    batch = method.collate(bundle.train_examples)
    with torch.no_grad():
        parts = method(batch)
        cls = method.encode_batch(batch).pooled
        expected_ce = torch.nn.functional.cross_entropy(method.head(cls), batch["labels"])
        expected_supcon = SupCon(temperature=0.3)(cls, batch["labels"])
    assert set(parts) == {"ce", "supcon"}
    assert torch.allclose(parts["ce"], expected_ce, atol=1e-5)
    assert torch.allclose(parts["supcon"], expected_supcon, atol=1e-5)


def test_regression_needs_lam_zero(tmp_path, minilm_path, data_root):
    config = fast_config(tmp_path, minilm_path, "data.task=stsb", "eval.tasks=[stsb:dev]", "data.few_shot=null",
                         "data.limit=8")
    with pytest.raises(ConfigError, match="lam=0"):
        build(config, SCLArgs(lam=0.9), data_root)
    bundle = build(config, SCLArgs(lam=0.0), data_root)
    assert isinstance(bundle.method, SCLMethod)
    parts = bundle.method(bundle.method.collate(bundle.train_examples))
    assert set(parts) == {"mse"} and torch.isfinite(parts["mse"])


def test_unknown_method_arg_names_key_and_file(tmp_path, minilm_path, data_root):
    config = fast_config(tmp_path, minilm_path, "method_args.lambda=0.5")
    with pytest.raises(ConfigError, match=r"method_args\.lambda"):
        run_recipe(config, data_root=data_root)
