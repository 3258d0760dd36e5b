"""Information retrieval metrics over queries, a corpus and relevance judgements, as sentence-transformers scores them.

The definitions are those of sentence-transformers' ``InformationRetrievalEvaluator`` (v6), reproduced exactly:

- only queries with at least one relevant document are scored (ST keeps a query when ``relevant_docs[qid]`` is a
  non-empty set); relevance is binary: a document is relevant or not (ST takes a set of ids, so grades are not
  used; ``data/readers/beir.py`` makes every qrels row with a score > 0 relevant, as BEIR's evaluation does);
- every query searches the whole corpus by ``cosine`` (``normalize(q) · normalize(d)``) and ``dot`` (``q · d``),
  float32; the hits are ordered by descending score, ties by ascending corpus id (string order); a corpus
  document whose text equals the query is a candidate like any other (ST does not drop it);
- for the top ``k`` hits of a query with relevant set R:
  ``accuracy@k`` = 1 if a relevant document is among them; ``precision@k`` = relevant hits / k;
  ``recall@k`` = relevant hits / |R|; ``mrr@k`` = 1 / rank of the first relevant hit (0 if none);
  ``ndcg@k`` = Σ_{i<k} rel_i / log2(i + 2) divided by the same sum over min(|R|, k) ones;
  ``map@k`` = Σ over relevant hits at rank r of (relevant hits up to r) / r, divided by min(k, |R|);
  each averaged over the scored queries (fractions, not ×100, as ST returns them);
- keys as ST's without its evaluator-name prefix: ``cosine_ndcg@10``, ``dot_recall@100`` …, for every k in
  ``KS`` = (1, 3, 5, 10, 100) and every metric.

The corpus is searched in chunks of ``corpus_chunk_size`` rows and the queries in chunks of
``query_chunk_size``: each chunk's top max(k) per query (boundary ties settled by corpus id, as ST does) is
merged into a running top list, so memory stays O(query_chunk · (corpus_chunk + max k)) however large the corpus.

Example::

    >>> scores = information_retrieval_metrics(query_embeddings, corpus_embeddings, ["q1", "q2"],
    ...                                        ["d1", "d2", "d3"], {"q1": {"d1"}, "q2": {"d2", "d3"}})
    >>> scores["cosine_ndcg@10"]
    1.0
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor
from torch.nn import functional as F

from contrastext.data.readers.beir import BeirData
from contrastext.errors import EmptyDataError
from contrastext.evaluation.ir_keys import HEADLINE, KS, METRICS, SCORE_FUNCTIONS, metric_keys

__all__ = [
    "HEADLINE", "KS", "METRICS", "SCORE_FUNCTIONS", "Hits", "evaluate_information_retrieval", "evaluate_retrieval_set",
    "id_ranks", "information_retrieval_metrics", "metric_keys", "metrics_from_hits", "search_top_k",
]


@dataclass(frozen=True)
class Hits:
    """The top ``k`` corpus rows of each query: ``scores`` and ``rows`` (Q, k), best first (ties: corpus id)."""

    scores: Tensor
    rows: Tensor


def _scores(name: str, queries: Tensor, corpus: Tensor) -> Tensor:
    if name == "cosine":
        return F.normalize(queries, p=2, dim=-1) @ F.normalize(corpus, p=2, dim=-1).T
    if name == "dot":
        return queries @ corpus.T
    raise ValueError(f"unknown score function {name!r}: choose from {', '.join(SCORE_FUNCTIONS)}")


def id_ranks(corpus_ids: Sequence[str]) -> Tensor:
    """Position of each corpus row in the ascending order of the ids (the tie-break of equal scores)."""
    order = sorted(range(len(corpus_ids)), key=corpus_ids.__getitem__)
    ranks = torch.empty(len(corpus_ids), dtype=torch.long)
    ranks[torch.tensor(order, dtype=torch.long)] = torch.arange(len(corpus_ids))
    return ranks


def _chunk_top(scores: Tensor, ranks: Tensor, k: int, total: int) -> tuple[Tensor, Tensor]:
    """The top ``k`` columns of each row of ``scores`` by (−score, rank): (values, column positions).

    ``ranks`` are the chunk's columns' id ranks, all below ``total`` (the corpus size)."""
    if k < scores.size(1):  # one more than asked: equal scores straddle the cut iff the (k+1)-th equals the k-th
        values, positions = scores.topk(k + 1, dim=1, largest=True, sorted=True)
        tied = values[:, k] >= values[:, k - 1]
        values, positions = values[:, :k].contiguous(), positions[:, :k].contiguous()
    else:
        values, positions = scores.topk(k, dim=1, largest=True, sorted=True)
        tied = torch.zeros(scores.size(0), dtype=torch.bool)
    thresholds = values[:, k - 1 :]
    if bool(tied.any()):
        # Rows where equal scores straddle the cut: every score above it first, then the ties of lowest rank
        # (ST's integer key, so the result does not depend on where the chunks end).
        rows = torch.nonzero(tied).squeeze(1)
        sub, cut = scores[rows], thresholds[rows]
        keys = torch.where(sub > cut, ranks, 2 * total)
        keys = torch.where(sub == cut, ranks + total, keys)
        chosen = keys.topk(k, dim=1, largest=False).indices
        values[rows] = sub.gather(1, chosen)
        positions[rows] = chosen
    return values, positions


def _sort_hits(scores: Tensor, ranks: Tensor) -> tuple[Tensor, Tensor]:
    """Order each row by descending score, then ascending id rank; returns the permutation's scores and ranks."""
    by_rank = ranks.argsort(dim=1, stable=True)
    scores, ranks = scores.gather(1, by_rank), ranks.gather(1, by_rank)
    by_score = scores.argsort(dim=1, descending=True, stable=True)
    return scores.gather(1, by_score), ranks.gather(1, by_score)


