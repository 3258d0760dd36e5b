"""Top-K nearest neighbours by cosine similarity, over memory banks of up to millions of rows.

RECLAIM's active negative selection picks, for every example, the K bank entries closest to it. Two
interchangeable searches implement ``topk(queries, keys, k, exclude=None) -> (scores, indices)``:

- ``ExactSearch(chunk_size)``: scores the keys chunk by chunk (B × chunk_size at a time) and merges each
  chunk's candidates into a running top-K, so memory stays O(B · (chunk_size + k)) however long the bank;
  exact, on whatever device the tensors live on.
- ``FaissSearch``: a flat inner-product index of faiss (``IndexFlatIP``) over L2-normalised rows, which is
  exactly cosine similarity; CPU only.

``exclude`` (LongTensor of shape (B,)) gives each query's own row in ``keys``, which must not be returned
as its neighbour; a negative value means "nothing to exclude" for that query. No gradient flows through
a search: it only chooses indices.

Example::

    search = make_search("exact", chunk_size=65536)
    scores, indices = search.topk(features, bank.bank, k=100, exclude=batch_indices)
    negatives = bank.get(indices)  # (B, 100, dim)
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import torch
from torch import Tensor
from torch.nn import functional as F

from contrastext.errors import UnknownNameError


class NearestNeighbourSearch(ABC):
    """Cosine top-K over the rows of ``keys`` for each row of ``queries``."""

    @abstractmethod
    def topk(
        self, queries: Tensor, keys: Tensor, k: int, exclude: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        """Return ``(scores, indices)``, both (B, k), best first; ``indices`` index the rows of ``keys``."""


def check_search_inputs(queries: Tensor, keys: Tensor, k: int, exclude: Tensor | None) -> None:
    """Raise ``ValueError`` naming the expected shapes, or when ``k`` exceeds the candidates available."""
    if queries.dim() != 2 or keys.dim() != 2 or queries.size(1) != keys.size(1):
        raise ValueError(
            f"search expects queries (B, d) and keys (N, d) of the same width, "
            f"got {tuple(queries.shape)} and {tuple(keys.shape)}"
        )
    if exclude is not None and (exclude.dim() != 1 or exclude.size(0) != queries.size(0)):
        raise ValueError(
            f"search expects exclude of shape ({queries.size(0)},) (one bank index per query), "
            f"got {tuple(exclude.shape)}"
        )
    available = keys.size(0) - (1 if exclude is not None else 0)
    if k < 1 or k > available:
        raise ValueError(
            f"cannot return the top k={k} neighbours from a bank of {keys.size(0)} rows"
            + (" minus each query's own row" if exclude is not None else "")
            + f": k must be between 1 and {available}"
        )


class ExactSearch(NearestNeighbourSearch):
    """Exact cosine top-K by chunked matrix products with a running top-K merge (bounded memory)."""

    def __init__(self, chunk_size: int = 65536):
        if chunk_size < 1:
            raise ValueError(f"ExactSearch chunk_size must be >= 1, got {chunk_size}")
        self.chunk_size = chunk_size

    @torch.no_grad()
    def topk(
        self, queries: Tensor, keys: Tensor, k: int, exclude: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        check_search_inputs(queries, keys, k, exclude)
        compute_dtype = torch.promote_types(queries.dtype, torch.float32)
        queries = F.normalize(queries.detach().to(compute_dtype), dim=1)
        best_scores = queries.new_empty(queries.size(0), 0)
        best_indices = torch.empty(queries.size(0), 0, dtype=torch.long, device=queries.device)
        for start in range(0, keys.size(0), self.chunk_size):
            chunk = keys[start : start + self.chunk_size].detach().to(device=queries.device, dtype=compute_dtype)
            # cos = q·k / ‖k‖: dividing the (B, chunk) scores by the key norms avoids writing a normalised
            # copy of the chunk (F.normalize's eps clamp, so zero rows score 0 as they would there).
            norms = torch.linalg.vector_norm(chunk, dim=1).clamp_min(1e-12)
            scores = (queries @ chunk.T).div_(norms)  # (B, chunk)
            if exclude is not None:
                local = exclude.to(queries.device) - start
                inside = (local >= 0) & (local < chunk.size(0))
                rows = torch.nonzero(inside).squeeze(1)
                scores[rows, local[rows]] = float("-inf")
            # The chunk's own top-k first, then a merge of two (B, ≤k) lists: no (B, k + chunk) copies.
            chunk_scores, chunk_positions = scores.topk(min(k, scores.size(1)), dim=1)
            merged_scores = torch.cat([best_scores, chunk_scores], dim=1)
            merged_indices = torch.cat([best_indices, chunk_positions + start], dim=1)
            keep = min(k, merged_scores.size(1))
            best_scores, position = merged_scores.topk(keep, dim=1)
            best_indices = merged_indices.gather(1, position)
        return best_scores, best_indices


class FaissSearch(NearestNeighbourSearch):
    """Cosine top-K with faiss ``IndexFlatIP`` on L2-normalised rows (exact; the index is rebuilt per call)."""

    @torch.no_grad()
    def topk(
        self, queries: Tensor, keys: Tensor, k: int, exclude: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        import faiss

        check_search_inputs(queries, keys, k, exclude)
        device = queries.device
        query_array = F.normalize(queries.detach().float(), dim=1).cpu().numpy()
        key_array = F.normalize(keys.detach().float(), dim=1).cpu().numpy()
        index = faiss.IndexFlatIP(key_array.shape[1])
        index.add(key_array)
        asked = k + 1 if exclude is not None else k
        scores, indices = index.search(query_array, asked)
        scores, indices = torch.from_numpy(scores), torch.from_numpy(indices).long()
        if exclude is not None:
            # Move each query's own row to the end (stable, so the others keep their order) and drop k+1-th.
            is_own = indices == exclude.cpu().long().unsqueeze(1)
            order = torch.sort(is_own.to(torch.int8), dim=1, stable=True).indices[:, :k]
            scores, indices = scores.gather(1, order), indices.gather(1, order)
        return scores.to(device), indices.to(device)


SEARCHES: dict[str, type[NearestNeighbourSearch]] = {"exact": ExactSearch, "faiss": FaissSearch}


def make_search(name: str, **kwargs) -> NearestNeighbourSearch:
    """Build a search by name: ``"exact"`` (``ExactSearch(chunk_size=...)``) or ``"faiss"``."""
    if name not in SEARCHES:
        raise UnknownNameError(f"unknown search {name!r}: choose one of {', '.join(sorted(SEARCHES))}")
    return SEARCHES[name](**kwargs)
