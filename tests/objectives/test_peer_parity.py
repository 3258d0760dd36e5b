"""Parity with the peer libraries on the same embeddings.

- sentence-transformers ``MultipleNegativesRankingLoss(scale=1/τ)``, through ``compute_loss_from_embeddings``:
  embeddings ``[anchors, positives, neg_block_1, …]`` (each B rows) == ``InfoNCE(τ)(anchors, positives,
  cat(neg_blocks))``; its symmetric form (directions query_to_doc + doc_to_query, per_direction) ==
  ``InfoNCE(symmetric=True)``.
- pytorch-metric-learning ``NTXentLoss(τ)``: called as ``(anchors, labels=arange(B), ref_emb=cat(positives,
  negatives), ref_labels=cat(arange(B), B + arange(N)))``: with a separate reference set, PML makes (i, i) the
  only positive pair of anchor i and every other reference row a negative — exactly InfoNCE's candidates.
  (PML's usual SimCLR call on cat(a, p) with repeated labels also puts the other anchors among the
  negatives: that is CAPT's arrangement, and CAPT == 2 × that value.)
- pytorch-metric-learning ``SupConLoss(τ)(z, y)`` == ``SupCon(τ)(z, y)`` when the batch has positive and
  negative pairs (its AvgNonZeroReducer also drops anchors without a positive).
- SimCSE's ``cl_forward`` weight matrix for ``hard_negative_weight`` (rebuilt here as written in
  princeton-nlp/SimCSE simcse/models.py) == ``InfoNCE(hard_negative_weight=w)``.
- Wang & Isola's align/uniform one-liners; ``torch.nn.functional.triplet_margin_loss``.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from pytorch_metric_learning.losses import NTXentLoss, SupConLoss
from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

from contrastext.objectives import CAPT, Alignment, AlignUniform, InfoNCE, SupCon, TripletMargin, Uniformity


def randn(*shape: int, seed: int, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


@pytest.mark.parametrize("hard_negative_blocks", [0, 1, 3])
@pytest.mark.parametrize("temperature", [0.05, 0.5])
def test_infonce_equals_sentence_transformers_mnrl(hard_negative_blocks, temperature):
    a, p = randn(8, 16, seed=0), randn(8, 16, seed=1)
    blocks = [randn(8, 16, seed=2 + m) for m in range(hard_negative_blocks)]
    mnrl = MultipleNegativesRankingLoss(model=None, scale=1 / temperature)
    expected = mnrl.compute_loss_from_embeddings([a, p, *blocks], labels=None)
    negatives = torch.cat(blocks) if blocks else None
    ours = InfoNCE(temperature=temperature)(a, p, negatives)
    torch.testing.assert_close(ours, expected, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("with_negatives", [False, True])
def test_symmetric_infonce_equals_symmetric_mnrl(with_negatives):
    a, p, n = randn(8, 16, seed=5), randn(8, 16, seed=6), randn(8, 16, seed=7)
    mnrl = MultipleNegativesRankingLoss(
        model=None, scale=20.0, directions=("query_to_doc", "doc_to_query"), partition_mode="per_direction"
    )
    embeddings = [a, p, n] if with_negatives else [a, p]
    expected = mnrl.compute_loss_from_embeddings(embeddings, labels=None)
    ours = InfoNCE(temperature=0.05, symmetric=True)(a, p, n if with_negatives else None)
    torch.testing.assert_close(ours, expected, rtol=1e-10, atol=1e-10)


def test_infonce_gradients_equal_mnrl_gradients():
    a, p, n = (randn(6, 8, seed=s).requires_grad_() for s in (8, 9, 10))
    MultipleNegativesRankingLoss(model=None, scale=20.0).compute_loss_from_embeddings([a, p, n], None).backward()
    expected = [t.grad.clone() for t in (a, p, n)]
    for t in (a, p, n):
        t.grad = None
    InfoNCE(temperature=0.05)(a, p, n).backward()
    for t, g in zip((a, p, n), expected, strict=True):
        torch.testing.assert_close(t.grad, g)


@pytest.mark.parametrize("with_negatives", [False, True])
def test_infonce_equals_pml_ntxent_with_reference_set(with_negatives):
    a, p, n = randn(8, 16, seed=11), randn(8, 16, seed=12), randn(5, 16, seed=13)
    batch = a.shape[0]
    reference = torch.cat([p, n]) if with_negatives else p
    reference_labels = torch.arange(reference.shape[0])  # positives 0..B-1, negatives B.. (match nobody)
    expected = NTXentLoss(temperature=0.07)(a, torch.arange(batch), ref_emb=reference, ref_labels=reference_labels)
    ours = InfoNCE(temperature=0.07)(a, p, n if with_negatives else None)
    torch.testing.assert_close(ours, expected, rtol=1e-9, atol=1e-9)


def test_symmetric_infonce_equals_mean_of_two_pml_directions():
    a, p = randn(8, 16, seed=14), randn(8, 16, seed=15)
    labels, reference_labels = torch.arange(8), torch.arange(8)  # NOT the same object: PML would drop (i, i)
    ntxent = NTXentLoss(temperature=0.1)
    expected = (
        ntxent(a, labels, ref_emb=p, ref_labels=reference_labels) + ntxent(p, labels, ref_emb=a, ref_labels=reference_labels)
    ) / 2
    torch.testing.assert_close(InfoNCE(temperature=0.1, symmetric=True)(a, p), expected, rtol=1e-9, atol=1e-9)


def test_capt_equals_twice_pml_ntxent_on_both_views():
    s, t = randn(8, 16, seed=16), randn(8, 16, seed=17)
    labels = torch.arange(8).repeat(2)
    expected = 2 * NTXentLoss(temperature=0.1)(torch.cat([s, t]), labels)
    torch.testing.assert_close(CAPT(temperature=0.1)(s, t), expected, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize(
    "labels",
    [[0, 0, 1, 1, 2, 2, 2, 3], [0, 1, 2, 3, 4, 5, 6, 0], [1, 1, 1, 1, 0, 0, 0, 0]],
    ids=["groups", "one-pair-and-singletons", "two-classes"],
)
@pytest.mark.parametrize("temperature", [0.1, 0.3])
def test_supcon_equals_pml_supcon(labels, temperature):
    z, y = randn(8, 16, seed=18), torch.tensor(labels)
    expected = SupConLoss(temperature=temperature)(z, y)
    torch.testing.assert_close(SupCon(temperature=temperature)(z, y), expected, rtol=1e-9, atol=1e-9)


def test_infonce_hard_negative_weight_equals_simcse_weight_matrix():
    z1, z2, z3 = randn(6, 16, seed=19), randn(6, 16, seed=20), randn(6, 16, seed=21)
    temp, z3_weight = 0.05, 0.4
    # As in SimCSE's cl_forward: cls.sim is cosine / temp, the weights are added after.
    cos_sim = F.cosine_similarity(z1.unsqueeze(1), z2.unsqueeze(0), dim=-1) / temp
    z1_z3_cos = F.cosine_similarity(z1.unsqueeze(1), z3.unsqueeze(0), dim=-1) / temp
    cos_sim = torch.cat([cos_sim, z1_z3_cos], 1)
    weights = torch.tensor(
        [
            [0.0] * (cos_sim.size(-1) - z1_z3_cos.size(-1)) + [0.0] * i + [z3_weight] + [0.0] * (z1_z3_cos.size(-1) - i - 1)
            for i in range(z1_z3_cos.size(-1))
        ],
        dtype=cos_sim.dtype,
    )
    expected = F.cross_entropy(cos_sim + weights, torch.arange(6))
    ours = InfoNCE(temperature=temp, hard_negative_weight=z3_weight)(z1, z2, z3)
    torch.testing.assert_close(ours, expected, rtol=1e-10, atol=1e-10)


def test_alignment_uniformity_equal_wang_isola_code():
    x, y = F.normalize(randn(10, 8, seed=22), dim=1), F.normalize(randn(10, 8, seed=23), dim=1)
    align = (x - y).norm(p=2, dim=1).pow(2).mean()

    def unif(v):
        return torch.pdist(v, p=2).pow(2).mul(-2).exp().mean().log()

    torch.testing.assert_close(Alignment()(x, y), align)
    torch.testing.assert_close(Uniformity()(x), unif(x))
    wang_isola = AlignUniform(lam=1.5, form="wang_isola")
    torch.testing.assert_close(wang_isola(x, y), align + 1.5 * (unif(x) + unif(y)) / 2)


def test_triplet_euclidean_equals_torch_triplet_margin_loss():
    a, p, n = (randn(10, 8, seed=s) for s in (24, 25, 26))
    expected = F.triplet_margin_loss(a, p, n, margin=0.5, p=2, eps=0.0)
    torch.testing.assert_close(TripletMargin(margin=0.5)(a, p, n), expected)
