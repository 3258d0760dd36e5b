"""Decoupled contrastive learning: the positive is removed from InfoNCE's denominator.

DCL (Yeh et al., ECCV 2022, "Decoupled contrastive learning"), in the sentence-embedding form of Nie, Zhang &
Mao, ICLR 2023 ("On the inadequacy of optimizing alignment and uniformity…"), as their released code computes
it (BDBC-KG-NLP/ICLR2023_Gradient-Dissipation, ``loss.py`` ``decouple_contrastive_loss``; the same function in
``simcse/models.py``): with x, y L2-normalised inside (their ``Similarity`` is the cosine divided by ``temp``)
and the other rows of y as negatives,

    ℓ_i = −s_ii/τ + log Σ_{j≠i} exp(s_ij/τ),     s_ij = cos(x_i, y_j)          DCL = mean_i ℓ_i

Their code sums exp over the row with the diagonal zeroed (exp 0 = 1) and subtracts the 1: the same
Σ_{j≠i}; ours is a masked ``logsumexp``. τ: their ``--temp`` (``train.py`` default 0.05, also the value of
their ``run_unsup_example.sh``); our default 0.05.

HingedDCL (the authors' "DCL+", ``decouple_contrastive_positive_loss``): the per-sample term is clipped at
zero, ``mean_i relu(ℓ_i)`` (their ``(loss * (loss > 0)).mean()``: the mean is over all B rows, clipped rows
counting as 0), so pairs whose positive already beats the negatives' soft maximum stop pulling.

Unlike InfoNCE, ℓ_i is unbounded below. Yeh et al. also put same-view rows x_j among the negatives; this
form, like the authors', uses only y (one direction, x → y). A batch of one has no negative: both return 0
(connected to the graph).

Example::

    >>> x, y = torch.randn(16, 32), torch.randn(16, 32)
    >>> DCL(temperature=0.05)(x, y), HingedDCL(temperature=0.05)(x, y)
"""

from __future__ import annotations

import torch
from torch import Tensor

from .base import PairObjective
from .checks import zero_with_grad
from .similarity import normalize
from .temperature import TemperatureLike, check_temperature, temperature_value


def dcl_terms(x: Tensor, y: Tensor, tau: Tensor | float) -> Tensor:
    """Per-row DCL terms ℓ_i (B,) on already-normalised rows; needs B ≥ 2."""
    logits = (x @ y.T) / tau
    diagonal = torch.eye(x.shape[0], dtype=torch.bool, device=x.device)
    negatives = logits.masked_fill(diagonal, float("-inf"))
    return -logits.diagonal() + torch.logsumexp(negatives, dim=1)


class DCL(PairObjective):
    """Decoupled contrastive loss: InfoNCE without the positive in the denominator."""

    in_batch = True
    hinged = False

    def __init__(self, temperature: TemperatureLike = 0.05):
        super().__init__()
        self.temperature = check_temperature(type(self).__name__, temperature)

    def compute(self, x: Tensor, y: Tensor) -> Tensor:
        if x.shape[0] < 2:
            return zero_with_grad(x, y)
        terms = dcl_terms(normalize(x), normalize(y), temperature_value(self.temperature))
        return (terms.relu() if self.hinged else terms).mean()


class HingedDCL(DCL):
    """DCL with each per-sample term clipped at 0: mean_i relu(ℓ_i)."""

    hinged = True
