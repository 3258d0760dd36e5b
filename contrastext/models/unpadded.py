"""Unpadded ("packed") forward of BERT-family backbones: the token-wise layers run on the real tokens only.

A batch padded to its longest row wastes the work of every token-wise layer on the padding: on wiki1m at
max length 32, 21.9 real tokens per row against 32 per padded row, i.e. 32 % of the tokens. As MosaicBERT and
ModernBERT do, :func:`packed_forward` gathers the real tokens of the batch into one (tokens, hidden) matrix
and runs the QKV and output projections, the feed-forward layers, the residual adds and the LayerNorms on it;
only attention goes back to the (batch, heads, seq, head_dim) layout, with the backbone's own attention
function and key-padding mask, and its output is gathered back to the real tokens. The embedding layer runs on
the padded grid (it is a lookup, and so the word-embedding output stays the padded tensor that
``EncoderOutput.input_embeddings`` exposes); the first layer's projections take the real rows of it.

Same numbers as the Hugging Face forward:

- in eval mode every real token's hidden state equals the padded forward's within float32 rounding (≤ 1e-5;
  ``tests/models/test_unpadded.py``); positions and token types are those of the padded grid;
- in train mode dropout draws its random numbers exactly as the padded forward does: each dropout samples its
  Bernoulli mask for the padded (batch, seq, hidden) shape from the same global generator, in the same order
  (embeddings, then per layer the attention probabilities, the attention output and the feed-forward output),
  and keeps the rows of the real tokens. The same seed therefore gives the same masks, so a training run is the
  padded run's, loss curve included (to float rounding; tested on CPU, and built the same way for CUDA's fused
  dropout kernel). Drawing the masks for the padding costs a little (≈ 4 % of a CPU step); the projections and
  the feed-forward layers, where the time goes, run on real tokens only;
- the returned ``last_hidden_state`` is re-padded to (batch, seq, hidden) with zeros at padding positions (the
  padded forward leaves arbitrary values there; every pooling masks them out).

Which backbones: ``SUPPORTED_MODEL_TYPES`` (BERT and the models with BERT's layer layout: RoBERTa,
XLM-RoBERTa, ELECTRA) in encoder mode with absolute positions and the ``sdpa`` or ``eager`` attention; for
anything else :func:`unpadding_refusal` says why and the caller runs the plain forward. A batch whose rows do
not all start with a real token (left padding, an empty row) is refused too (:func:`packed_forward` returns
None), as is a backbone with hooks on its layers (they would not fire) or gradient checkpointing on.

Example::

    >>> out = packed_forward(backbone, batch["input_ids"], batch["attention_mask"])   # doctest: +SKIP
    >>> out.last_hidden_state.shape                                                     # doctest: +SKIP
    torch.Size([64, 32, 384])
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

SUPPORTED_MODEL_TYPES: frozenset[str] = frozenset({"bert", "roberta", "xlm-roberta", "electra"})
"""``config.model_type`` of the backbones whose layers have BERT's layout (checked module by module too)."""

ATTENTION_IMPLEMENTATIONS: frozenset[str] = frozenset({"sdpa", "eager"})

_LAYER_PARTS = (
    "attention.self.query",
    "attention.self.key",
    "attention.self.value",
    "attention.self.dropout",
    "attention.output.dense",
    "attention.output.LayerNorm",
    "attention.output.dropout",
    "intermediate.dense",
    "output.dense",
    "output.LayerNorm",
    "output.dropout",
)


@dataclass
class PackedOutput:
    """What the packed forward returns, shaped like the fields of a Hugging Face output that pooling reads."""

    last_hidden_state: Tensor
    """(batch, seq, hidden): the last layer, re-padded with zeros at padding positions."""
    pooler_output: Tensor | None = None
    """The backbone's pooler on the first token (only when asked for and the backbone has one)."""
    hidden_states: tuple[Tensor, ...] | None = None
    """(embeddings, layer 1, ..., layer L), re-padded like ``last_hidden_state`` (only when asked for)."""


def _submodule(module: nn.Module, dotted: str) -> Any:
    for name in dotted.split("."):
        module = getattr(module, name, None)
        if module is None:
            return None
    return module


