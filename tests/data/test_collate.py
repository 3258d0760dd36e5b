"""Tokenisation with dynamic padding and sequence padding."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoTokenizer

from contrastext.data.collate import labels_tensor, pad_sequences, tokenize
from contrastext.data.examples import Example


@pytest.fixture(scope="module")
def tokenizer(minilm_path):
    return AutoTokenizer.from_pretrained(minilm_path)


def test_pads_to_the_longest_in_the_batch_only(tokenizer):
    short = tokenize(tokenizer, ["a cat", "the cat sat"], max_length=64)
    assert short["input_ids"].shape == (2, 5)  # [CLS] the cat sat [SEP]
    assert short["attention_mask"].tolist() == [[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]]
    assert short["special_tokens_mask"][0].tolist() == [1, 0, 0, 1, 1]
    truncated = tokenize(tokenizer, ["word " * 100], max_length=8)
    assert truncated["input_ids"].shape == (1, 8)
    pairs = tokenize(tokenizer, ["a cat"], max_length=16, pairs=["a dog"])
    assert pairs["token_type_ids"][0].tolist() == [0, 0, 0, 0, 1, 1, 1]


def test_labels():
    examples = [Example(("a", "b"), 1), Example(("c d e", "f"), 0, source="x.tsv:3")]
    assert labels_tensor(examples).tolist() == [1, 0]
    with pytest.raises(ValueError, match="has no label"):
        labels_tensor([Example(("a",), source="y:1")])


def test_pad_sequences():
    padded = pad_sequences([[101, 7, 102], [101, 102]], pad_value=0)
    assert torch.equal(padded["input_ids"], torch.tensor([[101, 7, 102], [101, 102, 0]]))
    assert torch.equal(padded["attention_mask"], torch.tensor([[1, 1, 1], [1, 1, 0]]))
