"""STS-B dev with all-MiniLM-L6-v2: our Spearman equals sentence-transformers' evaluator; geometry on real data.

MiniLM is already sentence-tuned, so its absolute scores say nothing about our training code; this module
checks that our evaluation pipeline (registry reader -> encoder -> cosine -> correlation) reproduces the
reference implementation on the same pairs. To stay within the test budget on a shared 2-core machine it
uses the first PARITY_PAIRS pairs of STS-B dev (the full split was checked by hand: see the report).
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.feature_extraction.text import HashingVectorizer

from contrastext.data.tasks import load_task
from contrastext.evaluation.geometry import alignment, alignment_uniformity, uniformity
from contrastext.evaluation.sts import evaluate_sts
from contrastext.models.encoder import TextEncoder

PARITY_PAIRS = 300


@pytest.fixture(scope="module")
def cached_encode(minilm_path):
    """Our TextEncoder's ``encode``, memoised so the tests of this module encode each sentence once."""
    encoder = TextEncoder.load(minilm_path)
    encoder.eval()
    cache: dict[str, np.ndarray] = {}

    def encode(texts, batch_size=64):
        missing = [text for text in dict.fromkeys(texts) if text not in cache]
        if missing:
            embeddings = encoder.encode(missing, batch_size=batch_size, convert_to="numpy")
            cache.update(zip(missing, embeddings, strict=True))
        return np.stack([cache[text] for text in texts])

    return encode


@pytest.fixture(scope="module")
def stsb_dev(data_root):
    return load_task("stsb:dev", data_root).examples[:PARITY_PAIRS]


def test_stsb_dev_spearman_matches_sentence_transformers(cached_encode, stsb_dev, minilm_path):
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.evaluation import EmbeddingSimilarityEvaluator

    ours = evaluate_sts(cached_encode, stsb_dev, batch_size=64)
    assert ours["n"] == len(stsb_dev) == PARITY_PAIRS

    evaluator = EmbeddingSimilarityEvaluator(
        [example.texts[0] for example in stsb_dev],
        [example.texts[1] for example in stsb_dev],
        [example.label / 5.0 for example in stsb_dev],  # ST's datasets use [0, 1]; ranks are unchanged
        batch_size=64,
        main_similarity="cosine",
        name="sts-dev",
        write_csv=False,
    )
    theirs = evaluator(SentenceTransformer(minilm_path, device="cpu"))
    assert ours["spearman"] / 100 == pytest.approx(theirs["sts-dev_spearman_cosine"], abs=1e-4)
    assert ours["pearson"] / 100 == pytest.approx(theirs["sts-dev_pearson_cosine"], abs=1e-4)


def test_minilm_aligns_positive_pairs(cached_encode, stsb_dev):
    positives = [example for example in stsb_dev if example.label >= 4.0]
    left = cached_encode([example.texts[0] for example in positives])
    right = cached_encode([example.texts[1] for example in positives])
    sentences = list(dict.fromkeys(text for example in stsb_dev for text in example.texts))
    align, uniform = alignment(left, right), uniformity(cached_encode(sentences))
    assert align >= 0.0 and uniform <= 0.0
    # Positive pairs sit closer than random pairs: alignment is below the mean squared distance of all
    # pairs, which is >= -uniformity / 2 by Jensen (log E exp(-2d) >= -2 E d).
    assert align < -uniform / 2


def test_alignment_uniformity_reads_stsb(data_root):
    """The data plumbing on the full dev split, with a cheap bag-of-words "encoder" (hashed word counts)."""
    vectorizer = HashingVectorizer(n_features=512, alternate_sign=False)

    def bag_of_words(texts, batch_size=64):
        return vectorizer.transform(texts).toarray()

    examples = load_task("stsb:dev", data_root).examples
    result = alignment_uniformity(bag_of_words, data_root, split="dev")
    assert result["split"] == "dev"
    assert result["n_positive_pairs"] == sum(example.label >= 4.0 for example in examples)
    assert result["n_sentences"] == len({text for example in examples for text in example.texts})
    assert result["alignment"] >= 0.0 and result["uniformity"] <= 0.0
