"""experiments/gd_mechanism.py: the per-anchor gradient against InfoNCE's equation, the margin, the binning and
the rule, and tiny runs (random vectors; a tiny random BERT through the gd recipe)."""

from __future__ import annotations

import argparse
import json
import math

import pytest
import torch
from torch.nn import functional as F

from contrastext.objectives.registry import make_objective, objectives_taking

from ._scripts import load_experiment

gd = load_experiment("gd_mechanism")


def _unit(rows):
    return F.normalize(torch.tensor(rows, dtype=torch.float64), dim=1)


def test_per_anchor_gradient_is_infonce_equation_on_three_anchors():
    # ℓ_k = −log softmax_j(s_kj/τ)_k, s_kj = cos(x_k, y_j); for a unit x_k, B·L's gradient w.r.t. x_k is
    # (1/τ)(Σ_j p_kj y_j − y_k) minus its component along x_k (cos normalises x), y_j unit.
    tau = 0.5
    x = _unit([[1.0, 0.2, 0.0, 0.1], [0.0, 1.0, 0.3, 0.0], [0.2, 0.0, 1.0, 0.4]])
    y = _unit([[0.9, 0.3, 0.1, 0.0], [0.1, 0.8, 0.0, 0.5], [0.0, 0.3, 1.0, 0.2]])
    s = x @ y.T
    p = torch.softmax(s / tau, dim=1)
    expected = []
    for k in range(3):
        g = (p[k] @ y - y[k]) / tau
        g = g - (g @ x[k]) * x[k]
        expected.append(float(g.norm()))
    got = gd.per_anchor_gradient_norms(make_objective("infonce", temperature=tau), x, y)
    assert got.tolist() == pytest.approx(expected, rel=1e-9)
    # and the margin: s_kk − max_{j≠k} s_kj
    m = gd.margins(x, y)
    for k in range(3):
        others = [float(s[k, j]) for j in range(3) if j != k]
        assert float(m[k]) == pytest.approx(float(s[k, k]) - max(others), abs=1e-12)


def test_gradient_of_unnormalised_anchors_is_taken_on_the_sphere():
    torch.manual_seed(0)
    x, y = torch.randn(5, 8), torch.randn(5, 8)
    loss = make_objective("infonce", temperature=0.1)
    assert gd.per_anchor_gradient_norms(loss, 3 * x, y).tolist() == pytest.approx(
        gd.per_anchor_gradient_norms(loss, x, y).tolist(), rel=1e-6
    )


def test_bins_are_equal_count_by_rank():
    values = [float(v) for v in (9, 0, 8, 1, 7, 2, 6, 3, 5, 4)]
    index, edges = gd.equal_count_bins(values, 5)
    assert index == [4, 0, 4, 0, 3, 1, 3, 1, 2, 2]
    assert edges == [0.0, 2.0, 4.0, 6.0, 8.0, 9.0]
    index, _ = gd.equal_count_bins([float(v) for v in range(11)], 4)
    assert [index.count(b) for b in range(4)] == [3, 3, 3, 2]
    bins = gd.binned([1.0, 1.0, 3.0, 0.0, 0.0, 0.0, 5.0, 5.0, 0.0, 0.0], [0, 0, 1, 1, 2, 2, 3, 3, 4, 4], 5)
    assert [b["n"] for b in bins] == [2] * 5
    assert [b["median"] for b in bins] == [1.0, 1.5, 0.0, 5.0, 0.0]
    assert [b["zero_share"] for b in bins] == [0.0, 0.5, 1.0, 0.0, 1.0]
    with pytest.raises(ValueError, match="cannot fill"):
        gd.equal_count_bins([1.0, 2.0], 5)


def test_fade_rule_is_the_declared_ratio():
    assert gd.FADE_RATIO == 0.10
    bins = lambda bottom, top: [{"median": bottom}, {"median": 1.0}, {"median": top}]  # noqa: E731
    assert gd.fade_verdict(bins(1.0, 0.099)) == (pytest.approx(0.099), "fades")
    assert gd.fade_verdict(bins(1.0, 0.1))[1] == "does not fade"
    assert gd.fade_verdict(bins(2.0, 0.0)) == (0.0, "fades")
    assert gd.fade_verdict(bins(0.0, 1.0)) == (None, "no gradient")


def test_batches_keep_a_partial_batch_of_two_or_more():
    assert gd.batches(10, 4) == [slice(0, 4), slice(4, 8), slice(8, 10)]
    assert gd.batches(9, 4) == [slice(0, 4), slice(4, 8)]


def test_tiny_run_on_random_vectors_32_pairs():
    torch.manual_seed(0)
    x = torch.randn(32, 16)
    y = x + 0.5 * torch.randn(32, 16)
    objectives = {name: make_objective(name) for name in ("infonce", "align_uniform", "margin_product", "dcl")}
    result = gd.analyse(objectives, x, y, batch=8, bins=4)
    assert len(result["margins"]) == 32 and len(result["edges"]) == 5
    for name in objectives:
        assert len(result["norms"][name]) == 32
        assert sum(b["n"] for b in result["losses"][name]["bins"]) == 32
        assert all(math.isfinite(v) and v >= 0 for v in result["norms"][name])
    # InfoNCE's gradient falls as the margin grows; the hinge of margin_product is 0 past its margin
    infonce = [b["median"] for b in result["losses"]["infonce"]["bins"]]
    assert infonce[-1] < infonce[0]
    margins, norms = result["margins"], result["norms"]["margin_product"]
    assert all(n == 0.0 for m, n in zip(margins, norms, strict=True) if m > 0.09 + 1e-9)


def test_tiny_model_end_to_end(make_tiny_bert, data_root, tmp_path):
    args = argparse.Namespace(data_root=str(data_root), pairs=32, batch=16, bins=4, results=str(tmp_path))
    record = gd.measure(args, [f"model={make_tiny_bert()}"])
    assert set(record["losses"]) == set(objectives_taking("pairs"))
    assert record["settings"]["objectives"]["infonce"]["options"]["temperature"] == 0.05
    assert record["provenance"]["torch_threads"] >= 1 and record["provenance"]["git_commit"]
    assert all(len(v) == 64 for v in record["settings"]["encoder"]["data_files"].values())
    paths = gd.write(record, tmp_path)
    saved = json.loads(paths["json"].read_text(encoding="utf-8"))
    assert "norms" not in saved and saved["losses"]["infonce"]["bins"][0]["n"] == 8
    assert "Rule (declared" in paths["md"].read_text(encoding="utf-8")
    from PIL import Image

    assert Image.open(paths["png"]).size[0] >= 1200
