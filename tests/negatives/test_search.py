"""Exact (chunked) and faiss cosine top-K agree with a brute-force reference, with and without exclusion."""

import pytest
import torch
import torch.nn.functional as F

from contrastext.errors import ConfigError, UnknownNameError
from contrastext.negatives.search import (
    SEARCHES,
    ExactSearch,
    FaissSearch,
    NearestNeighbourSearch,
    make_search,
)


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
    with pytest.raises(UnknownNameError) as error:
        make_search("annoy")
    assert all(name in str(error.value) for name in SEARCHES.names())
    with pytest.raises(ConfigError, match=r"search 'exact': unknown argument\(s\) nprobe; accepted: chunk_size"):
        make_search("exact", nprobe=4)


@pytest.mark.parametrize("name", SEARCHES.names())
def test_every_registered_search_builds_with_its_defaults(name):
    assert isinstance(make_search(name), NearestNeighbourSearch)


# ------------------------------------------------------------------------ IVFSearch: an index kept across calls

import copy  # noqa: E402
import pickle  # noqa: E402

from contrastext.negatives.bank import MemoryBank  # noqa: E402
from contrastext.negatives.search import IVFSearch, default_nlist  # noqa: E402


def clustered_bank(rows: int = 6000, dim: int = 32, clusters: int = 60, seed: int = 0) -> torch.Tensor:
    """Rows around ``clusters`` random centres (features have neighbourhoods; isotropic noise has none)."""
    generator = torch.Generator().manual_seed(seed)
    centres = 3 * torch.randn(clusters, dim, generator=generator)
    members = torch.randint(clusters, (rows,), generator=generator)
    return centres[members] + torch.randn(rows, dim, generator=generator)


def recall(approximate: torch.Tensor, exact: torch.Tensor) -> float:
    hits = sum(len(set(a) & set(b)) for a, b in zip(approximate.tolist(), exact.tolist(), strict=True))
    return hits / exact.numel()


def moved_rows(bank: MemoryBank, count: int, seed: int) -> torch.Tensor:
    """Momentum-update ``count`` random rows of ``bank`` towards fresh clustered features; returns the rows."""
    generator = torch.Generator().manual_seed(seed)
    rows = torch.randperm(bank.size, generator=generator)[:count]
    bank.update(rows, clustered_bank(count, bank.dim, seed=seed + 100))
    return rows


def assert_exact_top_k(scores, indices, queries, keys, k, exclude=None, atol=1e-5):
    """``indices`` are an exact top-k up to ties: position by position their true cosines equal the best k
    (float32 sums in another order may swap two rows whose cosines differ by ~1e-7), all distinct."""
    truth = F.normalize(queries, dim=1) @ F.normalize(keys, dim=1).T
    if exclude is not None:
        truth[torch.arange(len(queries)), exclude] = float("-inf")
    best = truth.topk(k, dim=1).values
    assert torch.allclose(truth.gather(1, indices), best, atol=atol)
    assert torch.allclose(scores, best, atol=atol)
    assert all(len(set(row)) == k for row in indices.tolist())


def filled_bank(rows: int = 6000, dim: int = 32, momentum: float = 0.5) -> MemoryBank:
    bank = MemoryBank(rows, dim, momentum=momentum, generator=torch.Generator().manual_seed(rows))
    bank.update(torch.arange(rows), clustered_bank(rows, dim))
    return bank


def test_exhaustive_ivf_equals_exact_across_in_place_updates():
    """nprobe = nlist scans every list: the kept index, updated only at the changed rows, must give exactly
    ExactSearch's neighbours (and cosine scores) after every momentum update."""
    bank = filled_bank()
    search = IVFSearch(nlist=40, nprobe=40, storage="float32", exact_below=0)
    for step in range(6):
        generator = torch.Generator().manual_seed(step)
        queries_at = torch.randint(bank.size, (16,), generator=generator)
        queries = bank.bank[queries_at] + 0.1 * torch.randn(16, 32, generator=generator)
        changed = bank.take_changed()
        scores, indices = search.topk(queries, bank.bank, 50, exclude=queries_at, changed=changed)
        assert_exact_top_k(scores, indices, queries, bank.bank, 50, exclude=queries_at)
        moved_rows(bank, 64, seed=step)
    assert search.builds == 1  # one training, then only in-place updates
    assert search.updated_rows == 5 * 64  # O(changed rows): exactly the rows the updates wrote


