"""Per-anchor gradient norm against the margin (contrastext.evaluation.margins), written from InfoNCE's equation."""

from __future__ import annotations

import pytest
import torch
from torch.nn import functional as F

from contrastext.evaluation.margins import (
    anchor_gradient_norms,
    batches,
    equal_count_bins,
    margin_profile,
    margins,
    plot_margin_profile,
)
from contrastext.objectives.registry import make_objective


def _pairs(count: int, dim: int = 4):
    return (F.normalize(torch.rand(count, dim, generator=torch.Generator().manual_seed(seed)).double(), dim=1)
            for seed in (1, 2))


def test_an_anchors_gradient_norm_is_infonces_equation_and_its_margin_is_the_positive_over_the_best_negative():
    # ℓ_k = −log softmax_j(s_kj/τ)_k, s_kj = cos(x_k, y_j): B·L's gradient at a unit x_k is (1/τ)(Σ_j p_kj y_j − y_k)
    # minus its component along x_k; the margin is s_kk − max_{j≠k} s_kj.
    x, y = _pairs(3)
    s, tau = x @ y.T, 0.5
    g = (torch.softmax(s / tau, dim=1) @ y - y) / tau
    expected = (g - (g * x).sum(1, keepdim=True) * x).norm(dim=1).tolist()
    objective = make_objective("infonce", temperature=tau)
    assert anchor_gradient_norms(objective, 3 * x, y).tolist() == pytest.approx(expected, rel=1e-9)  # scale-free
    others = s.masked_fill(torch.eye(3, dtype=torch.bool), -2).max(dim=1).values
    assert margins(x, y).tolist() == pytest.approx((s.diagonal() - others).tolist(), abs=1e-12)
    with pytest.raises(ValueError, match="at least 2 pairs"):
        margins(x[:1], y[:1])


def test_bins_hold_equal_counts_and_a_short_last_batch_of_one_is_dropped():
    index, edges = equal_count_bins([5.0, 1.0, 3.0, 2.0, 4.0, 0.0], 3)
    assert index == [2, 0, 1, 1, 2, 0] and edges == [0.0, 2.0, 4.0, 5.0]
    assert batches(5, 2) == [slice(0, 2), slice(2, 4)] and batches(6, 4) == [slice(0, 4), slice(4, 6)]
    with pytest.raises(ValueError, match="cannot fill"):
        equal_count_bins([1.0], 2)


def test_the_profile_shows_infonce_fading_with_the_margin_and_draws_a_panel_per_loss(tmp_path):
    x, y = _pairs(64, dim=8)
    y = F.normalize(y + torch.linspace(0, 4, 64, dtype=torch.float64)[:, None] * x, dim=1)  # margins from low to high
    profile = margin_profile({"infonce": make_objective("infonce", temperature=0.05)}, x, y, batch=32, bins=4)
    medians = [b["median"] for b in profile["losses"]["infonce"]["bins"]]
    assert [b["n"] for b in profile["losses"]["infonce"]["bins"]] == [16] * 4 and len(profile["margins"]) == 64
    assert medians[-1] < medians[0] and profile["losses"]["infonce"]["top_over_bottom"] == pytest.approx(
        medians[-1] / medians[0])
    assert plot_margin_profile(profile, tmp_path / "profile.png").stat().st_size > 10_000
