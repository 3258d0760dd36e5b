"""Exact (chunked) and faiss cosine top-K agree with a brute-force reference, with and without exclusion."""

import pytest
import torch
import torch.nn.functional as F

from contrastext.errors import UnknownNameError
from contrastext.negatives.search import ExactSearch, FaissSearch, make_search


def brute_force(queries, keys, k, exclude=None):
    scores = F.normalize(queries, dim=1) @ F.normalize(keys, dim=1).T
    if exclude is not None:
        scores[torch.arange(len(queries)), exclude] = float("-inf")
    return scores.topk(k, dim=1)


@pytest.fixture
def data():
    generator = torch.Generator().manual_seed(0)
    keys = torch.randn(257, 16, generator=generator) * 3  # not normalised: the search must normalise
    exclude = torch.tensor([0, 5, 100, 256, 31, 64])
    queries = keys[exclude] + 0.05 * torch.randn(6, 16, generator=generator)
    return queries, keys, exclude


@pytest.mark.parametrize("chunk_size", [1, 7, 64, 10_000])
def test_exact_chunked_matches_brute_force(data, chunk_size):
    queries, keys, exclude = data
    for excluded in (None, exclude):
        expected_scores, expected_indices = brute_force(queries, keys, 10, excluded)
        scores, indices = ExactSearch(chunk_size=chunk_size).topk(queries, keys, 10, exclude=excluded)
        assert torch.equal(indices, expected_indices)
        assert torch.allclose(scores, expected_scores, atol=1e-6)


def test_exclusion_drops_own_row(data):
    queries, keys, exclude = data
    _, with_self = ExactSearch().topk(queries, keys, 3)
    assert torch.equal(with_self[:, 0], exclude)  # each query is nearest to its own noisy copy
    for search in (ExactSearch(chunk_size=50), FaissSearch()):
        _, indices = search.topk(queries, keys, 3, exclude=exclude)
        assert not (indices == exclude.unsqueeze(1)).any()


def test_faiss_matches_exact(data):
    queries, keys, exclude = data
    for excluded in (None, exclude):
        exact_scores, exact_indices = ExactSearch(chunk_size=32).topk(queries, keys, 8, exclude=excluded)
        faiss_scores, faiss_indices = FaissSearch().topk(queries, keys, 8, exclude=excluded)
        assert torch.equal(faiss_indices, exact_indices)
        assert torch.allclose(faiss_scores, exact_scores, atol=1e-5)


def test_negative_exclude_means_nothing_excluded(data):
    queries, keys, _ = data
    none = torch.full((6,), -1)
    for search in (ExactSearch(chunk_size=40), FaissSearch()):
        assert torch.equal(search.topk(queries, keys, 4, exclude=none)[1], search.topk(queries, keys, 4)[1])


def test_k_larger_than_bank_is_a_clear_error(data):
    queries, keys, exclude = data
    for search in (ExactSearch(), FaissSearch()):
        search.topk(queries, keys, 257)
        with pytest.raises(ValueError, match="k=258.*257 rows"):
            search.topk(queries, keys, 258)
        with pytest.raises(ValueError, match="own row: k must be between 1 and 256"):
            search.topk(queries, keys, 257, exclude=exclude)


def test_shape_errors(data):
    queries, keys, _ = data
    with pytest.raises(ValueError, match="same width"):
        ExactSearch().topk(queries[:, :5], keys, 2)
    with pytest.raises(ValueError, match=r"exclude of shape \(6,\)"):
        ExactSearch().topk(queries, keys, 2, exclude=torch.tensor([1, 2]))


def test_make_search_by_name():
    assert isinstance(make_search("exact", chunk_size=3), ExactSearch)
    assert isinstance(make_search("faiss"), FaissSearch)
    with pytest.raises(UnknownNameError, match="exact, faiss"):
        make_search("annoy")
