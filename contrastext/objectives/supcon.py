"""Supervised contrastive loss (SupCon) and the SCL fine-tuning objective CE + SupCon.

SupCon (Khosla et al., NeurIPS 2020, L^sup_out, Eq. 2; Gunel et al., ICLR 2021, Eq. 3): with z the
L2-normalised embeddings, P(i) = {p ≠ i : y_p = y_i} and A(i) = {a ≠ i},

    ℓ_i = −1/|P(i)| Σ_{p∈P(i)} log  exp(z_i·z_p/τ) / Σ_{a∈A(i)} exp(z_i·z_a/τ)

    L = mean of ℓ_i over the anchors that have at least one positive      (reduction="mean", the default)
    L = Σ_i ℓ_i                                                            (reduction="sum")

Choices (documented because the papers differ):

- Reduction. Both papers write a SUM over the batch: Gunel et al. Eq. 3, L_SCL = Σ_{i=1}^{N} −1/(N_{y_i}−1)
  Σ_j 1[i≠j] 1[y_i=y_j] log(...), and Khosla et al. Eq. 2. Khosla's reference code averages (and multiplies
  by τ/0.07), as does pytorch-metric-learning's ``SupConLoss`` (whose ``AvgNonZeroReducer`` also drops
  anchors without positive). ``reduction="mean"`` (this class's default) averages over the anchors with
  |P(i)| ≥ 1 and does not rescale, so ``SupCon(τ)(z, y) == pml.losses.SupConLoss(τ)(z, y)`` whenever some
  pair shares a label and some pair does not (PML returns 0 when every row has the same label; we still
  compute the loss then). ``reduction="sum"`` is Eq. 3 as printed; the ``scl`` recipe uses it by default
  (``method_args.supcon_reduction``). On a batch where every anchor has a positive, sum = N · mean.
- An anchor without positive contributes nothing (in Eq. 3 its term is 1/(N_{y_i}−1) = 1/0 times an empty
  sum; under the sum, leaving it out is adding 0). A batch without any positive pair (all labels distinct,
  or a batch of one) returns 0 connected to the inputs' graph, so ``backward()`` still works.
- Several views per sample: concatenate them and repeat the labels (Khosla's multi-view form).

CE + SupCon (Gunel et al., ICLR 2021, Eq. 1): ``L = (1 − λ)·CE(logits, y) + λ·SupCon(z, y)``. The paper
tunes λ (and τ) per task (§2) and the supplied text gives neither a grid nor the chosen values; the defaults
λ = 0.1, τ = 0.3 are ours (docs/methods/scl.md says why). Its SupCon part is ``self.supcon``, a
:class:`SupCon` with the mean reduction; the ``scl`` method swaps in ``SupCon(τ, reduction="sum")``
(Eq. 3). ``parts(...)`` returns the unweighted
``{"ce": …, "supcon": …}``; ``weights`` gives ``{"ce": 1 − λ, "supcon": λ}`` (a method can hand both to the
trainer, whose total Σ wᵢ·partᵢ then equals ``forward``).

Example::

    >>> z, y = torch.randn(16, 64), torch.randint(0, 3, (16,))
    >>> SupCon(temperature=0.1)(z, y), SupCon(temperature=0.1, reduction="sum")(z, y)
    >>> scl = CEPlusSupCon(lam=0.1, temperature=0.3)
    >>> scl(torch.randn(16, 3), z, y), scl.parts(torch.randn(16, 3), z, y)
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from .base import Objective
from .checks import check_embeddings, check_labels, upcast, zero_with_grad
from .similarity import normalize
from .temperature import TemperatureLike, check_temperature, temperature_value

REDUCTIONS = ("mean", "sum")


class SupCon(Objective):
    """Supervised contrastive loss over a labelled batch of embeddings (B, d)."""

    def __init__(self, temperature: TemperatureLike = 0.1, reduction: str = "mean"):
        super().__init__()
        self.temperature = check_temperature("SupCon", temperature)
        if reduction not in REDUCTIONS:
            raise ValueError(f"SupCon: `reduction` must be one of {', '.join(REDUCTIONS)}; got {reduction!r}")
        self.reduction = reduction

    def validate(self, embeddings: Tensor, labels: Tensor) -> dict[str, Tensor]:
        """``loss(embeddings (B, d), labels (B,))``."""
        embeddings = check_embeddings(self.owner, "embeddings", embeddings, min_rows=1)
        labels = check_labels(self.owner, labels, embeddings.shape[0])
        return {"embeddings": embeddings, "labels": labels}

    def compute(self, embeddings: Tensor, labels: Tensor) -> Tensor:
        """The loss on checked tensors."""
        batch = embeddings.shape[0]
        labels = labels.to(embeddings.device)
        z = normalize(embeddings)
        logits = (z @ z.T) / temperature_value(self.temperature)
        self_mask = torch.eye(batch, dtype=torch.bool, device=z.device)
        positive_mask = (labels.unsqueeze(0) == labels.unsqueeze(1)) & ~self_mask
        positives_per_anchor = positive_mask.sum(dim=1)
        has_positive = positives_per_anchor > 0
        if not bool(has_positive.any()):
            return zero_with_grad(embeddings)
        log_denominator = torch.logsumexp(logits.masked_fill(self_mask, float("-inf")), dim=1, keepdim=True)
        log_prob = logits - log_denominator
        mean_log_prob_positive = (log_prob * positive_mask).sum(dim=1)[has_positive] / positives_per_anchor[has_positive]
        if self.reduction == "sum":
            return -mean_log_prob_positive.sum()
        return -mean_log_prob_positive.mean()

    def extra_repr(self) -> str:
        return f"reduction={self.reduction!r}"


class CEPlusSupCon(Objective):
    """Gunel et al.'s SCL objective: (1 − λ)·cross-entropy + λ·SupCon."""

    def __init__(self, lam: float = 0.1, temperature: TemperatureLike = 0.3):
        super().__init__()
        if isinstance(lam, bool) or not isinstance(lam, int | float) or not 0.0 <= lam <= 1.0:
            raise ValueError(f"CEPlusSupCon: `lam` must be a number in [0, 1]; got {lam!r}")
        self.lam = float(lam)
        self.supcon = SupCon(temperature)

    @property
    def weights(self) -> dict[str, float]:
        """The weights of :meth:`parts` that make up :meth:`forward`."""
        return {"ce": 1.0 - self.lam, "supcon": self.lam}

    def validate(self, logits: Tensor, embeddings: Tensor, labels: Tensor) -> dict[str, Tensor]:
        """``loss(logits (B, C), embeddings (B, d), labels (B,) in [0, C))``."""
        embeddings = check_embeddings(self.owner, "embeddings", embeddings, min_rows=1)
        batch = embeddings.shape[0]
        logits = check_embeddings(self.owner, "logits", logits, rows=batch, like="embeddings")
        labels = check_labels(self.owner, labels, batch)
        num_classes = logits.shape[1]
        if batch and (int(labels.min()) < 0 or int(labels.max()) >= num_classes):
            raise ValueError(
                f"{self.owner}: `labels` must be class indices in [0, {num_classes}) for logits of shape "
                f"{tuple(logits.shape)}; got values in [{int(labels.min())}, {int(labels.max())}]"
            )
        return {"embeddings": embeddings, "logits": logits, "labels": labels}

    def parts(self, logits: Tensor, embeddings: Tensor, labels: Tensor) -> dict[str, Tensor]:
        """The unweighted parts ``{"ce": CE(logits, labels), "supcon": SupCon(embeddings, labels)}``."""
        return self.checked(self.compute_parts, logits, embeddings, labels)

    def compute_parts(self, logits: Tensor, embeddings: Tensor, labels: Tensor) -> dict[str, Tensor]:
        """:meth:`parts` on checked tensors."""
        ce = F.cross_entropy(upcast(logits), labels.to(logits.device))
        supcon = self.supcon.compute(embeddings, labels)
        return {"ce": ce, "supcon": supcon}

    def compute(self, logits: Tensor, embeddings: Tensor, labels: Tensor) -> Tensor:
        """Σ weights[name]·part on checked tensors."""
        parts = self.compute_parts(logits, embeddings, labels)
        return sum(self.weights[name] * value for name, value in parts.items())  # type: ignore[return-value]

    def extra_repr(self) -> str:
        return f"lam={self.lam}"
