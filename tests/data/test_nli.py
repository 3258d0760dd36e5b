"""NLI rows as SimCSE's triplets (contrastext/data/nli.py): entailment positive, contradiction hard negative,
neutral dropped; labels as strings or GLUE / Hugging Face integers (0 entailment, 1 neutral, 2 contradiction); a
premise's i-th entailment paired with its i-th contradiction. The rule rebuilds the shared SimCSE-format file
nli/snli_devtest_for_simcse.csv from SentEval's SNLI dev + test files, row for row."""

from __future__ import annotations

import csv

import pytest

from contrastext.data.examples import Example
from contrastext.data.nli import nli_class, nli_triplets
from contrastext.errors import DataFormatError


def rows(*items: tuple[str, str, object]) -> list[Example]:
    return [Example((p, h), label, f"nli.csv:{n + 2}") for n, (p, h, label) in enumerate(items)]


def test_the_shared_simcse_triplets_are_rebuilt_from_snli_dev_and_test(data_root):
    folder = data_root / "senteval" / "downstream" / "SNLI"
    examples = []
    for split in ("dev", "test"):
        columns = [(folder / f"{name}.{split}").read_text(encoding="utf-8").split("\n") for name in ("s1", "s2", "labels")]
        examples += [Example((s1.strip(), s2.strip()), label, f"{split}:{n + 1}")
                     for n, (s1, s2, label) in enumerate(zip(*columns, strict=True)) if label]  # fmt: skip
    triplets, counts = nli_triplets(examples)
    with (data_root / "nli" / "snli_devtest_for_simcse.csv").open(encoding="utf-8", newline="") as handle:
        expected = [tuple(row) for row in list(csv.reader(handle))[1:]]
    assert [example.texts for example in triplets] == expected  # the same rows, in the same order
    assert (counts.triplets, counts.entailment, counts.contradiction, counts.neutral) == (5883, 6697, 6515, 6454)


@pytest.mark.parametrize(
    ("value", "kind"),
    [("entailment", "entailment"), ("Contradiction", "contradiction"), (" neutral ", "neutral"), (0, "entailment"),
     ("1", "neutral"), (2, "contradiction"), ("2.0", "contradiction"), ("-", None), (-1, None)],
)  # fmt: skip
def test_labels_read_as_glue_and_hugging_face_name_them(value, kind):
    assert nli_class(value, "nli.csv:2") == kind


def test_pairing_counts_and_a_premise_spread_over_the_file():
    triplets, counts = nli_triplets(rows(
        ("a dog runs", "an animal moves", "entailment"),
        ("a man eats", "someone is eating", 0),
        ("a dog runs", "the dog sleeps", 2),
        ("a dog runs", "a dog is outside", 1),
        ("a man eats", "a man plays chess", "contradiction"),
        ("a dog runs", "a pet is running", "entailment"),
        ("a dog runs", "a cat runs", "-"),
        ("a dog runs", "nothing moves", "contradiction"),
        ("a dog runs", "an animal runs", "entailment"),
    ))  # fmt: skip
    assert [example.texts for example in triplets] == [
        ("a dog runs", "an animal moves", "the dog sleeps"),
        ("a man eats", "someone is eating", "a man plays chess"),
        ("a dog runs", "a pet is running", "nothing moves"),
    ]
    assert [example.source for example in triplets] == ["nli.csv:2", "nli.csv:3", "nli.csv:7"]  # the entailment's row
    assert (counts.rows, counts.entailment, counts.neutral, counts.contradiction, counts.no_gold) == (9, 4, 1, 3, 1)
    assert (counts.triplets, counts.premises, counts.unpaired_entailment, counts.unpaired_contradiction) == (3, 2, 1, 0)
    assert "9 rows (4 entailment, 3 contradiction, 1 neutral dropped, 1 without a gold label dropped) -> 3 triplets" \
        in counts.describe("nli.csv")


@pytest.mark.parametrize("label", ["not_entailment", "3", "0.5", "yes"])
def test_a_label_that_is_not_nli_names_the_file_and_line(label):
    with pytest.raises(DataFormatError, match=rf"^nli.csv:3: label '{label}' is not an NLI label"):
        nli_triplets(rows(("p", "h", "entailment"), ("p", "h2", label)))
