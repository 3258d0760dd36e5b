"""pairs: scoring follows sentence-transformers' InformationRetrievalEvaluator (identical texts kept)."""

from __future__ import annotations

import pytest

from contrastext.data.examples import Example
from contrastext.evaluation.retrieval import evaluate_pairs

st_ir = pytest.importorskip("sentence_transformers.sentence_transformer.evaluation.information_retrieval")

ANCHORS = ["A man is playing a guitar.", "A woman slices an onion.", "Children play in the park.",
           "The stock market fell today.", "A chef is cooking pasta.", "How do I learn Python?",
           "Kids are playing outside.", "Someone plays an instrument.", "What is the capital of France?",
           "A dog runs on the beach."]  # fmt: skip
POSITIVES = ["Someone plays an instrument.", "Vegetables are being cut.", "Kids are playing outside.",
             "Shares dropped sharply.", "Pasta is being made by a cook.", "Best way to study Python programming?",
             "Children play in the park.", "A guitarist performs on stage.", "Which city is France's capital?",
             "A puppy is running by the sea."]  # fmt: skip
NEGATIVES = ["A man is playing a guitar.", "A man cuts bread.", "Adults work in an office.", "The market rose.",
             "A chef washes dishes.", "How do I learn Java?", "Kids are sleeping.", "Nobody plays music.",
             "What is the capital of Spain?", "A cat sleeps on a sofa."]  # fmt: skip


def st_pair_scores(model, pairs: list[Example]) -> dict[str, float]:
    """ST's evaluator on the same retrieval: one query per row, the distinct candidates, the positive relevant."""
    candidates = list(dict.fromkeys(text for example in pairs for text in example.texts[1:]))
    ids = {text: f"c{index}" for index, text in enumerate(candidates)}
    evaluator = st_ir.InformationRetrievalEvaluator(
        {str(i): example.texts[0] for i, example in enumerate(pairs)}, {ids[text]: text for text in candidates},
        {str(i): {ids[example.texts[1]]} for i, example in enumerate(pairs)}, accuracy_at_k=[1, 10], mrr_at_k=[10],
        precision_recall_at_k=[1], ndcg_at_k=[10], map_at_k=[10], write_csv=False,
    )  # fmt: skip
    scores = evaluator(model)
    return {"accuracy_at_1": scores["cosine_accuracy@1"] * 100, "accuracy_at_10": scores["cosine_accuracy@10"] * 100,
            "mrr_at_10": scores["cosine_mrr@10"] * 100}  # fmt: skip


@pytest.fixture(scope="module")
def st_model(minilm_path):
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(minilm_path, device="cpu")


@pytest.mark.parametrize("with_negatives", [False, True])
def test_pairs_give_st_numbers_when_anchors_are_also_candidates(st_model, with_negatives):
    pairs = [Example((a, p, n) if with_negatives else (a, p)) for a, p, n in zip(ANCHORS, POSITIVES, NEGATIVES, strict=True)]
    # anchors 2, 6 and 7 are other rows' positives; anchor 0 is row 0's hard negative
    theirs = st_pair_scores(st_model, pairs)
    mine = evaluate_pairs(lambda texts, batch_size=64: st_model.encode(texts, batch_size=batch_size), pairs)
    for key, value in theirs.items():
        assert mine[key] == pytest.approx(value, abs=1e-6), key
    excluded = evaluate_pairs(lambda texts, batch_size=64: st_model.encode(texts, batch_size=batch_size), pairs,
                              exclude_identical=True)  # fmt: skip
    assert excluded["accuracy_at_1"] > mine["accuracy_at_1"]  # the old rule drops the anchors' own texts
