"""Top-K nearest neighbours by cosine similarity, over memory banks of up to millions of rows.

RECLAIM's active negative selection picks, for every example, the K bank entries closest to it. Two
interchangeable searches implement ``topk(queries, keys, k, exclude=None) -> (scores, indices)``:

- ``ExactSearch(chunk_size)``: scores the keys chunk by chunk (B × chunk_size at a time) and merges each
  chunk's candidates into a running top-K, so memory stays O(B · (chunk_size + k)) however long the bank;
  exact, on whatever device the tensors live on.
- ``FaissSearch``: a flat inner-product index of faiss (``IndexFlatIP``) over L2-normalised rows, which is
  exactly cosine similarity; CPU only; rebuilt at every call.
- ``IVFSearch`` (``"ivf"``): an approximate faiss IVF index (inverted lists, inner product on L2-normalised
  rows) **kept across calls** and updated in place: ``changed`` names the rows of ``keys`` written since the
  previous call (``MemoryBank.take_changed()``), and only those are re-encoded (``update_vectors``, with a
  hash-table direct map so a removal costs O(rows), not a pass over the lists). See its docstring.

``exclude`` (LongTensor of shape (B,)) gives each query's own row in ``keys``, which must not be returned
as its neighbour; a negative value means "nothing to exclude" for that query. The exclusion is exact for
every search (the approximate one asks for k + 1 and drops the own row). ``changed`` (LongTensor of rows,
or None: "any row may have changed") matters only to a ``stateful`` search; the others ignore it. A
stateful search is bound to one key matrix (one memory bank): ``fresh()`` gives another with the same
settings. No gradient flows through a search: it only chooses indices.

Example::

    search = make_search("exact", chunk_size=65536)
    scores, indices = search.topk(features, bank.bank, k=100, exclude=batch_indices)
    negatives = bank.get(indices)  # (B, 100, dim)

    kept = make_search("ivf", nprobe=32)              # one per bank
    scores, indices = kept.topk(features, bank.bank, k=100, exclude=batch_indices, changed=bank.take_changed())
"""

from __future__ import annotations

import json
import math
import os
from abc import ABC, abstractmethod
from pathlib import Path

import numpy as np
import torch
from torch import Tensor
from torch.nn import functional as F

from contrastext.errors import UnknownNameError
from contrastext.runtime.registry import Registry


