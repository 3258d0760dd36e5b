"""Gradient diagnostics: split each anchor's gradient into an alignment part and a uniformity part.

Analysis of "On the inadequacy of optimizing alignment and uniformity in contrastive learning of
sentence representations" (ICLR 2023): for L2-normalised anchors x_k and positives y_k, the gradient of
a contrastive loss w.r.t. x_k is the sum of

- the **alignment** part: what flows through the positive pair (x_k, y_k), i.e. through S_kk = cos(x_k, y_k);
- the **uniformity** part: what flows through every other partner of x_k: the negatives y_j (S_kj, j ≠ k)
  and, for losses with an x–x term (Wang & Isola's uniformity), the other anchors x_j.

The paper (Sec. 1 of the extract we hold) "decompose[s] the gradient of the contrastive loss into an
alignment component and a uniformity component and compare[s] the norms"; neither that extract nor the
authors' released code (BDBC-KG-NLP/ICLR2023_Gradient-Dissipation: losses, no gradient logging) gives the
computation, so the construction below (what counts as alignment, B · loss, the tangent projection) is ours.

All gradients are of B · loss (so a mean-reduced loss gives per-anchor gradients, independent of the batch
size) and are taken on the unit sphere: the tangent component (I − x_k x_kᵀ) ∇_{x_k}, which is the only
part that moves a normalised embedding. They are computed in float64.

For InfoNCE with p_kj = softmax_j(S_kj/τ) the parts are (before the tangent projection)::

    alignment_k  = −(1 − p_kk)/τ · y_k          uniformity_k = Σ_{j≠k} p_kj/τ · y_j

Two ways to compute the split:

``similarity_gradient_parts(loss_on_similarity, x, y)``: for a loss written on S = x̂ ŷᵀ (B × B). S is
built from two copies of x, one feeding the diagonal and one the off-diagonal entries; the gradient
reaching each copy is the alignment and the uniformity part. Exact for any function of S.

``gradient_parts(loss_fn, x, y)``: for any embedding loss ``loss_fn(x, y) -> scalar`` (the objectives
of this library), with no access to its internals. It assumes the loss is a sum of rotation-invariant
functions of pairs of embeddings (cosines, dot products, distances — true of InfoNCE, DCL, alignment/
uniformity and the margin losses), so ∇_{x_k} L = α x_k + Σ_partners β_p p. Probing the full gradient
along δ_k, the part of y_k orthogonal to x_k and to every other partner (x_j, y_j for j ≠ k), isolates
β_{y_k} = (∇_{x_k} L · δ_k) / (δ_k · y_k); the alignment part is β_{y_k} (I − x_k x_kᵀ) y_k and the
uniformity part is the rest of the tangent gradient. This needs δ_k ≠ 0: the 2B − 1 other partners (the B
anchors and the B − 1 other positives) span at most 2B − 1 dimensions, so they must leave room in d, hence
2B − 1 < d (e.g. B ≤ 192 for d = 384: 2·192 − 1 = 383), and positives that are not copies of anchors.

Example::

    parts = gradient_decomposition(InfoNCE(temperature=0.05), x, y)
    # {"alignment": 3.1, "uniformity": 2.9, "total": 0.8}: mean per-anchor gradient norms
    exact = similarity_gradient_parts(lambda s: F.cross_entropy(s / 0.05, torch.arange(len(s))), x, y).mean_norms()
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor
from torch.nn import functional as F

EmbeddingLoss = Callable[[Tensor, Tensor], Tensor]
SimilarityLoss = Callable[[Tensor], Tensor]


@dataclass
class GradientParts:
    """Per-anchor gradient vectors (B × d each); ``alignment + uniformity == total``."""

    alignment: Tensor
    uniformity: Tensor
    total: Tensor

    def mean_norms(self) -> dict[str, float]:
        """Mean over anchors of the L2 norm of each part."""
        return {
            "alignment": self.alignment.norm(dim=1).mean().item(),
            "uniformity": self.uniformity.norm(dim=1).mean().item(),
            "total": self.total.norm(dim=1).mean().item(),
        }


def _unit_pair(x: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:
    if x.dim() != 2 or x.shape != y.shape:
        raise ValueError(
            f"gradient diagnostics expect anchors x and positives y of the same shape (B, d), "
            f"got {tuple(x.shape)} and {tuple(y.shape)}"
        )
    if x.size(0) < 2:
        raise ValueError("gradient diagnostics need a batch of at least 2 pairs (the negatives)")
    return F.normalize(x.detach().double(), dim=1), F.normalize(y.detach().double(), dim=1)


def _tangent(gradient: Tensor, x: Tensor) -> Tensor:
    """(I − x_k x_kᵀ) g_k for each row (x rows have unit norm)."""
    return gradient - (gradient * x).sum(dim=1, keepdim=True) * x


def similarity_gradient_parts(loss_on_similarity: SimilarityLoss, x: Tensor, y: Tensor) -> GradientParts:
    """Exact split for a loss on the cosine matrix S (B × B): diagonal route vs off-diagonal route."""
    x, y = _unit_pair(x, y)
    batch = x.size(0)
    x_positive = x.clone().requires_grad_(True)
    x_negative = x.clone().requires_grad_(True)
    diagonal = torch.eye(batch, dtype=torch.bool, device=x.device)
    similarity = torch.where(
        diagonal,
        F.normalize(x_positive, dim=1) @ y.T,
        F.normalize(x_negative, dim=1) @ y.T,
    )
    loss = batch * loss_on_similarity(similarity)
    alignment, uniformity = torch.autograd.grad(loss, [x_positive, x_negative], allow_unused=True)
    alignment = torch.zeros_like(x) if alignment is None else _tangent(alignment, x)
    uniformity = torch.zeros_like(x) if uniformity is None else _tangent(uniformity, x)
    return GradientParts(alignment=alignment, uniformity=uniformity, total=alignment + uniformity)


def _positive_probes(x: Tensor, y: Tensor) -> Tensor:
    """δ_k (B × d): the part of y_k orthogonal to span{x_1..x_B, y_j (j ≠ k)}."""
    batch, dim = x.shape
    if 2 * batch - 1 >= dim:
        raise ValueError(
            f"gradient_parts needs 2B - 1 < d to isolate each positive pair, got B={batch}, d={dim}: "
            "use a smaller batch, or similarity_gradient_parts with a loss written on the similarity matrix"
        )
    everything = torch.cat([x, y])  # (2B, d)
    keep = ~torch.eye(batch, 2 * batch, dtype=torch.bool, device=x.device).roll(batch, dims=1)  # row k drops y_k
    others = everything.unsqueeze(0).expand(batch, -1, -1)[keep].view(batch, 2 * batch - 1, dim)
    basis, _ = torch.linalg.qr(others.transpose(1, 2))  # (B, d, 2B−1) orthonormal columns
    probes = y - (basis @ (basis.transpose(1, 2) @ y.unsqueeze(2))).squeeze(2)
    too_small = probes.norm(dim=1) < 1e-6
    if too_small.any():
        rows = torch.nonzero(too_small).squeeze(1).tolist()
        raise ValueError(
            f"positives {rows} lie in the span of the other embeddings (e.g. a positive equal to an anchor): "
            "their alignment part cannot be isolated"
        )
    return probes


def gradient_parts(loss_fn: EmbeddingLoss, x: Tensor, y: Tensor) -> GradientParts:
    """Split the gradient of any pairwise embedding loss ``loss_fn(x, y)`` (see the module docstring)."""
    x, y = _unit_pair(x, y)
    batch = x.size(0)
    anchors = x.clone().requires_grad_(True)
    loss = batch * loss_fn(anchors, y)
    (gradient,) = torch.autograd.grad(loss, [anchors])
    gradient = gradient.double()
    probes = _positive_probes(x, y)
    coefficient = (gradient * probes).sum(dim=1) / (probes * y).sum(dim=1)  # β_{y_k}
    total = _tangent(gradient, x)
    alignment = coefficient.unsqueeze(1) * _tangent(y, x)
    return GradientParts(alignment=alignment, uniformity=total - alignment, total=total)


def gradient_decomposition(loss_fn: EmbeddingLoss, x: Tensor, y: Tensor) -> dict[str, float]:
    """Mean per-anchor gradient norms ``{"alignment", "uniformity", "total"}`` of ``loss_fn(x, y)``."""
    return gradient_parts(loss_fn, x, y).mean_norms()
