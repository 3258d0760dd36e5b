"""Margin losses of Nie, Zhang & Mao, ICLR 2023 ("On the inadequacy of optimizing alignment and uniformity in
contrastive learning of sentence representations": MET, MAT, MPT), written as the authors' released code
computes them (our extract of the paper does not hold their equations): BDBC-KG-NLP/ICLR2023_Gradient-
Dissipation, ``loss.py`` (``margin_e_loss`` = MET, ``margin_loss`` = MAT, ``margin_p_loss`` = MPT; the same
functions are in ``simcse/models.py``, called there on the ``F.normalize``-d z1, z2).

Inputs are pairs (x_k, y_k), L2-normalised inside (the authors normalise z1, z2 before every loss); the
negatives of y_k are the other rows x_i, i ≠ k: each loss builds the matrix M[i, k] between x_i and y_k and
takes, per column k, the min (or max) over the rows i (``torch.min(..., dim=0)`` in their code). Each loss is
a mean over all k (clipped terms count as 0: their ``(dist * (dist > 0)).mean()``) of a hinge that asks the
positive to beat the hardest negative by a margin m (defaults: the default arguments of their functions):

    MarginEuclidean(m=0.45): mean_k relu( m   + ‖x_k − y_k‖ − min_i D_ik )   D_ik = ‖x_i − y_k‖ = √(2 − 2s_ik)
    MarginAngle(m=0.15):     mean_k relu( m·π + θ_kk       − min_i Θ_ik )   Θ_ik = θ_ik = arccos(s_ik)
    MarginProduct(m=0.09):   mean_k relu( m   − s_kk       + max_i S_ik )   S_ik = s_ik = x_i·y_k

(MarginAngle's m is in units of π: ``margin = margin * np.pi``.) The matrices D, Θ, S used for the hardest
negative differ from d_ik, θ_ik, s_ik only on their diagonal, which ``diagonal`` sets:

- ``"fill"`` (default, the authors' code): the diagonal is replaced by a constant before the min/max, as
  their ``torch.mul(matrix, 1 − eye)`` does: cosine 0 for MarginAngle (so Θ_kk = arccos 0 = π/2) and
  MarginProduct (S_kk = 0), distance 2 for MarginEuclidean (``mul(mask) + 2 * diag``). So MarginAngle's
  hardest negative angle is capped at π/2 and MarginProduct's hardest negative similarity is floored at 0
  (when every negative is farther, the constant wins and the negative side of the hinge has no gradient);
  MarginEuclidean is unaffected (2 is the largest distance on the sphere).
- ``"exclude"``: the min/max is over i ≠ k only (no cap, no floor).

Numerics (ours; the authors' code has no guard): distances are sqrt(max(2 − 2·s, ε)) and angles
arccos(clamp(s, −1 + ε, 1 − ε)), so values and gradients stay finite at zero distance and at cos = ±1
(duplicate or opposite rows), where the reference code can give NaN.

A batch of one has no negative: the loss is 0 (connected to the graph).

Example::

    >>> x, y = torch.randn(16, 32), torch.randn(16, 32)
    >>> MarginEuclidean()(x, y), MarginAngle()(x, y), MarginProduct(diagonal="exclude")(x, y)
"""

from __future__ import annotations

import math
from typing import Literal

import torch
from torch import Tensor

from .base import PairObjective
from .checks import check_choice, check_non_negative, zero_with_grad
from .similarity import normalize

DISTANCE_EPS = 1e-8
ARCCOS_EPS = 1e-6
DIAGONALS: tuple[str, ...] = ("fill", "exclude")
Diagonal = Literal["fill", "exclude"]


def cosine_matrix(x: Tensor, y: Tensor) -> Tensor:
    """s[i, k] = x_i · y_k for normalised rows."""
    return normalize(x) @ normalize(y).T


def hardest(matrix: Tensor, mode: str, fill: float | None = None) -> Tensor:
    """Per column k, the min (or max) over rows i of ``matrix``: the diagonal entry (i = k) is replaced by the
    constant ``fill`` (no gradient), or left out when ``fill`` is None."""
    diagonal = torch.eye(matrix.shape[0], dtype=torch.bool, device=matrix.device)
    if fill is None:
        fill = float("inf") if mode == "min" else float("-inf")
    masked = matrix.masked_fill(diagonal, fill)
    return masked.min(dim=0).values if mode == "min" else masked.max(dim=0).values


class _MarginLoss(PairObjective):
    """Shared checks: pairs (B, d), margin >= 0, ``diagonal`` "fill" | "exclude", batch of one -> 0.

    ``FILL`` is the value the authors' code gives the diagonal entry of the matrix the hardest negative is
    taken from (``diagonal="fill"``).
    """

    in_batch = True
    FILL: float = 0.0

    def __init__(self, margin: float, diagonal: Diagonal = "fill"):
        super().__init__()
        self.margin = check_non_negative(type(self).__name__, "margin", margin)
        self.diagonal = check_choice(type(self).__name__, "diagonal", diagonal, DIAGONALS)

    @property
    def fill(self) -> float | None:
        """The constant on the diagonal for the hardest-negative search, or None (excluded)."""
        return self.FILL if self.diagonal == "fill" else None

    def compute(self, x: Tensor, y: Tensor) -> Tensor:
        if x.shape[0] < 2:
            return zero_with_grad(x, y)
        return self.hinge(cosine_matrix(x, y)).relu().mean()

    def hinge(self, cosine: Tensor) -> Tensor:  # pragma: no cover - abstract
        raise NotImplementedError

    def extra_repr(self) -> str:
        return f"margin={self.margin}, diagonal={self.diagonal!r}"


class MarginEuclidean(_MarginLoss):
    """MET: relu(m + ‖x_k − y_k‖ − min_i D_ik), averaged over k (``loss.py`` ``margin_e_loss``, m = 0.45)."""

    FILL = 2.0  # ``torch.mul(uniform_sq_vec, mask) + 2 * diag``

    def __init__(self, margin: float = 0.45, diagonal: Diagonal = "fill"):
        super().__init__(margin, diagonal)

    def hinge(self, cosine: Tensor) -> Tensor:
        distance = (2 - 2 * cosine).clamp_min(DISTANCE_EPS).sqrt()
        return self.margin + distance.diagonal() - hardest(distance, "min", self.fill)


class MarginAngle(_MarginLoss):
    """MAT: relu(m·π + θ_kk − min_i Θ_ik), averaged over k (``loss.py`` ``margin_loss``, m = 0.15)."""

    FILL = math.pi / 2  # arccos of the zeroed cosine: ``torch.arccos(torch.mul(uniform_sq_vec, mask))``

    def __init__(self, margin: float = 0.15, diagonal: Diagonal = "fill"):
        super().__init__(margin, diagonal)

    def hinge(self, cosine: Tensor) -> Tensor:
        angle = torch.arccos(cosine.clamp(-1 + ARCCOS_EPS, 1 - ARCCOS_EPS))
        return self.margin * math.pi + angle.diagonal() - hardest(angle, "min", self.fill)


class MarginProduct(_MarginLoss):
    """MPT: relu(m − s_kk + max_i S_ik), averaged over k (``loss.py`` ``margin_p_loss``, m = 0.09)."""

    FILL = 0.0  # ``torch.mul(cos_sim, mask)``

    def __init__(self, margin: float = 0.09, diagonal: Diagonal = "fill"):
        super().__init__(margin, diagonal)

    def hinge(self, cosine: Tensor) -> Tensor:
        return self.margin - cosine.diagonal() + hardest(cosine, "max", self.fill)
