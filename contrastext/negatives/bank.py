"""A memory bank: one slowly updated embedding per training example, addressed by the example's index.

Wu et al., "Unsupervised Feature Learning via Non-Parametric Instance Discrimination", CVPR 2018;
RECLAIM ("Towards robust and efficient contrastive textual representation learning", ICLR 2021
submission) keeps two such banks, B_u and B_v, and updates them with momentum after each step:

    ũ_i ← (1 − ρ) · u_i + ρ · ũ_i        (ρ = ``momentum``, e.g. 0.5)

where u_i is the fresh (detached) feature of example i and ũ_i its bank entry.

Initialisation: every row is drawn from a standard Gaussian and scaled to unit L2 norm, so that cosine
search over a not-yet-visited bank returns uniformly random directions. Fresh features are stored as
given (not re-normalised): cosine search does not care about scale, and a critic sees real features.

Duplicate indices in one ``update`` call: the values given for the same index are averaged first, then
the momentum rule is applied once, so the result does not depend on the order of the rows.

Example::

    bank = MemoryBank(size=len(dataset), dim=384, momentum=0.5)
    negatives = bank.get(neighbour_indices)        # (B, K, 384)
    ...
    bank.update(batch_indices, features.detach())  # after the optimiser step
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


class MemoryBank(nn.Module):
    """``size`` × ``dim`` embeddings in a registered buffer, updated by momentum ``ρ`` per example index."""

    def __init__(self, size: int, dim: int, momentum: float = 0.5, generator: torch.Generator | None = None):
        super().__init__()
        if size < 1 or dim < 1:
            raise ValueError(f"MemoryBank needs size >= 1 and dim >= 1, got size={size}, dim={dim}")
        if not 0.0 <= momentum < 1.0:
            raise ValueError(f"MemoryBank momentum must be in [0, 1), got {momentum}")
        self.size = size
        self.dim = dim
        self.momentum = momentum
        initial = torch.randn(size, dim, generator=generator)
        self.register_buffer("bank", nn.functional.normalize(initial, dim=1))

    def __len__(self) -> int:
        return self.size

    def _check_indices(self, indices: Tensor) -> Tensor:
        if indices.dtype not in (torch.int32, torch.int64):
            raise ValueError(f"MemoryBank indices must be an integer tensor, got dtype {indices.dtype}")
        if indices.numel() and (int(indices.min()) < 0 or int(indices.max()) >= self.size):
            raise IndexError(
                f"MemoryBank index out of range: got values in [{int(indices.min())}, {int(indices.max())}], "
                f"the bank has {self.size} rows (valid indices 0..{self.size - 1})"
            )
        return indices.to(device=self.bank.device, dtype=torch.long)

    def get(self, indices: Tensor) -> Tensor:
        """The bank rows at ``indices`` (any shape), as a new tensor of shape ``indices.shape + (dim,)``."""
        return self.bank[self._check_indices(indices)]

    @torch.no_grad()
    def update(self, indices: Tensor, values: Tensor) -> None:
        """ũ ← (1 − ρ)·u + ρ·ũ for each row of ``values`` (n × dim) at ``indices`` (n,); values are detached."""
        if indices.dim() != 1 or values.dim() != 2 or values.shape != (indices.size(0), self.dim):
            raise ValueError(
                f"MemoryBank.update expects indices (n,) and values (n, {self.dim}), "
                f"got {tuple(indices.shape)} and {tuple(values.shape)}"
            )
        indices = self._check_indices(indices)
        values = values.detach().to(device=self.bank.device, dtype=self.bank.dtype)
        unique, inverse = torch.unique(indices, return_inverse=True)
        sums = torch.zeros(unique.size(0), self.dim, device=values.device, dtype=values.dtype)
        sums.index_add_(0, inverse, values)
        counts = torch.bincount(inverse, minlength=unique.size(0)).to(values.dtype).unsqueeze(1)
        fresh = sums / counts
        self.bank[unique] = (1.0 - self.momentum) * fresh + self.momentum * self.bank[unique]

    def extra_repr(self) -> str:
        return f"size={self.size}, dim={self.dim}, momentum={self.momentum}"
