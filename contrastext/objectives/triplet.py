"""Triplet margin loss, the classic baseline (Schroff et al., CVPR 2015, FaceNet; Reimers & Gurevych 2019,
Sentence-BERT's triplet objective):

    L = mean_i relu( d(a_i, p_i) − d(a_i, n_i) + m )

with ``distance="euclidean"``: d(u, v) = ‖u − v‖ (on the raw embeddings, computed as sqrt(max(‖u − v‖², ε))
so the gradient is finite when u = v), or ``distance="cosine"``: d(u, v) = 1 − cos(u, v).
Built on ``torch.nn.functional.triplet_margin_with_distance_loss``.

Example::

    >>> a, p, n = torch.randn(8, 32), torch.randn(8, 32), torch.randn(8, 32)
    >>> TripletMargin(margin=0.5, distance="cosine")(a, p, n)
"""

from __future__ import annotations

from typing import Literal

import torch.nn.functional as F
from torch import Tensor

from .base import Objective
from .checks import check_choice, check_embeddings, check_non_negative, common_dtype

DISTANCE_EPS = 1e-12
TRIPLET_DISTANCES: tuple[str, ...] = ("euclidean", "cosine")


def euclidean_distance(u: Tensor, v: Tensor) -> Tensor:
    """Row-wise ‖u − v‖ with a finite gradient at u = v."""
    return (u - v).pow(2).sum(dim=-1).clamp_min(DISTANCE_EPS).sqrt()


def cosine_distance(u: Tensor, v: Tensor) -> Tensor:
    """Row-wise 1 − cos(u, v)."""
    return 1 - F.cosine_similarity(u, v, dim=-1)


class TripletMargin(Objective):
    """relu(d(a, p) − d(a, n) + margin), averaged over the batch.

    Not a ``pair`` objective: ``loss(anchors, positives)`` is not a valid call, the (B, d) negatives (one per
    anchor) are required; ``takes_negatives`` says ``loss(anchors, positives, negatives)`` is its call.
    """

    takes_negatives = True

    def __init__(self, margin: float = 0.5, distance: Literal["euclidean", "cosine"] = "euclidean"):
        super().__init__()
        self.margin = check_non_negative("TripletMargin", "margin", margin)
        self.distance = check_choice("TripletMargin", "distance", distance, TRIPLET_DISTANCES)

    def validate(self, anchors: Tensor, positives: Tensor, negatives: Tensor) -> dict[str, Tensor]:
        """``loss(anchors (B, d), positives (B, d), negatives (B, d))``."""
        anchors = check_embeddings(self.owner, "anchors", anchors, min_rows=1)
        shape = dict(rows=anchors.shape[0], width=anchors.shape[1], like="anchors")
        positives = check_embeddings(self.owner, "positives", positives, **shape)
        negatives = check_embeddings(self.owner, "negatives", negatives, **shape)
        anchors, positives, negatives = common_dtype(anchors, positives, negatives)
        return {"anchors": anchors, "positives": positives, "negatives": negatives}

    def compute(self, anchors: Tensor, positives: Tensor, negatives: Tensor) -> Tensor:
        distance_function = euclidean_distance if self.distance == "euclidean" else cosine_distance
        return F.triplet_margin_with_distance_loss(
            anchors, positives, negatives, distance_function=distance_function, margin=self.margin
        )

    def extra_repr(self) -> str:
        return f"margin={self.margin}, distance={self.distance!r}"
