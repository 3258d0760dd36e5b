"""Projection heads placed after pooling: SimCSE's MLP and a configurable 2-layer MLP (CAPT style).

A ``Projection`` is a stack of ``DenseLayer``s, each ``activation(W x + b)``. Every layer has the
same parameter names as sentence-transformers' ``Dense`` module (``linear.weight``,
``linear.bias``), so a projection used at inference is saved as one ST ``Dense`` folder per layer
and ``SentenceTransformer(path)`` reproduces it exactly.

- ``"mlp"``: SimCSE's ``MLPLayer``, ``z = tanh(W h + b)`` with ``W`` of shape (h, h)
  (Gao et al., 2021, "SimCSE: Simple Contrastive Learning of Sentence Embeddings", section 3/appendix;
  princeton-nlp/SimCSE ``simcse/models.py``).
- ``"mlp2"``: ``z = W2 act(W1 h + b1) + b2``, a SimCLR-style non-linear projection head as used by
  contrastive pre-training (CAPT, Luo et al.); hidden width, output width and activation are
  configurable.

Whether the projection is applied by ``encode`` is the encoder's ``projection_at_inference`` flag:
SimCSE (unsupervised) trains with the MLP and evaluates without it; a model whose projection is
part of the embedding keeps it at inference.

Example::

    >>> import torch
    >>> head = build_projection("mlp2", hidden_size=8, output_dim=4)
    >>> head(torch.randn(3, 8)).shape
    torch.Size([3, 4])
    >>> Projection.from_config(head.config()).output_dim
    4
"""

from __future__ import annotations

from typing import Any

from torch import Tensor, nn

from contrastext.errors import ConfigError, UnknownNameError

ACTIVATIONS: dict[str, type[nn.Module]] = {
    "tanh": nn.Tanh,
    "relu": nn.ReLU,
    "gelu": nn.GELU,
    "identity": nn.Identity,
}
"""Activation names a ``DenseLayer`` accepts, mapped to their torch classes."""

PROJECTION_NAMES: tuple[str, ...] = ("mlp", "mlp2")


def _activation_name(module: nn.Module) -> str:
    for name, cls in ACTIVATIONS.items():
        if type(module) is cls:
            return name
    raise UnknownNameError(f"unsupported activation {type(module).__name__}; expected one of: {', '.join(ACTIVATIONS)}")


def activation_from_name(name: str) -> nn.Module:
    """Build an activation from its short name (``tanh``/``relu``/``gelu``/``identity``) or torch class path."""
    short = name.rsplit(".", 1)[-1].lower()
    if short not in ACTIVATIONS:
        raise UnknownNameError(f"unsupported activation {name!r}; expected one of: {', '.join(ACTIVATIONS)}")
    return ACTIVATIONS[short]()


def activation_class_path(name: str) -> str:
    """The torch class path sentence-transformers writes for an activation, e.g. ``torch.nn.modules.activation.Tanh``."""
    cls = type(activation_from_name(name))
    return f"{cls.__module__}.{cls.__name__}"


class DenseLayer(nn.Module):
    """``activation(linear(x))``; the same parameter names as sentence-transformers' ``Dense``."""

    def __init__(self, in_features: int, out_features: int, activation: str = "tanh", bias: bool = True):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, bias=bias)
        self.activation = activation_from_name(activation)

    @property
    def activation_name(self) -> str:
        return _activation_name(self.activation)

    def config(self) -> dict[str, Any]:
        return {
            "in_features": self.linear.in_features,
            "out_features": self.linear.out_features,
            "activation": self.activation_name,
            "bias": self.linear.bias is not None,
        }

    def forward(self, x: Tensor) -> Tensor:
        return self.activation(self.linear(x))


