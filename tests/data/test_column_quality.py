"""data/column_quality.py: the duplicate-positive count of a column store is the in-memory one; above the row
limit the check is skipped."""

from __future__ import annotations

import csv

from contrastext.data.column_convert import column_examples
from contrastext.data.column_quality import duplicate_positives
from contrastext.data.quality import duplicate_positives as in_memory_duplicates
from contrastext.data.sources import DataSpec, read_texts


def test_duplicate_positives_are_counted_on_the_hashes(tmp_path):
    path = tmp_path / "pairs.csv"
    rows = [("q1", "same"), ("q2", "other"), ("q3", "once more"), ("q4", "other"), ("q5", "same"), ("q6", "x")]
    with path.open("w", newline="") as handle:
        csv.writer(handle).writerows([("anchor", "positive"), *rows])
    store = column_examples(path, ["anchor", "positive"], cache_dir=tmp_path / "cache", progress=False)
    examples = read_texts(DataSpec(path=str(path)), "pairs", "mnrl").examples
    assert duplicate_positives(store) == in_memory_duplicates(examples) == (2, "same")
    assert duplicate_positives(store, limit=5) is None


def test_no_repeated_positive_is_zero(tmp_path):
    path = tmp_path / "pairs.csv"
    path.write_text("anchor,positive\na,b\nc,d\n")
    store = column_examples(path, ["anchor", "positive"], cache_dir=tmp_path / "cache", progress=False)
    assert duplicate_positives(store) == (0, None)
