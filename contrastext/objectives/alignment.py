"""Alignment and uniformity (Wang & Isola, ICML 2020, "Understanding contrastive representation learning
through alignment and uniformity on the hypersphere", Eq. 4–5, and their github.com/SsnL/align_uniform code).

On L2-normalised embeddings (inputs are normalised inside each module):

    Alignment(α)(x, y)  = E_i ‖x_i − y_i‖^α                              (α = 2 by default)
    Uniformity(t)(x)    = log E_{i<j} exp(−t ‖x_i − x_j‖²)               (t = 2 by default)

``AlignUniform(λ, α, t, form)`` is the "alignment + uniformity" training loss, in one of two forms:

- ``form="nie"`` (default): the loss of Nie, Zhang & Mao, ICLR 2023 ("On the inadequacy of optimizing
  alignment and uniformity in contrastive learning of sentence representations"), as their released code
  computes it (BDBC-KG-NLP/ICLR2023_Gradient-Dissipation, ``simcse/models.py`` ``cal_loss``, branch
  ``"a&u"``, with ``lalign`` / ``lunif`` of ``loss.py``)::

      (1 − λ) · Alignment(x, y) + λ · ( 2t + (Uniformity(x) + Uniformity(y)) / 2 )      λ ∈ [0, 1], default 0.5

  The 2t is the offset their ``lunif`` adds: a constant, it moves the logged value and not the gradient;
  it is kept so that our value equals theirs.
- ``form="wang_isola"``: Wang & Isola's ``align_loss(x, y) + lam * (uniform_loss(x) + uniform_loss(y)) / 2``::

      Alignment(x, y) + λ · (Uniformity(x) + Uniformity(y)) / 2

The two forms are NOT the same objective for the same λ: the "nie" form weighs alignment by (1 − λ), so
nie(λ) = (1 − λ) · wang_isola(λ / (1 − λ)) + 2tλ for λ < 1. At λ = 0.5, "nie" is half of "wang_isola" at λ = 1 (plus
t): the uniformity/alignment ratio is 1, not 0.5, and every gradient is halved.

Uniformity is computed with ``torch.pdist`` and ``logsumexp``: log mean exp(v) = logsumexp(v) − log M, with
M = B(B−1)/2, which never underflows to log 0 at large t. A batch of one has no pair: Uniformity returns 0
(connected to the graph).

Example::

    >>> x, y = torch.randn(32, 64), torch.randn(32, 64)
    >>> Alignment()(x, y), Uniformity()(x), AlignUniform()(x, y), AlignUniform(lam=1.0, form="wang_isola")(x, y)
"""

from __future__ import annotations

import math
from typing import Literal

import torch
from torch import Tensor

from .base import Objective, PairObjective
from .checks import (
    check_choice,
    check_embeddings,
    check_non_negative,
    check_positive,
    zero_with_grad,
)
from .similarity import normalize

ALIGN_UNIFORM_FORMS: tuple[str, ...] = ("nie", "wang_isola")


def alignment(x: Tensor, y: Tensor, alpha: float = 2.0) -> Tensor:
    """E‖x_i − y_i‖^α on already-normalised rows."""
    return (x - y).norm(p=2, dim=1).pow(alpha).mean()


def uniformity(x: Tensor, t: float = 2.0) -> Tensor:
    """log E_{i<j} exp(−t‖x_i − x_j‖²) on already-normalised rows (0 for a single row)."""
    if x.shape[0] < 2:
        return zero_with_grad(x)
    exponents = torch.pdist(x, p=2).pow(2).mul(-t)
    return torch.logsumexp(exponents, dim=0) - math.log(exponents.numel())


class Alignment(PairObjective):
    """Mean α-th power distance between positive pairs."""

    def __init__(self, alpha: float = 2.0):
        super().__init__()
        self.alpha = check_positive("Alignment", "alpha", alpha)

    def compute(self, x: Tensor, y: Tensor) -> Tensor:
        return alignment(normalize(x), normalize(y), self.alpha)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}"


class Uniformity(Objective):
    """Log of the mean Gaussian potential between all pairs of rows."""

    in_batch = True

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


class AlignUniform(PairObjective):
    """Alignment + uniformity: ``nie`` (default) (1−λ)·align + λ·(2t + (unif(x) + unif(y))/2), or
    ``wang_isola`` align + λ·(unif(x) + unif(y))/2."""

    in_batch = True  # its uniformity is over the batch's rows: at one row, alignment alone (a collapse)

    def __init__(
        self, lam: float = 0.5, alpha: float = 2.0, t: float = 2.0, form: Literal["nie", "wang_isola"] = "nie"
    ):
        super().__init__()
        self.form = check_choice("AlignUniform", "form", form, ALIGN_UNIFORM_FORMS)
        self.lam = check_non_negative("AlignUniform", "lam", lam)
        if form == "nie" and self.lam > 1:
            raise ValueError(
                f"AlignUniform: `lam` must be in [0, 1] with form='nie' (weights 1 − λ and λ); got {lam!r}"
            )
        self.alpha = check_positive("AlignUniform", "alpha", alpha)
        self.t = check_positive("AlignUniform", "t", t)

    def compute(self, x: Tensor, y: Tensor) -> Tensor:
        x, y = normalize(x), normalize(y)
        align = alignment(x, y, self.alpha)
        unif = (uniformity(x, self.t) + uniformity(y, self.t)) / 2
        if self.form == "wang_isola":
            return align + self.lam * unif
        return (1 - self.lam) * align + self.lam * (2 * self.t + unif)

    def extra_repr(self) -> str:
        return f"lam={self.lam}, alpha={self.alpha}, t={self.t}, form={self.form!r}"
