"""Eval specs: ``ir:FOLDER[@SPLIT]``, column roles ``KIND[ROLE=COLUMN,...]:PATH``, and a qrels file refused where a
table is expected. (An ir set's metric keys in training: tests/runs/test_evaluation.py; through ``eval --json``
against sentence-transformers: tests/cli/test_eval_encode_commands.py.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contrastext.data.readers.beir import read_beir
from contrastext.errors import ConfigError, DataFormatError, MissingDataError, UnknownNameError
from contrastext.evaluation.task_specs import load_eval_data, parse_eval_spec

STS_ROWS = [("A man plays a guitar.", "A man plays music.", 4.2), ("A cat sleeps.", "A dog runs.", 0.6),
            ("The sky is blue.", "The sky is clear.", 4.6)]  # fmt: skip


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def beir_folder(root: Path, split: str = "test") -> Path:
    """Four documents, three queries (q3 unjudged), graded qrels with a grade-0 row."""
    root.mkdir(parents=True, exist_ok=True)
    write_jsonl(root / "corpus.jsonl", [{"_id": "d1", "title": "Music", "text": "A man plays a guitar."},
                                        {"_id": "d2", "text": "An onion is sliced."},
                                        {"_id": "d3", "text": "Kids play outside."},
                                        {"_id": "d4", "text": "Stocks fell."}])  # fmt: skip
    write_jsonl(root / "queries.jsonl", [{"_id": "q1", "text": "guitar music"}, {"_id": "q2", "text": "cooking"},
                                         {"_id": "q3", "text": "unjudged"}])  # fmt: skip
    (root / "qrels").mkdir(exist_ok=True)
    (root / "qrels" / f"{split}.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t2\nq1\td3\t1\nq2\td2\t1\n"
                                                 "q2\td4\t0\n")  # fmt: skip
    return root


# ------------------------------------------------------------------------------------------------ ir: specs


def test_an_ir_spec_reads_a_beir_folder_with_test_as_its_default_split(tmp_path):
    folder = beir_folder(tmp_path / "myset")
    spec = parse_eval_spec(f"ir:{folder}")
    assert (spec.task.name, spec.split, spec.kind, spec.task.metric) == ("myset", "test", "ir", "cosine_ndcg@10")
    data = load_eval_data(spec)
    assert data.examples == [] and data.retrieval.relevant_docs == read_beir(folder).relevant_docs
    assert parse_eval_spec(str(folder)).kind == "ir"  # a bare BEIR folder: its kind from its layout


def test_an_ir_spec_names_its_split_and_a_missing_one_is_named(tmp_path):
    folder = beir_folder(tmp_path / "myset", split="dev")
    assert parse_eval_spec(f"ir:{folder}@dev").split == "dev"
    with pytest.raises(MissingDataError, match=r"ir:.*myset.*test\.jsonl, test\.tsv, test\.csv"):
        parse_eval_spec(f"ir:{folder}")


def test_ir_on_a_qrels_file_says_which_folder_spec_to_write(tmp_path):
    folder = beir_folder(tmp_path / "myset")
    with pytest.raises(ConfigError, match=f"write ir:{folder}@test"):
        parse_eval_spec(f"ir:{folder}/qrels/test.tsv")


@pytest.mark.parametrize("spec", ["sts:{q}", "pairs:{q}", "classification:{q}", "{q}", "sts[score=score]:{q}"])
def test_a_qrels_file_where_a_table_is_expected_is_one_error_naming_the_file(tmp_path, spec):
    folder = beir_folder(tmp_path / "myset")
    qrels = folder / "qrels" / "test.tsv"
    with pytest.raises(DataFormatError) as caught:
        parse_eval_spec(spec.format(q=qrels))
    message = str(caught.value)
    assert message.startswith(f"{qrels}:1: looks like BEIR qrels") and f"ir:{folder}@test" in message
    assert "\n" not in message


def test_ir_roles_name_other_columns_in_csv_files(tmp_path):
    folder = tmp_path / "renamed"
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.csv").write_text("doc,body,headline\nd1,A man plays a guitar.,Music\nd2,An onion is sliced.,\n")
    (folder / "queries.csv").write_text("doc,body\nq1,guitar music\nq2,cooking\n")
    (folder / "qrels" / "test.csv").write_text("qid,docid,rel\nq1,d1,1\nq2,d2,3\n")
    spec = parse_eval_spec(f"ir[id=doc,text=body,title=headline,query_id=qid,corpus_id=docid,score=rel]:{folder}")
    data = load_eval_data(spec).retrieval
    assert data.corpus == {"d1": "Music A man plays a guitar.", "d2": "An onion is sliced."}
    assert data.relevant_docs == {"q1": {"d1"}, "q2": {"d2"}} and data.qrels["q2"] == {"d2": 3}
    with pytest.raises(ConfigError, match=r"no column '_id' in .*corpus.csv.*ir\[id=COLUMN\]"):
        parse_eval_spec(f"ir:{folder}")
    with pytest.raises(ConfigError, match=r"test.csv has the header qid, docid, rel.*query_id=COLUMN"):
        parse_eval_spec(f"ir[id=doc,text=body]:{folder}")


# ------------------------------------------------------------------------------------------- column roles


def write_sts(path: Path, header: str) -> Path:
    path.write_text(header + "\n" + "".join(f'"{a}","{b}",{score}\n' for a, b, score in STS_ROWS))
    return path


def test_sts_roles_read_what_the_default_names_read(tmp_path):
    default = load_eval_data(parse_eval_spec(f"sts:{write_sts(tmp_path / 'plain.csv', 'sentence1,sentence2,score')}"))
    renamed = write_sts(tmp_path / "my.csv", "text_a,text_b,similarity")
    for spec in (f"sts[text=text_a,pair=text_b,score=similarity]:{renamed}", f"sts[score=similarity]:{renamed}",
                 f" STS [ text = text_a , pair = text_b , score = similarity ] : {renamed}@dev"):  # fmt: skip
        parsed = parse_eval_spec(spec)
        assert (parsed.task.name, parsed.task.text_columns, parsed.task.label_column) == (
            "my", ("text_a", "text_b"), "similarity")  # fmt: skip
        examples = load_eval_data(parsed).examples
        assert [(e.texts, e.label) for e in examples] == [(e.texts, e.label) for e in default.examples]
    swapped = load_eval_data(parse_eval_spec(f"sts[text=text_b,pair=text_a,score=similarity]:{renamed}"))
    assert swapped.examples[0].texts == ("A man plays music.", "A man plays a guitar.")


def test_pairs_roles_pick_two_of_several_text_columns(tmp_path):
    rows = [{"id": "1", "question": "how to reset a password", "answer": "steps to change it", "topic": "it"},
            {"id": "2", "question": "best pizza", "answer": "where to eat pizza", "topic": "food"}]  # fmt: skip
    qa = write_jsonl(tmp_path / "qa.jsonl", rows)
    with pytest.raises(ConfigError, match="pairs needs two or three text columns"):
        parse_eval_spec(f"pairs:{qa}")  # four string columns
    spec = parse_eval_spec(f"pairs[text=question,pair=answer]:{qa}")
    assert [e.texts for e in load_eval_data(spec).examples] == [(r["question"], r["answer"]) for r in rows]
    spec = parse_eval_spec(f"pairs[text=question,pair=answer,negative=topic]:{qa}")
    assert load_eval_data(spec).examples[1].texts == ("best pizza", "where to eat pizza", "food")


def test_classification_roles_name_the_text_and_the_label(tmp_path):
    reviews = tmp_path / "reviews.tsv"
    reviews.write_text("id\treview\tstars\n" + "".join(f"{i}\treview {i}\t{'good' if i % 2 else 'bad'}\n"
                                                        for i in range(6)))  # fmt: skip
    spec = parse_eval_spec(f"classification[text=review,label=stars]:{reviews}")
    assert (spec.task.kind, spec.task.text_columns, spec.task.label_column) == ("single", ("review",), "stars")
    data = load_eval_data(spec)
    assert data.label_names == ("bad", "good") and data.examples[1].texts == ("review 1",)


@pytest.mark.parametrize(
    ("spec", "error", "expected"),
    [
        ("sts[label=similarity]:{f}", ConfigError, "sts reads its gold scores from score=COLUMN"),
        ("sts[text=nope,pair=text_b,score=similarity]:{f}", ConfigError, "no column 'nope'; its columns: text_a"),
        ("sts[pair=text_b,score=similarity]:{f}", ConfigError, "[pair=...] needs [text=...] too"),
        ("sts[score=similarity,score=text_a]:{f}", ConfigError, "the role 'score' is given twice"),
        ("sts[similarity]:{f}", ConfigError, "'similarity' in [...] is not ROLE=COLUMN"),
        ("pairs[label=similarity]:{f}", ConfigError, "pairs takes no column role 'label'"),
        ("ranking[text=a]:{f}", UnknownNameError, "unknown kind 'ranking'"),
        ("sts:{f}", ConfigError, "name them with sts[text=COLUMN,pair=COLUMN,score=COLUMN]:PATH"),
    ],
)
def test_bad_roles_are_errors_naming_the_role(tmp_path, spec, error, expected):
    renamed = write_sts(tmp_path / "my.csv", "text_a,text_b,similarity")
    with pytest.raises(error) as caught:
        parse_eval_spec(spec.format(f=renamed))
    assert expected in str(caught.value) and "\n" not in str(caught.value)
