"""Task heads: shapes, Sentence-BERT pair features, symmetric pair head, the report's dense pair head, errors."""

from __future__ import annotations

import math

import pytest
import torch

from contrastext.errors import ConfigError, UnknownNameError
from contrastext.models.heads import (
    ClassificationHead,
    DensePairHead,
    DenseTanhHead,
    PairHead,
    RegressionHead,
    pair_features,
)


def test_classification_head_shape():
    head = ClassificationHead(8, num_labels=5).eval()
    assert head(torch.randn(3, 8)).shape == (3, 5)
    with pytest.raises(ConfigError, match="num_labels"):
        ClassificationHead(8, num_labels=0)


def test_sentence_bert_pair_features_order():
    u, v = torch.randn(2, 4), torch.randn(2, 4)
    features = pair_features(u, v, ("u", "v", "absdiff", "prod"))
    torch.testing.assert_close(features, torch.cat([u, v, (u - v).abs(), u * v], dim=-1))
    with pytest.raises(ValueError, match="same shape"):
        pair_features(u, torch.randn(2, 5), ("u",))


def test_pair_head_linear_on_features_and_symmetric_variant():
    torch.manual_seed(0)
    u, v = torch.randn(3, 4), torch.randn(3, 4)
    plain = PairHead(4, num_labels=2, dropout=0.0)
    linear = plain.classifier.linear
    torch.testing.assert_close(plain(u, v), torch.cat([u, v, (u - v).abs()], -1) @ linear.weight.T + linear.bias)
    symmetric = PairHead(4, num_labels=2, parts=("u", "v", "diff"), symmetric=True).eval()
    torch.testing.assert_close(symmetric(u, v), symmetric(v, u))
    one_order = PairHead(4, num_labels=2, parts=("u", "v", "diff")).eval()
    one_order.load_state_dict(symmetric.state_dict())
    assert not torch.allclose(one_order(u, v), one_order(v, u))
    torch.testing.assert_close((one_order(u, v) + one_order(v, u)) / 2, symmetric(u, v))


def test_pair_head_unknown_part():
    with pytest.raises(UnknownNameError, match="absdiff"):
        PairHead(4, 2, parts=("u", "cosine"))


def test_regression_head_gives_one_value_per_row():
    assert RegressionHead(8).eval()(torch.randn(6, 8)).shape == (6,)


def test_dense_pair_head_is_a_linear_layer_per_branch_then_an_activation_then_a_linear_layer():
    # CS224N report §4 "Dense Prediction Heads": three embeddings -> individual linear layers -> single
    # logits -> (DPHA: activation) -> a linear layer -> the final logit. Written out with explicit numbers.
    head = DensePairHead(2, num_outputs=1, branches=3, activation="tanh")
    with torch.no_grad():
        for layer, (w, b) in zip(head.branches, [((1.0, 2.0), 0.5), ((-1.0, 0.0), 0.0), ((0.5, 0.5), -1.0)], strict=True):
            layer.weight.copy_(torch.tensor([w]))
            layer.bias.fill_(b)
        head.output.weight.copy_(torch.tensor([[1.0, -2.0, 3.0]]))
        head.output.bias.fill_(0.25)
    x1, x2, x3 = torch.tensor([[1.0, 1.0]]), torch.tensor([[2.0, -1.0]]), torch.tensor([[0.0, 4.0]])
    # branch logits: 1 + 2 + 0.5 = 3.5, -2, 0 + 2 - 1 = 1
    expected = 1.0 * math.tanh(3.5) - 2.0 * math.tanh(-2.0) + 3.0 * math.tanh(1.0) + 0.25
    assert head(x1, x2, x3).item() == pytest.approx(expected, rel=1e-6)
    plain = DensePairHead(2, num_outputs=1, branches=3, activation="none")
    plain.load_state_dict(head.state_dict())
    assert plain(x1, x2, x3).item() == pytest.approx(3.5 - 2.0 * -2.0 + 3.0 * 1.0 + 0.25, rel=1e-6)
    assert DensePairHead(4, num_outputs=3, branches=2)(torch.randn(5, 4), torch.randn(5, 4)).shape == (5, 3)
    with pytest.raises(ValueError, match="3 branches, got 2"):
        head(x1, x2)
    with pytest.raises(UnknownNameError, match="relu"):
        DensePairHead(2, activation="relu")


def test_dense_tanh_head_is_robertas_classification_head():
    """dropout → dense → tanh → dropout → out_proj on the first token: Hugging Face's RobertaClassificationHead
    (fairseq's is the same) gives the same logits with the same weights."""
    from transformers import RobertaConfig
    from transformers.models.roberta.modeling_roberta import RobertaClassificationHead

    head = DenseTanhHead(8, num_labels=3, dropout=0.1).eval()
    assert head(torch.randn(4, 8)).shape == (4, 3)
    reference = RobertaClassificationHead(RobertaConfig(hidden_size=8, num_attention_heads=2, num_labels=3,
                                                                hidden_dropout_prob=0.1)).eval()
    reference.load_state_dict(head.state_dict())  # the same names: dense, out_proj
    features = torch.randn(4, 5, 8)  # (batch, tokens, hidden): the head reads token 0
    assert torch.allclose(head(features[:, 0]), reference(features), atol=1e-6)
    assert DenseTanhHead(8, num_labels=1, squeeze=True).eval()(torch.randn(4, 8)).shape == (4,)
    with pytest.raises(ConfigError, match="num_labels"):
        DenseTanhHead(8, num_labels=0)
    with pytest.raises(ConfigError, match="squeeze"):
        DenseTanhHead(8, num_labels=2, squeeze=True)