class NearestNeighbourSearch(ABC):
    """Cosine top-K over the rows of ``keys`` for each row of ``queries``."""

    #: True when the search keeps state about ``keys`` between calls (then one instance per key matrix).
    stateful: bool = False

    @abstractmethod
    def topk(
        self, queries: Tensor, keys: Tensor, k: int, exclude: Tensor | None = None, changed: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        """Return ``(scores, indices)``, both (B, k), best first; ``indices`` index the rows of ``keys``.

        ``changed``: the rows of ``keys`` written since this search's previous call (None: unknown, any row);
        only a ``stateful`` search reads it.
        """

    def fresh(self) -> NearestNeighbourSearch:
        """A search with the same settings and no kept state (the search itself when it keeps none)."""
        return self


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
        self, queries: Tensor, keys: Tensor, k: int, exclude: Tensor | None = None, changed: Tensor | None = None
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
        self, queries: Tensor, keys: Tensor, k: int, exclude: Tensor | None = None, changed: Tensor | None = None
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
            scores, indices, _ = drop_excluded(scores, indices, exclude.cpu().long(), k)
        return scores.to(device), indices.to(device)


def drop_excluded(scores: Tensor, indices: Tensor, exclude: Tensor | None, k: int) -> tuple[Tensor, Tensor, Tensor]:
    """The first ``k`` results of each row that are real (index ≥ 0, faiss's "no result" is −1) and not the
    row's ``exclude`` entry, order kept; and a (B,) mask of the rows left with fewer than ``k`` such results."""
    valid = indices >= 0
    if exclude is not None:
        valid &= indices != exclude.unsqueeze(1)
    # Move the invalid entries to the end (stable, so the others keep their order), then keep k.
    order = torch.sort((~valid).to(torch.int8), dim=1, stable=True).indices[:, :k]
    short = valid.sum(dim=1) < k
    return scores.gather(1, order), indices.gather(1, order), short


STORAGES = ("float32", "float16", "int8")
ON_CUDA = ("exact", "index")


def default_nlist(rows: int) -> int:
    """Inverted lists for a bank of ``rows``: 4·√N (the low end of faiss's 4·√N … 16·√N guideline), at most
    N / 39 (k-means wants ≥ 39 training points per list) and at least 1."""
    return max(1, min(round(4 * math.sqrt(rows)), rows // 39))


def default_nprobe(nlist: int) -> int:
    """Lists scanned per query: 2048 / √nlist, within [1, nlist] (64 at SST-2's 67,349 rows, 32 at 1M).

    With nlist = 4·√N a list holds √N / 4 rows, so the rows scanned per query grow as N^¼ (4,200 at 67k,
    8,100 at 1M): neighbourhoods are denser in a larger bank, and on all-MiniLM-L6-v2 features of SST-2
    (and 1M jittered copies of them) this kept recall@100 ≥ 0.9 against the exact search at both sizes.
    """
    return max(1, min(nlist, round(2048 / math.sqrt(nlist))))


class IVFSearch(NearestNeighbourSearch):
    """Approximate cosine top-K from a faiss IVF index kept across calls and updated in place as the bank moves.

    The index (``IndexIVFScalarQuantizer`` with ``storage="float16"``, the default, or ``"int8"``;
    ``IndexIVFFlat`` with ``"float32"``; inner product on L2-normalised rows, i.e. cosine, and k-means with
    unit-norm centroids) holds row i of ``keys`` under id i. At each call:

    1. *update*: the rows named by ``changed`` (``MemoryBank.take_changed()``: those the momentum update wrote
       since the previous call) are re-normalised and replaced in place (``update_vectors``: a hash-table
       direct map finds each row's list, so the cost is O(changed rows), not a pass over the bank);
    2. *retrain* when the lists no longer fit the rows: once ``retrain_after`` × N distinct rows have been
       rewritten since the last training (default the whole bank: once an epoch), or earlier (after at least
       a tenth of that) when the lists' imbalance factor (faiss ``invlists.imbalance_factor()``, 1 for equal
       lists) has grown past ``rebalance_at`` × its value right after the last training: a bank that starts
       as N(0, I) noise and fills with features that all fall into a few lists. A training runs k-means
       (``kmeans_iterations``, on ``train_points_per_list`` × nlist rows drawn with ``seed``) and re-adds
       every row: O(N · nlist), amortised over the steps between two trainings;
    3. *search* ``nprobe`` of the ``nlist`` lists for k + 1 neighbours, then drop each query's own row
       (exact: it is never returned) and keep k. A query left with fewer than k results (its probed lists
       hold too few rows) is answered by ``ExactSearch`` instead.

    ``changed=None`` (unknown), another key matrix (its storage or shape differs from the last call's) or
    no index yet: the index is trained and filled from scratch. Scores are the index's inner products:
    exact cosines of the current rows with ``float32`` storage, within ~1e-3 with ``float16`` (the rows
    are stored at half precision; near-ties may then swap places).

    Defaults: ``nlist`` = 4·√N (``default_nlist``: 1,038 lists at SST-2's 67,349 rows, 4,000 at 1M),
    ``nprobe`` = 2048 / √nlist (``default_nprobe``: 64 at 67k rows, 32 at 1M), ``float16`` storage.
    Scanning an IVF list is bound by memory traffic, not by arithmetic: half-precision rows scan 2–3×
    faster than ``float32`` ones at the same recall. In a first measurement on all-MiniLM-L6-v2 features
    of SST-2 these defaults gave recall@100 of 0.90–0.92 for v (the mean word embedding, the harder bank)
    and 0.96 for u (the ``[CLS]`` vector) at 67,349 rows, and 0.94 for v on 1M jittered copies, against
    ``ExactSearch``; ``bench/reclaim_overhead.py`` measures it together with the overhead, and
    ``tests/negatives/test_search.py`` floors it on a synthetic bank. Raise ``nprobe`` for recall, lower it
    for speed.

    Where it does not apply it falls back to ``ExactSearch``: banks of fewer than ``exact_below`` rows
    (a matrix product is as fast there), and keys on a CUDA device unless ``on_cuda="index"`` (the exact
    search is then one matrix product on the GPU; faiss's GPU indexes cannot remove or update rows, so
    they cannot be kept, and ``on_cuda="index"`` keeps this CPU index, copying queries and changed rows).

    ``builds`` (k-means trainings), ``updated_rows`` and ``exact_fallbacks`` count what happened (for tests
    and the benchmark). The kept index is not copied by ``copy``/``pickle``: a copy rebuilds it. To reuse a built
    index in another process (a large bank's k-means is minutes), :meth:`save_index` writes it with faiss and
    :meth:`load_index` adopts it for the same keys: the next call updates it in place instead of training anew.
    """

    stateful = True

    def __init__(
        self,
        nlist: int | None = None,
        nprobe: int | None = None,
        storage: str = "float16",
        retrain_after: float = 1.0,
        rebalance_at: float = 2.0,
        exact_below: int = 10_000,
        train_points_per_list: int = 40,
        kmeans_iterations: int = 10,
        seed: int = 0,
        on_cuda: str = "exact",
    ):
        if nlist is not None and nlist < 1:
            raise ValueError(f"IVFSearch nlist must be >= 1, got {nlist}")
        if nprobe is not None and nprobe < 1:
            raise ValueError(f"IVFSearch nprobe must be >= 1, got {nprobe}")
        if storage not in STORAGES:
            raise UnknownNameError(f"unknown IVFSearch storage {storage!r}: choose one of {', '.join(STORAGES)}")
        if on_cuda not in ON_CUDA:
            raise UnknownNameError(f"unknown IVFSearch on_cuda {on_cuda!r}: choose one of {', '.join(ON_CUDA)}")
        if not 0.0 < retrain_after <= 1.0:
            raise ValueError(f"IVFSearch retrain_after must be in (0, 1], got {retrain_after}")
        if rebalance_at <= 1.0:
            raise ValueError(f"IVFSearch rebalance_at must be > 1, got {rebalance_at}")
        if train_points_per_list < 1 or kmeans_iterations < 1 or exact_below < 0:
            raise ValueError(
                "IVFSearch needs train_points_per_list >= 1, kmeans_iterations >= 1 and exact_below >= 0, got "
                f"{train_points_per_list}, {kmeans_iterations}, {exact_below}"
            )
        self.options = dict(
            nlist=nlist, nprobe=nprobe, storage=storage, retrain_after=retrain_after, rebalance_at=rebalance_at,
            exact_below=exact_below, train_points_per_list=train_points_per_list,
            kmeans_iterations=kmeans_iterations, seed=seed, on_cuda=on_cuda,
        )
        self.nlist, self.nprobe, self.storage, self.on_cuda = nlist, nprobe, storage, on_cuda
        self.retrain_after, self.rebalance_at, self.exact_below = retrain_after, rebalance_at, exact_below
        self.train_points_per_list, self.kmeans_iterations, self.seed = train_points_per_list, kmeans_iterations, seed
        self.exact = ExactSearch()
        self.builds = self.updated_rows = self.exact_fallbacks = 0
        self._drop_index()

    def fresh(self) -> IVFSearch:
        return IVFSearch(**self.options)

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state.update(_index=None, _identity=None, _touched=None, _touched_rows=0, _built_imbalance=1.0)
        return state

    def _drop_index(self) -> None:
        self._index = None
        self._identity: tuple | None = None
        self._touched: np.ndarray | None = None  # rows rewritten since the last training
        self._touched_rows = 0
        self._built_imbalance = 1.0

    @property
    def index(self):
        """The kept faiss index (None before the first call, or while the exact fallback applies)."""
        return self._index

    @torch.no_grad()
    def topk(
        self, queries: Tensor, keys: Tensor, k: int, exclude: Tensor | None = None, changed: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        check_search_inputs(queries, keys, k, exclude)
        if keys.size(0) < max(self.exact_below, 1) or (keys.is_cuda and self.on_cuda == "exact"):
            self._drop_index()  # not kept up to date meanwhile: rebuilt if the index path applies again
            return self.exact.topk(queries, keys, k, exclude)
        self._sync(keys, changed)
        query_array = F.normalize(queries.detach().float(), dim=1).cpu().numpy()
        asked = min(k + (1 if exclude is not None else 0), keys.size(0))
        scores, indices = self._index.search(query_array, asked)
        scores, indices = torch.from_numpy(scores), torch.from_numpy(indices).long()
        own = exclude.detach().cpu().long() if exclude is not None else None
        scores, indices, short = drop_excluded(scores, indices, own, k)
        if bool(short.any()):
            rows = torch.nonzero(short).squeeze(1)
            on_device = rows.to(queries.device)
            exact_scores, exact_indices = self.exact.topk(
                queries[on_device], keys, k, None if exclude is None else exclude[rows.to(exclude.device)]
            )
            scores[rows] = exact_scores.cpu().to(scores.dtype)
            indices[rows] = exact_indices.cpu()
            self.exact_fallbacks += rows.numel()
        return scores.to(queries.device), indices.to(queries.device)

    def _sync(self, keys: Tensor, changed: Tensor | None) -> None:
        identity = (keys.data_ptr(), keys.device, keys.dtype, tuple(keys.shape))
        if self._index is None or identity != self._identity or changed is None:
            self._build(keys)
            return
        if changed.numel():
            rows = changed.detach().cpu().long().unique()
            if int(rows[0]) < 0 or int(rows[-1]) >= keys.size(0):
                raise IndexError(f"IVFSearch changed rows must be in [0, {keys.size(0)}), got {rows.tolist()[:5]}…")
            vectors = F.normalize(keys.index_select(0, rows.to(keys.device)).detach().float(), dim=1).cpu().numpy()
            ids = rows.numpy()
            self._index.update_vectors(ids, np.ascontiguousarray(vectors))
            self.updated_rows += ids.size
            fresh = ~self._touched[ids]
            self._touched_rows += int(fresh.sum())
            self._touched[ids] = True
        due = self.retrain_after * keys.size(0)
        if self._touched_rows >= due or (
            self._touched_rows >= 0.1 * due and self._imbalance() > self.rebalance_at * self._built_imbalance
        ):
            self._build(keys)

    def save_index(self, path: str | os.PathLike) -> None:
        """Write the kept index (``faiss.write_index``) and, beside it, the rows it was built from as a check:
        their count, width and a checksum (``<path>.json``)."""
        import faiss

        if self._index is None:
            raise RuntimeError("IVFSearch has no kept index to save: search once first (or the bank is below "
                               f"exact_below = {self.exact_below} rows and the exact search applies)")
        path = Path(path)
        faiss.write_index(self._index, str(path))
        shape = self._identity[3]
        meta = {"rows": shape[0], "dim": shape[1], "built_imbalance": self._built_imbalance,
                "options": self.options}
        path.with_name(path.name + ".json").write_text(json.dumps(meta), encoding="utf-8")

    def load_index(self, path: str | os.PathLike, keys: Tensor) -> None:
        """Adopt the index :meth:`save_index` wrote, for ``keys`` (the same rows it was built from: the same
        count and width, checked; the rows themselves are the caller's to match). The next call with these
        ``keys`` and a ``changed`` tensor updates it in place, with no training."""
        import faiss

        path = Path(path)
        meta = json.loads(path.with_name(path.name + ".json").read_text(encoding="utf-8"))
        if (meta["rows"], meta["dim"]) != tuple(keys.shape):
            raise ValueError(f"{path}: the index holds {meta['rows']} rows of width {meta['dim']}, the keys are "
                             f"{tuple(keys.shape)}")
        index = faiss.read_index(str(path))
        index.set_direct_map_type(faiss.DirectMap.Hashtable)
        index.nprobe = min(self.nprobe or default_nprobe(index.nlist), index.nlist)
        self._index = index
        self._identity = (keys.data_ptr(), keys.device, keys.dtype, tuple(keys.shape))
        self._touched = np.zeros(keys.size(0), dtype=bool)
        self._touched_rows = 0
        self._built_imbalance = float(meta["built_imbalance"])

    def _imbalance(self) -> float:
        return float(self._index.invlists.imbalance_factor())

    def _build(self, keys: Tensor) -> None:
        """Train the lists (k-means on a seeded sample of the current rows) and add every row."""
        import faiss

        rows, dim = keys.shape
        nlist = min(self.nlist or default_nlist(rows), rows)
        quantizer = faiss.IndexFlatIP(dim)
        if self.storage == "float32":
            index = faiss.IndexIVFFlat(quantizer, dim, nlist, faiss.METRIC_INNER_PRODUCT)
        else:
            kind = faiss.ScalarQuantizer.QT_fp16 if self.storage == "float16" else faiss.ScalarQuantizer.QT_8bit
            index = faiss.IndexIVFScalarQuantizer(quantizer, dim, nlist, kind, faiss.METRIC_INNER_PRODUCT)
        index.cp.niter = self.kmeans_iterations
        index.cp.spherical = True  # unit-norm centroids: cosine lists, and no long-centroid lists that take all
        index.cp.seed = self.seed
        index.cp.max_points_per_centroid = self.train_points_per_list
        index.cp.min_points_per_centroid = min(self.train_points_per_list, 39)
        generator = torch.Generator().manual_seed(self.seed)
        sample_size = min(rows, self.train_points_per_list * nlist)
        sample = torch.randperm(rows, generator=generator)[:sample_size].sort().values
        index.train(self._normalised(keys, sample.to(keys.device)))
        index.set_direct_map_type(faiss.DirectMap.Hashtable)
        chunk = 65536
        for start in range(0, rows, chunk):
            stop = min(start + chunk, rows)
            index.add_with_ids(self._normalised(keys[start:stop]), np.arange(start, stop, dtype=np.int64))
        index.nprobe = min(self.nprobe or default_nprobe(nlist), nlist)
        self._index = index
        self._identity = (keys.data_ptr(), keys.device, keys.dtype, tuple(keys.shape))
        self._touched = np.zeros(rows, dtype=bool)
        self._touched_rows = 0
        self._built_imbalance = max(self._imbalance(), 1.0)
        self.builds += 1

    @staticmethod
    def _normalised(keys: Tensor, rows: Tensor | None = None) -> np.ndarray:
        chosen = keys if rows is None else keys.index_select(0, rows)
        return np.ascontiguousarray(F.normalize(chosen.detach().float(), dim=1).cpu().numpy())


SEARCHES: Registry[type[NearestNeighbourSearch]] = Registry(
    "search", {"exact": ExactSearch, "faiss": FaissSearch, "ivf": IVFSearch}
)
"""The searches by name (a :class:`~contrastext.runtime.registry.Registry`): a new search is one
``NearestNeighbourSearch`` subclass above and its entry here; ``SEARCHES.check(name, key)`` validates a config
value naming a search."""


def make_search(name: str, **kwargs) -> NearestNeighbourSearch:
    """Build a search by name: ``"exact"`` (``ExactSearch(chunk_size=...)``), ``"faiss"`` or ``"ivf"``
    (``IVFSearch(nlist=..., nprobe=..., ...)``); an unknown name is an UnknownNameError listing the known ones, an
    unknown or invalid argument a ConfigError naming the search and the key
    (:meth:`~contrastext.runtime.registry.Registry.make`)."""
    return SEARCHES.make(name, **kwargs)
