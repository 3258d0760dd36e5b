"""RECLAIM's active negative selection (ANS): the critic NCE with the K nearest bank entries as negatives.

Paper: L. Chen et al., "Towards robust and efficient contrastive textual representation learning",
ICLR 2021 submission (RECLAIM), §3.3–3.4, Eq. 6–7. Two memory banks hold a momentum-averaged copy of every
training example's features, B_u = {ũ_j} and B_v = {ṽ_j}, initialised with N(0, I) noise (§3.4). For the
pair (u_i, v_i) of example i, V_nn and U_nn are the K nearest bank entries by cosine (§3.3):

    N_v(i) = top-K_j  cos(v_i, ṽ_j),  j ≠ i        N_u(i) = top-K_j  cos(u_i, ũ_j),  j ≠ i

    L = −(1/B) Σ_i [ log g(u_i, v_i) + ½ Σ_{j ∈ N_v(i)} log(1 − g(u_i, ṽ_j))
                                     + ½ Σ_{j ∈ N_u(i)} log(1 − g(ũ_j, v_i)) ]          (−Eq. 6)

with g the Wasserstein critic (``objectives/critic.py``; the "−" the extracted Eq. 6 prints before the
halved sums is read as "+", see there). ``negative_reduction="mean"`` uses (1/K) Σ instead of ½ Σ. After
the optimiser step, ``update`` moves the bank entries of the batch: ũ_i ← (1 − ρ)·u_i + ρ·ũ_i
(ρ = ``momentum``, Eq. 7), the same for ṽ_i. ``bank_init``: ``"gaussian"`` (N(0, I), the paper) or
``"unit"`` (the same draws at unit norm).

Search (``search``): a name of :func:`contrastext.negatives.search.make_search` (with ``search_options``) or
a search object. Each bank gets its own search (``search.fresh()``), so a search kept across steps
(``"ivf"``, an index updated in place) serves one bank; before each search the bank says which rows its
momentum updates wrote since the previous one (``MemoryBank.take_changed()``), and only those are re-indexed.

Cost: the top-K sets of a batch overlap, so the K·B indices of each side are deduplicated (``torch.unique``):
each distinct bank row is gathered once and projected once by the factorised critic
(``WassersteinCritic.score_indexed``), then addressed by index; the loss and gradients are those of the
gathered (B, K, d) negatives (tests/objectives/test_ans.py checks it against the pairwise form).

Modes (the paper's ablations, §5.4):

- ``"topk"``: the K nearest neighbours above (the method);
- ``"random"``: instead of the top-K, a random ``random_fraction`` (default 80%) of the bank, drawn afresh
  each call, shared by the batch and never containing the batch's own rows ("the 80% Method"). Cost: the
  critic scores B × ⌈fraction · N⌉ pairs, so keep N moderate in this mode; with ``"half_sum"`` the negative
  terms then count M = ⌈fraction · N⌉ each (Eq. 6 with V_nn, U_nn replaced by the random rows);
- ``"in_batch"``: the other rows of the batch only, K = B − 1 (banks unused by the loss, still updated).

Example::

    ans = ANS(WassersteinCritic(384, 384), bank_size=len(dataset), dim_u=384, dim_v=384, k=100, momentum=0.5)
    loss = ans(u, v, batch_indices)        # in the method's forward
    ans.update(batch_indices, u, v)        # in the method's after_step()
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from contrastext.errors import UnknownNameError
from contrastext.negatives.bank import MemoryBank
from contrastext.negatives.search import NearestNeighbourSearch, make_search
from contrastext.objectives.base import Objective
from contrastext.objectives.checks import check_indices, check_paired_rows
from contrastext.objectives.critic import CriticNCE, WassersteinCritic

MODES = ("topk", "random", "in_batch")


class ANS(Objective):
    """Critic NCE whose negatives come from two momentum memory banks (top-K, random subset or in-batch)."""

    def __init__(
        self,
        critic: WassersteinCritic,
        bank_size: int,
        dim_u: int,
        dim_v: int,
        k: int = 100,
        momentum: float = 0.5,
        search: str | NearestNeighbourSearch = "exact",
        mode: str = "topk",
        random_fraction: float = 0.8,
        negative_reduction: str = "half_sum",
        bank_init: str = "gaussian",
        search_options: dict | None = None,
    ):
        super().__init__()
        if mode not in MODES:
            raise UnknownNameError(f"unknown ANS mode {mode!r}: choose one of {', '.join(MODES)}")
        if not 0.0 < random_fraction <= 1.0:
            raise ValueError(f"ANS random_fraction must be in (0, 1], got {random_fraction}")
        if mode == "topk" and not 1 <= k <= bank_size - 1:
            raise ValueError(
                f"ANS k={k} is impossible with a bank of {bank_size} examples: "
                f"k must be between 1 and {bank_size - 1} (each example's own row is excluded)"
            )
        self.nce = CriticNCE(critic, negative_reduction=negative_reduction)
        self.bank_u = MemoryBank(bank_size, dim_u, momentum, init=bank_init)
        self.bank_v = MemoryBank(bank_size, dim_v, momentum, init=bank_init)
        if isinstance(search, str):
            search = make_search(search, **(search_options or {}))
        elif search_options:
            raise ValueError("ANS search_options apply to a search given by name, not to a search object")
        # One search per bank: a stateful search (an index kept across steps) follows one key matrix.
        self.search_u, self.search_v = search, search.fresh()
        self.k, self.mode, self.random_fraction = k, mode, random_fraction

    @property
    def critic(self) -> WassersteinCritic:
        return self.nce.critic

    def validate(self, u: Tensor, v: Tensor, indices: Tensor) -> dict[str, Tensor]:
        """``loss(u (B, dim_u), v (B, dim_v), indices (B,))``: features and bank rows of the batch's examples."""
        u, v = check_paired_rows(self.owner, "u", u, "v", v, width_a=self.bank_u.dim, width_b=self.bank_v.dim)
        indices = check_indices(self.owner, indices, u.size(0))
        return {"u": u, "v": v, "indices": indices}

    def nearest_negatives(self, u: Tensor, v: Tensor, indices: Tensor) -> tuple[Tensor, Tensor]:
        """Bank indices (B, K) of the top-K ũ nearest to each u_i and of the top-K ṽ nearest to each v_i."""
        _, near_u = self.search_u.topk(
            u.detach(), self.bank_u.bank, self.k, exclude=indices, changed=self.bank_u.take_changed()
        )
        _, near_v = self.search_v.topk(
            v.detach(), self.bank_v.bank, self.k, exclude=indices, changed=self.bank_v.take_changed()
        )
        return near_u, near_v

    @property
    def search(self) -> NearestNeighbourSearch:
        """The search of bank B_u (B_v's is ``search_v``, a ``fresh()`` copy of the same settings)."""
        return self.search_u

    def random_negatives(self, indices: Tensor) -> Tensor:
        """A random ⌈fraction · N⌉ of bank rows (M,), none of them in the batch, drawn afresh."""
        size = self.bank_u.size
        allowed = torch.ones(size, dtype=torch.bool, device=self.bank_u.bank.device)
        allowed[indices.to(allowed.device)] = False
        candidates = torch.nonzero(allowed).squeeze(1)
        if candidates.numel() == 0:
            raise ValueError(f"ANS random mode: the batch covers the whole bank of {size} rows, no negatives left")
        count = min(math.ceil(self.random_fraction * size), candidates.numel())
        return candidates[torch.randperm(candidates.numel(), device=candidates.device)[:count]]

    def compute(self, u: Tensor, v: Tensor, indices: Tensor) -> Tensor:
        """The NCE loss of the batch (u_i, v_i) of examples ``indices`` with negatives chosen by ``mode``."""
        if self.mode == "in_batch":
            return self.nce(u, v)
        if self.mode == "random":
            rows = self.random_negatives(indices)  # shared by the whole batch: (M, d) negatives
            return self.nce(u, v, negatives_u=self.bank_u.get(rows), negatives_v=self.bank_v.get(rows))
        near_u, near_v = self.nearest_negatives(u, v, indices)
        # The batch's top-K sets overlap: gather each distinct bank row once and let the critic project it once.
        rows_u, index_u = torch.unique(near_u, return_inverse=True)
        rows_v, index_v = torch.unique(near_v, return_inverse=True)
        return self.nce(
            u,
            v,
            negatives_u=self.bank_u.get(rows_u),
            negatives_v=self.bank_v.get(rows_v),
            negative_index_u=index_u,
            negative_index_v=index_v,
        )

    @torch.no_grad()
    def update(self, indices: Tensor, u: Tensor, v: Tensor) -> None:
        """Momentum update of both banks at ``indices`` with the detached features (after the optimiser step)."""
        self.validate(u, v, indices)
        self.bank_u.update(indices, u)
        self.bank_v.update(indices, v)

    def extra_repr(self) -> str:
        return (
            f"k={self.k}, mode={self.mode!r}, random_fraction={self.random_fraction}, "
            f"negative_reduction={self.nce.negative_reduction!r}"
        )
