"""Task heads: shapes, Sentence-BERT pair features, symmetric pair head, clear errors."""

from __future__ import annotations

import pytest
import torch

from contrastext.errors import ConfigError, UnknownNameError
from contrastext.models.heads import ClassificationHead, PairHead, RegressionHead, pair_features


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