def unpadding_refusal(backbone: nn.Module) -> str | None:
    """Why :func:`packed_forward` cannot run ``backbone`` (a short reason), or None when it can."""
    config = getattr(backbone, "config", None)
    model_type = getattr(config, "model_type", None)
    if model_type not in SUPPORTED_MODEL_TYPES:
        return f"model_type {model_type!r} is not one of {', '.join(sorted(SUPPORTED_MODEL_TYPES))}"
    if getattr(config, "is_decoder", False) or getattr(config, "add_cross_attention", False):
        return "the backbone is configured as a decoder"
    if getattr(config, "position_embedding_type", "absolute") not in (None, "absolute"):
        return f"position_embedding_type {config.position_embedding_type!r} (only absolute positions are packed)"
    attention = getattr(config, "_attn_implementation", None) or "eager"
    if attention not in ATTENTION_IMPLEMENTATIONS:
        return f"attention implementation {attention!r} (packed: {', '.join(sorted(ATTENTION_IMPLEMENTATIONS))})"
    embeddings, layers = getattr(backbone, "embeddings", None), _submodule(backbone, "encoder.layer")
    if embeddings is None or not isinstance(layers, nn.ModuleList) or len(layers) == 0:
        return "no embeddings + encoder.layer modules"
    # transformers sets the flag on the model, its encoder and its layers (GradientCheckpointingLayer)
    if any(getattr(module, "gradient_checkpointing", False) is True for module in (backbone, backbone.encoder, *layers)):
        return "gradient checkpointing is on"
    return _layout_refusal(backbone, layers)


_LAYOUT = "_contrastext_layout_refusal"


def _layout_refusal(backbone: nn.Module, layers: nn.ModuleList) -> str | None:
    """Whether every layer has BERT's submodules; checked once per set of layers (kept on the backbone)."""
    key = tuple(id(part) for layer in layers for part in (layer, *(_submodule(layer, p) for p in _LAYER_PARTS[:3])))
    cached = backbone.__dict__.get(_LAYOUT)
    if cached is not None and cached[0] == key:
        return cached[1]
    reason = None
    for index, layer in enumerate(layers):
        missing = [part for part in _LAYER_PARTS if _submodule(layer, part) is None]
        if missing or not callable(getattr(getattr(layer, "intermediate", None), "intermediate_act_fn", None)):
            reason = f"layer {index} does not have BERT's layout (missing {', '.join(missing) or 'intermediate_act_fn'})"
            break
    backbone.__dict__[_LAYOUT] = (key, reason)
    return reason


def _foreign_hooks(module: nn.Module) -> bool:
    """Whether ``module`` has forward (pre-)hooks other than transformers' own output-capturing ones (installed
    once ``output_hidden_states`` was asked for, and idle outside the model's own forward)."""
    hooks = [*module._forward_hooks.values(), *module._forward_pre_hooks.values()]
    return any(not getattr(hook, "__module__", "").startswith("transformers.") for hook in hooks)


def _has_hooks(module: nn.Module) -> bool:
    return any(_foreign_hooks(child) for child in module.modules())


def _attention_function(backbone: nn.Module) -> Callable[..., tuple[Tensor, Any]]:
    """The attention function the backbone's own layers call (the registry's sdpa, or the model's eager one)."""
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    eager = getattr(sys.modules[type(backbone).__module__], "eager_attention_forward", None)
    implementation = getattr(backbone.config, "_attn_implementation", None) or "eager"
    if implementation == "eager":
        if eager is None:
            raise RuntimeError(f"{type(backbone).__module__} has no eager_attention_forward")
        return eager
    return ALL_ATTENTION_FUNCTIONS.get_interface(implementation, eager)


def _attention_mask(backbone: nn.Module, embedding_output: Tensor, attention_mask: Tensor) -> Tensor | None:
    """The mask the backbone's own forward would build for its attention function (None: attend everywhere)."""
    from transformers.masking_utils import create_bidirectional_mask

    return create_bidirectional_mask(
        config=backbone.config, inputs_embeds=embedding_output, attention_mask=attention_mask
    )


