"""Hard-negative mining gives sentence-transformers' mine_hard_negatives negatives on the same inputs."""

from __future__ import annotations

import csv
import random

import pytest

from contrastext.errors import ConfigError, UnknownNameError
from contrastext.negatives.mining import MiningOptions, mine_hard_negatives

datasets = pytest.importorskip("datasets")
hard_negatives = pytest.importorskip("sentence_transformers.util.hard_negatives")


@pytest.fixture(scope="module")
def st_model(minilm_path):
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(minilm_path, device="cpu")


@pytest.fixture(scope="module")
def nli_rows(data_root):
    """120 (premise, entailment) rows of SNLI: premises repeat, so some queries have several positives."""
    with open(data_root / "nli" / "snli_devtest_for_simcse.csv", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))[:120]
    return [row["sent0"] for row in rows], [row["sent1"] for row in rows], [row["hard_neg"] for row in rows]


_CACHE: dict[str, object] = {}


def encode_with(model):
    """The model's normalised embeddings, each text encoded once per test session."""
    import numpy as np

    def encode(texts):
        new = [text for text in dict.fromkeys(texts) if text not in _CACHE]
        if new:
            vectors = model.encode(new, batch_size=32, normalize_embeddings=True, convert_to_numpy=True)
            _CACHE.update(zip(new, vectors, strict=True))
        return np.stack([_CACHE[text] for text in texts])

    return encode


def st_negatives(model, queries, positives, corpus=None, seed=0, **options) -> tuple[dict[str, set[str]], object]:
    dataset = datasets.Dataset.from_dict({"query": queries, "answer": positives})
    random.seed(seed)
    mined = hard_negatives.mine_hard_negatives(dataset, model, corpus=corpus, verbose=False, batch_size=32, **options)
    found: dict[str, set[str]] = {}
    for row in mined:
        for column in mined.column_names[2:]:
            if column.startswith("negative"):
                found.setdefault(row["query"], set()).add(row[column])
    return found, mined


def overlap(mine: dict[str, set[str]], theirs: dict[str, set[str]]) -> float:
    keys = set(mine) | set(theirs)
    shared = sum(len(mine.get(k, set()) & theirs.get(k, set())) for k in keys)
    total = sum(max(len(mine.get(k, set())), len(theirs.get(k, set()))) for k in keys)
    return shared / total


@pytest.mark.parametrize(
    ("options", "search"),
    [
        ({}, "exact"),
        ({}, "faiss"),
        ({"num_negatives": 5, "relative_margin": 0.05}, "exact"),
        ({"num_negatives": 5, "relative_margin": 0.05}, "faiss"),
        ({"range_min": 2, "range_max": 12, "max_score": 0.8, "min_score": 0.1, "num_negatives": 3}, "exact"),
        ({"absolute_margin": 0.02, "num_negatives": 2, "output_format": "n-tuple"}, "exact"),
        ({"num_negatives": 3, "output_format": "labeled-pair"}, "exact"),
        ({"num_negatives": 4, "sampling_strategy": "random", "range_max": 20}, "exact"),
        ({"num_negatives": 3, "include_positives": True}, "exact"),
    ],
)
def test_negatives_equal_st(st_model, nli_rows, options, search):
    queries, positives, corpus = nli_rows
    theirs, st_rows = st_negatives(st_model, queries, positives, corpus=corpus, **options)
    mined = mine_hard_negatives(queries, positives, encode_with(st_model), corpus=corpus,
                                options=MiningOptions(search=search, **options), anchor_name="query",
                                positive_name="answer")  # fmt: skip
    if options.get("output_format") == "labeled-pair":
        mine = {}
        for query, text, label in mined.rows:
            if label == 0:
                mine.setdefault(query, set()).add(text)
        theirs = {}
        for row in st_rows:
            if row["label"] == 0:
                theirs.setdefault(row["query"], set()).add(row["answer"])
    else:
        mine = {}
        for row in mined.rows:
            mine.setdefault(row[0], set()).update(row[2:])
    assert overlap(mine, theirs) >= 0.95
    assert len(mined.rows) == pytest.approx(len(st_rows), rel=0.05)
    assert tuple(st_rows.column_names) == mined.columns


