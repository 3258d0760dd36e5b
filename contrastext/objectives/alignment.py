"""Alignment and uniformity (Wang & Isola, ICML 2020, "Understanding contrastive representation learning
through alignment and uniformity on the hypersphere", Eq. 4–5, and their github.com/SsnL/align_uniform code).

On L2-normalised embeddings (inputs are normalised inside each module):

    Alignment(α)(x, y)  = E_i ‖x_i − y_i‖^α                              (α = 2 by default)
    Uniformity(t)(x)    = log E_{i<j} exp(−t ‖x_i − x_j‖²)               (t = 2 by default)
    AlignUniform(λ, α, t)(x, y) = Alignment(x, y) + λ · (Uniformity(x) + Uniformity(y)) / 2

``AlignUniform`` is Wang & Isola's training loss (``align_loss(x, y) + lam * (uniform_loss(x) +
uniform_loss(y)) / 2``), also the "alignment + uniformity" baseline of Nie et al., ICLR 2023 ("On the
inadequacy of optimizing alignment and uniformity in contrastive learning of sentence representations").
Their code's ``lunif`` adds the constant 2t to the uniformity term; a constant changes no gradient, and we
leave it out.

Uniformity is computed with ``torch.pdist`` and ``logsumexp``: log mean exp(v) = logsumexp(v) − log M, with
M = B(B−1)/2, which never underflows to log 0 at large t. A batch of one has no pair: Uniformity returns 0
(connected to the graph).

Example::

    >>> x, y = torch.randn(32, 64), torch.randn(32, 64)
    >>> Alignment()(x, y), Uniformity()(x), AlignUniform(lam=1.0)(x, y)
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from .base import Objective
from .checks import check_embeddings, check_non_negative, check_pair, check_positive, zero_with_grad
from .similarity import normalize


def alignment(x: Tensor, y: Tensor, alpha: float = 2.0) -> Tensor:
    """E‖x_i − y_i‖^α on already-normalised rows."""
    return (x - y).norm(p=2, dim=1).pow(alpha).mean()


def uniformity(x: Tensor, t: float = 2.0) -> Tensor:
    """log E_{i<j} exp(−t‖x_i − x_j‖²) on already-normalised rows (0 for a single row)."""
    if x.shape[0] < 2:
        return zero_with_grad(x)
    exponents = torch.pdist(x, p=2).pow(2).mul(-t)
    return torch.logsumexp(exponents, dim=0) - math.log(exponents.numel())


class Alignment(Objective):
    """Mean α-th power distance between positive pairs."""

    pair = True

    def __init__(self, alpha: float = 2.0):
        super().__init__()
        self.alpha = check_positive("Alignment", "alpha", alpha)

    def validate(self, x: Tensor, y: Tensor) -> dict[str, Tensor]:
        """``loss(x (B, d), y (B, d))``."""
        x, y = check_pair(self.owner, "x", x, "y", y)
        return {"x": x, "y": y}

    def compute(self, x: Tensor, y: Tensor) -> Tensor:
        return alignment(normalize(x), normalize(y), self.alpha)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}"


class Uniformity(Objective):
    """Log of the mean Gaussian potential between all pairs of rows."""

    def __init__(self, t: float = 2.0):
        super().__init__()
        self.t = check_positive("Uniformity", "t", t)

    def validate(self, x: Tensor) -> dict[str, Tensor]:
        """``loss(x (B, d))``."""
        return {"x": check_embeddings(self.owner, "x", x, min_rows=1)}

    def compute(self, x: Tensor) -> Tensor:
        return uniformity(normalize(x), self.t)

    def extra_repr(self) -> str:
        return f"t={self.t}"


class AlignUniform(Objective):
    """Wang & Isola's loss: align(x, y) + λ·(unif(x) + unif(y))/2."""

    pair = True

    def __init__(self, lam: float = 0.5, alpha: float = 2.0, t: float = 2.0):
        super().__init__()
        self.lam = check_non_negative("AlignUniform", "lam", lam)
        self.alpha = check_positive("AlignUniform", "alpha", alpha)
        self.t = check_positive("AlignUniform", "t", t)

    def validate(self, x: Tensor, y: Tensor) -> dict[str, Tensor]:
        """``loss(x (B, d), y (B, d))``."""
        x, y = check_pair(self.owner, "x", x, "y", y)
        return {"x": x, "y": y}

    def compute(self, x: Tensor, y: Tensor) -> Tensor:
        x, y = normalize(x), normalize(y)
        return alignment(x, y, self.alpha) + self.lam * (uniformity(x, self.t) + uniformity(y, self.t)) / 2

    def extra_repr(self) -> str:
        return f"lam={self.lam}, alpha={self.alpha}, t={self.t}"
