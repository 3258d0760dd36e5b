"""Pooling functions on hand-made hidden states: masking, [CLS] choice, SimCSE's first-last average."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from contrastext.errors import UnknownNameError
from contrastext.models.pooling import (
    POOLING_NAMES,
    check_pooling_name,
    cls_pool,
    first_last_avg_pool,
    max_pool,
    mean_pool,
    needs_hidden_states,
    pool,
)


def padded_batch(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, list[int]]:
    """Hidden states (3, 6, 4) whose padding positions hold huge values that must never leak in."""
    generator = torch.Generator().manual_seed(seed)
    lengths = [6, 2, 4]
    hidden = torch.randn(3, 6, 4, generator=generator)
    mask = torch.zeros(3, 6, dtype=torch.long)
    for row, length in enumerate(lengths):
        mask[row, :length] = 1
        hidden[row, length:] = 1e4
    return hidden, mask, lengths


def test_mean_ignores_padding():
    hidden, mask, lengths = padded_batch()
    pooled = mean_pool(hidden, mask)
    for row, length in enumerate(lengths):
        torch.testing.assert_close(pooled[row], hidden[row, :length].mean(dim=0))


def test_max_ignores_padding_even_when_padding_is_larger():
    hidden, mask, lengths = padded_batch()
    hidden = -hidden.abs()  # every real value is negative; padding (+1e4 below) would win if it leaked in
    for row, length in enumerate(lengths):
        hidden[row, length:] = 1e4
    pooled = max_pool(hidden, mask)
    for row, length in enumerate(lengths):
        torch.testing.assert_close(pooled[row], hidden[row, :length].max(dim=0).values)
    assert (pooled < 0).all()


def test_mean_in_half_precision_is_finite_and_close():
    hidden, mask, _ = padded_batch()
    hidden = hidden.clamp(max=50)
    pooled = mean_pool(hidden.half(), mask)
    assert pooled.dtype == torch.float16
    torch.testing.assert_close(pooled.float(), mean_pool(hidden, mask), atol=2e-2, rtol=1e-2)


def test_cls_is_first_attended_token_for_right_and_left_padding():
    hidden, _, _ = padded_batch()
    right = torch.tensor([[1, 1, 1, 0, 0, 0]] * 3)
    left = torch.tensor([[0, 0, 1, 1, 1, 1]] * 3)
    torch.testing.assert_close(cls_pool(hidden, right), hidden[:, 0])
    torch.testing.assert_close(cls_pool(hidden, left), hidden[:, 2])


def test_first_last_avg_uses_first_transformer_layer_not_embeddings():
    hidden, mask, lengths = padded_batch()
    embeddings, layer1, layer2, last = (hidden + k for k in (100.0, 1.0, 2.0, 3.0))
    pooled = first_last_avg_pool((embeddings, layer1, layer2, last), mask)
    for row, length in enumerate(lengths):
        expected = ((layer1[row, :length] + last[row, :length]) / 2).mean(dim=0)
        torch.testing.assert_close(pooled[row], expected)


def test_pool_dispatch_and_pooler_output():
    hidden, mask, _ = padded_batch()
    output = SimpleNamespace(last_hidden_state=hidden, pooler_output=torch.ones(3, 4), hidden_states=None)
    torch.testing.assert_close(pool("cls_before_pooler", output, mask), hidden[:, 0])
    torch.testing.assert_close(pool("pooler", output, mask), torch.ones(3, 4))
    with pytest.raises(ValueError, match="pooler"):
        pool("pooler", SimpleNamespace(last_hidden_state=hidden, pooler_output=None), mask)
    with pytest.raises(ValueError, match="hidden_states"):
        pool("first_last_avg", output, mask)


def test_unknown_pooling_lists_the_names():
    with pytest.raises(UnknownNameError) as error:
        check_pooling_name("avg")
    for name in POOLING_NAMES:
        assert name in str(error.value)


def test_only_first_last_avg_needs_hidden_states():
    assert [name for name in POOLING_NAMES if needs_hidden_states(name)] == ["first_last_avg"]