@torch.no_grad()
def search_top_k(
    queries: Tensor,
    corpus: Tensor,
    corpus_ids: Sequence[str],
    k: int,
    score_function: str = "cosine",
    corpus_chunk_size: int = 50_000,
    query_chunk_size: int = 1024,
    progress: Callable[[int], None] | None = None,
    ranks: Tensor | None = None,
) -> Hits:
    """Each query's top ``min(k, len(corpus))`` corpus rows by ``score_function``, ordered as ST orders them.

    ``corpus`` may be a tensor or anything sliceable into rows (a numpy memmap): only one chunk is converted
    to a float32 tensor at a time. ``progress(n)`` is called with the rows of each corpus chunk searched;
    ``ranks``: :func:`id_ranks` of ``corpus_ids`` when already computed."""
    n_corpus = len(corpus_ids)
    if n_corpus == 0 or queries.size(0) == 0:
        raise EmptyDataError("nothing to search: the queries or the corpus are empty")
    k = min(k, n_corpus)
    ranks = id_ranks(corpus_ids) if ranks is None else ranks
    queries = queries.float()
    best_scores = queries.new_empty(queries.size(0), 0)
    best_ranks = torch.empty(queries.size(0), 0, dtype=torch.long)
    for start in range(0, n_corpus, corpus_chunk_size):
        stop = min(start + corpus_chunk_size, n_corpus)
        chunk = corpus[start:stop] if isinstance(corpus, Tensor) else torch.from_numpy(np.array(corpus[start:stop]))
        chunk = chunk.float()
        chunk_ranks = ranks[start:stop]
        top = min(k, stop - start)
        merged_scores, merged_ranks = [], []
        for q_start in range(0, queries.size(0), query_chunk_size):
            q_stop = min(q_start + query_chunk_size, queries.size(0))
            scores = _scores(score_function, queries[q_start:q_stop], chunk)
            values, positions = _chunk_top(scores, chunk_ranks, top, n_corpus)
            both_scores = torch.cat([best_scores[q_start:q_stop], values], dim=1)
            both_ranks = torch.cat([best_ranks[q_start:q_stop], chunk_ranks[positions]], dim=1)
            sorted_scores, sorted_ranks = _sort_hits(both_scores, both_ranks)
            merged_scores.append(sorted_scores[:, :k])
            merged_ranks.append(sorted_ranks[:, :k])
        best_scores, best_ranks = torch.cat(merged_scores), torch.cat(merged_ranks)
        if progress is not None:
            progress(stop - start)
    rows = torch.empty(n_corpus, dtype=torch.long)
    rows[ranks] = torch.arange(n_corpus)
    return Hits(best_scores, rows[best_ranks])


