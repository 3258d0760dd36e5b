"""The data spec (contrastext.data.sources): which source wins, which column is what, string labels, file
formats by suffix, and Hugging Face ``datasets`` folders. Real files in tmp_path; no data root is ever read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contrastext.data.examples import Example
from contrastext.data.readers.table import read_table, table_columns
from contrastext.data.sources import (
    DataSpec,
    canonical_label,
    choose_source,
    index_labels,
    label_set,
    read_labelled,
    read_texts,
)
from contrastext.errors import ConfigError, DataFormatError, EmptyDataError, MissingDataError


@pytest.fixture(autouse=True)
def no_data_root(monkeypatch):
    """No test here may need the benchmark data root."""
    monkeypatch.delenv("CONTRASTEXT_DATA", raising=False)


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


# ------------------------------------------------------------------------------------------ source choice


def test_a_source_given_with_set_replaces_the_files_source() -> None:
    values = {"task": "sst2", "path": "mine.csv", "dataset": None}
    assert choose_source(values, {"data.path"}, "scl.yaml") == "path"
    assert choose_source({"task": None, "path": "mine.csv", "dataset": None}, {"data"}, "scl.yaml") == "path"
    assert choose_source({"task": "sst2", "path": None, "dataset": None}, set(), "scl.yaml") == "task"
    assert choose_source({"task": None, "path": None, "dataset": None}, set(), "scl.yaml") is None


def test_two_sources_at_one_level_are_an_error_naming_both() -> None:
    values = {"task": "sst2", "path": "mine.csv", "dataset": None}
    with pytest.raises(ConfigError, match=r"^scl\.yaml: data\.task \('sst2'\) and data\.path \('mine\.csv'\) both"):
        choose_source(values, set(), "scl.yaml")
    values = {"task": "sst2", "path": "mine.csv", "dataset": "folder"}
    with pytest.raises(ConfigError, match=r"^--set data\.path and --set data\.dataset: .*'mine\.csv'.*'folder'"):
        choose_source(values, {"data.path", "data.dataset"}, "scl.yaml")


def test_keys_that_do_not_go_with_the_source_are_errors() -> None:
    with pytest.raises(ConfigError, match="data.columns applies to data.path or data.dataset"):
        DataSpec(task="sst2", columns={"text": "x"}, origin="r.yaml").check()
    with pytest.raises(ConfigError, match="data.split applies to data.dataset"):
        DataSpec(path="a.csv", split="test").check()
    with pytest.raises(ConfigError, match="data.columns.anchor: unknown role"):
        DataSpec(path="a.csv", columns={"anchor": "q"}).check()


# -------------------------------------------------------------------------------------------- formats


def test_a_tsv_is_split_on_tabs_and_a_csv_on_commas(tmp_path) -> None:
    tsv = write(tmp_path / "pairs.tsv", "q\ta\nwhat, exactly?\tthis, and that\n")
    csv = write(tmp_path / "pairs.csv", 'q,a\n"what, exactly?","this, and that"\n')
    for path in (tsv, csv):
        examples = read_texts(DataSpec(path=str(path)), "pairs", "simcse-sup").examples
        assert [e.texts for e in examples] == [("what, exactly?", "this, and that")]
        assert examples[0].source == f"{path}:2"


def test_a_jsonl_file_is_read_by_key_and_a_txt_one_sentence_a_line(tmp_path) -> None:
    jsonl = write(tmp_path / "s.jsonl", '{"id": 7, "text": "first sentence"}\n\n{"id": 8, "text": "second"}\n')
    assert table_columns(jsonl).texts == ["text"]  # the number is not a text
    data = read_texts(DataSpec(path=str(jsonl)), "sentences", "simcse-unsup")
    assert [e.texts for e in data.examples] == [("first sentence",), ("second",)]
    assert data.description["columns"] == ["text"]
    txt = write(tmp_path / "s.txt", '{"looks": "like json"}\nplain\n')
    assert [e.texts for e in read_texts(DataSpec(path=str(txt)), "sentences", "x").examples] == [
        ('{"looks": "like json"}',), ("plain",)
    ]


def test_a_json_array_file_is_named_as_such(tmp_path) -> None:
    path = write(tmp_path / "a.json", '[\n  {"text": "x"}\n]\n')
    with pytest.raises(DataFormatError, match=r"a\.json:1: a JSON array"):
        read_texts(DataSpec(path=str(path)), "sentences", "simcse-unsup")


def test_unknown_suffix_folder_and_missing_file_are_clear(tmp_path) -> None:
    with pytest.raises(ConfigError, match=r"cannot tell the format of .*data\.xlsx"):
        read_texts(DataSpec(path=str(tmp_path / "data.xlsx")), "sentences", "x")
    with pytest.raises(ConfigError, match="is a folder.*data.dataset"):
        read_texts(DataSpec(path=str(tmp_path)), "sentences", "x")
    with pytest.raises(MissingDataError, match="nope.csv"):
        read_texts(DataSpec(path=str(tmp_path / "nope.csv")), "sentences", "x")
    with pytest.raises(EmptyDataError, match="h.csv"):
        read_texts(DataSpec(path=str(write(tmp_path / "h.csv", "text\n"))), "sentences", "x")


def test_a_bad_row_names_file_and_line(tmp_path) -> None:
    path = write(tmp_path / "pairs.csv", "q,a\nx,y\nonly one\n")
    with pytest.raises(DataFormatError, match=r"pairs\.csv:3: expected 2 columns"):
        read_texts(DataSpec(path=str(path)), "pairs", "simcse-sup")
    path = write(tmp_path / "empty.csv", "text,label\nfine,a\n ,b\n")
    with pytest.raises(DataFormatError, match=r"empty\.csv:3: empty text in column 'text'"):
        read_labelled(DataSpec(path=str(path)), "scl")


def test_read_table_reads_string_labels_and_names_a_missing_label_column(tmp_path) -> None:
    path = write(tmp_path / "r.csv", "text,label\nx, pos \n")
    assert read_table(path, ["text"], "label", label_type="str")[0].label == "pos"
    with pytest.raises(DataFormatError, match=r"r\.csv:1: no column 'stars' in the header; the columns are text, label"):
        read_table(path, ["text"], "stars")


# -------------------------------------------------------------------------------------------- columns


def test_default_columns_follow_the_sentence_transformers_convention(tmp_path) -> None:
    path = write(tmp_path / "nli.csv", "premise,hypothesis,label\na,b,entailment\nc,d,neutral\n")
    data = read_labelled(DataSpec(path=str(path)), "scl")
    assert data.layout.texts == ("premise", "hypothesis") and data.layout.target == "label"
    assert data.task.kind == "pair" and data.task.name == "nli"
    path = write(tmp_path / "sts.tsv", "s1\ts2\tscore\na\tb\t4.5\nc\td\t1\n")
    data = read_labelled(DataSpec(path=str(path)), "reclaim")
    assert data.task.kind == "regression" and [e.label for e in data.train] == [4.5, 1.0]
    pairs = read_texts(DataSpec(path=str(path)), "pairs", "simcse-sup")  # the score is not a text
    assert pairs.examples[0].texts == ("a", "b")


def test_named_columns_pick_and_order_the_texts(tmp_path) -> None:
    path = write(tmp_path / "qa.csv", "id,hard,answer,question,stars\n1,h,a,q,5\n2,h2,a2,q2,1\n")
    roles = {"text": "question", "pair": "answer", "negative": "hard"}
    assert read_texts(DataSpec(path=str(path), columns=roles), "pairs", "simcse-sup").examples[0].texts == ("q", "a", "h")
    with pytest.raises(ConfigError, match="single sentences; .* text columns id, hard, answer, question, stars"):
        read_texts(DataSpec(path=str(path)), "sentences", "simcse-unsup")
    only = read_texts(DataSpec(path=str(path), columns={"text": "answer"}), "sentences", "simcse-unsup")
    assert only.examples[0].texts == ("a",)
    with pytest.raises(ConfigError, match=r"data\.columns\.text: no column 'body' in .*qa\.csv; its columns: id, hard"):
        read_texts(DataSpec(path=str(path), columns={"text": "body"}), "sentences", "x")
    with pytest.raises(ConfigError, match="data.columns.label: simcse-sup trains on pairs"):
        read_texts(DataSpec(path=str(path), columns={**roles, "label": "stars"}), "pairs", "simcse-sup")
    labelled = read_labelled(DataSpec(path=str(path), columns={"text": "question", "label": "stars"}), "scl")
    assert labelled.layout.texts == ("question",) and labelled.layout.target == "stars"


def test_labelled_data_needs_a_target_column(tmp_path) -> None:
    path = write(tmp_path / "t.csv", "text\nx\n")
    with pytest.raises(ConfigError, match="no 'label' or 'score' column .* data.columns.label"):
        read_labelled(DataSpec(path=str(path)), "scl")


# --------------------------------------------------------------------------------------------- labels


def test_label_sets_are_sorted_or_given() -> None:
    def rows(*labels):
        return [Example(("t",), label, f"f.csv:{i + 2}") for i, label in enumerate(labels)]

    assert label_set(rows("ok", "bad", "good", "ok")) == ["bad", "good", "ok"]
    assert label_set(rows("10", "2", "1.0")) == ["1", "2", "10"]  # integers numerically; 1.0 is 1
    assert label_set(rows("neg", "pos"), ["pos", "neg", "neutral"]) == ["pos", "neg", "neutral"]
    with pytest.raises(DataFormatError, match=r"f\.csv:3: label 'maybe' is not in data.label_names \(pos, neg\)"):
        label_set(rows("neg", "maybe"), ["pos", "neg"])
    assert canonical_label(" 3.0 ") == "3" and canonical_label("2.5") == "2.5" and canonical_label("x") == "x"
    assert [e.label for e in index_labels(rows("pos", "neg"), ["neg", "pos"])] == [1, 0]
    with pytest.raises(DataFormatError, match=r"f\.csv:3: label 'meh' was not seen in the training data"):
        index_labels(rows("pos", "meh"), ["neg", "pos"])


def test_string_labels_of_three_classes_and_an_unseen_evaluation_label(tmp_path) -> None:
    train = write(tmp_path / "reviews.csv", "text,label\na,good\nb,bad\nc,ok\nd,good\n")
    dev = write(tmp_path / "dev.csv", "text,label\ne,ok\nf,bad\n")
    data = read_labelled(DataSpec(path=str(train), eval_path=str(dev)), "scl")
    assert data.task.num_labels == 3 and data.task.label_names == ("bad", "good", "ok")
    assert [e.label for e in data.train] == [1, 0, 2, 1] and [e.label for e in data.eval] == [2, 0]
    assert data.eval_split == "eval" and data.eval_name == str(dev)
    unseen = write(tmp_path / "unseen.csv", "text,label\ne,ok\nf,terrible\n")
    with pytest.raises(DataFormatError, match=r"unseen\.csv:3: label 'terrible' was not seen in the training data"):
        read_labelled(DataSpec(path=str(train), eval_path=str(unseen)), "scl")
    wrong = write(tmp_path / "wrong.csv", "sentence,label\ne,ok\n")
    with pytest.raises(ConfigError, match=r"wrong\.csv: no column 'text'"):
        read_labelled(DataSpec(path=str(train), eval_path=str(wrong)), "scl")
    one_class = write(tmp_path / "one.csv", "text,label\na,x\nb,x\n")
    with pytest.raises(ConfigError, match="two classes at least"):
        read_labelled(DataSpec(path=str(one_class)), "scl")


def test_jsonl_labels_may_be_numbers_or_strings(tmp_path) -> None:
    path = write(tmp_path / "r.jsonl", "\n".join(json.dumps(r) for r in [
        {"text": "a", "label": 1}, {"text": "b", "label": 0}, {"text": "c", "label": 2.0},
    ]) + "\n")
    data = read_labelled(DataSpec(path=str(path)), "scl")
    assert data.task.label_names == ("0", "1", "2") and [e.label for e in data.train] == [1, 0, 2]


# ------------------------------------------------------------------------------------ datasets folders


def test_a_save_to_disk_folder_with_class_labels_and_splits(tmp_path) -> None:
    datasets = pytest.importorskip("datasets")
    features = datasets.Features(
        {"idx": datasets.Value("int64"), "sentence": datasets.Value("string"),
         "label": datasets.ClassLabel(names=["negative", "neutral", "positive"])}
    )
    train = datasets.Dataset.from_dict(
        {"idx": [0, 1, 2, 3], "sentence": ["a", "b", "c", "d"], "label": [2, 0, 1, 2]}, features=features
    )
    test = datasets.Dataset.from_dict({"idx": [4], "sentence": ["e"], "label": [1]}, features=features)
    folder = tmp_path / "reviews"
    datasets.DatasetDict({"train": train, "test": test}).save_to_disk(str(folder))
    data = read_labelled(DataSpec(dataset=str(folder), eval_split="test"), "scl")
    assert data.layout.texts == ("sentence",)  # the int column is not a text
    assert data.task.label_names == ("negative", "neutral", "positive")  # the ClassLabel order, all of it
    assert [e.label for e in data.train] == [2, 0, 1, 2] and [e.label for e in data.eval] == [1]
    assert data.train[0].source == f"{folder}[train]:1" and data.task.name == "reviews"
    with pytest.raises(ConfigError, match=r"has no split 'validation'; its splits: train, test"):
        read_labelled(DataSpec(dataset=str(folder), split="validation"), "scl")
    single = tmp_path / "single"
    train.save_to_disk(str(single))
    assert len(read_labelled(DataSpec(dataset=str(single)), "scl").train) == 4


def test_a_parquet_folder_is_read_through_datasets(tmp_path) -> None:
    datasets = pytest.importorskip("datasets")
    folder = tmp_path / "pairs"
    folder.mkdir()
    datasets.Dataset.from_dict({"anchor": ["q1", "q2"], "positive": ["a1", "a2"]}).to_parquet(str(folder / "train.parquet"))
    data = read_texts(DataSpec(dataset=str(folder)), "pairs", "simcse-sup")
    assert [e.texts for e in data.examples] == [("q1", "a1"), ("q2", "a2")]


def test_a_hub_name_offline_is_one_clear_error(monkeypatch) -> None:
    datasets = pytest.importorskip("datasets")
    import huggingface_hub.constants

    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(MissingDataError, match=r"data\.dataset: cannot load the Hugging Face dataset 'someone/no-such'"):
        read_texts(DataSpec(dataset="someone/no-such"), "pairs", "simcse-sup")


# ------------------------------------------------------------------------ retrieval data shapes (issue 23, item 3)


def test_list_valued_columns_are_named_when_a_recipe_cannot_read_them(tmp_path) -> None:
    path = write(tmp_path / "r.jsonl", json.dumps({"pos": ["a", "b"], "neg": ["c"], "id": 3}) + "\n")
    with pytest.raises(ConfigError) as error:
        read_texts(DataSpec(path=str(path)), "sentences", "simcse-unsup")
    assert str(error.value) == (
        f"<config>: simcse-unsup trains on single sentences; {path} has the text columns none (and the list-valued "
        "columns pos, neg, which simcse-unsup reads for pairs only): choose one with data.columns.text"
    )
    wide = write(tmp_path / "w.jsonl", json.dumps({"query": "q", "pos": ["a"], "neg": ["c"], "more": ["d"]}) + "\n")
    with pytest.raises(ConfigError, match=r"has the text columns query and the list-valued columns pos, neg, more: "
                                          r"name them with data.columns.text"):  # fmt: skip
        read_texts(DataSpec(path=str(wide)), "pairs", "mnrl")
    first = write(tmp_path / "f.jsonl", json.dumps({"pos": ["a"], "query": "q"}) + "\n")
    with pytest.raises(ConfigError, match=r"the first, 'pos', holds lists and the anchor is one text a row"):
        read_texts(DataSpec(path=str(first)), "pairs", "mnrl")


def test_list_columns_named_by_roles_and_the_unused_ones_are_noted(tmp_path) -> None:
    rows = [{"id": n, "question": f"q{n}", "answers": [f"a{n}", f"b{n}"], "bad": [f"c{n}"], "label": 1} for n in range(3)]
    path = write(tmp_path / "r.jsonl", "".join(json.dumps(row) + "\n" for row in rows))
    spec = DataSpec(path=str(path), columns={"text": "question", "pair": "answers", "negative": "bad"})
    data = read_texts(spec, "pairs", "mnrl")
    assert [example.texts for example in data.examples][:2] == [("q0", "a0", "c0"), ("q0", "b0", "c0")]
    assert data.description["unused_columns"] == ["id", "label"]
    assert data.unused_targets == [
        f"{path}: mnrl does not use the label column and the column id (it reads question, answers, bad); its rows "
        "are all trained on, whatever their label"
    ]
    assert len(data.notes) == 1 and "list-valued columns read as one row per positive" in data.notes[0]
    with pytest.raises(ConfigError, match="data.num_negatives: scl fine-tunes on labelled rows"):
        read_labelled(DataSpec(path=str(path), num_negatives=1), "scl")


def test_nli_rows_only_for_a_recipe_that_asks_and_a_label_role_elsewhere_is_refused(tmp_path) -> None:
    path = write(tmp_path / "nli.csv", "s1,s2,gold\na,b,entailment\na,c,contradiction\n")
    spec = DataSpec(path=str(path), columns={"text": "s1", "pair": "s2", "label": "gold"})
    data = read_texts(spec, "pairs", "simcse-sup", nli=True)
    assert [example.texts for example in data.examples] == [("a", "b", "c")]
    assert data.description["columns"] == ["s1", "s2", "gold"]
    with pytest.raises(ConfigError, match="data.columns.label: mnrl trains on pairs .* without labels; remove it"):
        read_texts(spec, "pairs", "mnrl")
    triplets = DataSpec(path=str(path), columns={"text": "s1", "pair": "s2", "negative": "gold", "label": "gold"})
    with pytest.raises(ConfigError, match="simcse-sup reads a label only on NLI rows"):
        read_texts(triplets, "pairs", "simcse-sup", nli=True)


def test_sentence_transformers_n_tuple_columns_are_read_as_they_are(tmp_path) -> None:
    path = write(tmp_path / "mined.csv", "query,answer,negative_1,negative_2,negative_3\nq,a,n1,n2,n3\nr,b,m1,m2,m3\n")
    data = read_texts(DataSpec(path=str(path)), "pairs", "mnrl")
    assert [example.texts for example in data.examples] == [("q", "a", "n1", "n2", "n3"), ("r", "b", "m1", "m2", "m3")]
    assert data.description["columns"] == ["query", "answer", "negative_1", "negative_2", "negative_3"]
    other = write(tmp_path / "four.csv", "query,answer,negative_1,extra\nq,a,n1,x\n")
    with pytest.raises(ConfigError, match="has the text columns query, answer, negative_1, extra: name them"):
        read_texts(DataSpec(path=str(other)), "pairs", "mnrl")


def test_nli_labels_that_make_no_triplet_are_an_error_with_the_way_out(tmp_path) -> None:
    path = write(tmp_path / "dupes.csv", "q1,q2,label\na,b,0\nc,d,1\n")
    with pytest.raises(EmptyDataError, match="no NLI triplet: .* name them with data.columns.text and "
                                             "data.columns.pair .the label column is then not read"):  # fmt: skip
        read_texts(DataSpec(path=str(path)), "pairs", "simcse-sup", nli=True)
    data = read_texts(DataSpec(path=str(path), columns={"text": "q1", "pair": "q2"}), "pairs", "simcse-sup", nli=True)
    assert [example.texts for example in data.examples] == [("a", "b"), ("c", "d")]
    assert data.unused_targets and "simcse-sup does not use the label column" in data.unused_targets[0]