def _dropout(x: Tensor, module: nn.Module, padded_rows: int, index: Tensor | None) -> Tensor:
    """``module`` (an ``nn.Dropout``) applied to the packed rows ``x`` with the mask the padded forward would draw.

    The mask is drawn for the (padded_rows, width) input the padded forward sees, from the same generator, and its
    rows of real tokens are kept, so the random stream and the kept elements are the padded forward's. On CPU
    ``F.dropout`` draws ``empty_like(input).bernoulli_(1 - p)``, divides it by ``1 - p`` and multiplies: done here
    the same way. Elsewhere (CUDA's fused dropout kernel) the scaled mask is ``F.dropout`` of a tensor of ones.
    """
    p = float(module.p)
    if not module.training or p == 0.0:
        return x
    if p == 1.0:
        return x * x.new_zeros(())
    shape = (padded_rows, x.shape[-1])
    if x.device.type == "cpu":
        noise = torch.empty(shape, dtype=x.dtype, device=x.device).bernoulli_(1.0 - p)
    else:
        noise = F.dropout(torch.ones(shape, dtype=x.dtype, device=x.device), p, True)
    if index is not None:
        noise = noise.index_select(0, index)
    if x.device.type == "cpu":
        noise.div_(1.0 - p)
    return x * noise


def _qkv(attention: nn.Module, x: Tensor, frozen: dict | None = None) -> Tensor:
    """Query, key and value of the packed rows side by side (tokens, 3 * all_head_size).

    Plain ``nn.Linear`` projections run as one matrix product on the concatenated weights; anything else
    (quantised or adapted linear layers) is called module by module.
    """
    parts = (attention.query, attention.key, attention.value)
    if all(type(part) is nn.Linear and part.bias is not None for part in parts):
        return F.linear(x, *_fused_weights(attention, parts, frozen))
    return torch.cat([part(x) for part in parts], dim=-1)


_FROZEN = "_contrastext_frozen_qkv"


@contextlib.contextmanager
def frozen_weights(backbone: nn.Module) -> Iterator[None]:
    """Promise that the backbone's weights do not change inside the block (one ``encode`` call): the concatenated
    query/key/value weights are then built once per layer for the whole block instead of at every batch.

    The promise cannot be checked cheaply (fused optimisers update parameters without bumping their version
    counters), so nothing is kept after the block.
    """
    previous = backbone.__dict__.get(_FROZEN)
    backbone.__dict__[_FROZEN] = {}
    try:
        yield
    finally:
        if previous is None:
            backbone.__dict__.pop(_FROZEN, None)
        else:
            backbone.__dict__[_FROZEN] = previous


def _fused_weights(attention: nn.Module, parts: tuple[nn.Linear, ...], frozen: dict | None) -> tuple[Tensor, Tensor]:
    """The concatenated (weight, bias) of the query, key and value projections; kept in ``frozen`` (the dict of
    a :func:`frozen_weights` block) when given and gradients are off, else made at every call."""
    if frozen is None or torch.is_grad_enabled():
        return torch.cat([part.weight for part in parts]), torch.cat([part.bias for part in parts])
    fused = frozen.get(id(attention))
    if fused is None:
        fused = frozen[id(attention)] = (
            torch.cat([part.weight for part in parts]), torch.cat([part.bias for part in parts])
        )
    return fused


def _repad(packed: Tensor, index: Tensor | None, batch: int, seq: int) -> Tensor:
    """(tokens, width) -> (batch, seq, width) with zeros at padding positions (differentiable).

    ``index`` holds the flat (row * seq + position) index of every real token; None: there is no padding.
    """
    width = packed.shape[-1]
    if index is None:
        return packed.view(batch, seq, width)
    return packed.new_zeros((batch * seq, width)).index_copy(0, index, packed).view(batch, seq, width)


def _layer(
    layer: nn.Module,
    x: Tensor,
    index: Tensor | None,
    batch: int,
    seq: int,
    mask: Tensor | None,
    attend: Callable[..., tuple[Tensor, Any]],
    frozen: dict | None = None,
) -> Tensor:
    """One BERT layer on packed rows ``x`` (tokens, hidden): the same operations, in the same order, as BertLayer."""
    self_attention = layer.attention.self
    heads = int(self_attention.num_attention_heads)
    head_dim = int(self_attention.attention_head_size)
    rows = batch * seq
    qkv = _repad(_qkv(self_attention, x, frozen), index, batch, seq).view(batch, seq, 3, heads, head_dim)
    query, key, value = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # each (batch, heads, seq, head_dim)
    scaling = getattr(self_attention, "scaling", head_dim**-0.5)
    dropout = float(self_attention.dropout.p) if self_attention.training else 0.0
    context, _ = attend(self_attention, query, key, value, mask, dropout=dropout, scaling=scaling)
    context = context.reshape(rows, heads * head_dim)
    if index is not None:
        context = context.index_select(0, index)

    output = layer.attention.output
    hidden = output.LayerNorm(_dropout(output.dense(context), output.dropout, rows, index) + x)
    feed_forward = layer.output
    intermediate = layer.intermediate(hidden)
    return feed_forward.LayerNorm(_dropout(feed_forward.dense(intermediate), feed_forward.dropout, rows, index) + hidden)


