"""Margin losses of Nie et al., ICLR 2023 ("On the inadequacy of optimizing alignment and uniformity in
contrastive learning of sentence representations", Sec. 5; their ``loss.py`` calls them MET, MAT, MPT).

Inputs are pairs (x_k, y_k), L2-normalised inside; the negatives of y_k are the other rows x_i, i ≠ k.
Each loss is a mean over k of a hinge that asks the positive to beat the hardest negative by a margin m:

    MarginEuclidean(m=0.45):  mean_k relu( m   + ‖x_k − y_k‖ − min_{i≠k} ‖x_i − y_k‖ )
    MarginAngle(m=0.15):      mean_k relu( m·π + θ_kk       − min_{i≠k} θ_ik )          θ_ik = arccos(x_i·y_k)
    MarginProduct(m=0.09):    mean_k relu( m   − s_kk       + max_{i≠k} s_ik )          s_ik = x_i·y_k

Numerics: distances are sqrt(max(2 − 2·s, ε)) and angles arccos(clamp(s, −1 + ε, 1 − ε)), so gradients stay
finite at zero distance and at cos = ±1 (duplicate or opposite rows). The reference code zeroes the
diagonal before its min/max (so a diagonal 0 can win); here the diagonal is excluded exactly.

A batch of one has no negative: the loss is 0 (connected to the graph).

Example::

    >>> x, y = torch.randn(16, 32), torch.randn(16, 32)
    >>> MarginEuclidean()(x, y), MarginAngle()(x, y), MarginProduct()(x, y)
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from .base import Objective
from .checks import check_non_negative, check_pair, zero_with_grad
from .similarity import normalize

DISTANCE_EPS = 1e-8
ARCCOS_EPS = 1e-6


def cosine_matrix(x: Tensor, y: Tensor) -> Tensor:
    """s[i, k] = x_i · y_k for normalised rows."""
    return normalize(x) @ normalize(y).T


def hardest(matrix: Tensor, mode: str) -> Tensor:
    """Per column k, the min (or max) over rows i ≠ k."""
    diagonal = torch.eye(matrix.shape[0], dtype=torch.bool, device=matrix.device)
    if mode == "min":
        return matrix.masked_fill(diagonal, float("inf")).min(dim=0).values
    return matrix.masked_fill(diagonal, float("-inf")).max(dim=0).values


class _MarginLoss(Objective):
    """Shared checks: pairs (B, d), margin >= 0, batch of one -> 0."""

    pair = True

    def __init__(self, margin: float):
        super().__init__()
        self.margin = check_non_negative(type(self).__name__, "margin", margin)

    def validate(self, x: Tensor, y: Tensor) -> dict[str, Tensor]:
        """``loss(x (B, d), y (B, d))``."""
        x, y = check_pair(self.owner, "x", x, "y", y)
        return {"x": x, "y": y}

    def compute(self, x: Tensor, y: Tensor) -> Tensor:
        if x.shape[0] < 2:
            return zero_with_grad(x, y)
        return self.hinge(cosine_matrix(x, y)).relu().mean()

    def hinge(self, cosine: Tensor) -> Tensor:  # pragma: no cover - abstract
        raise NotImplementedError

    def extra_repr(self) -> str:
        return f"margin={self.margin}"


class MarginEuclidean(_MarginLoss):
    """relu(m + ‖x_k − y_k‖ − min_{i≠k} ‖x_i − y_k‖), averaged over k."""

    def __init__(self, margin: float = 0.45):
        super().__init__(margin)

    def hinge(self, cosine: Tensor) -> Tensor:
        distance = (2 - 2 * cosine).clamp_min(DISTANCE_EPS).sqrt()
        return self.margin + distance.diagonal() - hardest(distance, "min")


class MarginAngle(_MarginLoss):
    """relu(m·π + θ_kk − min_{i≠k} θ_ik), averaged over k."""

    def __init__(self, margin: float = 0.15):
        super().__init__(margin)

    def hinge(self, cosine: Tensor) -> Tensor:
        angle = torch.arccos(cosine.clamp(-1 + ARCCOS_EPS, 1 - ARCCOS_EPS))
        return self.margin * math.pi + angle.diagonal() - hardest(angle, "min")


class MarginProduct(_MarginLoss):
    """relu(m − s_kk + max_{i≠k} s_ik), averaged over k."""

    def __init__(self, margin: float = 0.09):
        super().__init__(margin)

    def hinge(self, cosine: Tensor) -> Tensor:
        return self.margin - cosine.diagonal() + hardest(cosine, "max")
