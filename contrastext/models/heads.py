"""Task heads on pooled sentence vectors: classification, pair classification, regression.

- ``ClassificationHead``: ``logits = W dropout(z) + b`` for single-text tasks (SST-2, SCL fine-tuning).
- ``PairHead``: logits for a pair ``(u, v)`` from a concatenation of named parts:
  ``u``, ``v``, ``absdiff`` = |u − v|, ``diff`` = u − v, ``prod`` = u ⊙ v.
  The default ``("u", "v", "absdiff")`` is Sentence-BERT's classification objective
  (Reimers & Gurevych, 2019): ``softmax(W [u; v; |u − v|])``.
  With ``symmetric=True`` the logits are averaged over both orders,
  ``(f([u; v; u − v]) + f([v; u; v − u])) / 2``, so swapping the two texts never changes the
  prediction: our reading of the CS224N multi-task report's "concatenation of both orders and the
  difference" (``parts=("u", "v", "diff"), symmetric=True``).
- ``RegressionHead``: one score ``w·dropout(x) + b`` (e.g. on ``PairHead``-style features or a
  single vector).

Example::

    >>> import torch
    >>> head = PairHead(8, num_labels=3, parts=("u", "v", "diff"), symmetric=True).eval()
    >>> u, v = torch.randn(2, 8), torch.randn(2, 8)
    >>> torch.allclose(head(u, v), head(v, u))
    True
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from contrastext.errors import ConfigError, UnknownNameError

PAIR_PARTS: tuple[str, ...] = ("u", "v", "absdiff", "diff", "prod")


class ClassificationHead(nn.Module):
    """Dropout then a linear layer: (batch, in_features) -> (batch, num_labels) logits."""

    def __init__(self, in_features: int, num_labels: int, dropout: float = 0.1):
        super().__init__()
        if num_labels < 1:
            raise ConfigError(f"num_labels must be >= 1, got {num_labels}")
        self.dropout = nn.Dropout(dropout)
        self.linear = nn.Linear(in_features, num_labels)

    def forward(self, pooled: Tensor) -> Tensor:
        return self.linear(self.dropout(pooled))


def pair_features(u: Tensor, v: Tensor, parts: tuple[str, ...]) -> Tensor:
    """Concatenate the named parts of a pair along the last dimension (see ``PAIR_PARTS``)."""
    if u.shape != v.shape:
        raise ValueError(f"pair vectors must have the same shape, got {tuple(u.shape)} and {tuple(v.shape)}")
    built = {"u": lambda: u, "v": lambda: v, "absdiff": lambda: (u - v).abs(), "diff": lambda: u - v, "prod": lambda: u * v}
    return torch.cat([built[part]() for part in parts], dim=-1)


class PairHead(nn.Module):
    """Classify (or score, with ``num_labels=1``) a pair of vectors from concatenated pair features."""

    def __init__(
        self,
        in_features: int,
        num_labels: int,
        parts: tuple[str, ...] = ("u", "v", "absdiff"),
        symmetric: bool = False,
        dropout: float = 0.1,
    ):
        super().__init__()
        parts = tuple(parts)
        unknown = [part for part in parts if part not in PAIR_PARTS]
        if unknown or not parts:
            raise UnknownNameError(f"unknown pair feature part(s) {unknown}; expected some of: {', '.join(PAIR_PARTS)}")
        self.parts = parts
        self.symmetric = symmetric
        self.classifier = ClassificationHead(in_features * len(parts), num_labels, dropout=dropout)

    def forward(self, u: Tensor, v: Tensor) -> Tensor:
        logits = self.classifier(pair_features(u, v, self.parts))
        if self.symmetric:
            logits = (logits + self.classifier(pair_features(v, u, self.parts))) / 2
        return logits


class RegressionHead(nn.Module):
    """Dropout then a linear layer to one value: (batch, in_features) -> (batch,)."""

    def __init__(self, in_features: int, dropout: float = 0.0):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.linear = nn.Linear(in_features, 1)

    def forward(self, features: Tensor) -> Tensor:
        return self.linear(self.dropout(features)).squeeze(-1)
