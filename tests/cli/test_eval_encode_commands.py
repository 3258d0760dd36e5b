"""The ``eval`` and ``encode`` commands end to end (in-process through ``main``), on MiniLM and real data."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.cli.cli_runs import run


def test_eval_writes_json_of_the_documented_shape(minilm_path, data_root, tmp_path, capsys):
    out = tmp_path / "results.json"
    argv = ["eval", "--model", minilm_path, "--tasks", "stsb:dev", "--data-root", str(data_root)]
    code, stdout, stderr = run([*argv, "--json", str(out), "--limit", "40", "--no-progress"], capsys)
    assert code == 0, stderr
    results = json.loads(out.read_text())
    assert set(results) == {"model", "tasks", "average", "metrics"}
    assert results["model"] == minilm_path
    assert set(results["tasks"]) == {"stsb"}
    stsb = results["tasks"]["stsb"]
    assert set(stsb) == {"split", "spearman", "pearson", "n"}
    assert stsb["split"] == "dev" and stsb["n"] == 40
    assert -100.0 <= stsb["spearman"] <= 100.0 and isinstance(stsb["pearson"], float)
    assert results["average"] == {"spearman": stsb["spearman"], "pearson": stsb["pearson"]}
    assert "stsb" in stdout and "average" in stdout  # the table
    assert results["metrics"] == {  # the keys of training's metrics.json
        "stsb_dev_spearman": stsb["spearman"], "stsb_dev_pearson": stsb["pearson"],
        "stsb_dev_score": stsb["spearman"], "score": stsb["spearman"],
    }


def test_encode_writes_one_row_per_line(minilm_path, tmp_path, capsys):
    texts = tmp_path / "texts.txt"
    texts.write_text("A man is playing a guitar.\nA woman slices an onion.\nThe cat sleeps.\n", encoding="utf-8")
    out = tmp_path / "emb.npy"
    argv = ["encode", "--model", minilm_path, "--input", str(texts), "--output", str(out), "--no-progress"]
    code, _, stderr = run(argv, capsys)
    assert code == 0, stderr
    embeddings = np.load(out)
    assert embeddings.shape == (3, 384) and embeddings.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(embeddings, axis=1), 1.0, atol=1e-5)


def one_line_error(code: int, stderr: str) -> str:
    assert code == 2
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("error: ")
    return lines[0]


def test_empty_line_is_an_error_naming_it(minilm_path, tmp_path, capsys):
    texts = tmp_path / "texts.txt"
    texts.write_text("one\n\nthree\n", encoding="utf-8")
    argv = ["encode", "--model", minilm_path, "--input", str(texts), "--output", str(tmp_path / "e.npy")]
    message = one_line_error(*run(argv, capsys)[::2])
    assert f"{texts}:2" in message and "empty line" in message


def test_unknown_task_is_a_one_line_error(minilm_path, data_root, capsys):
    argv = ["eval", "--model", minilm_path, "--tasks", "stsb,nosuchtask", "--data-root", str(data_root)]
    message = one_line_error(*run(argv, capsys)[::2])
    assert "nosuchtask" in message


def test_missing_data_root_is_a_one_line_error(minilm_path, tmp_path, capsys):
    missing = tmp_path / "no-data"
    argv = ["eval", "--model", minilm_path, "--tasks", "stsb:dev", "--data-root", str(missing)]
    message = one_line_error(*run(argv, capsys)[::2])
    assert str(missing) in message


def test_missing_model_is_a_one_line_error(data_root, tmp_path, capsys):
    missing = tmp_path / "no-model"
    argv = ["eval", "--model", str(missing), "--tasks", "stsb:dev", "--data-root", str(data_root)]
    message = one_line_error(*run(argv, capsys)[::2])
    assert str(missing) in message


def test_every_option_is_explained_in_help(capsys):
    for command, options in {
        "eval": ["--model", "--tasks", "--data-root", "--json", "--batch-size", "--aggregation", "--limit"],
        "encode": ["--model", "--input", "--output", "--batch-size", "--normalize"],
    }.items():
        code, stdout, _ = run([command, "--help"], capsys)
        assert code == 0
        for option in options:
            assert option in stdout, f"{command} --help does not mention {option}"


# ------------------------------------------------------------------ issue 10: hostile inputs, exact outputs


def test_encode_row_i_is_line_i_with_lone_cr_and_crlf(tiny_bert_path, tmp_path, capsys):
    """A lone \\r inside a line stays in its text: 3 lines give 3 rows (4 before the fix)."""
    lone = tmp_path / "lone.txt"
    lone.write_bytes(b"first text\nsecond\rstill second\nthird text\n")
    crlf = tmp_path / "crlf.txt"
    crlf.write_bytes(b"first text\r\nsecond\r\nthird text\r\n")
    lf = tmp_path / "lf.txt"
    lf.write_bytes(b"first text\nsecond\nthird text\n")
    outputs = {}
    for name in ("lone", "crlf", "lf"):
        out = tmp_path / f"{name}.npy"
        argv = ["encode", "-m", tiny_bert_path, "-i", str(tmp_path / f"{name}.txt"), "-o", str(out), "--no-progress"]
        code, _, stderr = run(argv, capsys)
        assert code == 0, stderr
        outputs[name] = np.load(out)
    assert outputs["lone"].shape[0] == 3
    np.testing.assert_array_equal(outputs["crlf"], outputs["lf"])


def test_encode_writes_exactly_the_output_path_it_reports(tiny_bert_path, tmp_path, capsys):
    texts = tmp_path / "texts.txt"
    texts.write_text("one\ntwo\n", encoding="utf-8")
    out = tmp_path / "emb.bin"
    code, _, stderr = run(["encode", "-m", tiny_bert_path, "-i", str(texts), "-o", str(out), "--no-progress"], capsys)
    assert code == 0, stderr
    assert f"wrote {out} (2 x 32)" in stderr
    assert sorted(path.name for path in tmp_path.iterdir()) == ["emb.bin", "texts.txt"]  # no emb.bin.npy
    assert np.load(out).shape == (2, 32)


def test_encode_invalid_utf8_names_file_and_line(tiny_bert_path, tmp_path, capsys):
    texts = tmp_path / "texts.txt"
    texts.write_bytes(b"fine\nbad \xff byte\n")
    argv = ["encode", "-m", tiny_bert_path, "-i", str(texts), "-o", str(tmp_path / "e.npy")]
    message = one_line_error(*run(argv, capsys)[::2])
    assert f"{texts}:2" in message and "UTF-8" in message


def test_constant_gold_scores_are_written_as_null_with_a_warning(tiny_bert_path, data_root, tmp_path, capsys, caplog):
    root = tmp_path / "data"
    rows = (data_root / "stsb/original/sts-dev.csv").read_text(encoding="utf-8").splitlines()[:6]
    constant = ["\t".join([*row.split("\t")[:4], "2.5", *row.split("\t")[5:]]) for row in rows]
    (root / "stsb/original").mkdir(parents=True)
    (root / "stsb/original/sts-dev.csv").write_text("\n".join(constant) + "\n", encoding="utf-8")
    out = tmp_path / "results.json"
    argv = ["eval", "-m", tiny_bert_path, "--tasks", "stsb:dev", "--data-root", str(root), "--json", str(out)]
    code, _, stderr = run([*argv, "--no-progress"], capsys)
    assert code == 0, stderr
    text = out.read_text(encoding="utf-8")
    assert "NaN" not in text
    results = json.loads(text, parse_constant=lambda name: pytest.fail(f"bare {name} in the JSON"))
    assert results["tasks"]["stsb"]["spearman"] is None and results["tasks"]["stsb"]["pearson"] is None
    assert results["average"] == {"spearman": None, "pearson": None}
    assert "gold scores are constant" in caplog.text and "null" in caplog.text


def test_trust_remote_code_is_documented_and_off_by_default(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # the help box would cut the long option name
    for command in ("eval", "encode"):
        code, stdout, _ = run([command, "--help"], capsys)
        assert code == 0 and "--trust-remote-code" in stdout


def test_trust_remote_code_flag_reaches_the_loader(tiny_bert_path, tmp_path, capsys, monkeypatch):
    from contrastext.models import TextEncoder

    seen = []
    original = TextEncoder.load.__func__
    monkeypatch.setattr(
        TextEncoder, "load", classmethod(lambda cls, path, **kw: seen.append(kw) or original(cls, path, **kw))
    )
    texts = tmp_path / "texts.txt"
    texts.write_text("one\n", encoding="utf-8")
    base = ["encode", "-m", tiny_bert_path, "-i", str(texts), "-o", str(tmp_path / "e.npy"), "--no-progress"]
    assert run(base, capsys)[0] == 0
    assert run([*base, "--trust-remote-code"], capsys)[0] == 0
    assert seen == [{"trust_remote_code": False}, {"trust_remote_code": True}]


def test_results_json_never_writes_a_bare_nan():
    from contrastext.cli.eval_command import results_json

    text, undefined = results_json({"tasks": {"x": {"spearman": float("nan"), "n": 2}}, "average": {"p": float("inf")}})
    assert json.loads(text) == {"tasks": {"x": {"spearman": None, "n": 2}}, "average": {"p": None}}
    assert undefined == ["tasks.x.spearman", "average.p"]


def _encode_argv(model: str, tmp_path, *extra: str) -> list[str]:
    texts = tmp_path / "texts.txt"
    texts.write_text("A man is playing a guitar.\nThe cat sleeps.\n", encoding="utf-8")
    return ["encode", "-m", model, "-i", str(texts), "-o", str(tmp_path / "emb.npy"), "--no-progress", *extra]


@pytest.mark.parametrize(
    ("device", "message"),
    [("banana", "not a device"), ("cuda:7", "CUDA GPU"), ("meta", "not supported")],
)
def test_encode_refuses_a_device_it_cannot_use_in_one_line(tiny_bert_path, tmp_path, capsys, device, message):
    import torch

    if device.startswith("cuda") and torch.cuda.device_count() > 7:  # pragma: no cover - an 8-GPU machine
        pytest.skip("this machine has a cuda:7")
    code, _, stderr = run(_encode_argv(tiny_bert_path, tmp_path, "--device", device), capsys)
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error:") and message in lines[0], stderr
    assert f"--device {device}" in lines[0] or f"--device '{device}'" in lines[0]
    assert not (tmp_path / "emb.npy").exists()


def test_encode_on_the_cpu_by_name_equals_the_default_without_a_gpu(tiny_bert_path, tmp_path, capsys):
    import torch

    code, _, stderr = run(_encode_argv(tiny_bert_path, tmp_path, "--device", "cpu"), capsys)
    assert code == 0, stderr
    on_cpu = np.load(tmp_path / "emb.npy")
    (tmp_path / "emb.npy").unlink()
    code, _, stderr = run(_encode_argv(tiny_bert_path, tmp_path), capsys)
    assert code == 0, stderr
    default = np.load(tmp_path / "emb.npy")
    if torch.cuda.is_available():  # the default is the GPU there: float32 kernels differ in rounding only
        np.testing.assert_allclose(default, on_cpu, atol=1e-4)
    else:
        np.testing.assert_array_equal(default, on_cpu)


@pytest.mark.cuda
def test_encode_and_eval_on_cuda_give_the_cpu_numbers(tiny_bert_path, data_root, tmp_path, capsys):
    code, _, stderr = run(_encode_argv(tiny_bert_path, tmp_path, "--device", "cuda"), capsys)
    assert code == 0, stderr
    on_cuda = np.load(tmp_path / "emb.npy")
    (tmp_path / "emb.npy").unlink()
    code, _, stderr = run(_encode_argv(tiny_bert_path, tmp_path, "--device", "cpu"), capsys)
    assert code == 0, stderr
    np.testing.assert_allclose(on_cuda, np.load(tmp_path / "emb.npy"), atol=1e-4)
    scores = {}
    for device in ("cuda", "cpu"):
        out = tmp_path / f"{device}.json"
        argv = ["eval", "-m", tiny_bert_path, "--tasks", "stsb:dev", "--data-root", str(data_root), "--limit", "60",
                "--no-progress", "--device", device, "--json", str(out)]
        code, _, stderr = run(argv, capsys)
        assert code == 0, stderr
        scores[device] = json.loads(out.read_text())["tasks"]["stsb"]["spearman"]
    assert scores["cuda"] == pytest.approx(scores["cpu"], abs=0.5)


# ------------------------------------------------------------- ir: specs and column roles (issue 23, items 1, 3)


def quora_beir_folder(data_root, folder, n_queries: int = 40, n_distractors: int = 160):
    """A BEIR folder from Quora duplicates: each duplicate pair's first question is a query, its second the relevant
    document (grade 1); the second questions of non-duplicate rows are distractors, some judged 0, and every fourth
    query also gets a grade-2 document; one query is unjudged. Returns ST's inputs (queries, corpus, relevant)."""
    from contrastext.data.tasks import load_task

    examples = load_task("minbert-quora:dev", data_root).examples
    seen: set[str] = set()

    def fresh(*texts: str) -> bool:
        if any(text in seen for text in texts) or len(set(texts)) < len(texts):
            return False
        seen.update(texts)
        return True

    duplicates = [e.texts for e in examples if e.label == 1 and fresh(*e.texts)][: n_queries + 1]
    distractors = [e.texts[1] for e in examples if e.label == 0 and fresh(e.texts[1])][:n_distractors]
    queries = {f"q{i}": first for i, (first, _) in enumerate(duplicates)}
    corpus_rows = [{"_id": f"d{i}", "title": "", "text": second} for i, (_, second) in enumerate(duplicates)]
    corpus_rows += [{"_id": f"x{i}", "text": text} for i, text in enumerate(distractors)]
    corpus_rows[3]["title"] = "Quora"  # a title: the document's text is "title text", for ST and for us
    judgements = [(f"q{i}", f"d{i}", 1) for i in range(n_queries)]
    judgements += [(f"q{i}", f"x{i}", 2) for i in range(0, n_queries, 4)] + [(f"q{i}", f"x{i}", 0) for i in (1, 2)]
    folder.mkdir()
    (folder / "qrels").mkdir()
    (folder / "corpus.jsonl").write_text("".join(json.dumps(row) + "\n" for row in corpus_rows), encoding="utf-8")
    (folder / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": qid, "text": text}) + "\n" for qid, text in queries.items()), encoding="utf-8"
    )  # q{n_queries} has no judgement: left out, as ST leaves it out
    (folder / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t{s}\n" for q, d, s in judgements), encoding="utf-8"
    )
    corpus = {row["_id"]: f"{row['title']} {row['text']}".strip() if row.get("title") else row["text"]
              for row in corpus_rows}  # fmt: skip
    relevant: dict[str, set[str]] = {}
    for query, document, score in judgements:
        if score > 0:
            relevant.setdefault(query, set()).add(document)
    return queries, corpus, relevant


