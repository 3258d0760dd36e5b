"""The gradient-dissipation recipe: several objectives for 3 steps, geometry and gradient diagnostics logged."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from contrastext.methods.gd import GDArgs
from contrastext.objectives import (
    DCL,
    AlignUniform,
    HingedDCL,
    InfoNCE,
    MarginAngle,
    MarginEuclidean,
    MarginProduct,
)
from contrastext.runs.gd import build, gradient_metrics
from contrastext.runs.gd import make_gd_objective as build_loss
from contrastext.runs.registry import run_recipe
from tests.runs.recipe_runs import read_log, recipe_config, train_overrides

DIAGNOSTICS = ("align", "uniform", "grad_alignment", "grad_uniformity")
FAST = [
    *train_overrides(max_steps=3, epochs=None, batch_size=8, lr="1e-3", eval_every=3),
    "data.limit=48",
    "eval.limit=60",
    "method_args.diagnostic_batch_size=8",
]


def config_for(tmp_path: Path, model: str, *overrides: str):
    return recipe_config("gd", tmp_path, model, *FAST, *overrides)


@pytest.mark.parametrize("loss", ["margin_euclidean", "dcl"])
def test_three_steps_log_the_loss_and_the_diagnostics(loss, tmp_path, tiny_bert_path, data_root):
    config = config_for(tmp_path, tiny_bert_path, f"method_args.loss={loss}")
    summary = run_recipe(config, data_root)

    records = read_log(tmp_path)
    assert [record["step"] for record in records] == [1, 2, 3]
    assert all(math.isfinite(record[f"loss/{loss}"]) for record in records)
    for key in (*DIAGNOSTICS, "stsb_dev_spearman"):
        assert math.isfinite(records[-1][f"eval/{key}"]), key
        assert summary["metrics"][key] == records[-1][f"eval/{key}"]
    metrics = summary["metrics"]
    assert metrics["align"] >= 0 and metrics["uniform"] <= 0
    assert metrics["grad_alignment"] > 0 and metrics["grad_uniformity"] >= 0


def test_every_loss_name_builds_its_objective_and_gives_a_finite_part(tmp_path, tiny_bert_path, data_root):
    expected = {
        "infonce": InfoNCE,
        "align_uniform": AlignUniform,
        "dcl": DCL,
        "hinged_dcl": HingedDCL,
        "margin_euclidean": MarginEuclidean,
        "margin_angle": MarginAngle,
        "margin_product": MarginProduct,
    }
    config = config_for(tmp_path, tiny_bert_path, "eval.tasks=[]", "method_args.geometry=false")
    bundle = build(config, GDArgs(), data_root)
    batch = bundle.method.collate(bundle.train_examples[:8])
    for name, cls in expected.items():
        objective = build_loss(GDArgs(loss=name, margin=0.2 if name.startswith("margin") else None))
        assert isinstance(objective, cls)
        bundle.method.loss = objective
        bundle.method.part_name = name
        part = bundle.method(batch)[name]
        assert part.dim() == 0 and math.isfinite(part.item()), name


def test_gradient_diagnostics_are_repeatable_and_leave_the_rng_alone(tmp_path, tiny_bert_path, data_root):
    config = config_for(tmp_path, tiny_bert_path, "eval.tasks=[]")
    bundle = build(config, config.method_args_as(GDArgs), data_root)
    bundle.method.eval()
    state = torch.get_rng_state()
    first = gradient_metrics(bundle.method, bundle.train_examples[:8])
    second = gradient_metrics(bundle.method, bundle.train_examples[:8])
    assert torch.equal(state, torch.get_rng_state())
    assert first == second and set(first) == {"grad_alignment", "grad_uniformity", "grad_total"}
    assert not bundle.method.encoder.training  # the evaluation mode is restored
