"""Gradient decomposition: checked against hand-derived InfoNCE / DCL / alignment-uniformity / MPT gradients,
and the generic (embedding-loss) split against the exact similarity-matrix split."""

import pytest
import torch
import torch.nn.functional as F

from contrastext.evaluation.gradients import gradient_decomposition, gradient_parts, similarity_gradient_parts
from contrastext.objectives import DCL, AlignUniform, InfoNCE, MarginAngle, MarginEuclidean, MarginProduct

TAU = 0.1
BATCH, DIM = 8, 32


pytestmark = pytest.mark.usefixtures("single_torch_thread")  # tiny tensors: one intra-op thread


@pytest.fixture
def pair():
    generator = torch.Generator().manual_seed(0)
    x = F.normalize(torch.randn(BATCH, DIM, generator=generator, dtype=torch.float64), dim=1)
    y = F.normalize(x + 0.7 * torch.randn(BATCH, DIM, generator=generator, dtype=torch.float64), dim=1)
    return x, y


# Small reference losses on embeddings (the library's own objectives live in contrastext/objectives).
def info_nce(x, y):
    logits = F.normalize(x, dim=1) @ F.normalize(y, dim=1).T / TAU
    return F.cross_entropy(logits, torch.arange(len(x)))


def info_nce_on_similarity(similarity):
    return F.cross_entropy(similarity / TAU, torch.arange(len(similarity)))


def decoupled(x, y):
    """DCL: the positive is removed from the denominator."""
    logits = F.normalize(x, dim=1) @ F.normalize(y, dim=1).T / TAU
    positive = logits.diagonal()
    negatives = logits.masked_fill(torch.eye(len(x), dtype=torch.bool), float("-inf"))
    return (-positive + torch.logsumexp(negatives, dim=1)).mean()


def align_uniform(x, y):
    """Wang & Isola: E‖x−y‖² + log E exp(−2‖x_i−x_j‖²)."""
    alignment = (x - y).pow(2).sum(1).mean()
    uniformity = torch.pdist(x).pow(2).mul(-2).exp().mean().log()
    return alignment + uniformity


def tangent(g, x):
    return g - (g * x).sum(1, keepdim=True) * x


def test_info_nce_matches_hand_derived_parts(pair):
    x, y = pair
    p = torch.softmax(x @ y.T / TAU, dim=1)
    alignment = -(1 - p.diagonal()).unsqueeze(1) / TAU * y
    off = p.masked_fill(torch.eye(BATCH, dtype=torch.bool), 0.0)
    uniformity = off @ y / TAU
    for parts in (gradient_parts(info_nce, x, y), similarity_gradient_parts(info_nce_on_similarity, x, y)):
        assert torch.allclose(parts.alignment, tangent(alignment, x), atol=1e-8)
        assert torch.allclose(parts.uniformity, tangent(uniformity, x), atol=1e-8)
        assert torch.allclose(parts.total, parts.alignment + parts.uniformity)


def test_total_is_the_tangent_gradient_of_batch_size_times_loss(pair):
    x, y = pair
    anchors = x.clone().requires_grad_(True)
    (gradient,) = torch.autograd.grad(BATCH * info_nce(anchors, y), [anchors])
    assert torch.allclose(gradient_parts(info_nce, x, y).total, tangent(gradient, x), atol=1e-10)


def test_decoupled_alignment_part_is_constant(pair):
    """DCL's positive term is −s_kk/τ alone: its alignment gradient is −(I − x xᵀ) y_k / τ, whatever p_kk."""
    x, y = pair
    parts = gradient_parts(decoupled, x, y)
    assert torch.allclose(parts.alignment, tangent(-y / TAU, x), atol=1e-8)
    on_similarity = similarity_gradient_parts(
        lambda s: (-s.diagonal() / TAU + torch.logsumexp((s / TAU).masked_fill(torch.eye(BATCH, dtype=torch.bool), float("-inf")), 1)).mean(),
        x,
        y,
    )
    assert torch.allclose(parts.uniformity, on_similarity.uniformity, atol=1e-8)


