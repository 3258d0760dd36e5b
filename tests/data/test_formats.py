"""Readers on the real benchmark files (row counts of the data README) and on small malformed files."""

from __future__ import annotations

from pathlib import Path

import pytest

from contrastext.data import formats
from contrastext.errors import DataFormatError, MissingDataError

REAL_FILES = [
    (formats.read_stsb_csv, "stsb/original/sts-train.csv", 5749),
    (formats.read_stsb_csv, "stsb/original/sts-dev.csv", 1500),
    (formats.read_stsb_csv, "senteval/downstream/STS/STSBenchmark/sts-train.csv", 5749),
    (formats.read_stsb_csv, "senteval/downstream/STS/STSBenchmark/sts-dev.csv", 1500),
    (formats.read_glue_stsb, "glue/STS-B/train.tsv", 5749),
    (formats.read_glue_stsb, "glue/STS-B/dev.tsv", 1500),
    (formats.read_senteval_sts, "senteval/downstream/STS/STS12-en-test", 3108),
    (formats.read_sick, "senteval/downstream/SICK/SICK_train.txt", 4500),
    (formats.read_sick, "senteval/downstream/SICK/SICK_trial.txt", 500),
    (formats.read_glue_sst2, "glue/SST-2/train.tsv", 67349),
    (formats.read_glue_sst2, "glue/SST-2/dev.tsv", 872),
    (formats.read_senteval_sst, "senteval/downstream/SST/binary/sentiment-train", 67349),
    (formats.read_senteval_sst, "senteval/downstream/SST/binary/sentiment-dev", 872),
    (formats.read_senteval_sst, "senteval/downstream/SST/fine/sentiment-train", 8544),
    (formats.read_senteval_sst, "senteval/downstream/SST/fine/sentiment-dev", 1101),
    (formats.read_glue_mrpc, "glue/MRPC/train.tsv", 3668),
    (formats.read_glue_mrpc, "glue/MRPC/dev.tsv", 408),
    (formats.read_senteval_mrpc, "senteval/downstream/MRPC/msr_paraphrase_train.txt", 4076),
    (formats.read_glue_cola, "glue/CoLA/train.tsv", 8551),
    (formats.read_glue_cola, "glue/CoLA/dev.tsv", 1043),
    (formats.read_glue_rte, "glue/RTE/train.tsv", 2490),
    (formats.read_glue_rte, "glue/RTE/dev.tsv", 277),
    (formats.read_glue_qnli, "glue/QNLI/dev.tsv", 5463),
    (formats.read_glue_qqp, "glue/QQP/subset_dev_23497.tsv", 23497),
    (formats.read_senteval_snli, "senteval/downstream/SNLI/s1.dev", 9842),
    (formats.read_senteval_snli, "senteval/downstream/SNLI/s1.test", 9824),
    (formats.read_simcse_csv, "nli/snli_devtest_for_simcse.csv", 5883),
    (formats.read_simcse_csv, "nli/nli_for_simcse.head9.csv", 9),
    (formats.read_sentences, "wiki1m/wiki1m_for_simcse.head11914.txt", 11914),
    (formats.read_minbert_sst, "minbert/ids-sst-train.csv", 8544),
    (formats.read_minbert_sst, "minbert/ids-sst-dev.csv", 1101),
    (formats.read_minbert_sts, "minbert/sts-train.csv", 6040),
    (formats.read_minbert_sts, "minbert/sts-dev.csv", 863),
    (formats.read_minbert_quora, "minbert/sample_quora-train.99rows.csv", 99),
]

# Expected shape of every example per reader: (number of texts, label type or None).
SHAPES = {
    formats.read_stsb_csv: (2, float),
    formats.read_glue_stsb: (2, float),
    formats.read_senteval_sts: (2, float),
    formats.read_sick: (2, float),
    formats.read_glue_sst2: (1, int),
    formats.read_senteval_sst: (1, int),
    formats.read_glue_mrpc: (2, int),
    formats.read_senteval_mrpc: (2, int),
    formats.read_glue_cola: (1, int),
    formats.read_glue_rte: (2, int),
    formats.read_glue_qnli: (2, int),
    formats.read_glue_qqp: (2, int),
    formats.read_senteval_snli: (2, int),
    formats.read_simcse_csv: (3, None),
    formats.read_sentences: (1, None),
    formats.read_minbert_sst: (1, int),
    formats.read_minbert_sts: (2, float),
    formats.read_minbert_quora: (2, int),
}


