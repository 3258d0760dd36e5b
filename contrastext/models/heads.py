"""Task heads on pooled sentence vectors: classification, pair classification, regression.

- ``ClassificationHead``: ``logits = W dropout(z) + b`` for single-text tasks (RECLAIM, CAPT, SCL's ``head: linear``).
- ``DenseTanhHead``: ``logits = W_o dropout(tanh(W_d dropout(z) + b_d)) + b_o``, fairseq's and Hugging Face's
  ``RobertaClassificationHead`` (dropout → dense(hidden, hidden) → tanh → dropout → out_proj): the head SCL's
  paper fine-tunes RoBERTa-large with (``method_args.head: dense_tanh``, :data:`SCL_HEADS`).
- ``PairHead``: logits for a pair ``(u, v)`` from a concatenation of named parts:
  ``u``, ``v``, ``absdiff`` = |u − v|, ``diff`` = u − v, ``prod`` = u ⊙ v.
  The default ``("u", "v", "absdiff")`` is Sentence-BERT's classification objective
  (Reimers & Gurevych, 2019): ``softmax(W [u; v; |u − v|])``.
  With ``symmetric=True`` the logits are averaged over both orders,
  ``(f([u; v; u − v]) + f([v; u; v − u])) / 2``, so swapping the two texts never changes the
  prediction. This is a bi-encoder head (each text encoded alone); the multi-task recipe's
  ``pair_encoding: separate`` uses it. The CS224N report's own pair head is ``DensePairHead`` below.
- ``RegressionHead``: one score ``w·dropout(x) + b`` (e.g. on ``PairHead``-style features or a
  single vector).
- ``DensePairHead``: the CS224N multi-task report's dense prediction head (§4 "Dense Prediction Heads")
  for a pair encoded JOINTLY by a cross-encoder: branch inputs x_k (the [CLS] vector of
  ``[CLS] s1 [SEP] s2 [SEP]``, of ``[CLS] s2 [SEP] s1 [SEP]``, and their difference) each go through their
  own linear layer to ``num_outputs`` logits, then an optional activation (the report's DPHA; none: DPH),
  then one linear layer over the concatenated branch logits:
  ``out = W_o [a(W_1 x_1 + b_1); …; a(W_K x_K + b_K)] + b_o``.

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
BRANCH_ACTIVATIONS: tuple[str, ...] = ("tanh", "none")
SCL_HEADS: tuple[str, ...] = ("dense_tanh", "linear")
"""SCL's ``method_args.head``: ``dense_tanh`` (:class:`DenseTanhHead`) or ``linear`` (:class:`ClassificationHead`)."""


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


class DenseTanhHead(nn.Module):
    """Dropout → dense(in, in) → tanh → dropout → out_proj: (batch, in_features) -> (batch, num_labels) logits.

    fairseq's ``RobertaClassificationHead`` (and Hugging Face's, which reads the same [CLS] / <s> vector); with
    ``squeeze=True`` and one output, a regression score of shape (batch,). Its ``dense`` + tanh is the shape of
    BERT's pooler, which is how it exports (:mod:`contrastext.models.hf_export`).
    """

    def __init__(self, in_features: int, num_labels: int, dropout: float = 0.1, squeeze: bool = False):
        super().__init__()
        if num_labels < 1:
            raise ConfigError(f"num_labels must be >= 1, got {num_labels}")
        if squeeze and num_labels != 1:
            raise ConfigError(f"squeeze=True gives one score per row; num_labels must be 1, got {num_labels}")
        self.dropout = nn.Dropout(dropout)
        self.dense = nn.Linear(in_features, in_features)
        self.out_proj = nn.Linear(in_features, num_labels)
        self.squeeze = squeeze

    def forward(self, pooled: Tensor) -> Tensor:
        hidden = torch.tanh(self.dense(self.dropout(pooled)))
        logits = self.out_proj(self.dropout(hidden))
        return logits.squeeze(-1) if self.squeeze else logits


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


class DensePairHead(nn.Module):
    """One linear layer per branch input, an optional activation, then a linear layer over the branch logits.

    ``DensePairHead(d, num_outputs=1, branches=3, activation="tanh")`` is the report's DPHA head on
    (e₁₂, e₂₁, e₁₂ − e₂₁); ``activation="none"`` its DPH; ``branches=2`` (no difference) its PH.
    Input: ``branches`` tensors of shape (batch, d); output (batch, num_outputs).
    """

    def __init__(self, in_features: int, num_outputs: int = 1, branches: int = 3, activation: str = "tanh"):
        super().__init__()
        if num_outputs < 1 or branches < 1:
            raise ConfigError(f"num_outputs and branches must be >= 1, got {num_outputs} and {branches}")
        if activation not in BRANCH_ACTIVATIONS:
            raise UnknownNameError(f"unknown branch activation {activation!r}; expected one of: {', '.join(BRANCH_ACTIVATIONS)}")
        self.branches = nn.ModuleList(nn.Linear(in_features, num_outputs) for _ in range(branches))
        self.activation = nn.Tanh() if activation == "tanh" else nn.Identity()
        self.output = nn.Linear(branches * num_outputs, num_outputs)

    def forward(self, *inputs: Tensor) -> Tensor:
        if len(inputs) != len(self.branches):
            raise ValueError(f"DensePairHead has {len(self.branches)} branches, got {len(inputs)} inputs")
        logits = [self.activation(branch(x)) for branch, x in zip(self.branches, inputs, strict=True)]
        return self.output(torch.cat(logits, dim=-1))
