"""The probe on registry tasks whose training data cannot fit it: one-line errors naming the file (issue 10)."""

from __future__ import annotations

import numpy as np
import pytest

from contrastext.errors import DataFormatError, EmptyDataError
from contrastext.evaluation.classification import evaluate_classification

TRAIN = "glue/SST-2/train.tsv"
DEV = "glue/SST-2/dev.tsv"


def encode(texts, batch_size=64):
    return np.stack([[len(text), text.count("e"), 1.0] for text in texts]).astype(float)


@pytest.fixture
def sst2_root(tmp_path, data_root):
    """SST-2 with 20 dev rows and a train file the test writes."""
    (tmp_path / "glue/SST-2").mkdir(parents=True)
    dev = (data_root / DEV).read_text(encoding="utf-8").splitlines()[:21]
    (tmp_path / DEV).write_text("\n".join(dev) + "\n", encoding="utf-8")
    return tmp_path


def write_train(root, rows):
    (root / TRAIN).write_text("sentence\tlabel\n" + "".join(f"{text}\t{label}\n" for text, label in rows))
    return root / TRAIN


def test_one_class_in_train_names_the_file(sst2_root):
    path = write_train(sst2_root, [(f"good film {i}", 1) for i in range(12)])
    with pytest.raises(DataFormatError, match=r"at least 2 classes .*\[1\]") as caught:
        evaluate_classification(encode, "sst2", sst2_root)
    assert str(caught.value).startswith(str(path))


def test_a_class_too_rare_for_cross_validation_names_the_file(sst2_root):
    path = write_train(sst2_root, [(f"good film {i}", 1) for i in range(12)] + [("bad film", 0)])
    with pytest.raises(DataFormatError, match="cross-validation needs at least 2") as caught:
        evaluate_classification(encode, "sst2", sst2_root)
    assert str(caught.value).startswith(str(path))


def test_a_train_file_with_a_header_only_is_an_empty_data_error(sst2_root):
    path = write_train(sst2_root, [])
    with pytest.raises(EmptyDataError, match="no example") as caught:
        evaluate_classification(encode, "sst2", sst2_root)
    assert str(path) in str(caught.value)


def test_max_train_leaving_one_class_says_so(sst2_root):
    write_train(sst2_root, [(f"good film {i}", 1) for i in range(30)] + [(f"bad film {i}", 0) for i in range(2)])
    with pytest.raises(DataFormatError, match="--max-train"):
        evaluate_classification(encode, "sst2", sst2_root, max_train=10, seed=0)


def test_a_balanced_train_file_still_works(sst2_root):
    write_train(sst2_root, [(f"good film {i}", 1) for i in range(10)] + [(f"bad movie {i}e", 0) for i in range(10)])
    assert evaluate_classification(encode, "sst2", sst2_root)["n"] == 20


def test_f1_follows_the_tasks_class_count_not_the_classes_present():
    """A 3-class task whose evaluation rows hold only classes 0 and 1 still gets macro F1 (sklearn's definition)."""
    from sklearn.metrics import f1_score

    from contrastext.evaluation.classification import classification_scores

    predictions, labels = np.array([0, 1, 1, 1, 1]), np.array([0, 1, 0, 0, 1])
    three = classification_scores(predictions, labels, num_classes=3)
    two = classification_scores(predictions, labels, num_classes=2)
    assert three["f1"] == pytest.approx(100 * f1_score(labels, predictions, average="macro", labels=[0, 1]))
    assert two["f1"] == pytest.approx(100 * f1_score(labels, predictions, average="binary"))
    assert three["f1"] != two["f1"]