def test_eval_ir_gives_st_information_retrieval_numbers(minilm_path, data_root, tmp_path, capsys):
    """``eval --tasks ir:FOLDER --json`` on a BEIR folder built from Quora: every key within 1e-6 of ST's
    InformationRetrievalEvaluator (graded qrels, a titled document, an unjudged query)."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.evaluation import InformationRetrievalEvaluator
    from sentence_transformers.util import cos_sim, dot_score

    from contrastext.evaluation.ir_keys import IR_METRIC_NAMES, KS

    folder = tmp_path / "quora_ir"
    queries, corpus, relevant = quora_beir_folder(data_root, folder)
    out = tmp_path / "ir.json"
    argv = ["eval", "-m", minilm_path, "--tasks", f"ir:{folder}", "--no-progress", "--json", str(out)]
    code, stdout, stderr = run(argv, capsys)
    assert code == 0, stderr
    results = json.loads(out.read_text())
    task = results["tasks"]["quora_ir"]
    assert (task["split"], task["kind"], task["n"], task["corpus"]) == ("test", "ir", 40, len(corpus))
    assert "ndcg@10" in stdout and "quora_ir" in stdout  # the table shows the headline

    model = SentenceTransformer(minilm_path, device="cpu")
    evaluator = InformationRetrievalEvaluator(
        queries, corpus, relevant, mrr_at_k=list(KS), ndcg_at_k=list(KS), accuracy_at_k=list(KS),
        precision_recall_at_k=list(KS), map_at_k=list(KS), score_functions={"cosine": cos_sim, "dot": dot_score},
        write_csv=False, name="quora_ir",
    )  # fmt: skip
    theirs = evaluator(model)
    assert {key.removeprefix("quora_ir_") for key in theirs} == set(IR_METRIC_NAMES)
    for key, value in theirs.items():
        name = key.removeprefix("quora_ir_")
        assert task[name] / 100 == pytest.approx(value, abs=1e-6), name
        assert results["metrics"][f"quora_ir_test_{name}"] == task[name]
    assert results["metrics"]["score"] == results["metrics"]["quora_ir_test_score"] == task["cosine_ndcg@10"]
    assert 0 < task["cosine_ndcg@10"] < 100 and task["cosine_accuracy@1"] < 100


def test_eval_reads_an_sts_file_through_its_column_roles(tiny_bert_path, tmp_path, capsys):
    rows = [("A man plays a guitar.", "A man plays music.", 4.2), ("A cat sleeps.", "A dog runs.", 0.6),
            ("The sky is blue.", "The sky is clear.", 4.6), ("Kids play.", "Stocks fell.", 0.0)]  # fmt: skip
    plain, renamed = tmp_path / "plain" / "my.csv", tmp_path / "renamed" / "my.csv"
    for path, header in ((plain, "sentence1,sentence2,score"), (renamed, "text_a,text_b,similarity")):
        path.parent.mkdir()
        path.write_text(header + "\n" + "".join(f'"{a}","{b}",{score}\n' for a, b, score in rows))
    results = {}
    for name, spec in (("plain", f"sts:{plain}"), ("roles", f"sts[text=text_a,pair=text_b,score=similarity]:{renamed}")):
        out = tmp_path / f"{name}.json"
        code, _, stderr = run(["eval", "-m", tiny_bert_path, "--tasks", spec, "--no-progress", "--json", str(out)],
                              capsys)  # fmt: skip
        assert code == 0, stderr
        results[name] = json.loads(out.read_text())
    assert results["roles"]["tasks"]["my"]["spearman"] == results["plain"]["tasks"]["my"]["spearman"]
    assert results["roles"]["metrics"] == results["plain"]["metrics"]


def test_commas_inside_a_specs_roles_do_not_split_the_task_list():
    from contrastext.cli.eval_command import parse_task_list
    from contrastext.errors import ContrastextError

    assert parse_task_list("stsb:dev, sts[text=a,pair=b,score=s]:my.csv@dev ,ir:beir") == [
        "stsb:dev", "sts[text=a,pair=b,score=s]:my.csv@dev", "ir:beir"]  # fmt: skip
    for bad in ("stsb:dev,,sts12", "sts[text=a,pair=b:my.csv"):
        with pytest.raises(ContrastextError):
            parse_task_list(bad)


def test_a_qrels_file_given_as_sts_is_one_error_line_naming_it(tiny_bert_path, tmp_path, capsys):
    folder = tmp_path / "beir"
    (folder / "qrels").mkdir(parents=True)
    qrels = folder / "qrels" / "test.tsv"
    qrels.write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    code, _, stderr = run(["eval", "-m", tiny_bert_path, "--tasks", f"sts:{qrels}", "--no-progress"], capsys)
    message = one_line_error(code, stderr)
    assert f"{qrels}:1: looks like BEIR qrels" in message and f"ir:{folder}@test" in message


def test_eval_help_shows_the_ir_and_column_role_specs(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    code, stdout, _ = run(["eval", "--help"], capsys)
    assert code == 0
    for spec in ("ir:FOLDER[@SPLIT]", "KIND:PATH[@SPLIT]", "'sts[text=text_a,pair=text_b,score=similarity]:my.csv'",
                 "'ir[id=doc_id,text=body]:my_folder'"):  # fmt: skip
        assert spec in stdout, spec  # a "[" rich would take for a style tag is escaped


@pytest.mark.parametrize(
    ("part", "rows", "expected"),
    [
        ("qrels/test.tsv", "query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td9\t1\n", "test.tsv:3: unknown corpus-id 'd9'"),
        ("qrels/test.tsv", "query-id\tcorpus-id\tscore\nq7\td1\t1\n", "test.tsv:2: unknown query-id 'q7'"),
        ("corpus.jsonl", '{"_id": "d1", "text": "a"}\n{"text": "no id"}\n', "corpus.jsonl:2: no '_id'"),
        ("corpus.jsonl", '{"_id": "d1", "text": "a"}\n{"_id": "d1", "text": "b"}\n', "corpus.jsonl:2: duplicate _id 'd1'"),
        ("queries.jsonl", '{"_id": "q1", "text": "a"}\n{"_id": "q1", "text": "b"}\n', "queries.jsonl:2: duplicate _id"),
    ],
)  # fmt: skip
def test_bad_rows_of_an_ir_folder_are_one_error_line_naming_file_and_line(tiny_bert_path, tmp_path, capsys, part,
                                                                          rows, expected):  # fmt: skip
    folder = tmp_path / "beir"
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text('{"_id": "d1", "text": "a guitar"}\n')
    (folder / "queries.jsonl").write_text('{"_id": "q1", "text": "music"}\n')
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    (folder / part).write_text(rows)
    out = tmp_path / "ir.json"
    argv = ["eval", "-m", tiny_bert_path, "--tasks", f"ir:{folder}", "--no-progress", "--json", str(out)]
    message = one_line_error(*run(argv, capsys)[::2])
    assert f"{folder / part.split('/')[0]}" in message and expected in message
    assert not out.exists()  # nothing written
