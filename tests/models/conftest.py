"""Fixtures for the encoder tests: all-MiniLM-L6-v2 loaded once per test module, and mixed-length texts."""

from __future__ import annotations

import pytest

from contrastext.models import TextEncoder

TEXTS = [
    "A man is playing a guitar.",
    "hi",
    "The quick brown fox jumps over the lazy dog near the river bank while children watch from the bridge.",
    "Cats sleep.",
    "A woman is slicing an onion in a small kitchen.",
    "ok",
    "Contrastive learning pulls paraphrases together and pushes unrelated sentences apart.",
]


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread(single_torch_thread) -> None:
    """Run these tests on one intra-op thread (``single_torch_thread``, tests/conftest.py): on a shared,
    busy CPU, OpenMP threads that spin-wait for each other made a tiny forward pass ~20x slower."""


@pytest.fixture(scope="module")
def minilm(minilm_path: str) -> TextEncoder:
    """The original all-MiniLM-L6-v2 folder as a TextEncoder (mean pooling + Normalize from its ST config)."""
    return TextEncoder.from_pretrained(minilm_path)


@pytest.fixture(scope="session")
def texts() -> list[str]:
    """Seven texts of very different lengths."""
    return list(TEXTS)


@pytest.fixture(scope="module")
def variant(minilm: TextEncoder):
    """``variant(**settings)``: another TextEncoder sharing MiniLM's backbone and tokenizer (no reload)."""

    def build(**settings) -> TextEncoder:
        return TextEncoder(minilm.backbone, minilm.tokenizer, max_seq_length=minilm.max_seq_length, **settings)

    return build
