"""The SentEval-style probe on a small slice of SST-2 with all-MiniLM-L6-v2 (real data, frozen encoder)."""

from __future__ import annotations

from collections import Counter

import pytest

from contrastext.data.tasks import load_task
from contrastext.evaluation.classification import evaluate_classification
from contrastext.models.encoder import TextEncoder


@pytest.fixture(scope="module")
def encoder(minilm_path):
    model = TextEncoder.load(minilm_path)
    model.eval()
    return model


def test_probe_beats_the_majority_class_on_sst2(encoder, data_root):
    limit = 200
    result = evaluate_classification(encoder.encode, "sst2:dev", data_root, max_train=400, limit=limit)
    labels = [example.label for example in load_task("sst2:dev", data_root).examples[:limit]]
    majority = 100 * Counter(labels).most_common(1)[0][1] / len(labels)
    assert result["split"] == "dev" and result["n"] == limit and result["n_train"] == 400
    assert result["c_selection"] == "5-fold CV on train"  # evaluating dev, so C cannot be chosen on it
    assert result["accuracy"] > majority
    assert 0.0 <= result["f1"] <= 100.0 and -100.0 <= result["mcc"] <= 100.0