def test_align_uniform_splits_into_its_two_terms(pair):
    """The x–x uniformity term counts as uniformity; the pair distance term as alignment."""
    x, y = pair
    parts = gradient_parts(align_uniform, x, y)
    assert torch.allclose(parts.alignment, tangent(-2 * y, x), atol=1e-8)  # ∇ of ‖x_k − y_k‖², on the sphere
    anchors = x.clone().requires_grad_(True)
    uniformity = torch.pdist(anchors).pow(2).mul(-2).exp().mean().log()
    (expected,) = torch.autograd.grad(BATCH * uniformity, [anchors])
    assert torch.allclose(parts.uniformity, tangent(expected, x), atol=1e-8)


def test_float32_loss_and_unnormalised_inputs(pair):
    x, y = pair
    expected = gradient_decomposition(info_nce, x, y)
    got = gradient_decomposition(lambda a, b: info_nce(a.float(), b.float()), 3 * x.float(), 2 * y.float())
    for key in ("alignment", "uniformity", "total"):
        assert got[key] == pytest.approx(expected[key], rel=1e-4)


def test_decomposition_returns_mean_norms(pair):
    x, y = pair
    parts = gradient_parts(info_nce, x, y)
    result = gradient_decomposition(info_nce, x, y)
    assert set(result) == {"alignment", "uniformity", "total"}
    assert result["alignment"] == pytest.approx(parts.alignment.norm(dim=1).mean().item())
    assert similarity_gradient_parts(info_nce_on_similarity, x, y).mean_norms() == pytest.approx(result)


def test_dcl_keeps_the_alignment_gradient_infonce_damps(pair):
    x, y = pair
    losses = {"infonce": info_nce, "dcl": decoupled, "align_uniform": align_uniform}
    table = {name: gradient_decomposition(loss, x, y) for name, loss in losses.items()}
    # InfoNCE damps the alignment gradient by (1 − p_kk); DCL does not.
    assert table["dcl"]["alignment"] > table["infonce"]["alignment"]


def test_library_objectives_split_like_their_similarity_forms(pair):
    """The library's objectives (objectives/*.py) through the generic split: InfoNCE equals the reference,
    DCL's alignment part is −(I − x xᵀ) y_k / τ, margin losses match their own hinge written on S,
    AlignUniform's alignment part is the gradient of its pair-distance term: B · (1 − λ) · mean‖x − y‖² in
    the authors' form (λ = 0.5), B · mean‖x − y‖² in Wang & Isola's."""
    x, y = pair
    parts = gradient_parts(InfoNCE(temperature=TAU), x, y)
    reference = gradient_parts(info_nce, x, y)
    assert torch.allclose(parts.alignment, reference.alignment, atol=1e-8)
    assert torch.allclose(parts.uniformity, reference.uniformity, atol=1e-8)

    assert torch.allclose(gradient_parts(DCL(temperature=TAU), x, y).alignment, tangent(-y / TAU, x), atol=1e-8)

    for margin_loss in (MarginProduct(margin=0.5), MarginAngle(margin=0.3), MarginEuclidean(margin=1.0)):
        generic = gradient_parts(margin_loss, x, y)
        exact = similarity_gradient_parts(lambda s, loss=margin_loss: loss.hinge(s).relu().mean(), x, y)
        assert generic.total.norm() > 0, type(margin_loss).__name__  # the test needs active hinges
        assert torch.allclose(generic.alignment, exact.alignment, atol=1e-8), type(margin_loss).__name__
        assert torch.allclose(generic.uniformity, exact.uniformity, atol=1e-8), type(margin_loss).__name__

    assert torch.allclose(gradient_parts(AlignUniform(), x, y).alignment, tangent(-2 * 0.5 * y, x), atol=1e-8)
    wang_isola = gradient_parts(AlignUniform(form="wang_isola"), x, y)
    assert torch.allclose(wang_isola.alignment, tangent(-2 * y, x), atol=1e-8)

    losses = {"infonce": InfoNCE(temperature=TAU), "dcl": DCL(temperature=TAU), "align_uniform": AlignUniform()}
    table = {name: gradient_decomposition(loss, x, y) for name, loss in losses.items()}
    assert table["infonce"] == pytest.approx(reference.mean_norms(), rel=1e-8)
    assert table["dcl"]["alignment"] == pytest.approx(tangent(y / TAU, x).norm(dim=1).mean().item(), rel=1e-8)
    assert table["align_uniform"]["alignment"] == pytest.approx(tangent(y, x).norm(dim=1).mean().item(), rel=1e-8)


