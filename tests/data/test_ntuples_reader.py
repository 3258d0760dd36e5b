"""Rows with list-valued columns as n-tuples (contrastext/data/readers/ntuples.py): one example per positive, the
negatives as n-tuple columns, n by num_negatives (rows with fewer dropped, as sentence-transformers' n-tuple
format drops them) or the fewest of any row; bad lists are one error naming path:line."""

from __future__ import annotations

import pytest

from contrastext.data.readers.ntuples import read_ntuples
from contrastext.errors import DataFormatError

ROWS = [
    (1, {"query": "q1", "pos": ["p1", "p2"], "neg": ["n1", "n2", "n3"]}),
    (2, {"query": "q2", "pos": ["p3"], "neg": ["n4", "n5"]}),
    (4, {"query": "q3", "pos": [], "neg": ["n6", "n7"]}),
]


def test_one_example_per_positive_with_the_fewest_negatives_of_any_row():
    examples, counts = read_ntuples("t.jsonl", ROWS, "query", "pos", "neg")
    assert [example.texts for example in examples] == [
        ("q1", "p1", "n1", "n2"), ("q1", "p2", "n1", "n2"), ("q2", "p3", "n4", "n5"),
    ]  # fmt: skip
    assert [example.source for example in examples] == ["t.jsonl:1", "t.jsonl:1", "t.jsonl:2"]
    assert (counts.rows, counts.examples, counts.num_negatives, counts.fewest, counts.most) == (3, 3, 2, 2, 3)
    assert (counts.too_few, counts.no_positive, counts.negatives_left_out) == (0, 1, 1)
    assert examples.skipped_sources == ["t.jsonl:4: no positive in 'pos'"]


def test_num_negatives_drops_the_rows_with_fewer_as_sentence_transformers_n_tuples():
    examples, counts = read_ntuples("t.jsonl", ROWS, "query", "pos", "neg", num_negatives=3)
    assert [example.texts for example in examples] == [("q1", "p1", "n1", "n2", "n3"), ("q1", "p2", "n1", "n2", "n3")]
    assert (counts.too_few, counts.chosen) == (1, "data.num_negatives")
    assert "t.jsonl:2: 2 negatives in 'neg', fewer than 3" in examples.skipped_sources
    line = counts.describe("t.jsonl", ("query", "pos", "neg"))
    assert "3 rows -> 2 (anchor, positive, negative_1 … negative_3) rows" in line
    assert "1 rows with fewer than 3 dropped" in line


def test_no_negative_column_gives_pairs_and_a_string_is_a_list_of_one():
    rows = [(1, {"q": "a", "p": ["b", "c"]}), (2, {"q": "d", "p": "e"})]
    examples, counts = read_ntuples("t.jsonl", rows, "q", "p")
    assert [example.texts for example in examples] == [("a", "b"), ("a", "c"), ("d", "e")]
    assert counts.num_negatives == 0


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ({"query": "q", "pos": ["a", 3]}, r"t.jsonl:7: key 'pos': item 2 is 3, not a string"),
        ({"query": "q", "pos": ["a"], "neg": [None]}, r"t.jsonl:7: key 'neg': item 1 is None, not a string"),
        ({"query": ["q"], "pos": ["a"]}, r"t.jsonl:7: key 'query': expected a string \(one text a row\), found a list"),
        ({"query": "q", "pos": {"a": 1}}, r"t.jsonl:7: key 'pos': expected a list of strings"),
        ({"query": "q"}, r"t.jsonl:7: missing key 'pos'"),
        ({"query": "q", "pos": ["a", "  "]}, r"t.jsonl:7: empty text in column 'pos\[2\]'"),
    ],
)
def test_bad_rows_name_the_file_and_line(record, message):
    record.setdefault("neg", [])
    with pytest.raises(DataFormatError, match=message):
        read_ntuples("t.jsonl", [(7, record)], "query", "pos", "neg")
