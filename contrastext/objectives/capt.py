"""CAPT: contrast a sequence with its corrupted copy (Luo et al., "Rethinking denoised auto-encoding in
language pre-training", EMNLP 2021; arXiv 2010.06351 "CAPT: Contrastive Pre-Training for Learning Denoised
Sequence Representations", Eq. 2–4).

With s_i the (L2-normalised) representation of sequence i, ŝ_i that of its corrupted copy, an optional
queue q_1 … q_Q of extra negatives, and sim the cosine similarity:

    ℓ(s_i) = −log  e^{sim(s_i, ŝ_i)/τ} / ( Σ_j e^{sim(s_i, ŝ_j)/τ} + Σ_{j≠i} e^{sim(s_i, s_j)/τ} + Σ_k e^{sim(s_i, q_k)/τ} )
    ℓ(ŝ_i) = −log  e^{sim(ŝ_i, s_i)/τ} / ( Σ_j e^{sim(ŝ_i, s_j)/τ} + Σ_{j≠i} e^{sim(ŝ_i, ŝ_j)/τ} + Σ_k e^{sim(ŝ_i, q_k)/τ} )

    L_capt = Σ_i [ ℓ(s_i) + ℓ(ŝ_i) ]                  reduction="sum": the paper's Eq. 4
    L      = 1/B Σ_i [ ℓ(s_i) + ℓ(ŝ_i) ]              reduction="mean" (this class's default)

The paper's Eq. 2 and Eq. 3 have no queue term; its memory queue (§2.2, "to store the desired negative
representations") adds the Σ_k terms to both denominators. The two directions are always SUMMED (Eq. 4).
Eq. 4 also sums over the batch (``reduction="sum"``, what the ``capt`` recipe uses); this class defaults to
the batch average, which keeps the scale independent of B. With ``reduction="mean"`` and no queue, L is
exactly twice SimCLR's NT-Xent over the 2B views (which averages over 2B anchors) — the tests check this
against pytorch-metric-learning's ``NTXentLoss(τ)(cat(s, ŝ), cat(arange(B), arange(B)))``.

``temperature`` may be a float, a 0-dim tensor, or a :class:`~contrastext.objectives.temperature.Temperature`
(e.g. ``InvertedTriangleTemperature``, CAPT's schedule; its ``value()`` is read at every call, so advancing
the schedule drives the loss). The queue is used as given: store it detached (MoCo-style).

Example::

    >>> capt = CAPT(temperature=0.1)
    >>> s, s_hat = torch.randn(8, 128), torch.randn(8, 128)
    >>> capt(s, s_hat), capt(s, s_hat, queue=torch.randn(64, 128))
    >>> CAPT(temperature=0.1, reduction="sum")(s, s_hat)     # Eq. 4: 8 × the mean
"""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor

from .base import Objective
from .checks import check_extra, check_pair
from .similarity import normalize
from .temperature import TemperatureLike, check_temperature, temperature_value

REDUCTIONS = ("mean", "sum")


class CAPT(Objective):
    """Symmetric contrast between originals (B, d) and corrupted copies (B, d), plus optional queue (Q, d)."""

    pair = True
    takes_negatives = True  # the third argument is the queue of extra negatives
    in_batch = True

    def __init__(self, temperature: TemperatureLike = 0.1, reduction: Literal["mean", "sum"] = "mean"):
        super().__init__()
        self.temperature = check_temperature("CAPT", temperature)
        if reduction not in REDUCTIONS:
            raise ValueError(f"CAPT: `reduction` must be one of {', '.join(REDUCTIONS)}; got {reduction!r}")
        self.reduction = reduction

    def validate(self, originals: Tensor, corrupted: Tensor, queue: Tensor | None = None) -> dict[str, Tensor | None]:
        """``loss(originals (B, d), corrupted (B, d), queue (Q, d) = None)``."""
        originals, corrupted = check_pair(self.owner, "originals", originals, "corrupted", corrupted)
        queue = check_extra(self.owner, "queue", queue, originals.shape[1], like="originals")
        if queue is not None:
            queue = queue.to(originals.dtype)
        return {"originals": originals, "corrupted": corrupted, "queue": queue}

    def compute(self, originals: Tensor, corrupted: Tensor, queue: Tensor | None = None) -> Tensor:
        """The loss on checked tensors."""
        tau = temperature_value(self.temperature)
        s, s_hat = normalize(originals), normalize(corrupted)
        mean = self._direction(s, s_hat, queue, tau) + self._direction(s_hat, s, queue, tau)
        return mean * s.shape[0] if self.reduction == "sum" else mean

    def extra_repr(self) -> str:
        return f"reduction={self.reduction!r}"

    @staticmethod
    def _direction(views: Tensor, others: Tensor, queue: Tensor | None, tau: Tensor | float) -> Tensor:
        """mean_i ℓ(views_i): target others_i; candidates all others, views_j (j ≠ i), the queue."""
        batch = views.shape[0]
        self_mask = torch.eye(batch, dtype=torch.bool, device=views.device)
        cross = views @ others.T
        same = (views @ views.T).masked_fill(self_mask, float("-inf"))
        blocks = [cross, same] if queue is None else [cross, same, views @ normalize(queue).T]
        logits = torch.cat(blocks, dim=1) / tau
        targets = torch.arange(batch, device=views.device)
        return F.cross_entropy(logits, targets)