def test_recall_at_100_floor_with_default_options():
    bank = filled_bank(8000)
    search = IVFSearch(exact_below=0)
    exact = ExactSearch()
    generator = torch.Generator().manual_seed(5)
    for step in range(3):
        queries_at = torch.randint(bank.size, (32,), generator=generator)
        queries = bank.bank[queries_at] + 0.3 * torch.randn(32, 32, generator=generator)
        _, found = search.topk(queries, bank.bank, 100, exclude=queries_at, changed=bank.take_changed())
        _, truth = exact.topk(queries, bank.bank, 100, exclude=queries_at)
        assert recall(found, truth) >= 0.9, f"step {step}: recall@100 {recall(found, truth):.3f}"
        moved_rows(bank, 400, seed=10 + step)
    index = search.index
    assert index.nlist == default_nlist(8000) and index.nprobe < index.nlist  # not an exhaustive scan
    assert search.builds == 1


@pytest.mark.parametrize("storage", ["float32", "float16", "int8"])
def test_every_storage_keeps_recall(storage):
    bank = filled_bank(6000)
    queries_at = torch.arange(0, 6000, 200)
    queries = bank.bank[queries_at] + 0.3 * torch.randn(30, 32, generator=torch.Generator().manual_seed(1))
    _, found = IVFSearch(storage=storage, exact_below=0).topk(queries, bank.bank, 100, exclude=queries_at)
    _, truth = ExactSearch().topk(queries, bank.bank, 100, exclude=queries_at)
    assert recall(found, truth) >= 0.85


def test_ivf_exclusion_is_exact():
    """Each query is its own row: without exclusion it comes first, with exclusion it never comes back, and
    the k results are distinct real rows."""
    bank = filled_bank(3000)
    own = torch.tensor([0, 17, 999, 2999, 1500])
    queries = bank.bank[own].clone()
    search = IVFSearch(nlist=30, nprobe=4, exact_below=0)
    _, with_self = search.topk(queries, bank.bank, 10, changed=bank.take_changed())
    assert torch.equal(with_self[:, 0], own)
    _, indices = search.topk(queries, bank.bank, 10, exclude=own, changed=bank.take_changed())
    assert not (indices == own.unsqueeze(1)).any()
    assert all(len(set(row)) == 10 and min(row) >= 0 for row in indices.tolist())
    _, nothing_excluded = search.topk(queries, bank.bank, 10, exclude=torch.full((5,), -1), changed=bank.take_changed())
    assert torch.equal(nothing_excluded, with_self)


def test_too_few_probed_rows_fall_back_to_exact():
    """One probed list of ~20 rows cannot hold 100 neighbours: those queries get ExactSearch's answer."""
    bank = filled_bank(3000)
    own = torch.arange(0, 3000, 300)
    queries = bank.bank[own] + 0.1 * torch.randn(10, 32, generator=torch.Generator().manual_seed(2))
    search = IVFSearch(nlist=150, nprobe=1, exact_below=0, train_points_per_list=20)
    scores, indices = search.topk(queries, bank.bank, 100, exclude=own)
    expected_scores, expected_indices = ExactSearch().topk(queries, bank.bank, 100, exclude=own)
    _, raw = search.index.search(F.normalize(queries, dim=1).numpy(), 101)
    raw = torch.from_numpy(raw)
    short = ((raw >= 0) & (raw != own.unsqueeze(1))).sum(dim=1) < 100  # what the index alone could not fill
    assert short.any() and search.exact_fallbacks == int(short.sum())
    assert torch.equal(indices[short], expected_indices[short])
    assert torch.allclose(scores[short], expected_scores[short], atol=1e-5)
    assert (indices >= 0).all() and not (indices == own.unsqueeze(1)).any()
    assert all(len(set(row)) == 100 for row in indices.tolist())


