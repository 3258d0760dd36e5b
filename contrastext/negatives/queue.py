"""A first-in first-out queue of detached embeddings, used as extra negatives (MoCo style).

He et al., "Momentum Contrast for Unsupervised Visual Representation Learning", CVPR 2020; CAPT
(Luo et al., §2.2 "Memory Queue"; 8192 rows, §3.1) enqueues the aggregated representations of both the
original and the corrupted sentences of every step. The queue lives in registered buffers, so
``state_dict()`` saves it with the method and ``.to(device)`` moves it.

Example::

    queue = Queue(capacity=4096, dim=384)
    loss = info_nce(anchors, torch.cat([positives, queue.contents()]))
    queue.enqueue(positives)  # after the step: stored detached, the oldest rows drop out
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


class Queue(nn.Module):
    """FIFO of at most ``capacity`` embeddings of width ``dim``; the oldest rows are overwritten first."""

    def __init__(self, capacity: int, dim: int, dtype: torch.dtype = torch.float32):
        super().__init__()
        if capacity < 1 or dim < 1:
            raise ValueError(f"Queue needs capacity >= 1 and dim >= 1, got capacity={capacity}, dim={dim}")
        self.capacity = capacity
        self.dim = dim
        self.register_buffer("embeddings", torch.zeros(capacity, dim, dtype=dtype))
        # Next row to write, and how many rows hold data (both 0-d long tensors so state_dict keeps them).
        self.register_buffer("pointer", torch.zeros((), dtype=torch.long))
        self.register_buffer("filled", torch.zeros((), dtype=torch.long))

    def __len__(self) -> int:
        return int(self.filled)

    @torch.no_grad()
    def enqueue(self, x: Tensor) -> None:
        """Append the rows of ``x`` (n × dim), detached; when n > capacity only the newest rows are kept."""
        if x.dim() != 2 or x.size(1) != self.dim:
            raise ValueError(f"Queue.enqueue expects a (n, {self.dim}) tensor, got shape {tuple(x.shape)}")
        x = x.detach().to(device=self.embeddings.device, dtype=self.embeddings.dtype)
        if x.size(0) >= self.capacity:
            self.embeddings.copy_(x[-self.capacity :])
            self.pointer.zero_()
            self.filled.fill_(self.capacity)
            return
        n = x.size(0)
        rows = (int(self.pointer) + torch.arange(n, device=x.device)) % self.capacity
        self.embeddings[rows] = x
        self.pointer.fill_((int(self.pointer) + n) % self.capacity)
        self.filled.fill_(min(int(self.filled) + n, self.capacity))

    def contents(self) -> Tensor:
        """The stored rows, oldest first (a ``len(self) × dim`` tensor; empty before the first enqueue)."""
        filled, pointer = int(self.filled), int(self.pointer)
        if filled < self.capacity:
            return self.embeddings[:filled].clone()
        return torch.cat([self.embeddings[pointer:], self.embeddings[:pointer]])

    def extra_repr(self) -> str:
        return f"capacity={self.capacity}, dim={self.dim}, filled={len(self)}"