class Projection(nn.Module):
    """A stack of ``DenseLayer``s applied to the pooled vector."""

    def __init__(self, layers: list[DenseLayer]):
        super().__init__()
        if not layers:
            raise ConfigError("a projection needs at least one layer")
        self.layers = nn.ModuleList(layers)

    @classmethod
    def simcse_mlp(cls, hidden_size: int) -> Projection:
        """SimCSE's ``MLPLayer``: ``tanh(W h + b)`` with ``W`` (hidden_size, hidden_size)."""
        return cls([DenseLayer(hidden_size, hidden_size, activation="tanh")])

    @classmethod
    def two_layer_mlp(
        cls, input_dim: int, hidden_dim: int | None = None, output_dim: int | None = None, activation: str = "relu"
    ) -> Projection:
        """``W2 act(W1 h + b1) + b2``; hidden and output widths default to the input width."""
        hidden_dim = hidden_dim or input_dim
        output_dim = output_dim or input_dim
        return cls(
            [
                DenseLayer(input_dim, hidden_dim, activation=activation),
                DenseLayer(hidden_dim, output_dim, activation="identity"),
            ]
        )

    @property
    def input_dim(self) -> int:
        return self.layers[0].linear.in_features

    @property
    def output_dim(self) -> int:
        return self.layers[-1].linear.out_features

    def config(self) -> dict[str, Any]:
        """A JSON-able description from which ``from_config`` rebuilds the same shapes."""
        return {"layers": [layer.config() for layer in self.layers]}

    @classmethod
    def from_config(cls, config: dict[str, Any], source: str = "projection config") -> Projection:
        """Rebuild from ``config()``'s output; ``source`` names the file in error messages."""
        layers = config.get("layers") if isinstance(config, dict) else None
        if not isinstance(layers, list) or not layers:
            raise ConfigError(f"{source}: key 'layers' must be a non-empty list of dense layer configs")
        built = []
        for i, layer in enumerate(layers):
            try:
                built.append(
                    DenseLayer(
                        int(layer["in_features"]),
                        int(layer["out_features"]),
                        activation=str(layer.get("activation", "tanh")),
                        bias=bool(layer.get("bias", True)),
                    )
                )
            except (KeyError, TypeError, ValueError) as error:
                raise ConfigError(
                    f"{source}: layers[{i}] needs integer 'in_features' and 'out_features' ({error})"
                ) from error
        return cls(built)

    def forward(self, x: Tensor) -> Tensor:
        for layer in self.layers:
            x = layer(x)
        return x


def build_projection(spec: str | dict[str, Any] | Projection | None, hidden_size: int, **options: Any) -> Projection | None:
    """Build a projection from a name (``"mlp"``, ``"mlp2"``), a dict, or pass a ``Projection`` through.

    Dict forms: ``{"name": "mlp2", "hidden_dim": 512, "output_dim": 128, "activation": "gelu"}`` or
    ``Projection.config()``'s ``{"layers": [...]}``. ``options`` are extra keyword arguments for ``mlp2``.
    """
    if spec is None or isinstance(spec, Projection):
        projection = spec
    elif isinstance(spec, dict) and "layers" in spec:
        projection = Projection.from_config(spec)
    elif isinstance(spec, dict):
        options = {**{k: v for k, v in spec.items() if k != "name"}, **options}
        projection = build_projection(spec.get("name", "mlp"), hidden_size, **options)
    elif spec == "mlp":
        if options:
            raise ConfigError(f"projection 'mlp' takes no options, got: {', '.join(sorted(options))}")
        projection = Projection.simcse_mlp(hidden_size)
    elif spec == "mlp2":
        allowed = {"hidden_dim", "output_dim", "activation"}
        unknown = sorted(set(options) - allowed)
        if unknown:
            raise ConfigError(f"unknown projection 'mlp2' option(s) {unknown}; expected: {sorted(allowed)}")
        projection = Projection.two_layer_mlp(hidden_size, **options)
    else:
        raise UnknownNameError(f"unknown projection {spec!r}; expected one of: {', '.join(PROJECTION_NAMES)}")
    if projection is not None and projection.input_dim != hidden_size:
        raise ConfigError(
            f"projection expects inputs of width {projection.input_dim} but the pooled vector has width {hidden_size}"
        )
    return projection
