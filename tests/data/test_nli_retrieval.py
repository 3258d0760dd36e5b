"""``contrastext nli-to-beir`` (contrastext/data/nli_retrieval.py): a BEIR folder from the shared SNLI triplets that
keeps every evaluation document out of training, read back as ``eval ir:`` reads it; one-line errors."""

from __future__ import annotations

import json

from contrastext.data.nli_retrieval import build_nli_retrieval
from contrastext.data.readers.beir import read_beir
from tests.cli.cli_runs import run

SNLI = "nli/snli_devtest_for_simcse.csv"


def test_the_folder_keeps_evaluation_text_out_of_training_and_reads_back_as_beir(data_root, tmp_path, capsys):
    built = build_nli_retrieval(data_root / SNLI, name=SNLI)
    queries = set(built["queries"].values())
    relevant = {built["corpus"][document] for judged in built["qrels"].values() for _, document in judged}
    assert not {anchor for anchor, _ in built["pairs"]} & queries and not {p for _, p in built["pairs"]} & relevant
    assert not {anchor for anchor, _, _ in built["triplets"]} & queries
    assert not {text for _, positive, negative in built["triplets"] for text in (positive, negative)} & relevant
    manifest = built["manifest"]
    assert manifest["corpus"] == len(built["corpus"]) >= 10_000 and manifest["queries"] == {"test": 1000, "dev": 500}
    assert len(built["pairs"]) == manifest["train_pairs"] > 4000 and manifest["source"] == SNLI
    assert len(built["triplets"]) == manifest["train_triplets"] > 4000
    folder = tmp_path / "beir"
    code, out, err = run(["nli-to-beir", "-i", str(data_root / SNLI), "-o", str(folder)], capsys)
    assert code == 0, err
    assert json.loads(out) == {**manifest, "source": str(data_root / SNLI)}
    data = read_beir(folder, split="test")
    assert len(data.corpus) == len(built["corpus"]) and len(data.relevant_docs) == 1000
    assert sum(len(docs) for docs in data.relevant_docs.values()) == len(built["qrels"]["test"])
    before = sorted((p.name, p.stat().st_mtime_ns) for p in folder.iterdir())
    code, _, err = run(["nli-to-beir", "-i", str(data_root / SNLI), "-o", str(folder)], capsys)
    assert code == 2 and err.startswith("error: ") and "not an empty folder" in err
    assert sorted((p.name, p.stat().st_mtime_ns) for p in folder.iterdir()) == before  # refused: nothing changed


def test_a_bad_row_or_a_small_file_is_one_error_line_naming_the_file(tmp_path, capsys):
    source = tmp_path / "triplets.csv"
    source.write_text("sent0,sent1,hard_neg\na,b,c\nd,,f\n", encoding="utf-8")
    code, _, err = run(["nli-to-beir", "-i", str(source), "-o", str(tmp_path / "out")], capsys)
    assert code == 2 and err.strip() == f"error: {source}:3: an empty text"
    source.write_text("premise,hypothesis\na,b\n", encoding="utf-8")
    code, _, err = run(["nli-to-beir", "-i", str(source), "-o", str(tmp_path / "out")], capsys)
    assert code == 2 and f"{source}:1: expected the columns sent0,sent1,hard_neg" in err
    source.write_text("sent0,sent1,hard_neg\na,b,c\nd,e,f\n", encoding="utf-8")
    code, _, err = run(["nli-to-beir", "-i", str(source), "-o", str(tmp_path / "out"), "--test-queries", "1"], capsys)
    assert code == 2 and "2 premises, too few" in err and not (tmp_path / "out").exists()
