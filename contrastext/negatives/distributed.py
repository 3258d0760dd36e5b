"""Gather embeddings from every process with gradients, so in-batch negatives span the global batch.

With W processes of local batch B, each process scores its B local anchors against all W·B gathered
candidates. ``all_gather_with_grad`` is an autograd function:

- forward: ``torch.distributed.all_gather`` of the (B, d) local tensors, concatenated to (W·B, d);
- backward: every process holds a gradient for the whole (W·B, d) tensor (from its own loss); the
  gradient of the local slice is the SUM over processes of their gradients for that slice, so the
  backward all-reduces (sum) the incoming gradient and returns the local rows.

Scaling, stated once: if each process's loss is the mean over its B local anchors, L_r, then the
gradient reaching the local embeddings of process r is ∂(Σ_r' L_r')/∂x_r = W · ∂L_global/∂x_r, where
L_global is the mean over all W·B anchors. DistributedDataParallel then *averages* parameter gradients
over the W processes, which divides by W again: the update equals single-process training on the global
batch. (This is the same convention as ``torch.distributed.nn.functional.all_gather`` and
sentence-transformers' ``all_gather_with_grad``, which uses it.)

When torch.distributed is not initialised (one process), every function here is the identity.
All processes must pass tensors of the same shape (equal local batch sizes).

Example::

    gathered = gather_for_contrastive(anchors, positives)
    logits = cos_sim(gathered.anchors, gathered.candidates) / tau     # (B, W·B)
    loss = F.cross_entropy(logits, gathered.labels)                   # labels = rank·B + arange(B)
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import torch.distributed as dist
from torch import Tensor

from contrastext.runtime.processes import is_distributed, rank_and_world_size


class _AllGatherWithGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: Tensor) -> Tensor:
        rank, world_size = rank_and_world_size()
        ctx.rank, ctx.rows = rank, x.size(0)
        parts = [torch.empty_like(x) for _ in range(world_size)]
        dist.all_gather(parts, x.contiguous())
        return torch.cat(parts, dim=0)

    @staticmethod
    def backward(ctx, grad_output: Tensor) -> Tensor:
        grad = grad_output.contiguous().clone()
        dist.all_reduce(grad, op=dist.ReduceOp.SUM)
        return grad[ctx.rank * ctx.rows : (ctx.rank + 1) * ctx.rows]


def _check_same_rows(x: Tensor) -> None:
    """all_gather needs equal shapes: fail with a clear message instead of hanging or garbling rows."""
    _, world_size = rank_and_world_size()
    shape = torch.tensor(list(x.shape), dtype=torch.long, device=x.device)
    shapes = [torch.empty_like(shape) for _ in range(world_size)]
    dist.all_gather(shapes, shape)
    if any(not torch.equal(other, shape) for other in shapes):
        raise ValueError(
            "all_gather_with_grad needs the same tensor shape on every process, got "
            + ", ".join(str(tuple(s.tolist())) for s in shapes)
            + " (use equal local batch sizes, e.g. drop_last=True)"
        )


def all_gather_with_grad(x: Tensor) -> Tensor:
    """Concatenate ``x`` (B, ...) from all processes in rank order, keeping gradients; identity if not distributed."""
    if not is_distributed():
        return x
    if x.dim() == 0:
        raise ValueError("all_gather_with_grad expects a tensor with a batch dimension, got a scalar")
    _check_same_rows(x)
    return _AllGatherWithGrad.apply(x)


@torch.no_grad()
def all_gather_rows(x: Tensor) -> Tensor:
    """Concatenate ``x`` (n_r, ...) from all processes in rank order, WITHOUT gradients; the processes may hold
    different numbers of rows (a last, uneven batch). Identity when not distributed.

    For state that every process must update identically: RECLAIM's memory banks and CAPT's queue take the
    rows of every process, not only their own, so the banks stay the same on every rank.
    """
    if not is_distributed():
        return x
    _, world_size = rank_and_world_size()
    rows = torch.tensor([x.size(0)], dtype=torch.long, device=x.device)
    counts = [torch.empty_like(rows) for _ in range(world_size)]
    dist.all_gather(counts, rows)
    most = int(max(int(count) for count in counts))
    padded = x.new_zeros((most, *x.shape[1:]))
    padded[: x.size(0)] = x
    parts = [torch.empty_like(padded) for _ in range(world_size)]
    dist.all_gather(parts, padded.contiguous())
    return torch.cat([part[: int(count)] for part, count in zip(parts, counts, strict=True)], dim=0)


class GatheredBatch(NamedTuple):
    """Local anchors, global candidates, and for each local anchor the row of its positive in candidates."""

    anchors: Tensor
    candidates: Tensor
    labels: Tensor


def gather_for_contrastive(anchors: Tensor, positives: Tensor, negatives: Tensor | None = None) -> GatheredBatch:
    """Gather positives (and optional hard negatives) from all processes into one candidate set.

    ``candidates`` = [positives of rank 0, …, positives of rank W−1, negatives of rank 0, …] (the
    SimCSE-supervised layout), and ``labels[i] = rank · B + i``, the row of anchor i's positive.
    Anchors stay local: each process computes the loss of its own anchors.
    """
    if anchors.dim() != 2 or positives.shape != anchors.shape:
        raise ValueError(
            f"gather_for_contrastive expects anchors and positives of the same shape (B, d), "
            f"got {tuple(anchors.shape)} and {tuple(positives.shape)}"
        )
    if negatives is not None and (negatives.dim() != 2 or negatives.size(1) != anchors.size(1)):
        raise ValueError(
            f"gather_for_contrastive expects negatives of shape (M, {anchors.size(1)}), got {tuple(negatives.shape)}"
        )
    rank, _ = rank_and_world_size()
    candidates = all_gather_with_grad(positives)
    if negatives is not None:
        candidates = torch.cat([candidates, all_gather_with_grad(negatives)], dim=0)
    batch_size = anchors.size(0)
    labels = torch.arange(batch_size, device=anchors.device) + rank * batch_size
    return GatheredBatch(anchors=anchors, candidates=candidates, labels=labels)