@pytest.mark.parametrize(("reader", "relative", "rows"), REAL_FILES, ids=[case[1] for case in REAL_FILES])
def test_real_file_row_counts_and_shapes(data_root: Path, reader, relative: str, rows: int) -> None:
    examples = reader(data_root / relative)
    assert len(examples) == rows
    assert examples.skipped == 0
    num_texts, label_type = SHAPES[reader]
    for example in examples:
        assert len(example.texts) == num_texts
        assert all(text and text == text.strip() for text in example.texts)
        if label_type is None:
            assert example.label is None
        else:
            assert type(example.label) is label_type
    assert examples[0].source.startswith(str(data_root / relative))  # "path:line" (a folder's file)


def test_stsb_keeps_quotes_and_ignores_extra_columns(data_root: Path) -> None:
    examples = formats.read_stsb_csv(data_root / "stsb/original/sts-train.csv")
    assert any('"' in text for example in examples for text in example.texts)
    assert all(0.0 <= example.label <= 5.0 for example in examples)
    first = examples[0]
    assert first.texts == ("A plane is taking off.", "An air plane is taking off.")
    assert first.label == 5.0
    assert first.source.endswith("sts-train.csv:1")


def test_sts12_subsets(data_root: Path) -> None:
    subsets = formats.read_senteval_sts_subsets(data_root / "senteval/downstream/STS/STS12-en-test")
    sizes = {name: len(examples) for name, examples in subsets.items()}
    assert sizes == {"MSRpar": 750, "MSRvid": 750, "SMTeuroparl": 459, "surprise.OnWN": 750, "surprise.SMTnews": 399}


def test_mrpc_bom_is_dropped_and_labels_are_binary(data_root: Path) -> None:
    examples = formats.read_glue_mrpc(data_root / "glue/MRPC/train.tsv")
    assert {example.label for example in examples} == {0, 1}
    assert not examples[0].texts[0].startswith("\ufeff")


def test_entailment_labels(data_root: Path) -> None:
    qnli = formats.read_glue_qnli(data_root / "glue/QNLI/dev.tsv")
    assert qnli[0].label == 0 and qnli[1].label == 1  # entailment, not_entailment
    rte_test = formats.read_glue_rte(data_root / "glue/RTE/test.tsv")
    assert len(rte_test) == 3000 and all(example.label is None for example in rte_test)


def test_qqp_row_with_space_before_label_is_repaired(data_root: Path) -> None:
    examples = formats.read_glue_qqp(data_root / "glue/QQP/subset_dev_23497.tsv")
    assert examples[0].texts[1] == "Which level of prepration is enough for the exam jlpt5?"
    assert examples[0].label == 0
    assert {example.label for example in examples} == {0, 1}


def test_snli_labels(data_root: Path) -> None:
    examples = formats.read_senteval_snli(data_root / "senteval/downstream/SNLI/s1.dev")
    assert {example.label for example in examples} == {0, 1, 2}
    assert examples[0].label == 1  # the first label of labels.dev is "neutral"


def test_minbert_quora_bad_labels_raise_or_are_counted(data_root: Path) -> None:
    path = data_root / "minbert/quora-dev.csv"
    with pytest.raises(DataFormatError, match=r"quora-dev\.csv:2577: .*is_duplicate"):
        formats.read_minbert_quora(path)
    examples = formats.read_minbert_quora(path, on_bad_label="skip")
    assert len(examples) == 20212
    assert examples.skipped == 2
    assert [entry.split(": ")[0].rsplit(":", 1)[1] for entry in examples.skipped_sources] == ["2577", "14222"]


# ---- malformed files written to tmp_path: every failure names the file and the line ----


def write(tmp_path: Path, name: str, content: str | bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    return path


STSB_ROW = "main-captions\tMSRvid\t2012test\t0001\t{score}\t{s1}\t{s2}\n"


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (STSB_ROW.format(score="5.0", s1="a", s2="b") + "genre\tfile\tyear\n", r"sts\.csv:2: expected at least 7 columns"),
        (STSB_ROW.format(score="high", s1="a", s2="b"), r"sts\.csv:1: column 'score': expected a number"),
        (STSB_ROW.format(score="nan", s1="a", s2="b"), r"sts\.csv:1: .*finite"),
        (STSB_ROW.format(score="1", s1="a", s2="  "), r"sts\.csv:1: empty text in column 'sentence2'"),
    ],
)
def test_stsb_malformed_rows(tmp_path: Path, content: str, reason: str) -> None:
    with pytest.raises(DataFormatError, match=reason):
        formats.read_stsb_csv(write(tmp_path, "sts.csv", content))


