"""Projection heads: SimCSE's MLP, the 2-layer MLP, configs, and parity with sentence-transformers' Dense."""

from __future__ import annotations

import pytest
import torch
from sentence_transformers.models import Dense

from contrastext.errors import ConfigError, UnknownNameError
from contrastext.models.projection import Projection, build_projection


def test_simcse_mlp_is_tanh_of_a_square_linear():
    torch.manual_seed(0)
    head = build_projection("mlp", hidden_size=8)
    x = torch.randn(5, 8)
    linear = head.layers[0].linear
    assert linear.weight.shape == (8, 8)
    torch.testing.assert_close(head(x), torch.tanh(x @ linear.weight.T + linear.bias))


def test_two_layer_mlp_shapes_and_activation():
    torch.manual_seed(0)
    head = build_projection({"name": "mlp2", "hidden_dim": 16, "output_dim": 4, "activation": "gelu"}, hidden_size=8)
    first, second = head.layers
    x = torch.randn(3, 8)
    expected = second.linear(torch.nn.functional.gelu(first.linear(x)))
    torch.testing.assert_close(head(x), expected)
    assert (head.input_dim, head.output_dim) == (8, 4)


def test_config_round_trip_rebuilds_the_same_function():
    torch.manual_seed(0)
    head = build_projection("mlp2", hidden_size=8, output_dim=3)
    rebuilt = Projection.from_config(head.config())
    rebuilt.load_state_dict(head.state_dict())
    x = torch.randn(4, 8)
    torch.testing.assert_close(rebuilt(x), head(x))


def test_dense_layer_matches_sentence_transformers_dense():
    torch.manual_seed(0)
    layer = build_projection("mlp", hidden_size=6).layers[0]
    dense = Dense(6, 6, activation_function=torch.nn.Tanh())
    dense.load_state_dict(layer.state_dict())  # same parameter names: linear.weight, linear.bias
    x = torch.randn(2, 6)
    torch.testing.assert_close(dense({"sentence_embedding": x})["sentence_embedding"], layer(x))


def test_bad_projection_specs_are_clear_errors():
    with pytest.raises(UnknownNameError, match="mlp2"):
        build_projection("mlp3", hidden_size=8)
    with pytest.raises(UnknownNameError, match="tanh"):
        build_projection("mlp2", hidden_size=8, activation="swishy")
    with pytest.raises(ConfigError, match="width"):
        build_projection(Projection.simcse_mlp(4), hidden_size=8)
    with pytest.raises(ConfigError, match="depth"):
        build_projection("mlp2", hidden_size=8, depth=3)
    with pytest.raises(ConfigError, match="layers"):
        Projection.from_config({"layers": [{"in_features": 4}]})
