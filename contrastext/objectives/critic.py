"""RECLAIM's Wasserstein-constrained critic and its NCE objective.

Paper: L. Chen et al., "Towards robust and efficient contrastive textual representation learning",
ICLR 2021 submission (RECLAIM). A critic g(u, v) ∈ (0, 1) tells a true pair of features of the same
text (u: e.g. the pooled sentence feature, v: e.g. the mean input-embedding feature) from mismatched
pairs. Constraining the pre-sigmoid score s(u, v) to be 1-Lipschitz turns the KL-based bound into the
Wasserstein dependency measure (Ozair et al., 2019), which avoids vanishing contrast signals (§3.2).

Critic architecture (``WassersteinCritic``)::

    p_u(u) = W2ᵘ σ(W1ᵘ u),   p_v(v) = W2ᵛ σ(W1ᵛ v)                   (two projection MLPs to width h)
    s(u, v) = W5 σ(W4 σ(W3 [p_u(u); p_v(v)]))                        (3-layer MLP on the concatenation)
    g(u, v) = sigmoid(s(u, v))

The paper (appendix, "Architecture for g"): "two different MLP layers first to map u, v into the same
dimension, and then we feed both into a three layer MLP", with dim = 64 for BERT. Not given: the depth of
the two projections (ours: two layers each), how "both" are fed (ours: concatenation), the widths inside
the three-layer MLP (ours: h) and the activation (ours: LeakyReLU(0.2); §3.2 names ReLU and Leaky ReLU as
1-Lipschitz activations).

Computed factorised: the head's first layer W3 = [W3ᵘ  W3ᵛ] splits over the concatenation, W3 [p_u; p_v] + b
= (W3ᵘ p_u + b) + W3ᵛ p_v, so each row's projection goes through its half of W3 once and the pairs only add
(B × K × h) before the rest of the head; with bank negatives given as distinct rows and an index
(``CriticNCE(..., negative_index_u=...)``, ``WassersteinCritic.score_indexed``) each distinct row is projected
once per step instead of once per (query, negative) pair. The same function, summed in another order (equal
to the concatenated form within float rounding, tests/objectives/test_ans.py); each layer's spectral-normalised
weight is still read once per ``score`` call, so the power iterations are those of the concatenated form.

Every Linear carries spectral normalisation (operator norm ≤ 1, §3.2) and σ = LeakyReLU(0.2) is 1-Lipschitz,
so p_u and p_v are 1-Lipschitz. Concatenating them keeps the constant ≤ 1 *in the joint input (u, v)*:
‖[p_u(u) − p_u(u′); p_v(v) − p_v(v′)]‖² = ‖p_u(u) − p_u(u′)‖² + ‖p_v(v) − p_v(v′)‖² ≤ ‖u − u′‖² + ‖v − v′‖²,
so no 1/√2 factor is needed (it would be if one input fed both branches). The head is a composition of
1-Lipschitz maps, hence |s(u, v) − s(u′, v′)| ≤ ‖(u, v) − (u′, v′)‖. (Spectral norm is estimated by power
iteration, one step per training forward, so the bound holds up to that estimate's accuracy.)

NCE objective (``CriticNCE``): the paper's Eq. 6 (its Eq. 3 with K negatives per side), maximised by the
paper, so our loss is its negative::

    L_ANS = E_π [ log g(u, v) + ½ Σ_{v′∈V_nn} log(1 − g(u, v′)) + ½ Σ_{u′∈U_nn} log(1 − g(u′, v)) ]   (Eq. 6)

    loss  = −(1/B) Σ_i [ log g(u_i, v_i) + ½ Σ_k log(1 − g(u_i, v′_ik)) + ½ Σ_k log(1 − g(u′_ik, v_i)) ]

``negative_reduction="half_sum"`` (default) is this form: each side's K negative terms are summed and
halved. The extracted text of Eq. 6 prints "−" before the two halved sums; we read them as "+", the form of
Eq. 3 (L_NCE = E log g + γ E log(1 − g)): with "−" maximising L_ANS would push g(u, v′) of the negatives
towards 1, the opposite of NCE. ``negative_reduction="mean"`` replaces ½ Σ_k by (1/K) Σ_k on each side (our
earlier form; it weighs the negatives K/2 times less, e.g. 50× at K = 100).

Computed as log g = logsigmoid(s) and log(1 − g) = logsigmoid(−s). Negatives v′_ik (paired with u_i) and
u′_ik (paired with v_i) come from a memory bank (ANS, ``objectives/ans.py``) or, when not given, from the
batch: every other row j ≠ i (K = B − 1).

Example::

    critic = WassersteinCritic(dim_u=384, dim_v=384)
    nce = CriticNCE(critic)                           # Eq. 6: ½ Σ over the negatives
    loss = nce(u, v)                                  # in-batch negatives
    loss = nce(u, v, negatives_u=nu, negatives_v=nv)  # (B, K, d) negatives from the banks
    rows, index = torch.unique(near_v, return_inverse=True)   # the batch's top-K sets, deduplicated
    loss = nce(u, v, negatives_u=nu, negatives_v=bank_v[rows], negative_index_v=index)
"""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.nn import functional as F
from torch.nn.utils.parametrizations import spectral_norm

