"""IR metrics equal sentence-transformers' InformationRetrievalEvaluator on the same data and embeddings."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from contrastext.errors import EmptyDataError
from contrastext.evaluation.information_retrieval import (
    KS,
    evaluate_information_retrieval,
    information_retrieval_metrics,
    metric_keys,
    search_top_k,
)

st_ir = pytest.importorskip("sentence_transformers.sentence_transformer.evaluation.information_retrieval")
st_similarity = pytest.importorskip("sentence_transformers.util.similarity")


class _CardData:
    def set_evaluation_metrics(self, *args, **kwargs) -> None:
        pass


class FixedModel:
    """What ST's evaluator calls on a model, answering from a table of precomputed embeddings."""

    def __init__(self, table: dict[str, torch.Tensor]):
        self.table = table
        self.model_card_data = _CardData()

    def _encode(self, texts, **kwargs):
        return torch.stack([self.table[text] for text in texts])

    encode_query = encode_document = _encode


def st_metrics(queries, corpus, relevant, table, chunk=50_000) -> dict[str, float]:
    evaluator = st_ir.InformationRetrievalEvaluator(
        queries, corpus, relevant, corpus_chunk_size=chunk, mrr_at_k=list(KS), ndcg_at_k=list(KS),
        accuracy_at_k=list(KS), precision_recall_at_k=list(KS), map_at_k=list(KS), write_csv=False,
        score_functions={"cosine": st_similarity.cos_sim, "dot": st_similarity.dot_score},
    )
    return evaluator(FixedModel(table))


def ours(queries, corpus, relevant, table, **kwargs) -> dict[str, float]:
    query_ids, corpus_ids = list(queries), list(corpus)
    query_embeddings = torch.stack([table[queries[q]] for q in query_ids])
    corpus_embeddings = torch.stack([table[corpus[c]] for c in corpus_ids])
    return information_retrieval_metrics(query_embeddings, corpus_embeddings, query_ids, corpus_ids, relevant, **kwargs)


def assert_same(mine: dict[str, float], theirs: dict[str, float]) -> None:
    assert set(mine) == set(theirs) == set(metric_keys())
    for key in theirs:
        assert mine[key] == pytest.approx(theirs[key], abs=1e-6), key


def random_set(seed: int, n_queries=40, n_corpus=300, dim=16, levels: int | None = None):
    generator = np.random.default_rng(seed)
    vectors = generator.normal(size=(n_queries + n_corpus, dim)).astype(np.float32)
    if levels is not None:  # few distinct values: many exact ties
        vectors = np.round(vectors.clip(-1, 1) * levels) / levels
    queries = {f"q{i}": f"query {i}" for i in range(n_queries)}
    corpus = {f"d{(i * 7919) % 1000}": f"doc {i}" for i in range(n_corpus)}  # ids out of string order
    corpus_ids = list(corpus)
    relevant = {}
    for i in range(n_queries - 3):  # the last three queries have no relevant document: left out, as in ST
        relevant[f"q{i}"] = set(generator.choice(corpus_ids, size=generator.integers(1, 5), replace=False).tolist())
    relevant["q39"] = set()
    texts = list(queries.values()) + list(corpus.values())
    table = {text: torch.from_numpy(vectors[i]) for i, text in enumerate(texts)}
    return queries, corpus, relevant, table


@pytest.mark.parametrize("seed", [0, 1])
def test_random_embeddings_give_st_numbers(seed):
    queries, corpus, relevant, table = random_set(seed)
    assert_same(ours(queries, corpus, relevant, table), st_metrics(queries, corpus, relevant, table))


def test_chunked_search_gives_the_same_numbers():
    queries, corpus, relevant, table = random_set(2)
    theirs = st_metrics(queries, corpus, relevant, table)
    assert_same(ours(queries, corpus, relevant, table, corpus_chunk_size=37, query_chunk_size=5), theirs)


def test_ties_are_broken_by_corpus_id_as_st_does():
    queries, corpus, relevant, table = random_set(3, dim=4, levels=1)  # values in {-1, 0, 1}: ties everywhere
    theirs = st_metrics(queries, corpus, relevant, table)
    assert_same(ours(queries, corpus, relevant, table), theirs)
    assert_same(ours(queries, corpus, relevant, table, corpus_chunk_size=29, query_chunk_size=7), theirs)


def test_search_orders_by_score_then_id():
    queries = torch.tensor([[1.0, 0.0]])
    corpus = torch.tensor([[1.0, 0.0], [2.0, 0.0], [0.0, 1.0], [1.0, 0.0]])
    hits = search_top_k(queries, corpus, ["b", "c", "z", "a"], k=3, corpus_chunk_size=2)
    assert hits.rows.tolist() == [[3, 0, 1]]  # cosine 1, 1, 1: ids a < b < c
    hits = search_top_k(queries, corpus, ["b", "c", "z", "a"], k=2, score_function="dot")
    assert hits.rows.tolist() == [[1, 3]]


def test_a_query_text_in_the_corpus_is_kept_with_a_real_model(minilm_path):
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(minilm_path, device="cpu")
    corpus_texts = ["A man is playing a guitar.", "A woman slices an onion.", "Children play in the park.",
                    "The stock market fell today.", "A chef is cooking pasta.", "Someone plays an instrument.",
                    "How do I learn Python?", "Kids are playing outside."]  # fmt: skip
    corpus = {f"c{i}": text for i, text in enumerate(corpus_texts)}
    queries = {"q0": "A man is playing a guitar.", "q1": "Someone is cutting vegetables.", "q2": "How do I learn Python?",
               "q3": "Children are playing."}  # fmt: skip
    # q0's text is c0 but its judged answer is c5; q2's text is c6, also its answer.
    relevant = {"q0": {"c5"}, "q1": {"c1", "c4"}, "q2": {"c6"}, "q3": {"c2", "c7"}}
    texts = list(dict.fromkeys(list(queries.values()) + corpus_texts))
    table = dict(zip(texts, model.encode(texts, convert_to_tensor=True), strict=True))
    theirs = st_metrics(queries, corpus, relevant, table)
    assert theirs["cosine_accuracy@1"] < 1.0  # c0 (the query's own text) ranks first for q0: kept, as ST keeps it
    assert_same(ours(queries, corpus, relevant, table), theirs)

    def encode(texts, batch_size=64):
        return model.encode(texts, batch_size=batch_size)

    assert_same(evaluate_information_retrieval(encode, queries, corpus, relevant), theirs)


def test_no_query_with_a_relevant_document_is_an_error():
    with pytest.raises(EmptyDataError):
        information_retrieval_metrics(np.ones((1, 2)), np.ones((1, 2)), ["q"], ["d"], {"q": set()})


def test_a_memmapped_corpus_is_read_chunk_by_chunk(tmp_path):
    queries, corpus, relevant, table = random_set(4)
    corpus_ids = list(corpus)
    stored = np.lib.format.open_memmap(tmp_path / "corpus.npy", mode="w+", dtype=np.float32,
                                       shape=(len(corpus_ids), 16))  # fmt: skip
    stored[:] = torch.stack([table[corpus[c]] for c in corpus_ids]).numpy()
    query_embeddings = torch.stack([table[queries[q]] for q in queries])
    mine = information_retrieval_metrics(query_embeddings, np.load(tmp_path / "corpus.npy", mmap_mode="r"),
                                         list(queries), corpus_ids, relevant, corpus_chunk_size=64)  # fmt: skip
    assert_same(mine, st_metrics(queries, corpus, relevant, table))