def test_unknown_changes_other_keys_and_small_banks():
    bank = filled_bank(3000)
    queries = bank.bank[:4] + 0.1
    search = IVFSearch(nlist=20, nprobe=20, storage="float32", exact_below=0)
    search.topk(queries, bank.bank, 5, changed=bank.take_changed())
    assert search.builds == 1
    search.topk(queries, bank.bank, 5, changed=torch.empty(0, dtype=torch.long))
    assert search.builds == 1  # nothing changed: nothing to do
    search.topk(queries, bank.bank, 5)  # changed=None: any row may have changed, so the index is rebuilt
    assert search.builds == 2
    other = bank.bank.clone()  # another key matrix (another bank): rebuilt, never mixed up
    other[:100] = -other[:100]
    scores, indices = search.topk(queries, other, 5, changed=torch.empty(0, dtype=torch.long))
    assert search.builds == 3
    assert_exact_top_k(scores, indices, queries, other, 5)
    small = IVFSearch()  # default exact_below=10,000: a 3,000-row bank is searched exactly, no index
    assert torch.equal(small.topk(queries, bank.bank, 5)[1], ExactSearch().topk(queries, bank.bank, 5)[1])
    assert small.index is None and small.builds == 0


def test_retraining_after_half_the_bank_or_when_lists_become_unbalanced():
    bank = filled_bank(4000)
    search = IVFSearch(nlist=40, nprobe=40, exact_below=0, retrain_after=0.5)
    queries = bank.bank[:4]
    search.topk(queries, bank.bank, 5, changed=bank.take_changed())
    for part in range(4):  # 4 × 400 distinct rows: 1,600 < 2,000 = half the bank, lists stay balanced
        bank.update(torch.arange(part * 400, (part + 1) * 400), clustered_bank(400, 32, seed=50 + part))
        search.topk(queries, bank.bank, 5, changed=bank.take_changed())
    assert search.builds == 1
    bank.update(torch.arange(1600, 2000), clustered_bank(400, 32, seed=60))  # 2,000 distinct rows rewritten
    search.topk(queries, bank.bank, 5, changed=bank.take_changed())
    assert search.builds == 2
    # A noise bank whose rows then all move to one spot: the lists become unbalanced long before half the
    # bank is rewritten, and the lists are retrained.
    noise = MemoryBank(4000, 32, momentum=0.0)
    search = IVFSearch(nlist=40, nprobe=8, exact_below=0, retrain_after=1.0)
    search.topk(noise.bank[:4], noise.bank, 5, changed=noise.take_changed())
    spot = torch.randn(32)
    noise.update(torch.arange(1200), spot + 0.01 * torch.randn(1200, 32))
    _, indices = search.topk(spot.unsqueeze(0), noise.bank, 5, changed=noise.take_changed())
    assert search.builds == 2
    assert indices.max() < 1200


def test_fresh_copies_and_pickles_hold_no_index():
    bank = filled_bank(3000)
    search = make_search("ivf", nlist=20, nprobe=5, exact_below=0)
    assert isinstance(search, IVFSearch) and search.stateful
    search.topk(bank.bank[:2], bank.bank, 5, changed=bank.take_changed())
    assert search.index is not None
    for other in (search.fresh(), copy.deepcopy(search), pickle.loads(pickle.dumps(search))):
        assert other is not search and other.index is None and other.options == search.options
        _, indices = other.topk(bank.bank[:2], bank.bank, 5)
        assert torch.equal(indices, search.topk(bank.bank[:2], bank.bank, 5, changed=bank.take_changed())[1])
    assert ExactSearch().fresh() is not None and not ExactSearch.stateful


def test_a_saved_index_is_adopted_by_another_search_and_kept_without_training(tmp_path):
    """save_index / load_index: a second IVFSearch adopts the built index for the same keys, answers exactly as
    the first, and then updates it in place (no k-means) as the bank moves."""
    bank = filled_bank(3000)
    first = IVFSearch(nlist=20, nprobe=20, storage="float32", exact_below=0)
    queries = bank.bank[:8] + 0.05
    expected = first.topk(queries, bank.bank, 10, changed=bank.take_changed())
    first.save_index(tmp_path / "bank.faiss")
    second = IVFSearch(nlist=20, nprobe=20, storage="float32", exact_below=0)
    second.load_index(tmp_path / "bank.faiss", bank.bank)
    found = second.topk(queries, bank.bank, 10, changed=bank.take_changed())
    assert torch.equal(found[1], expected[1]) and torch.allclose(found[0], expected[0])
    moved_rows(bank, 64, seed=1)
    scores, indices = second.topk(queries, bank.bank, 10, changed=bank.take_changed())
    assert_exact_top_k(scores, indices, queries, bank.bank, 10)
    assert second.builds == 0 and second.updated_rows == 64
    with pytest.raises(ValueError, match="holds 3000 rows of width 32"):
        IVFSearch().load_index(tmp_path / "bank.faiss", bank.bank[:100])
    with pytest.raises(RuntimeError, match="no kept index to save"):
        IVFSearch().save_index(tmp_path / "none.faiss")


