"""The encoder of a run: ``config.model`` loaded (or built from scratch) with the pooling, projection and
maximum length a recipe asks for. The one place where recipes load models.

Example::

    >>> encoder = build_encoder(config, pooling="cls", projection="mlp", projection_at_inference=False)
    >>> encoder.max_seq_length == config.data.max_length
    True
"""

from __future__ import annotations

from typing import Any

from contrastext.models.encoder import TextEncoder
from contrastext.models.names import resolve_model
from contrastext.training.config import TrainConfig


def build_encoder(
    config: TrainConfig,
    pooling: str,
    projection: str | dict[str, Any] | None = None,
    projection_at_inference: bool | None = None,
    normalize: bool | None = None,
    from_scratch: dict[str, Any] | None = None,
) -> TextEncoder:
    """``config.model`` with ``pooling`` and ``data.max_length`` (and a projection head when asked).

    ``from_scratch``: a BertConfig dict; the backbone is then randomly initialised with that shape and
    ``config.model``'s tokenizer (CAPT's pre-training from scratch).
    """
    model = resolve_model(config.model)
    if from_scratch is not None:
        return TextEncoder.from_config(
            from_scratch, model, pooling=pooling, max_seq_length=config.data.max_length, projection=projection
        )
    return TextEncoder.from_pretrained(
        model,
        pooling=pooling,
        max_seq_length=config.data.max_length,
        projection=projection,
        projection_at_inference=projection_at_inference,
        normalize=normalize,
    )
