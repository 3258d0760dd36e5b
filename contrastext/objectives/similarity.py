"""Pairwise similarity between two sets of embeddings: cosine or dot product.

``pairwise_similarity(a, b)[i, j] = sim(a_i, b_j)`` with

- ``"cos"``: ``a_i · b_j / (‖a_i‖ ‖b_j‖)`` (rows L2-normalised first, as sentence-transformers' ``cos_sim``),
- ``"dot"``: ``a_i · b_j``.

Example::

    >>> a = torch.tensor([[1.0, 0.0], [0.0, 2.0]])
    >>> pairwise_similarity(a, a)
    tensor([[1., 0.],
            [0., 1.]])
"""

from __future__ import annotations

from typing import Literal

import torch.nn.functional as F
from torch import Tensor

from .checks import check_choice, check_embeddings, common_dtype

SimilarityKind = Literal["cos", "dot"]
SIMILARITY_KINDS: tuple[str, ...] = ("cos", "dot")


def normalize(x: Tensor) -> Tensor:
    """L2-normalise rows (zero rows stay zero: ``F.normalize`` divides by max(‖x‖, 1e-12))."""
    return F.normalize(x, p=2, dim=-1)


def pairwise_similarity(a: Tensor, b: Tensor, kind: SimilarityKind = "cos") -> Tensor:
    """Return the (A, B) matrix of similarities between the rows of ``a`` (A, d) and ``b`` (B, d)."""
    check_choice("pairwise_similarity", "kind", kind, SIMILARITY_KINDS)
    a = check_embeddings("pairwise_similarity", "a", a)
    b = check_embeddings("pairwise_similarity", "b", b, width=a.shape[1], like="a", rows_name="N")
    a, b = common_dtype(a, b)
    if kind == "cos":
        a, b = normalize(a), normalize(b)
    return a @ b.T
