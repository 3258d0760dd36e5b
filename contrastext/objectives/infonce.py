"""InfoNCE with in-batch negatives and optional extra (hard) negatives: SimCSE / MultipleNegativesRanking.

For anchors a (B×d), positives p (B×d) and optional extra negatives n (N×d), the candidates of every
anchor are ``c = [p_1 … p_B, n_1 … n_N]`` and the target of anchor i is column i:

    ℓ_i = −log  exp(s(a_i, p_i)/τ + w_ii) / Σ_j exp(s(a_i, c_j)/τ + w_ij)          L = mean_i ℓ_i

with ``s`` cosine (default) or dot product. This is Henderson et al. 2017 ("Efficient natural language
response suggestion for smart reply") / van den Oord et al. 2018 (CPC), and SimCSE's loss (Gao et al.,
EMNLP 2021, Eq. 1 unsupervised, Eq. 5 supervised with hard negatives).

- ``hard_negative_weight`` is SimCSE's ``hard_negative_weight`` (models.py ``cl_forward``): ``w`` is added,
  after dividing by τ, to the logit of anchor i's OWN hard negatives only, i.e. column ``B + i`` (and
  ``B + m·B + i`` when ``negatives`` stacks m blocks of B, the sentence-transformers layout
  ``[neg_1; neg_2; …]`` of (anchor, positive, neg_1, …, neg_m) tuples). Other logits get 0.
- ``symmetric=True`` averages ℓ with the positives→anchors direction, whose candidates are the anchors
  only (extra negatives are not used backwards), as sentence-transformers'
  ``MultipleNegativesRankingLoss(directions=("query_to_doc", "doc_to_query"), partition_mode="per_direction")``.
- Duplicate masking (``mask_duplicate_positives=True``, or whenever ``positive_ids`` is passed): every
  candidate other than the target that IS the target is removed from the softmax (logit −∞), so a batch
  holding the same positive text twice does not push a sentence away from itself. "Is the target" means
  the same id when ``positive_ids`` (B integers, e.g. hashes of the positive texts) is given — then only
  in-batch columns can be masked — and otherwise an exactly equal embedding row (``torch.equal`` per row),
  which also catches extra negatives equal to the positive. The backward direction masks anchors likewise.

Equalities the tests check: with ``similarity="cos"`` this equals sentence-transformers'
``MultipleNegativesRankingLoss(scale=1/τ).compute_loss_from_embeddings([anchors, positives, *negative_blocks])``
and pytorch-metric-learning's ``NTXentLoss(τ)(anchors, labels=arange(B), ref_emb=cat(positives, negatives),
ref_labels=cat(arange(B), B + arange(N)))``.

Non-finite inputs: NaN or ±inf in ``anchors``, ``positives`` or ``negatives`` is a ValueError naming the argument
(the base class's check, on by default; about 0.2 ms a call on a 1024×384 batch, 3 % of the forward on one CPU
thread: see :mod:`contrastext.objectives.checks` to switch it off).

Example::

    >>> loss = InfoNCE(temperature=0.05)
    >>> a, p = torch.randn(8, 32), torch.randn(8, 32)
    >>> loss(a, p)                          # unsupervised SimCSE: p is a dropout twin of a
    >>> loss(a, p, torch.randn(8, 32))      # supervised SimCSE: NLI contradictions as hard negatives
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from .base import Objective
from .checks import check_choice, check_embeddings, check_extra, check_labels, common_dtype
from .similarity import SIMILARITY_KINDS, SimilarityKind, pairwise_similarity
from .temperature import TemperatureLike, check_temperature, temperature_value


class InfoNCE(Objective):
    """Cross-entropy of each anchor over its positive, the other positives and the extra negatives."""

    pair = True
    takes_negatives = True
    in_batch = True

    def __init__(
        self,
        temperature: TemperatureLike = 0.05,
        similarity: SimilarityKind = "cos",
        symmetric: bool = False,
        hard_negative_weight: float = 0.0,
        mask_duplicate_positives: bool = False,
    ):
        super().__init__()
        self.temperature = check_temperature("InfoNCE", temperature)
        self.similarity = check_choice("InfoNCE", "similarity", similarity, SIMILARITY_KINDS)
        self.symmetric = bool(symmetric)
        if isinstance(hard_negative_weight, bool) or not isinstance(hard_negative_weight, int | float):
            raise ValueError(f"InfoNCE: `hard_negative_weight` must be a number; got {hard_negative_weight!r}")
        self.hard_negative_weight = float(hard_negative_weight)
        self.mask_duplicate_positives = bool(mask_duplicate_positives)

    def validate(
        self,
        anchors: Tensor,
        positives: Tensor,
        negatives: Tensor | None = None,
        positive_ids: Tensor | None = None,
    ) -> dict[str, Tensor | None]:
        """``loss(anchors (B, d), positives (B, d), negatives (N, d) = None, positive_ids (B,) = None)``."""
        anchors = check_embeddings(self.owner, "anchors", anchors, min_rows=1)
        batch, width = anchors.shape
        positives = check_embeddings(self.owner, "positives", positives, rows=batch, width=width, like="anchors")
        negatives = check_extra(self.owner, "negatives", negatives, width)
        if positive_ids is not None:
            check_labels(self.owner, positive_ids, batch, name="positive_ids")
        if self.hard_negative_weight != 0.0 and negatives is not None and negatives.shape[0] % batch != 0:
            raise ValueError(
                f"{self.owner}: with hard_negative_weight, `negatives` must stack blocks of B rows (shape (m*B, d), "
                f"row m*B+i is a hard negative of anchor i) with B={batch}; got shape {tuple(negatives.shape)}"
            )
        anchors, positives = common_dtype(anchors, positives)
        if negatives is not None:
            negatives = negatives.to(anchors.dtype)
        return {"anchors": anchors, "positives": positives, "negatives": negatives, "positive_ids": positive_ids}

    def compute(
        self, anchors: Tensor, positives: Tensor, negatives: Tensor | None = None, positive_ids: Tensor | None = None
    ) -> Tensor:
        """The loss on checked tensors (no validation; used by wrappers that cache embeddings)."""
        tau = temperature_value(self.temperature)
        candidates = positives if negatives is None else torch.cat([positives, negatives], dim=0)
        logits = pairwise_similarity(anchors, candidates, self.similarity) / tau
        bias = self._hard_negative_bias(logits)
        if bias is not None:  # skipping the addition avoids a copy of the B×C logits
            logits = logits + bias
        mask = self._duplicate_mask(positives, candidates, positive_ids)
        if mask is not None:
            logits = logits.masked_fill(mask, float("-inf"))
        targets = torch.arange(anchors.shape[0], device=anchors.device)
        loss = F.cross_entropy(logits, targets)
        if not self.symmetric:
            return loss
        backward_logits = pairwise_similarity(positives, anchors, self.similarity) / tau
        backward_mask = self._duplicate_mask(anchors, anchors, positive_ids)
        if backward_mask is not None:
            backward_logits = backward_logits.masked_fill(backward_mask, float("-inf"))
        return (loss + F.cross_entropy(backward_logits, targets)) / 2

    def _hard_negative_bias(self, logits: Tensor) -> Tensor | None:
        """SimCSE's weight matrix: w at columns B + m·B + i of row i, 0 elsewhere (None when w = 0)."""
        batch, columns = logits.shape
        if self.hard_negative_weight == 0.0 or columns == batch:
            return None
        blocks = columns // batch
        own = torch.eye(batch, dtype=torch.bool, device=logits.device).repeat(1, blocks)
        own[:, :batch] = False
        return own.to(logits.dtype) * self.hard_negative_weight

    def _duplicate_mask(self, targets: Tensor, candidates: Tensor, ids: Tensor | None) -> Tensor | None:
        """True where candidate j ≠ i is the same item as target i (same id, else equal embedding)."""
        if ids is None and not self.mask_duplicate_positives:
            return None
        batch, columns = targets.shape[0], candidates.shape[0]
        if ids is not None:
            ids = ids.to(targets.device)
            same = torch.zeros(batch, columns, dtype=torch.bool, device=targets.device)
            same[:, :batch] = ids.unsqueeze(1) == ids.unsqueeze(0)
        else:
            # Exact row equality through torch.unique's row ids: O((B + C)·d) memory, no B×C×d tensor.
            _, row_ids = torch.unique(torch.cat([targets, candidates]).detach(), dim=0, return_inverse=True)
            same = row_ids[:batch].unsqueeze(1) == row_ids[batch:].unsqueeze(0)
        target_column = torch.arange(batch, device=targets.device)
        same[target_column, target_column] = False
        return same

    def extra_repr(self) -> str:
        return (
            f"similarity={self.similarity!r}, symmetric={self.symmetric}, "
            f"hard_negative_weight={self.hard_negative_weight}, mask_duplicate_positives={self.mask_duplicate_positives}"
        )