DISCOUNTS: list[float] = []


def _dcg(relevances: Sequence[int], k: int) -> float:
    """Σ relᵢ / log2(i + 2) over the first k (ST's ``compute_dcg_at_k``, the same float operations)."""
    while len(DISCOUNTS) < min(len(relevances), k):
        DISCOUNTS.append(float(np.log2(len(DISCOUNTS) + 2)))
    return sum(relevances[i] / DISCOUNTS[i] for i in range(min(len(relevances), k)))


def metrics_from_hits(
    hit_ids: Sequence[Sequence[str]], relevant: Sequence[set[str]], ks: Sequence[int] = KS
) -> dict[str, float]:
    """``{"ndcg@10": ..., ...}`` from each query's ranked corpus ids and relevant set, ST's formulas (fractions)."""
    totals: dict[str, list[float]] = {f"{metric}@{k}": [] for metric in METRICS for k in ks}
    for hits, wanted in zip(hit_ids, relevant, strict=True):
        flags = [1 if doc in wanted else 0 for doc in hits]
        for k in ks:
            top = flags[:k]
            found = sum(top)
            totals[f"accuracy@{k}"].append(1.0 if found else 0.0)
            totals[f"precision@{k}"].append(found / k)
            totals[f"recall@{k}"].append(found / len(wanted))
            first = next((rank for rank, flag in enumerate(top) if flag), None)
            totals[f"mrr@{k}"].append(0.0 if first is None else 1.0 / (first + 1))
            totals[f"ndcg@{k}"].append(_dcg(top, k) / _dcg([1] * len(wanted), k))
            correct, precisions = 0, 0.0
            for rank, flag in enumerate(top):
                if flag:
                    correct += 1
                    precisions += correct / (rank + 1)
            totals[f"map@{k}"].append(precisions / min(k, len(wanted)))
    # ST divides hit and reciprocal-rank sums by the query count and takes np.mean of the others.
    return {key: float(sum(values) / len(values) if key.startswith(("accuracy", "mrr")) else np.mean(values))
            for key, values in totals.items()}