from contrastext.errors import UnknownNameError

from .base import Objective
from .checks import check_negative_sets, check_paired_rows

NEGATIVE_REDUCTIONS = ("half_sum", "mean")


def _sn_linear(in_features: int, out_features: int) -> nn.Module:
    return spectral_norm(nn.Linear(in_features, out_features))


def _projection(in_features: int, hidden: int, slope: float) -> nn.Sequential:
    return nn.Sequential(
        _sn_linear(in_features, hidden), nn.LeakyReLU(slope), _sn_linear(hidden, hidden)
    )


class WassersteinCritic(nn.Module):
    """Spectral-normalised pair critic; ``score`` gives the 1-Lipschitz pre-sigmoid logit s(u, v)."""

    def __init__(self, dim_u: int, dim_v: int, hidden: int = 64, negative_slope: float = 0.2):
        super().__init__()
        self.dim_u, self.dim_v, self.hidden = dim_u, dim_v, hidden
        self.project_u = _projection(dim_u, hidden, negative_slope)
        self.project_v = _projection(dim_v, hidden, negative_slope)
        self.head = nn.Sequential(
            _sn_linear(2 * hidden, hidden),
            nn.LeakyReLU(negative_slope),
            _sn_linear(hidden, hidden),
            nn.LeakyReLU(negative_slope),
            _sn_linear(hidden, 1),
        )

    def first_layer_halves(self) -> tuple[Tensor, Tensor, Tensor]:
        """``(W_u, W_v, b)`` of the head's first layer, W = [W_u  W_v] split over the concatenation
        [p_u; p_v], so W [p_u; p_v] + b = (W_u p_u + b) + W_v p_v. The spectral-normalised W is read once
        (in training mode each read is one power-iteration step, as one pass through the layer)."""
        layer = self.head[0]
        weight = layer.weight
        return weight[:, : self.hidden], weight[:, self.hidden :], layer.bias

    def _after_first_layer(self, pre_activation: Tensor) -> Tensor:
        """The head after its first Linear: σ, then the two remaining layers; (..., h) -> (...)."""
        return self.head[1:](pre_activation).squeeze(-1)

    def score(self, u: Tensor, v: Tensor) -> Tensor:
        """Pre-sigmoid scores for u (..., dim_u) and v (..., dim_v) whose leading shapes broadcast.

        Each row is projected once, through p and the first head layer's half of its side (W_u p_u(u) + b,
        W_v p_v(v): the factorised W [p_u; p_v] + b), then the two are broadcast and added:
        ``score(u[:, None], v)`` with u (B, du) and v (B, K, dv) gives (B, K); ``score(u[:, None], v[None])``
        gives all B × B pairs.
        """
        if u.size(-1) != self.dim_u or v.size(-1) != self.dim_v:
            raise ValueError(
                f"critic expects u (..., {self.dim_u}) and v (..., {self.dim_v}), "
                f"got {tuple(u.shape)} and {tuple(v.shape)}"
            )
        try:
            torch.broadcast_shapes(u.shape[:-1], v.shape[:-1])
        except RuntimeError as error:
            raise ValueError(
                f"critic cannot pair u of shape {tuple(u.shape)} with v of shape {tuple(v.shape)}: "
                "their leading dimensions do not broadcast"
            ) from error
        pu, pv = self.project_u(u), self.project_v(v)
        weight_u, weight_v, bias = self.first_layer_halves()
        return self._after_first_layer(F.linear(pu, weight_u, bias) + F.linear(pv, weight_v))

    def score_indexed(self, fixed: Tensor, rows: Tensor, index: Tensor, fixed_is_u: bool) -> Tensor:
        """Scores (B, K) of each fixed row i (B, d) against ``rows[index[i, k]]``: ``rows`` (M, d) are distinct
        rows (a batch's deduplicated negatives), ``index`` (B, K) addresses them. Each distinct row is projected
        once, to its first-layer half (M, h), and only those are gathered; equal to ``score`` on the gathered
        (B, K, d) rows. ``fixed_is_u``: the fixed rows are u (the rows v), else the other way round."""
        weight_u, weight_v, bias = self.first_layer_halves()
        if fixed_is_u:
            first_fixed = F.linear(self.project_u(fixed), weight_u, bias)
            first_rows = F.linear(self.project_v(rows), weight_v)
        else:
            first_rows = F.linear(self.project_u(rows), weight_u, bias)
            first_fixed = F.linear(self.project_v(fixed), weight_v)
        # index_select on the flat (B·K,) index (its backward an index_add_), not first_rows[index]: same values.
        addressed = first_rows.index_select(0, index.reshape(-1)).view(*index.shape, first_rows.size(-1))
        return self._after_first_layer(first_fixed.unsqueeze(1) + addressed)

    def forward(self, u: Tensor, v: Tensor) -> Tensor:
        """g(u, v) = sigmoid(score(u, v)) ∈ (0, 1)."""
        return torch.sigmoid(self.score(u, v))


