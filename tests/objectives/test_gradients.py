"""torch.autograd.gradcheck on small float64 inputs, away from the kinks of relu / min / max.

For the hinge losses the test first asserts that no hinge term is within 1e-3 of zero and that the hardest
negative leads the second hardest by more than 1e-3, so finite differences (eps 1e-6) never cross a kink.
"""

from __future__ import annotations

import pytest
import torch
from torch.autograd import gradcheck

from contrastext.objectives import (
    CAPT,
    DCL,
    AlignUniform,
    CEPlusSupCon,
    HingedDCL,
    InfoNCE,
    MarginAngle,
    MarginEuclidean,
    MarginProduct,
    SupCon,
    TripletMargin,
)
from contrastext.objectives.decoupled import dcl_terms
from contrastext.objectives.margin import cosine_matrix
from contrastext.objectives.similarity import normalize
from contrastext.objectives.triplet import cosine_distance, euclidean_distance


def leaf(*shape: int, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=generator, dtype=torch.float64).requires_grad_()


@pytest.mark.parametrize(
    ("objective", "n_inputs"),
    [
        (InfoNCE(temperature=0.2), 2),
        (InfoNCE(temperature=0.2, symmetric=True, hard_negative_weight=0.5), 3),
        (InfoNCE(temperature=1.5, similarity="dot"), 3),
        (CAPT(temperature=0.2), 3),
        (AlignUniform(lam=0.8, alpha=2.0, t=2.0), 2),
        (DCL(temperature=0.3), 2),
    ],
    ids=["infonce", "infonce-sym-hardneg", "infonce-dot", "capt-queue", "align-uniform", "dcl"],
)
def test_smooth_objectives(objective, n_inputs):
    inputs = tuple(leaf(4, 3, seed=seed) for seed in range(n_inputs))
    assert gradcheck(objective, inputs, eps=1e-6, atol=1e-5)


def test_supcon_and_ce_plus_supcon():
    z, logits = leaf(6, 3, seed=10), leaf(6, 3, seed=11)
    labels = torch.tensor([0, 0, 1, 1, 2, 0])
    assert gradcheck(lambda e: SupCon(temperature=0.3)(e, labels), (z,), eps=1e-6, atol=1e-5)
    assert gradcheck(lambda lg, e: CEPlusSupCon(0.7, 0.3)(lg, e, labels), (logits, z), eps=1e-6, atol=1e-5)


def away_from_kinks(hinge: torch.Tensor, matrix: torch.Tensor, largest: bool) -> bool:
    """No hinge term near 0, and per column a clear hardest negative (off-diagonal)."""
    off_diagonal = matrix.detach().clone()
    off_diagonal.fill_diagonal_(float("-inf") if largest else float("inf"))
    top2 = off_diagonal.topk(2, dim=0, largest=largest).values
    return bool((hinge.detach().abs() > 1e-3).all() and ((top2[0] - top2[1]).abs() > 1e-3).all())


@pytest.mark.parametrize(
    ("objective", "largest"),
    [(MarginEuclidean(0.45), False), (MarginAngle(0.15), False), (MarginProduct(0.09), True)],
    ids=["euclidean", "angle", "product"],
)
def test_margin_losses(objective, largest):
    x, y = leaf(5, 3, seed=12), leaf(5, 3, seed=13)
    cosine = cosine_matrix(x, y)
    hinge = objective.hinge(cosine)
    matrix = {"MarginEuclidean": 2 - 2 * cosine, "MarginAngle": torch.arccos(cosine), "MarginProduct": cosine}
    assert away_from_kinks(hinge, matrix[type(objective).__name__], largest)
    assert (hinge > 0).any(), "the test needs active hinge terms"
    assert gradcheck(objective, (x, y), eps=1e-6, atol=1e-5)


def test_hinged_dcl():
    x, y = leaf(5, 3, seed=14), leaf(5, 3, seed=15)
    with torch.no_grad():
        y[:2] = x[:2] * 1.5  # two clipped rows, the others active
    terms = dcl_terms(normalize(x), normalize(y), 0.3)
    assert (terms.abs() > 1e-3).all() and (terms < 0).any() and (terms > 0).any()
    assert gradcheck(HingedDCL(temperature=0.3), (x, y), eps=1e-6, atol=1e-5)


@pytest.mark.parametrize("distance", ["euclidean", "cosine"])
def test_triplet(distance):
    a, p, n = leaf(5, 3, seed=16), leaf(5, 3, seed=17), leaf(5, 3, seed=18)
    objective = TripletMargin(margin=0.3, distance=distance)
    distance_function = euclidean_distance if distance == "euclidean" else cosine_distance
    hinge = distance_function(a, p) - distance_function(a, n) + 0.3
    assert (hinge.detach().abs() > 1e-3).all() and (hinge > 0).any()
    assert gradcheck(objective, (a, p, n), eps=1e-6, atol=1e-5)