def test_margin_product_parts_match_the_hand_derived_gradient(pair):
    """MPT (the authors' margin_p_loss, m = 0.09 and the diagonal filled with cosine 0), from its equation:
    B·loss = Σ_k relu(m − s_kk + max_i S_ik). For an active column k the gradient w.r.t. x_k gets −y_k (the
    positive: alignment) and the anchor x_{i*} winning the max gets +y_k (a negative: uniformity) unless the
    winner is the filled diagonal, a constant. Pairs: some columns have every negative at cosine < 0 (the
    filled 0 wins there), the others an ordinary hardest negative."""
    x, y = pair
    y = y.clone()
    y[:3] = F.normalize(-x.sum(0, keepdim=True) + 0.05 * y[:3], dim=1)  # far from every anchor
    similarity = x @ y.T
    filled = similarity.masked_fill(torch.eye(BATCH, dtype=torch.bool), 0.0)
    winner = filled.max(dim=0).indices
    active = 0.09 - similarity.diagonal() + filled.max(dim=0).values > 0
    own = winner == torch.arange(BATCH)
    assert own[active].any() and (~own)[active].any()  # both cases occur among the active columns
    alignment = torch.zeros_like(x)
    uniformity = torch.zeros_like(x)
    for k in range(BATCH):
        if active[k]:
            alignment[k] -= y[k]
            if winner[k] != k:
                uniformity[winner[k]] += y[k]
    parts = gradient_parts(MarginProduct(), x, y)
    assert torch.allclose(parts.alignment, tangent(alignment, x), atol=1e-8)
    assert torch.allclose(parts.uniformity, tangent(uniformity, x), atol=1e-8)
    excluded = gradient_parts(MarginProduct(diagonal="exclude"), x, y)
    assert not torch.allclose(excluded.uniformity, parts.uniformity, atol=1e-6)  # the fill changes the gradient


def test_errors_are_clear(pair):
    x, y = pair
    with pytest.raises(ValueError, match="same shape"):
        gradient_decomposition(info_nce, x, y[:3])
    with pytest.raises(ValueError, match="2B - 1 < d"):
        gradient_decomposition(info_nce, torch.randn(20, 16), torch.randn(20, 16))
    with pytest.raises(ValueError, match="span"):
        gradient_decomposition(info_nce, x, x)


@pytest.mark.cuda
def test_cuda_decompositions_equal_the_cpu_ones(cuda_device, pair):
    """The gd recipe decomposes the gradient of embeddings that live on the GPU: the same split there (float64)."""
    x, y = pair

    def on_similarity(similarity):
        return F.cross_entropy(similarity / TAU, torch.arange(len(similarity), device=similarity.device))

    def similarity_decomposition(loss, x, y):
        return similarity_gradient_parts(loss, x, y).mean_norms()

    for decompose, loss in ((gradient_decomposition, InfoNCE(temperature=TAU)),
                            (similarity_decomposition, on_similarity)):
        expected = decompose(loss, x, y)
        assert decompose(loss, x.to(cuda_device), y.to(cuda_device)) == pytest.approx(expected, rel=1e-6)
