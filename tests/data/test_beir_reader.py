"""The BEIR reader: JSONL and CSV/TSV layouts, graded qrels, and one file:line error per kind of bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contrastext.data.readers.beir import looks_like_qrels, read_beir, read_beir_files
from contrastext.errors import DataFormatError, MissingDataError

CORPUS = [{"_id": "d1", "title": "Guitar", "text": "A man plays a guitar."}, {"_id": "d2", "text": "An onion is sliced."},
          {"_id": "d3", "title": "", "text": "Kids play outside."}, {"_id": 4, "text": "Numeric id."}]  # fmt: skip
QUERIES = [{"_id": "q1", "text": "music"}, {"_id": "q2", "text": "cooking"}, {"_id": "q3", "text": "unjudged"}]
QRELS = "query-id\tcorpus-id\tscore\nq1\td1\t2\nq1\td3\t1\nq2\td2\t1\nq2\t4\t0\n"


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def beir_folder(root: Path, corpus=CORPUS, queries=QUERIES, qrels=QRELS, split="test") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    write_jsonl(root / "corpus.jsonl", corpus)
    write_jsonl(root / "queries.jsonl", queries)
    (root / "qrels").mkdir(exist_ok=True)
    (root / "qrels" / f"{split}.tsv").write_text(qrels, encoding="utf-8")
    return root


def test_a_beir_folder_is_read(tmp_path):
    data = read_beir(beir_folder(tmp_path / "set"))
    assert data.corpus == {"d1": "Guitar A man plays a guitar.", "d2": "An onion is sliced.", "d3": "Kids play outside.",
                           "4": "Numeric id."}  # fmt: skip
    assert list(data.queries) == ["q1", "q2", "q3"]
    assert data.qrels == {"q1": {"d1": 2, "d3": 1}, "q2": {"d2": 1, "4": 0}}
    assert data.relevant_docs == {"q1": {"d1", "d3"}, "q2": {"d2"}}  # grade 0: judged not relevant


def test_csv_and_tsv_files_are_read_alike(tmp_path):
    folder = tmp_path / "csvset"
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.csv").write_text('_id,title,text\nd1,Guitar,"A man plays a guitar."\nd2,,"An onion, sliced."\n')
    (folder / "queries.tsv").write_text("_id\ttext\nq1\tmusic\n")
    (folder / "qrels" / "dev.csv").write_text("query-id,corpus-id,score\nq1,d1,1\n")
    data = read_beir(folder, split="dev")
    assert data.corpus == {"d1": "Guitar A man plays a guitar.", "d2": "An onion, sliced."}
    assert data.relevant_docs == {"q1": {"d1"}}
    same = read_beir_files(folder / "corpus.csv", folder / "queries.tsv", folder / "qrels" / "dev.csv")
    assert same.corpus == data.corpus and same.qrels == data.qrels


@pytest.mark.parametrize(
    ("where", "content", "expected"),
    [
        ("corpus", [{"_id": "d1", "text": "x"}, {"text": "no id"}], "corpus.jsonl:2: no '_id'"),
        ("corpus", [{"_id": "d1", "text": "x"}, {"_id": "d1", "text": "y"}], "corpus.jsonl:2: duplicate _id 'd1' (first at line 1)"),
        ("corpus", [{"_id": "d1", "text": ["a list"]}], "corpus.jsonl:1: 'text' is ['a list']: expected a string"),
        ("queries", [{"_id": "q1", "text": "x"}, {"_id": "q1", "text": "x"}], "queries.jsonl:2: duplicate _id 'q1'"),
        ("qrels", "query-id\tcorpus-id\tscore\nq1\td1\t1\nq9\td1\t1\n", "test.tsv:3: unknown query-id 'q9'"),
        ("qrels", "query-id\tcorpus-id\tscore\nq1\tdx\t1\n", "test.tsv:2: unknown corpus-id 'dx'"),
        ("qrels", "query-id\tcorpus-id\tscore\nq1\td1\t0.5\n", "test.tsv:2: score '0.5' is not an integer"),
        ("qrels", "q1\td1\t1\n", "test.tsv:1: expected the qrels header"),
        ("qrels", "query-id\tcorpus-id\tscore\nq1\td1\n", "test.tsv:2: expected 3 columns"),
    ],
)  # fmt: skip
def test_bad_input_names_file_and_line(tmp_path, where, content, expected):
    arguments = {"corpus": CORPUS, "queries": QUERIES, "qrels": QRELS}
    arguments[where] = content
    with pytest.raises(DataFormatError) as caught:
        read_beir(beir_folder(tmp_path / "set", **arguments))
    assert expected in str(caught.value)


def test_missing_parts_are_named(tmp_path):
    folder = beir_folder(tmp_path / "set")
    with pytest.raises(MissingDataError, match="qrels/dev|dev.jsonl"):
        read_beir(folder, split="dev")
    (folder / "queries.jsonl").unlink()
    with pytest.raises(MissingDataError, match="queries.jsonl, queries.tsv, queries.csv"):
        read_beir(folder)


def test_qrels_header_is_recognised():
    assert looks_like_qrels(["query-id", "corpus-id", "score"]) and looks_like_qrels(["query_id", "corpus_id", "score"])
    assert not looks_like_qrels(["sentence1", "sentence2", "score"])


def test_graded_qrels_score_as_st_does(tmp_path):
    """Grades 1 and 2 both count as relevant (ST takes sets); grade 0 rows are left out of the sets."""
    torch = pytest.importorskip("torch")
    st_ir = pytest.importorskip("sentence_transformers.sentence_transformer.evaluation.information_retrieval")
    from sentence_transformers.util.similarity import cos_sim, dot_score

    from contrastext.evaluation.information_retrieval import KS, information_retrieval_metrics
    from tests.evaluation.test_information_retrieval import FixedModel

    data = read_beir(beir_folder(tmp_path / "set"))
    generator = torch.Generator().manual_seed(0)
    texts = list(dict.fromkeys([*data.queries.values(), *data.corpus.values()]))
    table = dict(zip(texts, torch.randn(len(texts), 8, generator=generator), strict=True))
    evaluator = st_ir.InformationRetrievalEvaluator(
        data.queries, data.corpus, data.relevant_docs, mrr_at_k=list(KS), ndcg_at_k=list(KS), accuracy_at_k=list(KS),
        precision_recall_at_k=list(KS), map_at_k=list(KS), write_csv=False,
        score_functions={"cosine": cos_sim, "dot": dot_score},
    )
    theirs = evaluator(FixedModel(table))
    query_ids, corpus_ids = list(data.queries), list(data.corpus)
    mine = information_retrieval_metrics(
        torch.stack([table[data.queries[q]] for q in query_ids]), torch.stack([table[data.corpus[c]] for c in corpus_ids]),
        query_ids, corpus_ids, data.relevant_docs,
    )  # fmt: skip
    assert set(mine) == set(theirs)
    for key, value in theirs.items():
        assert mine[key] == pytest.approx(value, abs=1e-6), key
