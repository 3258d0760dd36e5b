"""data/column_convert.py: a pair file converted, streaming, to a cached column store that holds the rows the
in-memory reader gives (blank rows dropped and counted), in a cache folder keyed by the file's fingerprint; bad
input is an error naming ``file:line`` and leaves no store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contrastext.data import column_convert
from contrastext.data.column_convert import column_examples, store_key
from contrastext.data.quality import drop_blank
from contrastext.data.sources import DataSpec, read_texts
from contrastext.errors import DataFormatError, EmptyDataError


def write_pairs(path: Path, rows: list[tuple[str, str]]) -> Path:
    import csv

    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["anchor", "positive"])
        writer.writerows(rows)
    return path


def in_memory(path: Path):
    """What a run holds today: read_texts, then the blank rows dropped."""
    return drop_blank(list(read_texts(DataSpec(path=str(path)), "pairs", "mnrl").examples))


ROWS = [("a question", "its answer"), ("  padded  ", "a, quoted\nanswer"), ("\u200b\u200f", "blank anchor"),
        ("é ünïcode", "ok"), ("a question", "another answer")]


def test_the_store_holds_the_in_memory_rows_and_sources(tmp_path):
    path = write_pairs(tmp_path / "pairs.csv", ROWS)
    store = column_examples(path, ["anchor", "positive"], cache_dir=tmp_path / "cache", progress=False)
    kept, dropped = in_memory(path)
    assert list(store) == kept and len(store) == 4
    assert store.dropped_blank == len(dropped) == 1 and store.first_dropped == dropped[0].source
    assert store[-1] == kept[-1] and store[1:3] == kept[1:3]
    assert store.lengths.tolist() == [sum(len(text) for text in example.texts) for example in kept]
    with pytest.raises(IndexError):
        store[4]


def test_lengths_and_hashes_are_those_of_each_kept_row_s_texts(tmp_path):
    import xxhash

    path = write_pairs(tmp_path / "pairs.csv", ROWS + [(f"q {i}", f"a {i}") for i in range(100)])
    store = column_examples(path, ["anchor", "positive"], cache_dir=tmp_path / "cache", progress=False)
    texts = [example.texts for example in store]
    assert store.hashes.tolist() == [[xxhash.xxh3_64_intdigest(text.encode()) for text in row] for row in texts]
    assert store.lengths.tolist() == [sum(map(len, row)) for row in texts] and len(texts) == 104


def test_jsonl_rows_are_read_as_the_in_memory_reader_does(tmp_path):
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(json.dumps({"anchor": a, "positive": p, "id": i}) + "\n" for i, (a, p) in enumerate(ROWS)))
    store = column_examples(path, ["anchor", "positive"], cache_dir=tmp_path / "cache", progress=False)
    assert list(store) == in_memory(path)[0]


def test_the_store_is_cached_by_fingerprint_and_never_written_beside_the_input(tmp_path, monkeypatch):
    data = tmp_path / "data"
    data.mkdir()
    path = write_pairs(data / "pairs.csv", ROWS[:2])
    first = column_examples(path, ["anchor", "positive"], cache_dir=tmp_path / "cache", progress=False)
    assert [item.name for item in data.iterdir()] == ["pairs.csv"]

    def no_conversion(*args, **kwargs):
        raise AssertionError("converted again")

    monkeypatch.setattr(column_convert, "convert", no_conversion)
    again = column_examples(path, ["anchor", "positive"], cache_dir=tmp_path / "cache", progress=False)
    assert again.folder == first.folder and list(again) == list(first)
    monkeypatch.undo()
    write_pairs(path, ROWS[:3])  # changed: a new key, converted again
    assert store_key(path, ["anchor", "positive"]) != first.folder.name
    assert len(column_examples(path, ["anchor", "positive"], cache_dir=tmp_path / "cache", progress=False)) == 2


def test_a_bad_row_is_the_in_memory_error_and_leaves_no_store(tmp_path):
    path = tmp_path / "pairs.csv"
    path.write_text("anchor,positive\na,b\nc,d,e\n")
    with pytest.raises(DataFormatError) as in_memory_error:
        in_memory(path)
    with pytest.raises(DataFormatError) as error:
        column_examples(path, ["anchor", "positive"], cache_dir=tmp_path / "cache", progress=False)
    assert str(error.value) == str(in_memory_error.value) and "pairs.csv:3" in str(error.value)
    assert list((tmp_path / "cache").iterdir()) == []


def test_an_empty_text_a_missing_column_and_no_row_are_errors(tmp_path):
    cache = tmp_path / "cache"
    empty_text = write_pairs(tmp_path / "empty.csv", [("a", "b"), ("c", "  ")])
    with pytest.raises(DataFormatError, match=r"empty\.csv:3.*empty text in column 'positive'"):
        column_examples(empty_text, ["anchor", "positive"], cache_dir=cache, progress=False)
    with pytest.raises(DataFormatError, match="expected a header row naming the columns anchor, answer"):
        column_examples(empty_text, ["anchor", "answer"], cache_dir=cache, progress=False)
    header_only = write_pairs(tmp_path / "header.csv", [])
    with pytest.raises(EmptyDataError, match="header.csv: no example"):
        column_examples(header_only, ["anchor", "positive"], cache_dir=cache, progress=False)
    assert list(cache.iterdir()) == []


def test_a_run_spec_is_read_with_the_columns_read_texts_chooses(tmp_path):
    from contrastext.data.column_sources import read_text_columns
    from contrastext.errors import ConfigError

    path = tmp_path / "pairs.csv"
    path.write_text("question,answer,label\nq1,a1,1\nq2,a2,0\n")
    spec = DataSpec(path=str(path), columns={"text": "answer", "pair": "question"})
    store, description = read_text_columns(spec, "pairs", "mnrl", cache_dir=tmp_path / "cache", progress=False)
    assert list(store) == list(read_texts(spec, "pairs", "mnrl").examples)
    assert description["columns"] == ["answer", "question"] and description["n_rows"] == 2
    sentences = tmp_path / "lines.txt"
    sentences.write_text("one\ntwo\n")
    with pytest.raises(ConfigError, match="one sentence a line"):
        read_text_columns(DataSpec(path=str(sentences)), "sentences", "simcse-unsup", cache_dir=tmp_path / "cache")


def test_a_datasets_folder_is_streamed_into_a_store(tmp_path):
    from datasets import Dataset

    from contrastext.data.column_convert import dataset_column_examples

    folder = tmp_path / "pairs"
    Dataset.from_dict({"anchor": [a for a, _ in ROWS], "positive": [p for _, p in ROWS]}).save_to_disk(str(folder))
    store = dataset_column_examples(folder, None, ["anchor", "positive"], cache_dir=tmp_path / "cache", progress=False)
    spec = DataSpec(dataset=str(folder))
    assert list(store) == drop_blank(list(read_texts(spec, "pairs", "mnrl").examples))[0]
    assert store.dropped_blank == 1


def test_a_datasets_split_in_blocks_gives_the_in_memory_rows_values_and_errors(tmp_path, monkeypatch):
    """Blocks of 2 rows: string columns go through Arrow's kernels, a number column or a null row by row."""
    from datasets import Dataset

    from contrastext.data.column_convert import dataset_column_examples

    monkeypatch.setattr(column_convert, "CHUNK_ROWS", 2)
    row_by_row = []
    record_rows = column_convert.record_rows
    monkeypatch.setattr(column_convert, "record_rows", lambda *a: row_by_row.append(1) or record_rows(*a))
    columns = {"anchor": [a for a, _ in ROWS] + ["seven"], "positive": [p for _, p in ROWS] + ["7"]}
    strings, mixed = tmp_path / "strings", tmp_path / "mixed"
    Dataset.from_dict(columns).save_to_disk(str(strings))
    Dataset.from_dict({**columns, "score": [1.5, 2, 3, 4, 5, 6]}).save_to_disk(str(mixed))
    store = dataset_column_examples(strings, None, ["anchor", "positive"], cache_dir=tmp_path / "cache", progress=False)
    assert list(store) == drop_blank(list(read_texts(DataSpec(dataset=str(strings)), "pairs", "mnrl").examples))[0]
    assert row_by_row == [] and len(store) == 5 and store.dropped_blank == 1  # every block by the kernels

    spec = DataSpec(dataset=str(mixed), columns={"text": "anchor", "pair": "score"})
    store = dataset_column_examples(mixed, None, ["anchor", "score"], cache_dir=tmp_path / "cache", progress=False)
    assert list(store) == drop_blank(list(read_texts(spec, "pairs", "mnrl").examples))[0]
    assert store[0].texts == ("a question", "1.5") and len(row_by_row) == 3  # every block row by row

    with_null = tmp_path / "null"
    Dataset.from_dict({"anchor": ["a", "b", "c", "d"], "positive": ["p", "q", "r", None]}).save_to_disk(str(with_null))
    with pytest.raises(DataFormatError) as in_memory_error:
        read_texts(DataSpec(dataset=str(with_null)), "pairs", "mnrl")
    with pytest.raises(DataFormatError) as error:
        dataset_column_examples(with_null, None, ["anchor", "positive"], cache_dir=tmp_path / "cache", progress=False)
    assert str(error.value) == str(in_memory_error.value) and "[train]:4" in str(error.value)


