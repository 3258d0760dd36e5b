"""Tokenisation and dynamic padding: every batch is padded to its own longest row, never to max_length.

Example::

    >>> batch = tokenize(tokenizer, ["a short one", "a somewhat longer sentence"], max_length=32)
    >>> batch["input_ids"].shape        # [2, longest in this batch]
    >>> padded = pad_sequences([[101, 7, 102], [101, 102]], pad_value=0)
    >>> padded["input_ids"], padded["attention_mask"]
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor
from torch.nn.utils.rnn import pad_sequence

from contrastext.data.examples import Example

# The tensors an encoder's forward takes; tokenize() may add others (special_tokens_mask, labels).
ENCODER_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def encoder_inputs(batch: dict) -> dict[str, Tensor]:
    """The entries of a tokenised batch that the encoder's forward takes (see ``ENCODER_INPUTS``)."""
    return {name: batch[name] for name in ENCODER_INPUTS if name in batch}


def tokenize(
    tokenizer,
    texts: Sequence[str],
    max_length: int,
    pairs: Sequence[str] | None = None,
    special_tokens_mask: bool = True,
) -> dict[str, Tensor]:
    """Tokenise ``texts`` (and ``pairs`` as second segments) with truncation and dynamic padding.

    Returns ``input_ids``, ``attention_mask``, ``token_type_ids`` (when the tokenizer has them) and,
    by default, ``special_tokens_mask`` (what :mod:`contrastext.data.views` needs).
    """
    if isinstance(texts, str):
        raise TypeError("tokenize expects a list of texts, got one string")
    if pairs is not None and len(pairs) != len(texts):
        raise ValueError(f"{len(texts)} texts but {len(pairs)} pair texts")
    encoded = tokenizer(
        list(texts),
        list(pairs) if pairs is not None else None,
        max_length=max_length,
        truncation=True,
        padding="longest",
        return_tensors="pt",
        return_special_tokens_mask=special_tokens_mask,
    )
    return dict(encoded)


def labels_tensor(examples: Sequence[Example], dtype: torch.dtype = torch.long) -> Tensor:
    """The examples' labels as a tensor; an example without a label is an error naming its source."""
    missing = [example for example in examples if example.label is None]
    if missing:
        raise ValueError(f"example {missing[0].source or missing[0].texts!r} has no label")
    return torch.tensor([example.label for example in examples], dtype=dtype)


def pad_sequences(
    sequences: Sequence[Sequence[int] | Tensor], pad_value: int = 0, key: str = "input_ids"
) -> dict[str, Tensor]:
    """Right-pad already-tokenised id lists to the longest one; returns ``{key, "attention_mask"}``."""
    if not sequences:
        raise ValueError("pad_sequences needs at least one sequence")
    tensors = [torch.as_tensor(sequence, dtype=torch.long) for sequence in sequences]
    padded = pad_sequence(tensors, batch_first=True, padding_value=pad_value)
    masks = [torch.ones(len(tensor), dtype=torch.long) for tensor in tensors]
    return {key: padded, "attention_mask": pad_sequence(masks, batch_first=True, padding_value=0)}