def test_ivf_option_errors():
    with pytest.raises(ValueError, match="nprobe must be >= 1"):
        IVFSearch(nprobe=0)
    with pytest.raises(UnknownNameError, match="float32, float16, int8"):
        IVFSearch(storage="pq")
    with pytest.raises(ValueError, match="retrain_after"):
        IVFSearch(retrain_after=0)
    with pytest.raises(ValueError, match=r"k=11.*10 rows"):
        IVFSearch(exact_below=0).topk(torch.randn(2, 4), torch.randn(10, 4), 11)


@pytest.mark.cuda
def test_cuda_keys_use_the_exact_search_or_the_kept_cpu_index():
    bank = filled_bank(3000).cuda()
    own = torch.arange(0, 3000, 500, device="cuda")
    queries = bank.bank[own] + 0.1
    expected = ExactSearch().topk(queries, bank.bank, 20, exclude=own)[1]
    fallback = IVFSearch(exact_below=0)
    assert torch.equal(fallback.topk(queries, bank.bank, 20, exclude=own)[1], expected)
    assert fallback.index is None
    kept = IVFSearch(nlist=20, nprobe=20, storage="float32", exact_below=0, on_cuda="index")
    scores, indices = kept.topk(queries, bank.bank, 20, exclude=own, changed=bank.take_changed())
    assert indices.is_cuda and scores.is_cuda
    assert_exact_top_k(scores.cpu(), indices.cpu(), queries.cpu(), bank.bank.cpu(), 20, exclude=own.cpu())


@pytest.mark.cuda
def test_cuda_searches_give_the_cpu_neighbours_on_the_device(cuda_device, data):
    """Exact (chunked), faiss (the index on the CPU) and the kept IVF index (``on_cuda="index"``) on CUDA queries
    and keys: the neighbours found on the CPU, as tensors on the queries' device, with and without exclusion."""
    queries, keys, exclude = data
    searches = [ExactSearch(chunk_size=40), FaissSearch(),
                IVFSearch(nlist=8, nprobe=8, storage="float32", exact_below=0, on_cuda="index")]
    for search in searches:
        for excluded in (None, exclude):
            expected_scores, expected_indices = search.fresh().topk(queries, keys, 8, exclude=excluded)
            scores, indices = search.fresh().topk(
                queries.to(cuda_device), keys.to(cuda_device), 8,
                exclude=None if excluded is None else excluded.to(cuda_device),
            )
            assert scores.device.type == indices.device.type == cuda_device.type
            assert torch.equal(indices.cpu(), expected_indices), type(search).__name__
            assert torch.allclose(scores.cpu(), expected_scores, atol=1e-5)


# ----------------------------------------------------------------- MemoryBank: which rows changed since last time


def test_bank_reports_the_rows_its_updates_wrote():
    bank = MemoryBank(size=50, dim=4)
    assert bank.take_changed() is None  # first call: nobody has seen the rows yet
    assert bank.take_changed().numel() == 0
    bank.update(torch.tensor([7, 3, 7]), torch.randn(3, 4))
    bank.update(torch.tensor([3, 40]), torch.randn(2, 4))
    assert bank.take_changed().tolist() == [3, 7, 40]
    assert bank.take_changed().tolist() == []


def test_bank_reports_unknown_after_writes_it_did_not_make():
    bank = MemoryBank(size=50, dim=4)
    bank.take_changed()
    bank.bank[5] = 1.0  # a direct write: not through update()
    assert bank.take_changed() is None
    bank.update(torch.tensor([1]), torch.randn(1, 4))
    bank.load_state_dict({"bank": torch.randn(50, 4)})
    bank.update(torch.tensor([2]), torch.randn(1, 4))
    assert bank.take_changed() is None  # the state dict replaced every row
    for _ in range(11):  # 55 rows written > 50 rows held: cheaper to treat as "everything"
        bank.update(torch.arange(5), torch.randn(5, 4))
    assert bank.take_changed() is None
    bank.update(torch.tensor([9]), torch.randn(1, 4))
    assert bank.take_changed().tolist() == [9]
