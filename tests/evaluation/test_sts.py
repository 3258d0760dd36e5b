"""STS scoring on hand-made embeddings whose cosine ordering is known."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from contrastext.data.examples import Example
from contrastext.evaluation.sts import evaluate_sts

# "a" is the anchor; b, c, d, e are ever further from it (angles 0°, 30°, 60°, 90°, 180°).
ANGLES = {"a": 0.0, "b": 30.0, "c": 60.0, "d": 90.0, "e": 180.0, "f": 45.0, "g": 120.0}
VECTORS = {name: np.array([np.cos(np.radians(deg)), np.sin(np.radians(deg)), 0.0]) for name, deg in ANGLES.items()}


class CountingEncoder:
    """Looks the vectors up and records every batch it was asked to encode."""

    def __init__(self):
        self.calls: list[list[str]] = []

    def __call__(self, texts, batch_size=64):
        self.calls.append(list(texts))
        return np.stack([VECTORS[text] for text in texts])


def pairs(*rows):
    return [Example((s1, s2), label=score) for s1, s2, score in rows]


def test_known_ordering_gives_perfect_spearman():
    data = pairs(("a", "a", 5.0), ("a", "b", 4.0), ("a", "c", 3.0), ("a", "d", 1.0), ("a", "e", 0.0))
    result = evaluate_sts(CountingEncoder(), data)
    assert result["spearman"] == pytest.approx(100.0)
    assert result["n"] == 5
    assert 0 < result["pearson"] <= 100.0


def test_reversed_scores_give_minus_100():
    data = pairs(("a", "b", 0.0), ("a", "c", 1.0), ("a", "d", 2.0))
    assert evaluate_sts(CountingEncoder(), data)["spearman"] == pytest.approx(-100.0)


def test_each_sentence_is_encoded_once():
    data = pairs(("a", "b", 4.0), ("b", "a", 4.0), ("a", "c", 3.0), ("c", "d", 3.5))
    encoder = CountingEncoder()
    evaluate_sts(encoder, data)
    encoded = [text for call in encoder.calls for text in call]
    assert sorted(encoded) == ["a", "b", "c", "d"]


def test_all_and_wmean_aggregations():
    subsets = {
        "one": pairs(("a", "b", 4.0), ("a", "c", 3.0), ("a", "d", 1.0)),
        # cosines all distinct (no ties): angles 45°, 180°, 120°, 150°
        "two": pairs(("a", "f", 1.0), ("a", "e", 3.0), ("a", "g", 2.0), ("b", "e", 0.5)),
    }
    everything = [example for subset in subsets.values() for example in subset]
    cosines = {
        (s1, s2): float(VECTORS[s1] @ VECTORS[s2]) for s1, s2 in [example.texts for example in everything]
    }

    def rho(rows):
        return 100 * stats.spearmanr([cosines[r.texts] for r in rows], [r.label for r in rows])[0]

    result_all = evaluate_sts(CountingEncoder(), [], subsets=subsets, aggregation="all")
    assert result_all["spearman"] == pytest.approx(rho(everything))
    assert result_all["n"] == 7 and result_all["aggregation"] == "all"
    assert result_all["subsets"]["one"]["spearman"] == pytest.approx(rho(subsets["one"]))
    assert result_all["subsets"]["two"]["n"] == 4

    result_wmean = evaluate_sts(CountingEncoder(), [], subsets=subsets, aggregation="wmean")
    expected = (3 * rho(subsets["one"]) + 4 * rho(subsets["two"])) / 7
    assert result_wmean["spearman"] == pytest.approx(expected)
    assert result_wmean["subsets"] == result_all["subsets"]


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="no scored pairs"):
        evaluate_sts(CountingEncoder(), [])
    with pytest.raises(ValueError, match="x.tsv:3: STS needs pairs"):
        evaluate_sts(CountingEncoder(), [Example(("a",), label=1.0, source="x.tsv:3")])
    with pytest.raises(ValueError, match="aggregation"):
        evaluate_sts(CountingEncoder(), pairs(("a", "b", 1.0)), aggregation="mean")


# ------------------------------------------------------------------ issue 10: undefined correlations, NaN models


def test_constant_gold_scores_give_none_with_a_warning_never_nan(caplog):
    result = evaluate_sts(CountingEncoder(), pairs(("a", "b", 2.0), ("a", "c", 2.0), ("a", "d", 2.0)))
    assert result == {"spearman": None, "pearson": None, "n": 3}
    assert "gold scores are constant" in caplog.text and "null" in caplog.text


def test_a_single_pair_gives_none_instead_of_raising():
    assert evaluate_sts(CountingEncoder(), pairs(("a", "b", 2.0)))["spearman"] is None


def test_an_undefined_subset_makes_the_wmean_headline_none_but_not_all():
    subsets = {
        "flat": pairs(("a", "b", 1.0), ("a", "c", 1.0)),
        "fine": pairs(("a", "b", 3.0), ("a", "c", 2.0), ("a", "d", 1.0)),
    }
    wmean = evaluate_sts(CountingEncoder(), [], subsets=subsets, aggregation="wmean")
    assert wmean["spearman"] is None and wmean["subsets"]["flat"]["spearman"] is None
    assert wmean["subsets"]["fine"]["spearman"] == pytest.approx(100.0)
    everything = evaluate_sts(CountingEncoder(), [], subsets=subsets, aggregation="all")
    assert everything["spearman"] is not None


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_embeddings_are_refused(bad):
    from contrastext.errors import NonFiniteError

    def diverged(texts, batch_size=64):
        vectors = np.stack([VECTORS[text] for text in texts])
        vectors[1, 0] = bad
        return vectors

    with pytest.raises(NonFiniteError, match="NaN or infinite embeddings for 1 of 3 texts"):
        evaluate_sts(diverged, pairs(("a", "b", 2.0), ("a", "c", 1.0)))


def test_no_pairs_is_a_contrastext_error():
    from contrastext.errors import ContrastextError

    with pytest.raises(ContrastextError, match="no scored pairs"):
        evaluate_sts(CountingEncoder(), [])
