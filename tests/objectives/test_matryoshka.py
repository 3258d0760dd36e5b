"""Matryoshka: sentence-transformers' MatryoshkaLoss on the same embeddings, its parts, half precision, its checks.

sentence-transformers' ``MatryoshkaLoss`` truncates the model's output; here the "model" returns the given
embeddings, so both losses see the same numbers.
"""

from __future__ import annotations

import pytest
import torch
from sentence_transformers.sentence_transformer.losses import MatryoshkaLoss, MultipleNegativesRankingLoss
from sentence_transformers.util import dot_score
from torch import nn

from contrastext.objectives import DCL, InfoNCE
from contrastext.objectives.matryoshka import Matryoshka


class GivenEmbeddings(nn.Module):
    """A stand-in sentence-transformers model: its features are the embeddings."""

    def __init__(self, width: int):
        super().__init__()
        self.width = width

    def forward(self, features: dict) -> dict:
        return {"sentence_embedding": features["embedding"]}

    def get_embedding_dimension(self) -> int:
        return self.width

    def _get_untruncated_embedding_dimension(self) -> int:  # sentence-transformers >= 6.3 asks the model for it
        return self.width


def randn(*shape: int, seed: int, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def st_matryoshka(columns: list[torch.Tensor], dims, weights=None, **mnrl) -> torch.Tensor:
    model = GivenEmbeddings(columns[0].shape[-1])
    loss = MatryoshkaLoss(model, MultipleNegativesRankingLoss(model, **mnrl), dims, weights)
    return loss([{"embedding": column} for column in columns], None)


@pytest.mark.parametrize("negative_blocks", [0, 1, 2])
@pytest.mark.parametrize(("dims", "weights"), [([32, 16, 8, 4], None), ([8, 32, 16], [0.5, 2.0, 1.0])])
def test_equals_sentence_transformers_matryoshka_of_mnrl(negative_blocks, dims, weights):
    a, p = randn(8, 32, seed=0), randn(8, 32, seed=1)
    blocks = [randn(8, 32, seed=2 + m) for m in range(negative_blocks)]
    expected = st_matryoshka([a, p, *blocks], dims, weights, scale=20.0)
    ours = Matryoshka(InfoNCE(temperature=0.05), dims, weights)(a, p, torch.cat(blocks) if blocks else None)
    torch.testing.assert_close(ours, expected, rtol=1e-10, atol=1e-10)


def test_each_prefix_is_renormalised_as_sentence_transformers_does():
    """With a dot product the re-normalisation after truncation matters: both do it."""
    a, p = randn(6, 16, seed=3) * 3, randn(6, 16, seed=4) * 3
    expected = st_matryoshka([a, p], [16, 8, 4], scale=1.0, similarity_fct=dot_score)
    ours = Matryoshka(InfoNCE(temperature=1.0, similarity="dot"), [16, 8, 4])(a, p)
    torch.testing.assert_close(ours, expected, rtol=1e-10, atol=1e-10)
    unnormalised = sum(InfoNCE(temperature=1.0, similarity="dot")(a[:, :m], p[:, :m]) for m in (16, 8, 4))
    assert not torch.allclose(ours, unnormalised)


def test_gradients_equal_sentence_transformers_gradients():
    a, p, n = (randn(6, 16, seed=s).requires_grad_() for s in (5, 6, 7))
    st_matryoshka([a, p, n], [16, 8], [1.0, 0.5], scale=20.0).backward()
    expected = [t.grad.clone() for t in (a, p, n)]
    for t in (a, p, n):
        t.grad = None
    Matryoshka(InfoNCE(temperature=0.05), [16, 8], [1.0, 0.5])(a, p, n).backward()
    for t, g in zip((a, p, n), expected, strict=True):
        torch.testing.assert_close(t.grad, g)


def test_parts_are_the_inner_loss_per_dim_and_forward_their_weighted_sum():
    a, p = randn(8, 16, seed=8), randn(8, 16, seed=9)
    loss = Matryoshka(InfoNCE(temperature=0.05), [4, 16, 8], [3.0, 1.0, 2.0])
    parts = loss.parts(a, p)
    assert list(parts) == [16, 8, 4] and loss.dims == (16, 8, 4) and loss.weights == (1.0, 2.0, 3.0)
    for dim, value in parts.items():
        torch.testing.assert_close(value, InfoNCE(temperature=0.05)(a[:, :dim], p[:, :dim]))
    torch.testing.assert_close(loss(a, p), sum(loss.weight_of(dim) * value for dim, value in parts.items()))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_finite_in_half_precision_at_a_low_temperature(dtype):
    a, p, n = (randn(16, 64, seed=s, dtype=torch.float32).to(dtype) for s in (10, 11, 12))
    loss = Matryoshka(InfoNCE(temperature=0.01), [64, 32, 16, 8])
    value = loss(a, p, n)
    assert value.dtype == torch.float32 and torch.isfinite(value)
    reference = loss(a.double(), p.double(), n.double())
    torch.testing.assert_close(value.double(), reference, rtol=1e-4, atol=1e-4)


def test_n_dims_per_step_draws_that_many_dims_repeatably():
    a, p = randn(8, 16, seed=13), randn(8, 16, seed=14)
    loss = Matryoshka(InfoNCE(), [16, 8, 4, 2], n_dims_per_step=2)
    torch.manual_seed(0)
    first = [tuple(loss.parts(a, p)) for _ in range(20)]
    torch.manual_seed(0)
    again = [tuple(loss.parts(a, p)) for _ in range(20)]
    assert first == again
    assert all(len(dims) == 2 and list(dims) == sorted(dims, reverse=True) for dims in first)
    assert len(set(first)) > 1  # not always the same two
    assert tuple(Matryoshka(InfoNCE(), [16, 8], n_dims_per_step=5).parts(a, p)) == (16, 8)  # more than there are: all


def test_takes_the_calls_of_its_inner_objective():
    assert (Matryoshka(InfoNCE(), [8]).pair, Matryoshka(InfoNCE(), [8]).takes_negatives) == (True, True)
    assert (Matryoshka(DCL(), [8]).pair, Matryoshka(DCL(), [8]).takes_negatives, Matryoshka(DCL(), [8]).in_batch) == (
        True, False, True
    )  # fmt: skip


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"dims": []}, "at least one dimension"),
        ({"dims": [8, 0]}, "positive integer"),
        ({"dims": [8, 8]}, "repeats"),
        ({"dims": [8, 4], "weights": [1.0]}, "1 weights for 2 dims"),
        ({"dims": [8], "n_dims_per_step": 0}, "n_dims_per_step"),
    ],
)
def test_bad_arguments_are_refused(arguments, message):
    with pytest.raises(ValueError, match=message):
        Matryoshka(InfoNCE(), **arguments)


def test_a_dim_wider_than_the_embeddings_is_refused_by_the_call():
    with pytest.raises(ValueError, match="dim 32 is wider than the embeddings \\(16\\)"):
        Matryoshka(InfoNCE(), [32, 8])(randn(4, 16, seed=0), randn(4, 16, seed=1))