FUZZ_PIECES = ["q", "two words", ",", '"', "\r\n", "\n", " ", "\u00a0", "é", "\u200b\u200f", "\x1c", "\t", "\x00"]


@settings(max_examples=60, deadline=None)
@given(body=st.lists(st.sampled_from(FUZZ_PIECES), min_size=1, max_size=40), block_bytes=st.integers(1, 64))
def test_any_csv_gives_the_in_memory_examples_blank_rows_and_errors(body, block_bytes):
    """Random CSV bodies, converted in blocks of 1–64 bytes: the in-memory reader's kept examples and blank count,
    or its DataFormatError."""
    import tempfile

    from contrastext.data.readers import csv_blocks
    from contrastext.errors import ContrastextError

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "fuzz.csv"
        path.write_text("anchor,positive\n" + "".join(body), newline="")
        try:
            expected = drop_blank(list(read_texts(DataSpec(path=str(path)), "pairs", "mnrl").examples))
        except ContrastextError as error:
            expected = error
        saved, csv_blocks.BLOCK_BYTES = csv_blocks.BLOCK_BYTES, block_bytes
        try:
            store = column_examples(path, ["anchor", "positive"], cache_dir=Path(folder) / "cache", progress=False)
            got = (list(store), store.dropped_blank)
        except ContrastextError as error:
            got = error
        finally:
            csv_blocks.BLOCK_BYTES = saved
    if isinstance(expected, DataFormatError):
        assert isinstance(got, DataFormatError) and str(got) == str(expected)
    elif isinstance(expected, ContrastextError) or not expected[0]:
        assert isinstance(got, ContrastextError)  # no row, or every row blank
    else:
        assert got == (expected[0], len(expected[1]))
