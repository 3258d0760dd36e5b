"""Pooling: turn a backbone's per-token hidden states into one sentence vector.

Names (``POOLING_NAMES``):

- ``cls``: the last layer's hidden state at the first attended token ([CLS] for right-padded
  BERT), exactly sentence-transformers' ``"cls"`` mode.
- ``cls_before_pooler``: the same raw [CLS] vector under SimCSE's name. With this pooling a
  projection (SimCSE's MLP) is used in training only (SimCSE's unsupervised setting), so the
  encoder refuses ``projection_at_inference=True`` with it.
- ``pooler``: BERT's pooler output, ``tanh(W h_[CLS] + b)`` with the backbone's own pre-trained
  pooler weights. Backbones without a pooler layer (DistilBERT, ELECTRA, ...) are an error.
- ``mean``: masked mean of the last layer, ``sum_t m_t h_t / sum_t m_t``.
- ``max``: masked max of the last layer; padding positions are set to ``-inf`` first, so a
  padding token never wins.
- ``first_last_avg``: SimCSE's ``avg_first_last``: the masked mean of ``(h^(1) + h^(L)) / 2``
  where ``h^(1)`` is the output of the *first transformer layer* and ``h^(L)`` the last layer.
  In Hugging Face ``hidden_states`` index 0 is the embedding layer, so SimCSE uses
  ``hidden_states[1]`` and ``hidden_states[-1]`` (princeton-nlp/SimCSE, simcse/models.py,
  ``Pooler.forward``: ``first_hidden = hidden_states[1]``). Needs ``output_hidden_states``.

Example::

    >>> import torch
    >>> h = torch.tensor([[[1.0], [3.0], [100.0]]])     # 1 text, 3 tokens, width 1
    >>> m = torch.tensor([[1, 1, 0]])                    # last token is padding
    >>> mean_pool(h, m).item(), max_pool(h, m).item()
    (2.0, 3.0)
"""

from __future__ import annotations

import torch
from torch import Tensor

from contrastext.errors import UnknownNameError

POOLING_NAMES: tuple[str, ...] = ("cls", "cls_before_pooler", "pooler", "mean", "max", "first_last_avg")
"""Every pooling a ``TextEncoder`` accepts."""

HIDDEN_STATES_POOLINGS: frozenset[str] = frozenset({"first_last_avg"})
"""Poolings that need the backbone's per-layer hidden states (``output_hidden_states=True``)."""


def check_pooling_name(name: str) -> str:
    """Return ``name`` if it is a known pooling, else raise ``UnknownNameError`` listing the names."""
    if name not in POOLING_NAMES:
        raise UnknownNameError(f"unknown pooling {name!r}; expected one of: {', '.join(POOLING_NAMES)}")
    return name


def needs_hidden_states(name: str) -> bool:
    """Whether the pooling ``name`` reads per-layer hidden states (so the backbone must return them)."""
    return check_pooling_name(name) in HIDDEN_STATES_POOLINGS


def cls_pool(token_embeddings: Tensor, attention_mask: Tensor) -> Tensor:
    """Hidden state of the first attended token of each row: (batch, seq, dim) -> (batch, dim).

    For right padding this is position 0; for left padding it skips the pads, as in
    sentence-transformers' ``Pooling(pooling_mode="cls")``.
    """
    first = attention_mask.to(torch.int).argmax(dim=1)
    rows = torch.arange(token_embeddings.size(0), device=token_embeddings.device)
    return token_embeddings[rows, first]


def mean_pool(token_embeddings: Tensor, attention_mask: Tensor) -> Tensor:
    """Masked mean over tokens, ``sum_t m_t h_t / max(sum_t m_t, 1e-9)``, summed in float32 at least."""
    accumulate = torch.promote_types(token_embeddings.dtype, torch.float32)
    mask = attention_mask.unsqueeze(-1).to(token_embeddings.dtype)
    summed = (token_embeddings * mask).sum(dim=1, dtype=accumulate)
    count = mask.sum(dim=1, dtype=accumulate).clamp(min=1e-9)
    return (summed / count).to(token_embeddings.dtype)


def max_pool(token_embeddings: Tensor, attention_mask: Tensor) -> Tensor:
    """Masked max over tokens; padding positions are ``-inf`` so they never win."""
    padding = attention_mask.unsqueeze(-1) == 0
    return token_embeddings.masked_fill(padding, float("-inf")).max(dim=1).values


def first_last_avg_pool(hidden_states: tuple[Tensor, ...], attention_mask: Tensor) -> Tensor:
    """SimCSE's ``avg_first_last``: masked mean of ``(hidden_states[1] + hidden_states[-1]) / 2``.

    ``hidden_states`` is the Hugging Face tuple (embeddings, layer 1, ..., layer L).
    """
    if hidden_states is None or len(hidden_states) < 2:
        raise ValueError("first_last_avg pooling needs the backbone's hidden_states (embeddings + >= 1 layer)")
    return mean_pool((hidden_states[1] + hidden_states[-1]) / 2.0, attention_mask)


def pool(name: str, backbone_output, attention_mask: Tensor) -> Tensor:
    """Apply the pooling ``name`` to a Hugging Face model output; returns (batch, hidden)."""
    check_pooling_name(name)
    token_embeddings = backbone_output.last_hidden_state
    if name in ("cls", "cls_before_pooler"):
        return cls_pool(token_embeddings, attention_mask)
    if name == "mean":
        return mean_pool(token_embeddings, attention_mask)
    if name == "max":
        return max_pool(token_embeddings, attention_mask)
    if name == "first_last_avg":
        return first_last_avg_pool(backbone_output.hidden_states, attention_mask)
    pooler_output = getattr(backbone_output, "pooler_output", None)
    if pooler_output is None:
        raise ValueError("pooling 'pooler' needs a backbone with a pooler layer; this backbone returned none")
    return pooler_output
