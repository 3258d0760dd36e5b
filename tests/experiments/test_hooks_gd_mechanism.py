"""experiments/hooks/gd_mechanism.py: the per-anchor gradient against InfoNCE's equation, the margin, the bins and
the declared rule, a run on random vectors and one through the runner on a tiny random BERT."""

from __future__ import annotations

import argparse
import math

import pytest
import torch
from torch.nn import functional as F

from contrastext.objectives.registry import make_objective, objectives_taking
from tests.experiments._scripts import load_experiment

run, specs = load_experiment("run"), load_experiment("spec")
gd = run.load_hook("gd_mechanism")


def test_per_anchor_gradient_is_infonce_equation_and_the_margin():
    # ℓ_k = −log softmax_j(s_kj/τ)_k, s_kj = cos(x_k, y_j): B·L's gradient at a unit x_k is (1/τ)(Σ_j p_kj y_j − y_k)
    # minus its component along x_k; the margin is s_kk − max_{j≠k} s_kj.
    tau = 0.5
    x = F.normalize(torch.tensor([[1.0, 0.2, 0.0, 0.1], [0.0, 1.0, 0.3, 0.0], [0.2, 0.0, 1.0, 0.4]]).double(), dim=1)
    y = F.normalize(torch.tensor([[0.9, 0.3, 0.1, 0.0], [0.1, 0.8, 0.0, 0.5], [0.0, 0.3, 1.0, 0.2]]).double(), dim=1)
    s, expected = x @ y.T, []
    p = torch.softmax(s / tau, dim=1)
    for k in range(3):
        g = (p[k] @ y - y[k]) / tau
        expected.append(float((g - (g @ x[k]) * x[k]).norm()))
    objective = make_objective("infonce", temperature=tau)
    assert gd.per_anchor_gradient_norms(objective, x, y).tolist() == pytest.approx(expected, rel=1e-9)
    assert gd.per_anchor_gradient_norms(objective, 3 * x, y).tolist() == pytest.approx(expected, rel=1e-9)
    best_other = [max(float(s[k, j]) for j in range(3) if j != k) for k in range(3)]
    assert gd.margins(x, y).tolist() == pytest.approx([float(s[k, k]) - best_other[k] for k in range(3)], abs=1e-12)


def test_bins_batches_and_the_declared_rule():
    index, edges = gd.equal_count_bins([float(v) for v in (9, 0, 8, 1, 7, 2, 6, 3, 5, 4)], 5)
    assert index == [4, 0, 4, 0, 3, 1, 3, 1, 2, 2] and edges == [0.0, 2.0, 4.0, 6.0, 8.0, 9.0]
    index, _ = gd.equal_count_bins([float(v) for v in range(11)], 4)
    assert [index.count(b) for b in range(4)] == [3, 3, 3, 2]
    bins = gd.binned([1.0, 1.0, 3.0, 0.0, 0.0, 0.0, 5.0, 5.0, 0.0, 0.0], [0, 0, 1, 1, 2, 2, 3, 3, 4, 4], 5)
    assert [b["median"] for b in bins] == [1.0, 1.5, 0.0, 5.0, 0.0]
    assert [b["zero_share"] for b in bins] == [0.0, 0.5, 1.0, 0.0, 1.0]
    with pytest.raises(ValueError, match="cannot fill"):
        gd.equal_count_bins([1.0, 2.0], 5)
    assert gd.batches(10, 4) == [slice(0, 4), slice(4, 8), slice(8, 10)] and len(gd.batches(9, 4)) == 2
    three = lambda bottom, top: [{"median": bottom}, {"median": 1.0}, {"median": top}]  # noqa: E731
    assert gd.FADE_RATIO == 0.10 and gd.fade_verdict(three(1.0, 0.099)) == (pytest.approx(0.099), "fades")
    assert gd.fade_verdict(three(1.0, 0.1))[1] == "does not fade"
    assert gd.fade_verdict(three(0.0, 1.0)) == (None, "no gradient")


def test_random_vectors_infonce_falls_with_the_margin_and_the_hinge_is_zero_past_it():
    torch.manual_seed(0)
    x = torch.randn(32, 16)
    objectives = {name: make_objective(name) for name in ("infonce", "align_uniform", "margin_product", "dcl")}
    result = gd.analyse(objectives, x, x + 0.5 * torch.randn(32, 16), batch=8, bins=4)
    assert len(result["margins"]) == 32 and len(result["edges"]) == 5
    for name in objectives:
        assert sum(b["n"] for b in result["losses"][name]["bins"]) == 32
        assert all(math.isfinite(v) and v >= 0 for v in result["norms"][name])
    infonce = [b["median"] for b in result["losses"]["infonce"]["bins"]]
    assert infonce[-1] < infonce[0]
    norms = result["norms"]["margin_product"]
    assert all(n == 0.0 for m, n in zip(result["margins"], norms, strict=True) if m > 0.09 + 1e-9)


def test_a_tiny_model_through_the_runner(make_tiny_bert, data_root, tmp_path):
    experiment = specs.load_spec("gd_mechanism")
    args = run.build_parser(experiment).parse_args(["--results", str(tmp_path), "--runs", str(tmp_path / "runs"),
                                                    "--data-root", str(data_root), "--pairs", "32", "--batch", "16",
                                                    "--bins", "4"])
    item = run.plan(experiment, args)[0]
    item.overrides.append(f"model={make_tiny_bert()}")
    metrics, _ = gd.measure(item, argparse.Namespace(**vars(args)))
    assert set(metrics["losses"]) == set(objectives_taking("pairs")) and metrics["cpu_s"] > 0
    assert metrics["settings"]["objectives"]["infonce"]["options"]["temperature"] == 0.05
    assert metrics["losses"]["infonce"]["bins"][0]["n"] == 8 and (tmp_path / "gd_mechanism.png").stat().st_size > 10_000