def packed_forward(
    backbone: nn.Module,
    input_ids: Tensor,
    attention_mask: Tensor,
    token_type_ids: Tensor | None = None,
    output_hidden_states: bool = False,
    output_pooler: bool = False,
) -> PackedOutput | None:
    """The backbone's forward with its token-wise layers on the real tokens only (see the module docstring).

    Returns None when this batch or backbone cannot be packed (the caller then runs the plain forward):
    :func:`unpadding_refusal` gives a reason, a row does not start with a real token, or hooks are registered
    on the encoder's modules.
    """
    if unpadding_refusal(backbone) is not None or input_ids.dim() != 2:
        return None
    if _foreign_hooks(backbone) or _has_hooks(backbone.encoder):
        return None  # hooks on the model or its layers would not fire
    batch, seq = input_ids.shape
    if batch == 0 or seq == 0 or not bool(attention_mask[:, 0].all()):
        return None
    index = attention_mask.reshape(-1).nonzero().squeeze(1)
    if index.numel() == batch * seq:
        index = None  # no padding at all (common in length-sorted encoding): no gathering

    kwargs: dict[str, Tensor] = {"input_ids": input_ids}
    if token_type_ids is not None:
        kwargs["token_type_ids"] = token_type_ids
    embedding_output = backbone.embeddings(**kwargs)  # padded: the word-embedding hook sees the padded tensor
    mask = _attention_mask(backbone, embedding_output, attention_mask)
    hidden = embedding_output.reshape(batch * seq, -1)
    if index is not None:
        hidden = hidden.index_select(0, index)
    project = getattr(backbone, "embeddings_project", None)  # ELECTRA's embedding_size -> hidden_size
    if project is not None:
        hidden = project(hidden)

    attend = _attention_function(backbone)
    frozen = backbone.__dict__.get(_FROZEN)
    states = [hidden] if output_hidden_states else None
    for layer in backbone.encoder.layer:
        hidden = _layer(layer, hidden, index, batch, seq, mask, attend, frozen)
        if states is not None:
            states.append(hidden)
    last = _repad(hidden, index, batch, seq)
    pooler = getattr(backbone, "pooler", None)
    pooled = pooler(last) if output_pooler and pooler is not None else None
    hidden_states = None
    if states is not None:
        hidden_states = tuple(_repad(state, index, batch, seq) for state in states[:-1]) + (last,)
    return PackedOutput(last_hidden_state=last, pooler_output=pooled, hidden_states=hidden_states)


def pad_rows(
    encoded: Mapping[str, Sequence[Sequence[int]]],
    rows: Sequence[int],
    pad_values: Mapping[str, int],
    left: bool = False,
) -> dict[str, Tensor]:
    """Rows of a tokenizer's unpadded output (lists of ids) padded to their longest, as ``padding=True`` pads.

    ``pad_values`` names the fields to return and the value each is padded with (``input_ids``: the pad token,
    ``attention_mask``: 0, ``token_type_ids``: the pad token type); ``left`` pads on the left. Lets ``encode``
    tokenize every text once (its lengths order the batches) instead of once for the lengths and again per batch.
    """
    longest = max(len(encoded["input_ids"][row]) for row in rows)
    batch = {}
    for name, pad in pad_values.items():
        column = encoded[name]
        if left:
            padded = [[pad] * (longest - len(column[row])) + list(column[row]) for row in rows]
        else:
            padded = [list(column[row]) + [pad] * (longest - len(column[row])) for row in rows]
        batch[name] = torch.tensor(padded, dtype=torch.long)
    return batch