def test_undecodable_bytes_name_the_line(tmp_path: Path) -> None:
    path = write(tmp_path, "sts.csv", STSB_ROW.format(score="1", s1="a", s2="b").encode() + b"x\t\xff\xfe\n")
    with pytest.raises(DataFormatError, match=r"sts\.csv:2: not valid UTF-8"):
        formats.read_stsb_csv(path)


def test_bom_and_crlf_are_tolerated(tmp_path: Path) -> None:
    path = write(tmp_path, "train.tsv", "\ufeffsentence\tlabel\r\ngood film \t 1 \r\n")
    examples = formats.read_glue_sst2(path)
    assert len(examples) == 1
    assert examples[0].texts == ("good film",) and examples[0].label == 1
    assert examples[0].source == f"{path}:2"


@pytest.mark.parametrize(
    ("reader", "content", "reason"),
    [
        (formats.read_glue_sst2, "sentence\tlabel\nok\t2\n", r":2: column 'label': unknown label 2"),
        (formats.read_glue_sst2, "sentence\tlabel\nok\n", r":2: expected 2 columns"),
        (formats.read_glue_sst2, "text\tlabel\nok\t1\n", r":1: expected a header row naming the columns sentence"),
        (formats.read_glue_rte, "sentence1\tsentence2\tlabel\tidx\na\tb\tmaybe\t0\n", r":2: .*unknown label 'maybe'"),
        (formats.read_glue_qnli, "index\tquestion\tsentence\tlabel\n0\tq\t\tentailment\n", r":2: empty text"),
        (formats.read_glue_cola, "gj04\tx\t\tA sentence.\n", r":1: column 'label': expected an integer label"),
        (formats.read_glue_qqp, "1\t2\t3\tq1\tq2 maybe\n", r":1: expected 6 columns"),
        (formats.read_senteval_sst, "7 a sentence\n", None),
        (formats.read_senteval_sst, "oops\n", r":1: expected 'sentence<TAB>label'"),
        (formats.read_sick, "pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment\n1\ta\tb\t4.5\n", r":2: expected 5 columns"),
        (formats.read_minbert_sts, "\tid\tsentence1\tsentence2\tsimilarity\n0\tx\ta\tb\tabc\n", r":2: column 'similarity'"),
    ],
)
def test_malformed_rows_name_file_and_line(tmp_path: Path, reader, content: str, reason: str | None) -> None:
    path = write(tmp_path, "data.tsv", content)
    if reason is None:  # SentEval SST without num_labels accepts any class index
        assert reader(path)[0].label == 7
        with pytest.raises(DataFormatError, match=r"data\.tsv:1: column 'label': unknown label 7"):
            reader(path, num_labels=5)
        return
    with pytest.raises(DataFormatError, match=r"data\.tsv" + reason):
        reader(path)


def test_glue_test_file_without_label_column_is_unlabelled(tmp_path: Path) -> None:
    path = write(tmp_path, "test.tsv", "index\tsentence\n0\tColorless green ideas sleep.\n")
    assert formats.read_glue_cola(path)[0].label is None


def test_sts_subset_blank_gold_lines_are_skipped_and_counted(tmp_path: Path) -> None:
    write(tmp_path, "STS.input.news.txt", "a b\tc d\ne f\tg h\ni j\tk l\n")
    write(tmp_path, "STS.gs.news.txt", "4.2\n\n0.5\n")
    subsets = formats.read_senteval_sts_subsets(tmp_path)
    assert list(subsets) == ["news"]
    examples = subsets["news"]
    assert [example.label for example in examples] == [4.2, 0.5]
    assert examples.skipped == 1
    assert examples.skipped_sources[0].startswith(f"{tmp_path / 'STS.input.news.txt'}:2")
    assert formats.read_senteval_sts(tmp_path).skipped == 1


def test_sts_subset_errors(tmp_path: Path) -> None:
    write(tmp_path, "STS.input.news.txt", "a\tb\nc\td\n")
    write(tmp_path, "STS.gs.news.txt", "1\n")
    with pytest.raises(DataFormatError, match=r"STS\.gs\.news\.txt: has 1 lines"):
        formats.read_senteval_sts(tmp_path)
    write(tmp_path, "STS.gs.news.txt", "1\nx\n")
    with pytest.raises(DataFormatError, match=r"STS\.gs\.news\.txt:2: column 'score'"):
        formats.read_senteval_sts(tmp_path)
    write(tmp_path, "STS.gs.news.txt", "1\n2\n")
    write(tmp_path, "STS.input.other.txt", "a\tb\n")
    with pytest.raises(MissingDataError, match=r"STS\.gs\.other\.txt"):
        formats.read_senteval_sts(tmp_path)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(MissingDataError, match="no STS.input"):
        formats.read_senteval_sts(empty)


