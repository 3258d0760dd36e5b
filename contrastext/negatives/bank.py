"""A memory bank: one slowly updated embedding per training example, addressed by the example's index.

Wu et al., "Unsupervised Feature Learning via Non-Parametric Instance Discrimination", CVPR 2018;
RECLAIM ("Towards robust and efficient contrastive textual representation learning", ICLR 2021
submission) keeps two such banks, B_u and B_v, and updates them with momentum after each step:

    ũ_i ← (1 − ρ) · u_i + ρ · ũ_i        (ρ = ``momentum``; RECLAIM Eq. 7)

where u_i is the fresh (detached) feature of example i and ũ_i its bank entry. RECLAIM gives the range
ρ ∈ (0, 1] (§3.4) but no value; 0.5 is the memory-bank momentum of Wu et al.'s released code
(zhirongw/lemniscate.pytorch, ``NCEAverage(momentum=0.5)``, the same rule: old·m + new·(1 − m)), the work
RECLAIM cites for its update. We allow ρ = 0 (plain replacement, the "naive" update §3.4 argues against)
and exclude ρ = 1 (the bank would never move from its initial noise).

Initialisation (``init``):

- ``"gaussian"`` (default, RECLAIM §3.4: "initialized with Gaussian noise: u ∼ N(0, I)"): every entry an
  independent standard normal draw, rows of norm ≈ √dim;
- ``"unit"``: the same draws scaled to unit L2 norm (rows on the sphere, the scale of normalised features).

Cosine search does not see the scale, so both give the same nearest neighbours before a row is first
written; a critic does see it. Fresh features are stored as given (not re-normalised).

Duplicate indices in one ``update`` call: the values given for the same index are averaged first, then
the momentum rule is applied once, so the result does not depend on the order of the rows.

Changed rows (for a search index kept across steps, :class:`contrastext.negatives.search.IVFSearch`):
``take_changed()`` returns the rows ``update`` wrote since its previous call (O(rows written), not O(size)),
or None when that is unknown: at the first call, after a write that bypassed ``update`` (``bank.bank[i] =
...``, ``load_state_dict``, ``.to(device)``: seen from the buffer's identity and its in-place version
counter), or once more rows were written than the bank holds. None means "any row may have changed".
One consumer per bank: each call forgets what it returned.

Example::

    bank = MemoryBank(size=len(dataset), dim=384, momentum=0.5)          # rows ~ N(0, I)
    negatives = bank.get(neighbour_indices)        # (B, K, 384)
    ...
    bank.update(batch_indices, features.detach())  # after the optimiser step
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from contrastext.errors import UnknownNameError

INITS = ("gaussian", "unit")


def initial_rows(size: int, dim: int, init: str = "gaussian", generator: torch.Generator | None = None) -> Tensor:
    """``size`` × ``dim`` starting rows: N(0, I) draws (``"gaussian"``) or the same draws at unit norm (``"unit"``)."""
    if init not in INITS:
        raise UnknownNameError(f"unknown memory bank init {init!r}: choose one of {', '.join(INITS)}")
    rows = torch.randn(size, dim, generator=generator)
    return nn.functional.normalize(rows, dim=1) if init == "unit" else rows


class MemoryBank(nn.Module):
    """``size`` × ``dim`` embeddings in a registered buffer, updated by momentum ``ρ`` per example index."""

    def __init__(
        self,
        size: int,
        dim: int,
        momentum: float = 0.5,
        generator: torch.Generator | None = None,
        init: str = "gaussian",
    ):
        super().__init__()
        if size < 1 or dim < 1:
            raise ValueError(f"MemoryBank needs size >= 1 and dim >= 1, got size={size}, dim={dim}")
        if not 0.0 <= momentum < 1.0:
            raise ValueError(f"MemoryBank momentum must be in [0, 1), got {momentum}")
        self.size = size
        self.dim = dim
        self.momentum = momentum
        self.init = init
        self.register_buffer("bank", initial_rows(size, dim, init, generator))
        # Rows written by update() since the last take_changed(); _unknown: any row may have changed.
        self._written: list[Tensor] = []
        self._written_rows = 0
        self._unknown = True
        self._stamp = self._buffer_stamp()

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
        """The bank rows at ``indices`` (any shape), as a new tensor of shape ``indices.shape + (dim,)``.

        ``index_select`` on the flattened indices, not ``bank[indices]``: the same rows, and on CPU several
        times faster for a few thousand rows of a large bank (advanced indexing walks every element)."""
        indices = self._check_indices(indices)
        return self.bank.index_select(0, indices.reshape(-1)).view(*indices.shape, self.dim)

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
        self._notice_untracked_writes()
        old = self.bank.index_select(0, unique)
        self.bank.index_copy_(0, unique, (1.0 - self.momentum) * fresh + self.momentum * old)
        self._record_written(unique)

    def _buffer_stamp(self) -> tuple:
        # The buffer's identity and its in-place version counter (bumped by every in-place write, including
        # indexing assignment, copy_ and load_state_dict): a changed stamp means a write we did not record.
        bank = self.bank
        try:
            version = bank._version
        except RuntimeError:  # an inference-mode tensor keeps no version counter: writes cannot be seen
            version = None
        return (bank.data_ptr(), version, bank.device, bank.dtype, tuple(bank.shape))

    def _notice_untracked_writes(self) -> None:
        stamp = self._buffer_stamp()
        if stamp != self._stamp or stamp[1] is None:
            self._unknown = True
            self._written.clear()
            self._written_rows = 0

    def _record_written(self, rows: Tensor) -> None:
        if not self._unknown:
            self._written.append(rows)
            self._written_rows += rows.numel()
            if self._written_rows > self.size:  # more than the bank holds: a full refresh is as cheap
                self._unknown = True
                self._written.clear()
                self._written_rows = 0
        self._stamp = self._buffer_stamp()

    @torch.no_grad()
    def take_changed(self) -> Tensor | None:
        """The distinct rows written by ``update`` since the previous call (LongTensor on the bank's device),
        or None when any row may have changed (first call, untracked write, more writes than rows)."""
        self._notice_untracked_writes()
        if self._unknown:
            changed = None
        elif self._written:
            changed = torch.unique(torch.cat(self._written))
        else:
            changed = torch.empty(0, dtype=torch.long, device=self.bank.device)
        self._written.clear()
        self._written_rows = 0
        self._unknown = False
        self._stamp = self._buffer_stamp()
        return changed

    def extra_repr(self) -> str:
        return f"size={self.size}, dim={self.dim}, momentum={self.momentum}, init={self.init!r}"
