"""SimCSE on n-tuples (anchor, positive, negative_1 … negative_m): the m negative blocks are stacked as
sentence-transformers stacks its negative columns, so with InfoNCE(τ = 0.05) the loss of a batch equals
``MultipleNegativesRankingLoss(scale=20)`` on the same model and texts (issue 23, item 3)."""

from __future__ import annotations

import pytest
import torch

from contrastext.data.examples import Example
from contrastext.errors import DataFormatError
from contrastext.methods.simcse import SimCSE
from contrastext.models.encoder import TextEncoder
from contrastext.objectives import InfoNCE

pytestmark = pytest.mark.usefixtures("single_torch_thread")

ROWS = [
    ("what about cats", "a text on cats", "a text on rain", "a text on tea", "a text on chess"),
    ("what about rome", "a city in italy", "a text on pizza", "a text on trains", "a text on rivers"),
    ("how to brew tea", "steep the leaves", "grind the beans", "a text on bikes", "a text on gardens"),
]


@pytest.mark.parametrize("negatives", [0, 1, 3])
def test_the_loss_on_n_tuples_equals_sentence_transformers_mnrl(minilm_path, negatives):
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

    encoder = TextEncoder.load(minilm_path).eval()
    method = SimCSE(encoder, InfoNCE(temperature=0.05), supervised=True, gather=False).eval()
    examples = [Example(row[: 2 + negatives]) for row in ROWS]
    with torch.no_grad():
        ours = method(method.collate(examples))["infonce"]

    model = SentenceTransformer(minilm_path, device="cpu").eval()
    columns = [[row[column] for row in ROWS] for column in range(2 + negatives)]
    with torch.no_grad():
        theirs = MultipleNegativesRankingLoss(model, scale=20.0)([model.tokenize(texts) for texts in columns], None)
    torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=1e-5)


def test_examples_of_different_lengths_in_one_batch_are_refused(minilm_path):
    method = SimCSE(TextEncoder.load(minilm_path), InfoNCE(temperature=0.05), supervised=True, gather=False)
    with pytest.raises(DataFormatError, match=r"t.csv:3: .* all of one kind; got 3 texts after 4-text examples"):
        method.collate([Example(ROWS[0][:4], source="t.csv:2"), Example(ROWS[1][:3], source="t.csv:3")])


def test_cached_gradient_chunks_of_n_tuples_give_the_batchs_loss(minilm_path):
    """train.cache_chunk cuts an n-tuple batch into chunks holding every view of their rows: the loss from the
    chunks' embeddings, concatenated per view, is the whole batch's."""
    method = SimCSE(TextEncoder.load(minilm_path).eval(), InfoNCE(temperature=0.05), supervised=True, gather=False)
    method.eval()
    batch = method.collate([Example(row) for row in ROWS])
    with torch.no_grad():
        whole = method(batch)["infonce"]
        chunks = [method.embed(chunk) for chunk in method.split_batch(batch, 2)]
        views = [torch.cat([chunk[view] for chunk in chunks]) for view in range(len(ROWS[0]))]
        chunked = method.loss_from_embeddings(views, batch)["infonce"]
    torch.testing.assert_close(chunked, whole, atol=1e-5, rtol=1e-5)