def test_snli_line_counts_must_match(tmp_path: Path) -> None:
    write(tmp_path, "s1.dev", "a\nb\n")
    write(tmp_path, "s2.dev", "c\nd\n")
    write(tmp_path, "labels.dev", "neutral\n")
    with pytest.raises(DataFormatError, match=r"labels\.dev: line counts differ"):
        formats.read_senteval_snli(tmp_path / "s1.dev")
    write(tmp_path, "labels.dev", "neutral\nunsure\n")
    with pytest.raises(DataFormatError, match=r"labels\.dev:2: .*unknown label 'unsure'"):
        formats.read_senteval_snli(tmp_path / "s1.dev")


def test_simcse_csv_quoting_and_errors(tmp_path: Path) -> None:
    path = write(tmp_path, "nli.csv", 'sent0,sent1\n"a, b","say ""hi"""\n')
    assert formats.read_simcse_csv(path)[0].texts == ("a, b", 'say "hi"')
    path = write(tmp_path, "nli.csv", "sent0,sent1,hard_neg\na,b,c\na,b\n")
    with pytest.raises(DataFormatError, match=r"nli\.csv:3: expected 3 columns"):
        formats.read_simcse_csv(path)
    path = write(tmp_path, "nli.csv", "premise,hypothesis\na,b\n")
    with pytest.raises(DataFormatError, match=r"nli\.csv:1: expected the header sent0,sent1"):
        formats.read_simcse_csv(path)
    path = write(tmp_path, "nli.csv", 'sent0,sent1\n"a"b,c\n')
    with pytest.raises(DataFormatError, match=r"nli\.csv:2: bad CSV quoting"):
        formats.read_simcse_csv(path)


def test_csv_record_spanning_lines_reports_its_first_line(tmp_path: Path) -> None:
    path = write(tmp_path, "nli.csv", 'sent0,sent1\n"multi\nline",b\nc,\n')
    with pytest.raises(DataFormatError, match=r"nli\.csv:4: empty text in column 'sent1'"):
        formats.read_simcse_csv(path)


def test_sentences_blank_lines(tmp_path: Path) -> None:
    path = write(tmp_path, "wiki.txt", "one\n\ntwo\n")
    examples = formats.read_sentences(path)
    assert [example.texts for example in examples] == [("one",), ("two",)]
    assert examples.skipped == 1
    with pytest.raises(DataFormatError, match=r"wiki\.txt:2: blank line"):
        formats.read_sentences(path, blank_lines="raise")


def test_missing_file_names_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "nope" / "sts-dev.csv"
    with pytest.raises(MissingDataError, match=str(missing)):
        formats.read_stsb_csv(missing)
    with pytest.raises(MissingDataError, match="s2.dev"):
        write(tmp_path, "s1.dev", "a\n")
        formats.read_senteval_snli(tmp_path / "s1.dev")


def test_read_table_csv_tsv_jsonl(tmp_path: Path) -> None:
    csv_path = write(tmp_path, "pairs.csv", 'id,q,a,gold\n1,"x, y",z,entailment\n2,u,v,neutral\n')
    examples = formats.read_table(csv_path, ["q", "a"], "gold", label_names={"entailment": 0, "neutral": 1})
    assert [(example.texts, example.label) for example in examples] == [(("x, y", "z"), 0), (("u", "v"), 1)]
    tsv_path = write(tmp_path, "scores.tsv", "s1\ts2\tscore\na\tb\t 3.5 \n")
    assert formats.read_table(tsv_path, ["s1", "s2"], "score", label_type="float")[0].label == 3.5
    jsonl_path = write(tmp_path, "data.jsonl", '{"text": "hi", "y": 1}\n\n{"text": "yo", "y": "x"}\n')
    with pytest.raises(DataFormatError, match=r"data\.jsonl:3: column 'y'"):
        formats.read_table(jsonl_path, ["text"], "y")
    skipped = formats.read_table(jsonl_path, ["text"], "y", on_bad_label="skip")
    assert len(skipped) == 1 and skipped.skipped == 1
    bad_json = write(tmp_path, "bad.jsonl", '{"text": "hi"\n')
    with pytest.raises(DataFormatError, match=r"bad\.jsonl:1: invalid JSON"):
        formats.read_table(bad_json, ["text"])
    with pytest.raises(DataFormatError, match=r"data\.jsonl:1: missing key 'body'"):
        formats.read_table(jsonl_path, ["body"])