def test_ivf_search_recovers_most_of_the_exact_negatives(st_model, nli_rows):
    queries, positives, corpus = nli_rows
    exact = mine_hard_negatives(queries, positives, encode_with(st_model), corpus=corpus)
    ivf = mine_hard_negatives(queries, positives, encode_with(st_model), corpus=corpus,
                              options=MiningOptions(search="ivf"))  # fmt: skip
    as_sets = [{row[0]: set() for row in mined.rows} for mined in (exact, ivf)]
    for found, mined in zip(as_sets, (exact, ivf), strict=True):
        for row in mined.rows:
            found[row[0]].add(row[2])
    assert overlap(*as_sets) >= 0.8


def test_summary_is_st_table(st_model, nli_rows, capsys):
    queries, positives, corpus = nli_rows
    mined = mine_hard_negatives(queries, positives, encode_with(st_model), corpus=corpus,
                                options=MiningOptions(relative_margin=0.05))  # fmt: skip
    st_negatives_rows = hard_negatives.mine_hard_negatives(
        datasets.Dataset.from_dict({"query": queries, "answer": positives}), st_model, corpus=corpus,
        relative_margin=0.05, batch_size=32,
    )  # fmt: skip
    printed = capsys.readouterr().out.splitlines()
    table = [line for line in printed if line.split(" ")[0] in {"Metric", "Count", "Mean", "Median", "Std", "Min", "25%",
                                                                 "50%", "75%", "Max"}]  # fmt: skip
    assert len(st_negatives_rows) == len(mined.rows)
    assert table == mined.summary[1:11]  # the same table, to its 4 decimals
    skipped = [line for line in mined.summary if line.startswith("Skipped")]
    assert skipped and "relative_margin of 0.05" in skipped[0]
    assert skipped == [line for line in printed if line.startswith("Skipped")]


def test_a_query_with_several_positives_is_mined_once(st_model):
    queries = ["a cat", "a cat", "a car", "a boat", "a plane", "a train"]
    positives = ["a kitten", "a small cat", "an automobile", "a ship", "an aircraft", "a locomotive"]
    mined = mine_hard_negatives(queries, positives, encode_with(st_model), options=MiningOptions(num_negatives=2))
    assert "Found 5 unique queries out of 6 total queries." in mined.notes
    negatives = {row[2] for row in mined.rows if row[0] == "a cat"}
    assert not negatives & {"a kitten", "a small cat"}  # a query's positives are never its negatives
    assert sum(row[0] == "a cat" for row in mined.rows) == 4  # 2 positives x 2 negatives


def test_bad_options_are_named():
    encode = lambda texts: [[1.0, 0.0]] * len(texts)  # noqa: E731
    with pytest.raises(UnknownNameError, match="--sampling-strategy"):
        mine_hard_negatives(["a"], ["b"], encode, options=MiningOptions(sampling_strategy="best"))
    with pytest.raises(ConfigError, match="--num-negatives"):
        mine_hard_negatives(["a"], ["b"], encode, options=MiningOptions(num_negatives=0))
    with pytest.raises(ConfigError, match="--range-min must be smaller"):
        mine_hard_negatives(["a"], ["b"], encode, options=MiningOptions(range_min=5, range_max=3))


def test_a_search_a_user_registers_mines(st_model, nli_rows):
    """--search takes any registered search: one registered at run time mines what its parent does."""
    from contrastext.negatives.search import SEARCHES, ExactSearch

    class SmallChunks(ExactSearch):
        def __init__(self):
            super().__init__(chunk_size=7)

    queries, positives, corpus = nli_rows
    exact = mine_hard_negatives(queries, positives, encode_with(st_model), corpus=corpus)
    with SEARCHES.registered("small-chunks", SmallChunks):
        mined = mine_hard_negatives(queries, positives, encode_with(st_model), corpus=corpus,
                                    options=MiningOptions(search="small-chunks"))  # fmt: skip
    assert mined.rows == exact.rows
    with pytest.raises(UnknownNameError, match="small-chunks"):
        MiningOptions(search="small-chunks").check()
