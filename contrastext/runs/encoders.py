"""The encoder of a run: ``config.model`` loaded (or built from scratch) as the model is, changed only where a
recipe asks. The one place where recipes load models.

- Every setting left as None keeps the model's own: a sentence-transformers folder's pooling, Dense layers,
  normalisation and ``max_seq_length`` (a plain Hugging Face model: mean pooling, its position limit).
- ``data.max_length`` truncates the TRAINING batches only (``TextEncoder.train_max_length``, capped at the
  model's ``max_seq_length``); the saved model keeps its own ``max_seq_length`` (256 for all-MiniLM-L6-v2), so
  what it encodes later is not cut at 32 tokens. ``max_seq_length`` given here changes the saved length too.
- Whenever the encoder differs from the model it was loaded from, one line says how::

      model: pooling mean -> cls, + new SimCSE MLP (training only)

Example::

    >>> encoder = build_encoder(config, pooling="cls", projection="mlp", projection_at_inference=False)
    model: pooling mean -> cls, + new SimCSE MLP (training only)
    >>> encoder.train_max_length == config.data.max_length, encoder.max_seq_length   # the model's own
    (True, 256)
"""

from __future__ import annotations

from typing import Any

from contrastext.errors import ConfigError
from contrastext.models.encoder import DEFAULT_POOLING, TextEncoder, position_limit
from contrastext.models.names import locate_model
from contrastext.models.st_format import read_st_folder
from contrastext.runtime.processes import is_main_process
from contrastext.training.config import TrainConfig


def build_encoder(
    config: TrainConfig,
    pooling: str | None = None,
    projection: str | dict[str, Any] | None = None,
    projection_at_inference: bool | None = None,
    normalize: bool | None = None,
    from_scratch: dict[str, Any] | None = None,
    max_seq_length: int | None = None,
) -> TextEncoder:
    """``config.model`` with the changes asked for (None keeps the model's), training batches cut at
    ``data.max_length`` (at most the model's ``max_seq_length``).

    ``projection``: a new projection head (``"mlp"``: SimCSE's); ``projection_at_inference`` whether
    ``encode`` uses it. ``max_seq_length``: the saved model's maximum length (None: the model's own).
    ``from_scratch``: a BertConfig dict; the backbone is then randomly initialised with that shape and
    ``config.model``'s tokenizer (CAPT's pre-training from scratch), with ``data.max_length`` as its length.
    Prints one ``model: ...`` line when the encoder differs from the model (pooling, projection,
    normalisation, maximum length).
    """
    model = locate_model(config.model)
    if from_scratch is not None:
        encoder = TextEncoder.from_config(
            from_scratch,
            model,
            pooling=pooling or DEFAULT_POOLING,
            max_seq_length=max_seq_length or config.data.max_length,
            projection=projection,
        )
    else:
        encoder = TextEncoder.from_pretrained(
            model,
            pooling=pooling,
            max_seq_length=max_seq_length,
            projection=projection,
            projection_at_inference=projection_at_inference,
            normalize=normalize,
        )
        changes = shape_changes(model, encoder, projection)
        if changes and is_main_process():
            print(f"model: {', '.join(changes)}", flush=True)
    try:
        encoder.train_max_length = config.data.max_length  # above the position limit: refused
    except ConfigError as error:
        raise ConfigError(f"{config.source or '<config>'}: data.max_length: {error}") from None
    # Never longer than what the model encodes later: training on longer inputs would teach it nothing used.
    encoder.train_max_length = min(encoder.train_max_length, encoder.max_seq_length)
    return encoder


def _projection_name(projection: str | dict[str, Any] | None) -> str:
    name = projection.get("name", "mlp") if isinstance(projection, dict) else projection
    return {"mlp": "SimCSE MLP", "mlp2": "two-layer MLP"}.get(str(name), "projection")


def shape_changes(model: str, encoder: TextEncoder, projection: str | dict[str, Any] | None) -> list[str]:
    """How ``encoder`` differs from the model folder it was loaded from, in words (empty: it is the model).

    Compared: pooling, projection (a new one, one kept at or dropped from inference), normalisation and
    ``max_seq_length``.
    """
    folder = read_st_folder(model)
    pooling = (folder.pooling if folder is not None else None) or DEFAULT_POOLING
    normalize = folder.normalize if folder is not None else False
    had_projection = folder is not None and folder.projection is not None
    had_at_inference = folder is not None and folder.projection_at_inference
    changes = []
    if encoder.pooling != pooling:
        changes.append(f"pooling {pooling} -> {encoder.pooling}")
    use = "kept at inference" if encoder.projection_at_inference else "training only"
    if projection is not None:
        what = "replaced by a new" if had_projection else "+ new"
        changes.append(
            f"{'projection ' if had_projection else ''}{what} {_projection_name(projection)} ({use})"
        )
    elif encoder.projection is not None and encoder.projection_at_inference != had_at_inference:
        changes.append(f"projection now {use}")
    if encoder.normalize != normalize:
        changes.append(f"normalize {'on' if normalize else 'off'} -> {'on' if encoder.normalize else 'off'}")
    saved_length = folder.max_seq_length if folder is not None else None
    if saved_length is not None:
        limit = position_limit(encoder.backbone)
        saved_length = min(saved_length, limit) if limit is not None else saved_length
    if saved_length is not None and encoder.max_seq_length != saved_length:
        changes.append(f"max_seq_length {saved_length} -> {encoder.max_seq_length}")
    return changes
