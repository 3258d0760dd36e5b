"""Every objective against its explicit per-element loop (naive_objectives.py), in float32 and float64."""

from __future__ import annotations

import pytest
import torch

from contrastext.objectives import (
    CAPT,
    DCL,
    Alignment,
    AlignUniform,
    CEPlusSupCon,
    HingedDCL,
    InfoNCE,
    MarginAngle,
    MarginEuclidean,
    MarginProduct,
    SupCon,
    TripletMargin,
    Uniformity,
)
from tests.objectives import naive_objectives as naive

DTYPES = [torch.float32, torch.float64]
TOLERANCE = {torch.float32: dict(rel=1e-4, abs=1e-4), torch.float64: dict(rel=1e-9, abs=1e-9)}


def randn(*shape: int, dtype: torch.dtype, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=generator, dtype=torch.float64).to(dtype)


def close(value: torch.Tensor, expected: float, dtype: torch.dtype):
    assert value.dim() == 0
    assert value.item() == pytest.approx(expected, **TOLERANCE[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("similarity", ["cos", "dot"])
@pytest.mark.parametrize("symmetric", [False, True])
@pytest.mark.parametrize("with_negatives", [False, True])
def test_infonce(dtype, similarity, symmetric, with_negatives):
    a, p = randn(6, 5, dtype=dtype, seed=0), randn(6, 5, dtype=dtype, seed=1)
    n = randn(6, 5, dtype=dtype, seed=2) if with_negatives else None
    tau = 0.05 if similarity == "cos" else 2.0
    loss = InfoNCE(temperature=tau, similarity=similarity, symmetric=symmetric)(a, p, n)
    close(loss, naive.infonce(a, p, n, tau=tau, similarity=similarity, symmetric=symmetric), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("blocks", [1, 2])
def test_infonce_hard_negative_weight_hits_own_negatives_only(dtype, blocks):
    a, p, n = randn(5, 4, dtype=dtype, seed=3), randn(5, 4, dtype=dtype, seed=4), randn(5 * blocks, 4, dtype=dtype, seed=5)
    loss = InfoNCE(temperature=0.1, hard_negative_weight=0.7)(a, p, n)
    close(loss, naive.infonce(a, p, n, tau=0.1, weight=0.7), dtype)
    assert loss.item() != pytest.approx(naive.infonce(a, p, n, tau=0.1), rel=1e-3)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("symmetric", [False, True])
def test_infonce_duplicate_masking_by_ids(dtype, symmetric):
    a, p = randn(6, 4, dtype=dtype, seed=6), randn(6, 4, dtype=dtype, seed=7)
    ids = torch.tensor([0, 1, 0, 2, 1, 3])
    loss = InfoNCE(temperature=0.1, symmetric=symmetric)(a, p, positive_ids=ids)
    close(loss, naive.infonce(a, p, tau=0.1, symmetric=symmetric, ids=ids.tolist()), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_infonce_duplicate_masking_by_equal_embeddings(dtype):
    a, p = randn(6, 4, dtype=dtype, seed=8), randn(6, 4, dtype=dtype, seed=9)
    p[3] = p[0]  # row 3's positive is the same sentence as row 0's
    loss = InfoNCE(temperature=0.1, mask_duplicate_positives=True)(a, p)
    close(loss, naive.infonce(a, p, tau=0.1, ids=[0, 1, 2, 0, 4, 5]), dtype)
    unmasked = InfoNCE(temperature=0.1)(a, p)
    assert loss.item() < unmasked.item()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("labels", [[0, 0, 1, 1, 2, 2, 2], [0, 1, 1, 2, 3, 4, 0], [5, 5, 5, 5, 5, 5, 5]])
def test_supcon(dtype, labels):
    z, y = randn(7, 5, dtype=dtype, seed=10), torch.tensor(labels)
    close(SupCon(temperature=0.1)(z, y), naive.supcon(z, y, tau=0.1), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_ce_plus_supcon(dtype):
    logits, z, y = randn(7, 3, dtype=dtype, seed=11), randn(7, 5, dtype=dtype, seed=12), torch.tensor([0, 0, 1, 1, 2, 2, 0])
    objective = CEPlusSupCon(lam=0.9, temperature=0.3)
    parts = objective.parts(logits, z, y)
    close(parts["ce"], naive.cross_entropy(logits, y), dtype)
    close(parts["supcon"], naive.supcon(z, y, tau=0.3), dtype)
    expected = 0.1 * naive.cross_entropy(logits, y) + 0.9 * naive.supcon(z, y, tau=0.3)
    close(objective(logits, z, y), expected, dtype)
    assert objective.weights == pytest.approx({"ce": 0.1, "supcon": 0.9})


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("with_queue", [False, True])
def test_capt(dtype, with_queue):
    s, t = randn(5, 4, dtype=dtype, seed=13), randn(5, 4, dtype=dtype, seed=14)
    queue = randn(7, 4, dtype=dtype, seed=15) if with_queue else None
    close(CAPT(temperature=0.1)(s, t, queue), naive.capt(s, t, queue, tau=0.1), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_capt_accepts_tensor_temperature(dtype):
    s, t = randn(5, 4, dtype=dtype, seed=16), randn(5, 4, dtype=dtype, seed=17)
    objective = CAPT(temperature=torch.tensor(0.2, dtype=dtype))
    close(objective(s, t), naive.capt(s, t, tau=0.2), dtype)
    objective.temperature = torch.tensor(0.4, dtype=dtype)  # a schedule drives it
    close(objective(s, t), naive.capt(s, t, tau=0.4), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("alpha", [2.0, 1.0])
@pytest.mark.parametrize("t", [2.0, 0.5])
def test_alignment_uniformity(dtype, alpha, t):
    """Against the authors' lalign / lunif / cal_loss "a&u" (naive_objectives.py cites the lines)."""
    x, y = randn(6, 4, dtype=dtype, seed=18), randn(6, 4, dtype=dtype, seed=19)
    close(Alignment(alpha=alpha)(x, y), naive.alignment(x, y, alpha), dtype)
    close(Uniformity(t=t)(x), naive.uniformity(x, t), dtype)
    nie = AlignUniform(lam=0.7, alpha=alpha, t=t)(x, y)
    close(nie, naive.align_uniform(x, y, 0.7, alpha, t, form="nie"), dtype)
    wang_isola = AlignUniform(lam=0.7, alpha=alpha, t=t, form="wang_isola")(x, y)
    close(wang_isola, naive.align_uniform(x, y, 0.7, alpha, t, form="wang_isola"), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_align_uniform_default_is_the_authors_half_and_half(dtype):
    """Default λ = 0.5 (their train.py loss_lambda), α = 2, t = 2: 0.5·align + 0.5·(4 + (U(x) + U(y))/2)."""
    x, y = randn(6, 4, dtype=dtype, seed=27), randn(6, 4, dtype=dtype, seed=28)
    both_sides = (naive.uniformity(x, 2.0) + naive.uniformity(y, 2.0)) / 2
    close(AlignUniform()(x, y), 0.5 * naive.alignment(x, y, 2.0) + 0.5 * (4.0 + both_sides), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_dcl_and_hinged_dcl(dtype):
    """Against decouple_contrastive_loss / _positive_loss; τ = 0.05 is their default temp."""
    x, y = randn(6, 4, dtype=dtype, seed=20), randn(6, 4, dtype=dtype, seed=21)
    y[:3] = x[:3] + 0.01 * y[:3]  # some rows well aligned, so some hinged terms are clipped
    for tau in (0.5, 0.05):
        close(DCL(temperature=tau)(x, y), naive.dcl(x, y, tau=tau), dtype)
        close(HingedDCL(temperature=tau)(x, y), naive.dcl(x, y, tau=tau, hinged=True), dtype)
    close(DCL()(x, y), naive.dcl(x, y, tau=0.05), dtype)
    assert HingedDCL(temperature=0.5)(x, y).item() > DCL(temperature=0.5)(x, y).item()


MARGINS = [(MarginEuclidean, "euclidean", 0.45), (MarginAngle, "angle", 0.15), (MarginProduct, "product", 0.09)]


def far_negative_pairs(dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """Pairs where every negative x_i of y_0 has a negative cosine with it (angle > π/2), the other positives
    close to their anchors: the authors' filled diagonal (cos 0) is then y_0's hardest "negative"."""
    x, y = randn(6, 4, dtype=dtype, seed=22), randn(6, 4, dtype=dtype, seed=23)
    x[:, 0] = x[:, 0].abs() + 3  # every anchor leans towards +e_1
    y[1:] = x[1:] + 0.1 * y[1:]
    y[0] = -x[0] + 0.1 * y[0]  # y_0 leans towards −e_1: cos(x_i, y_0) < 0 for every i
    return x, y


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("objective", "kind", "margin"), MARGINS)
@pytest.mark.parametrize("diagonal", ["fill", "exclude"])
def test_margin_losses(dtype, objective, kind, margin, diagonal):
    """Against margin_e_loss / margin_loss / margin_p_loss (margins 0.45, 0.15·π, 0.09), on random pairs and
    on pairs where the filled diagonal wins."""
    x, y = randn(6, 4, dtype=dtype, seed=22), randn(6, 4, dtype=dtype, seed=23)
    y[:3] = x[:3] + 0.1 * y[:3]
    loss = objective(margin=margin, diagonal=diagonal)
    close(loss(x, y), naive.margin(x, y, kind, margin, diagonal), dtype)
    x, y = far_negative_pairs(dtype)
    close(loss(x, y), naive.margin(x, y, kind, margin, diagonal), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("objective", "kind", "margin"), MARGINS)
def test_margin_defaults_are_the_authors(dtype, objective, kind, margin):
    """The defaults are the authors' code: their margins and the filled diagonal. On the far-negative pairs
    the fill caps MAT's hardest angle at π/2 and floors MPT's hardest product at 0 (≠ "exclude"); MET's
    filled 2 is the largest distance on the sphere, so it agrees with "exclude"."""
    x, y = far_negative_pairs(dtype)
    close(objective()(x, y), naive.margin(x, y, kind, margin, "fill"), dtype)
    excluded = naive.margin(x, y, kind, margin, "exclude")
    if kind == "euclidean":
        close(objective()(x, y), excluded, dtype)
    else:
        assert objective()(x, y).item() != pytest.approx(excluded, rel=1e-3)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("distance", ["euclidean", "cosine"])
def test_triplet(dtype, distance):
    a, p, n = (randn(6, 4, dtype=dtype, seed=s) for s in (24, 25, 26))
    close(TripletMargin(margin=0.5, distance=distance)(a, p, n), naive.triplet(a, p, n, 0.5, distance), dtype)
