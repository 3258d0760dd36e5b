"""Matryoshka: any embedding objective applied to nested prefixes of the embedding, weighted and summed.

Kusupati et al., "Matryoshka Representation Learning", NeurIPS 2022 (arXiv 2205.13147): one model whose first
m dimensions are a good embedding for every m of a chosen set M, so that users can truncate it. For an inner
objective L on embeddings (anchors a, positives p, negatives n ...), dims M = {m_1 > m_2 > ... } and weights c_m,

    L_MRL = Σ_{m ∈ M} c_m · L( a[:, :m] / ‖a[:, :m]‖, p[:, :m] / ‖p[:, :m]‖, n[:, :m] / ‖n[:, :m]‖ … )

exactly as sentence-transformers' ``MatryoshkaLoss`` (``sentence_transformer/losses/matryoshka.py``): each
prefix is L2-normalised after truncation (its ``shrink``; for a cosine objective this changes nothing, for a dot
product it does), the dims are sorted in descending order with their weights, the weights default to 1, and
``n_dims_per_step`` > 0 (below ``len(M)``) draws that many dims per call at random (torch's global generator, so
a seeded run repeats), -1 uses them all. Every floating-point input of rank ≥ 2 whose last axis is the embedding
width is truncated (the anchors, positives and negatives of InfoNCE); other inputs (ids, labels) pass through.

The wrapper takes the calls its inner objective takes (``pair``, ``takes_negatives``, ``in_batch`` are the
inner's) and validates them with the inner's ``validate``. :meth:`Matryoshka.parts` gives the unweighted loss
per dim (``{m: L_m}``), which a method logs as one part per dim; ``forward`` is their weighted sum.

Example::

    >>> loss = Matryoshka(InfoNCE(temperature=0.05), dims=[384, 256, 128, 64])
    >>> loss(anchors, positives)                      # Σ_m L_InfoNCE(a[:, :m], p[:, :m])
    >>> loss.parts(anchors, positives)                # {384: ..., 256: ..., 128: ..., 64: ...}
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from .base import Objective


class Matryoshka(Objective):
    """``Σ_m c_m · inner(x[..., :m] normalised, ...)`` over the dims ``m`` (descending) with weights ``c_m``."""

    def __init__(
        self,
        objective: Objective,
        dims: Sequence[int],
        weights: Sequence[float] | None = None,
        n_dims_per_step: int = -1,
    ):
        super().__init__()
        if not isinstance(objective, Objective):
            raise ValueError(f"Matryoshka wraps an Objective; got {type(objective).__name__}")
        dims = list(dims)
        if not dims:
            raise ValueError("Matryoshka: `dims` must hold at least one dimension")
        if any(isinstance(dim, bool) or not isinstance(dim, int) or dim <= 0 for dim in dims):
            raise ValueError(f"Matryoshka: every dim must be a positive integer; got {dims}")
        if len(set(dims)) != len(dims):
            raise ValueError(f"Matryoshka: `dims` repeats a dimension: {dims}")
        weights = [1.0] * len(dims) if weights is None else [float(weight) for weight in weights]
        if len(weights) != len(dims):
            raise ValueError(f"Matryoshka: {len(weights)} weights for {len(dims)} dims; give one weight per dim")
        if isinstance(n_dims_per_step, bool) or not isinstance(n_dims_per_step, int) or n_dims_per_step == 0 \
                or n_dims_per_step < -1:
            raise ValueError(f"Matryoshka: `n_dims_per_step` must be -1 (all dims) or a positive integer; "
                             f"got {n_dims_per_step!r}")
        order = sorted(range(len(dims)), key=lambda i: -dims[i])  # descending, as sentence-transformers sorts
        self.objective = objective
        self.dims = tuple(dims[i] for i in order)
        self.weights = tuple(weights[i] for i in order)
        self.n_dims_per_step = n_dims_per_step
        self.pair = objective.pair
        self.takes_negatives = objective.takes_negatives
        self.in_batch = objective.in_batch

    @property
    def owner(self) -> str:
        return f"Matryoshka({self.objective.owner})"

    def validate(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """The inner objective's checks; the widest dim must fit the embeddings."""
        inputs = self.objective.validate(*args, **kwargs)
        width = embedding_width(inputs)
        if width is not None and self.dims[0] > width:
            raise ValueError(
                f"{self.owner}: dim {self.dims[0]} is wider than the embeddings ({width}); every dim must be at most "
                f"the embedding width"
            )
        return inputs

    def step_dims(self) -> tuple[int, ...]:
        """The dims of this call: all of them, or ``n_dims_per_step`` drawn at random (kept in descending order)."""
        if 0 < self.n_dims_per_step < len(self.dims):
            drawn = torch.randperm(len(self.dims))[: self.n_dims_per_step].sort().values.tolist()
            return tuple(self.dims[i] for i in drawn)
        return self.dims

    def compute_parts(self, **inputs: Any) -> dict[int, Tensor]:
        """The inner loss per dim of this call, unweighted, on checked inputs."""
        width = embedding_width(inputs)
        return {dim: self.objective.compute(**truncated(inputs, width, dim)) for dim in self.step_dims()}

    def compute(self, **inputs: Any) -> Tensor:
        """``Σ_m c_m · L_m`` on checked inputs."""
        weight = dict(zip(self.dims, self.weights, strict=True))
        return sum((weight[dim] * loss for dim, loss in self.compute_parts(**inputs).items()))  # type: ignore[return-value]

    def parts(self, *args: Any, **kwargs: Any) -> dict[int, Tensor]:
        """``{m: L_m}``, the unweighted inner loss of each dim of this call (checked and upcast as ``forward``)."""
        return self.checked(self.compute_parts, *args, **kwargs)

    def weight_of(self, dim: int) -> float:
        """c_m of ``dim``."""
        return dict(zip(self.dims, self.weights, strict=True))[dim]

    def extra_repr(self) -> str:
        return f"dims={list(self.dims)}, weights={list(self.weights)}, n_dims_per_step={self.n_dims_per_step}"


def embedding_width(inputs: dict[str, Any]) -> int | None:
    """The last axis of the first floating-point input of rank ≥ 2 (the embeddings)."""
    for value in inputs.values():
        if isinstance(value, Tensor) and value.is_floating_point() and value.dim() >= 2:
            return int(value.shape[-1])
    return None


def truncated(inputs: dict[str, Any], width: int | None, dim: int) -> dict[str, Any]:
    """Each embedding input (floating point, rank ≥ 2, last axis ``width``) cut to its first ``dim`` values and
    L2-normalised (sentence-transformers' ``shrink``); the other inputs as they are."""
    return {
        name: F.normalize(value[..., :dim], p=2, dim=-1)
        if isinstance(value, Tensor) and value.is_floating_point() and value.dim() >= 2 and value.shape[-1] == width
        else value
        for name, value in inputs.items()
    }