def information_retrieval_metrics(
    query_embeddings,
    corpus_embeddings,
    query_ids: Sequence[str],
    corpus_ids: Sequence[str],
    relevant_docs: Mapping[str, set[str]],
    *,
    score_functions: Sequence[str] = SCORE_FUNCTIONS,
    ks: Sequence[int] = KS,
    corpus_chunk_size: int = 50_000,
    query_chunk_size: int = 1024,
    progress: Callable[[int], None] | None = None,
) -> dict[str, float]:
    """ST's IR metrics for embedded queries (row i is ``query_ids[i]``) against an embedded corpus.

    Queries without a relevant document are left out, as ST leaves them out; ``EmptyDataError`` when none is
    left. Returns ``{"cosine_accuracy@1": ..., "dot_map@100": ...}`` (fractions) plus nothing else."""
    queries = query_embeddings if isinstance(query_embeddings, Tensor) else torch.from_numpy(np.array(query_embeddings))
    if queries.dim() != 2 or queries.size(0) != len(query_ids):
        raise ValueError(f"expected {len(query_ids)} query embeddings (Q, d), got shape {tuple(queries.shape)}")
    if len(corpus_embeddings) != len(corpus_ids):
        raise ValueError(f"expected {len(corpus_ids)} corpus embeddings, got {len(corpus_embeddings)}")
    kept = [row for row, qid in enumerate(query_ids) if relevant_docs.get(qid)]
    if not kept:
        raise EmptyDataError("no query has a relevant document: nothing to evaluate")
    queries = queries[torch.tensor(kept, dtype=torch.long)]
    relevant = [set(relevant_docs[query_ids[row]]) for row in kept]
    results: dict[str, float] = {}
    ranks = id_ranks(corpus_ids)
    for name in score_functions:
        hits = search_top_k(queries, corpus_embeddings, corpus_ids, max(ks), name, corpus_chunk_size,
                            query_chunk_size, progress, ranks)
        ranked = [[corpus_ids[row] for row in query_rows] for query_rows in hits.rows.tolist()]
        for key, value in metrics_from_hits(ranked, relevant, ks).items():
            results[f"{name}_{key}"] = value
    return results


def evaluate_information_retrieval(
    encode: Callable[..., np.ndarray],
    queries: Mapping[str, str],
    corpus: Mapping[str, str],
    relevant_docs: Mapping[str, set[str]],
    *,
    batch_size: int = 64,
    score_functions: Sequence[str] = SCORE_FUNCTIONS,
    ks: Sequence[int] = KS,
    corpus_chunk_size: int = 50_000,
    query_chunk_size: int = 1024,
) -> dict[str, float]:
    """Encode the scored queries and the corpus once with ``encode(texts, batch_size=...)`` and score them.

    ``queries`` / ``corpus`` map ids to texts (a ``BeirData``'s fields); see :func:`information_retrieval_metrics`."""
    query_ids = [qid for qid in queries if relevant_docs.get(qid)]
    if not query_ids:
        raise EmptyDataError("no query has a relevant document: nothing to evaluate")
    corpus_ids = list(corpus)
    query_embeddings = np.asarray(encode([queries[qid] for qid in query_ids], batch_size=batch_size))
    corpus_embeddings = np.asarray(encode([corpus[cid] for cid in corpus_ids], batch_size=batch_size))
    return information_retrieval_metrics(
        query_embeddings, corpus_embeddings, query_ids, corpus_ids, relevant_docs, score_functions=score_functions,
        ks=ks, corpus_chunk_size=corpus_chunk_size, query_chunk_size=query_chunk_size,
    )


def evaluate_retrieval_set(
    encode: Callable[..., np.ndarray],
    data: BeirData,
    *,
    batch_size: int = 64,
    limit: int | None = None,
    corpus_chunk_size: int = 50_000,
    query_chunk_size: int = 1024,
) -> dict[str, float | int]:
    """An ``ir:`` spec's numbers: :func:`evaluate_information_retrieval` on ``data`` (a ``BeirData``), ×100 like
    every task's metrics, plus ``n`` (the queries scored: those with a relevant document) and ``corpus`` (the
    documents searched). ``limit``: only the first ``limit`` of those queries (file order), the whole corpus
    searched (a smoke-test aid)."""
    data = data.first_queries(limit)
    scored = len(data.judged_queries())
    if not scored:
        raise EmptyDataError(f"{_where(data)}: no query has a relevant document (a qrels score > 0)")
    scores = evaluate_information_retrieval(
        encode, data.queries, data.corpus, data.relevant_docs, batch_size=batch_size,
        corpus_chunk_size=corpus_chunk_size, query_chunk_size=query_chunk_size,
    )
    return {**{key: value * 100 for key, value in scores.items()}, "n": scored, "corpus": len(data.corpus)}


def _where(data: BeirData) -> str:
    return str(data.paths[2]) if data.paths else "the retrieval set"