def _negative_scores(
    critic: WassersteinCritic, fixed: Tensor, negatives: Tensor, fixed_is_u: bool, index: Tensor | None = None
) -> Tensor:
    """Scores (B, K) of each fixed row i against its negatives: (B, K, d) per row, (K, d) shared, or (M, d)
    distinct rows addressed by ``index`` (B, K) (checked). A critic without ``score_indexed`` scores the
    gathered rows."""
    if index is not None:
        if hasattr(critic, "score_indexed"):
            return critic.score_indexed(fixed, negatives, index, fixed_is_u)
        negatives = negatives[index]
    if negatives.dim() == 2:
        negatives = negatives.unsqueeze(0)
    fixed = fixed.unsqueeze(1)
    return critic.score(fixed, negatives) if fixed_is_u else critic.score(negatives, fixed)


def reduce_negatives(terms: Tensor, reduction: str) -> Tensor:
    """One side's negative terms (B, K) -> (B,): ½ Σ_k (``"half_sum"``, Eq. 6) or (1/K) Σ_k (``"mean"``)."""
    return 0.5 * terms.sum(dim=1) if reduction == "half_sum" else terms.mean(dim=1)


class CriticNCE(Objective):
    """NCE with a learned critic: −[log g(u,v) + ½ Σ log(1 − g(u, v′)) + ½ Σ log(1 − g(u′, v))] (Eq. 6).

    A ``pair`` objective (``loss(u, v)`` uses in-batch negatives) whose third and fourth arguments are the
    negatives of u's side and v's side, not negatives of the anchors: ``takes_negatives`` is False.
    ``negative_reduction``: ``"half_sum"`` (Eq. 6) or ``"mean"`` ((1/K) Σ per side).
    """

    pair = True

    def __init__(self, critic: WassersteinCritic, negative_reduction: str = "half_sum"):
        super().__init__()
        if negative_reduction not in NEGATIVE_REDUCTIONS:
            raise UnknownNameError(
                f"unknown negative_reduction {negative_reduction!r}: choose one of {', '.join(NEGATIVE_REDUCTIONS)}"
            )
        self.critic = critic
        self.negative_reduction = negative_reduction

    def validate(
        self,
        u: Tensor,
        v: Tensor,
        negatives_u: Tensor | None = None,
        negatives_v: Tensor | None = None,
        negative_index_u: Tensor | None = None,
        negative_index_v: Tensor | None = None,
    ) -> dict[str, Tensor | None]:
        """``loss(u (B, du), v (B, dv), negatives_u (B, K, du) | (K, du) = None, negatives_v … = None,
        negative_index_u (B, K) = None, negative_index_v … = None)``.

        With ``negative_index_u`` given, ``negatives_u`` (M, du) holds distinct rows and row i's k-th negative
        is ``negatives_u[negative_index_u[i, k]]`` (a batch's top-K sets, deduplicated: each row is projected
        once); the same for v. Tensors are cast to the critic's own dtype, at least float32 (half inputs are
        upcast).
        """
        width_u, width_v = getattr(self.critic, "dim_u", None), getattr(self.critic, "dim_v", None)
        u, v = check_paired_rows(self.owner, "u", u, "v", v, width_a=width_u, width_b=width_v)
        batch = u.size(0)
        if (negatives_u is None or negatives_v is None) and batch < 2:
            raise ValueError(f"{self.owner} with in-batch negatives needs a batch of at least 2 pairs")
        negatives_u = check_negative_sets(self.owner, "negatives_u", negatives_u, batch, width_u)
        negatives_v = check_negative_sets(self.owner, "negatives_v", negatives_v, batch, width_v)
        negative_index_u = self._check_index("u", negative_index_u, negatives_u, batch)
        negative_index_v = self._check_index("v", negative_index_v, negatives_v, batch)
        compute_dtype = torch.promote_types(next(self.critic.parameters()).dtype, torch.float32)
        return {
            "u": u.to(compute_dtype),
            "v": v.to(compute_dtype),
            "negatives_u": None if negatives_u is None else negatives_u.to(compute_dtype),
            "negatives_v": None if negatives_v is None else negatives_v.to(compute_dtype),
            "negative_index_u": negative_index_u,
            "negative_index_v": negative_index_v,
        }

    def _check_index(self, side: str, index: Tensor | None, rows: Tensor | None, batch: int) -> Tensor | None:
        """``negative_index_<side>``: (B, K) integers addressing the M distinct rows of ``negatives_<side>`` (M, d)."""
        if index is None:
            return None
        name = f"negative_index_{side}"
        if rows is None or rows.dim() != 2:
            raise ValueError(f"{self.owner}: `{name}` addresses distinct rows: give `negatives_{side}` as (M, d)")
        if not isinstance(index, Tensor) or index.dim() != 2 or index.shape[0] != batch or index.shape[1] < 1:
            shape = tuple(index.shape) if isinstance(index, Tensor) else type(index).__name__
            raise ValueError(f"{self.owner}: `{name}` must be a (B={batch}, K) integer tensor, K >= 1; got {shape}")
        if index.is_floating_point() or index.dtype == torch.bool:
            raise ValueError(f"{self.owner}: `{name}` must be an integer tensor; got dtype {index.dtype}")
        if int(index.min()) < 0 or int(index.max()) >= rows.shape[0]:
            raise ValueError(
                f"{self.owner}: `{name}` values must address the {rows.shape[0]} rows of `negatives_{side}`; "
                f"got values in [{int(index.min())}, {int(index.max())}]"
            )
        return index.to(device=rows.device, dtype=torch.long)

    def compute(
        self,
        u: Tensor,
        v: Tensor,
        negatives_u: Tensor | None = None,
        negatives_v: Tensor | None = None,
        negative_index_u: Tensor | None = None,
        negative_index_v: Tensor | None = None,
    ) -> Tensor:
        """The loss on checked tensors of the critic's dtype."""
        batch = u.size(0)
        in_batch = None
        if negatives_u is None or negatives_v is None:
            in_batch = self.critic.score(u.unsqueeze(1), v.unsqueeze(0))  # (B, B): s(u_i, v_j)
            positive = in_batch.diagonal()
        else:
            positive = self.critic.score(u, v)
        off_diagonal = ~torch.eye(batch, dtype=torch.bool, device=u.device)

        if negatives_v is None:
            scores_v = in_batch[off_diagonal].view(batch, batch - 1)  # s(u_i, v_j), j ≠ i
        else:
            scores_v = _negative_scores(self.critic, u, negatives_v, fixed_is_u=True, index=negative_index_v)
        if negatives_u is None:
            scores_u = in_batch.T[off_diagonal].view(batch, batch - 1)  # s(u_j, v_i), j ≠ i
        else:
            scores_u = _negative_scores(self.critic, v, negatives_u, fixed_is_u=False, index=negative_index_u)

        per_pair = (
            F.logsigmoid(positive)
            + reduce_negatives(F.logsigmoid(-scores_v), self.negative_reduction)
            + reduce_negatives(F.logsigmoid(-scores_u), self.negative_reduction)
        )
        return -per_pair.mean()

    def extra_repr(self) -> str:
        return f"negative_reduction={self.negative_reduction!r}"
