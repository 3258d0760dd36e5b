"""Every recipe on the user's own data, through ``contrastext train`` (in-process): pair files in csv, tsv and
jsonl (supervised SimCSE), sentences in txt and jsonl (unsupervised SimCSE), a labelled CSV with string labels
and 3 classes (SCL, RECLAIM), a local ``datasets`` folder, ``--set data.path`` over a recipe's task, two
sources at one level, and bad rows named by file and line. No data root: none of these reads a registry task.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import yaml

import contrastext.cli.train_command  # noqa: F401  (registers the command)
from contrastext.errors import ConfigError
from tests.cli.cli_runs import run

pytestmark = pytest.mark.usefixtures("single_torch_thread")

QUIET = [
    "train.epochs=null",
    "train.max_steps=2",
    "train.batch_size=4",
    "train.save_every=null",
    "train.log_every=1",
    "train.progress_bar=false",
    "train.report_to=none",
]
LABELS = ("bad", "ok", "good")


@pytest.fixture(autouse=True)
def no_data_root(monkeypatch):
    """Own data needs no benchmark data root: none is given, and $CONTRASTEXT_DATA is unset."""
    monkeypatch.delenv("CONTRASTEXT_DATA", raising=False)


def train(capsys, recipe: str, output: Path, *overrides: str) -> tuple[int, str, str]:
    argv = ["train", recipe, "--output", str(output)]
    for override in overrides:
        argv += ["--set", override]
    return run(argv, capsys)


def trained(capsys, recipe: str, output: Path, model: str, source: str, *overrides: str) -> str:
    """The stdout of ``recipe`` trained for QUIET's 2 steps on ``source`` (``data.path=...`` or ``data.dataset=...``)
    without evaluation; the run must exit 0."""
    code, stdout, stderr = train(
        capsys, recipe, output, *QUIET, f"model={model}", source, "eval.tasks=[]", "train.metric_for_best=null",
        *overrides,
    )
    assert code == 0, stderr
    return stdout


def one_line_error(code: int, stderr: str) -> str:
    assert code == 2, stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    return lines[0]


def report(output: Path) -> dict:
    return json.loads((output / "metrics.json").read_text())["report"]


PAIRS = [(f"question {i}, with a comma", f"answer {i}", f"a wrong answer {i}") for i in range(12)]


def write_pairs(folder: Path, suffix: str) -> Path:
    path = folder / f"pairs{suffix}"
    if suffix == ".csv":
        with path.open("w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow(["question", "answer", "hard"])
            writer.writerows(PAIRS)
    elif suffix == ".tsv":
        path.write_text("question\tanswer\thard\n" + "".join("\t".join(row) + "\n" for row in PAIRS), encoding="utf-8")
    else:
        lines = [json.dumps({"id": i, "question": q, "answer": a, "hard": h}) for i, (q, a, h) in enumerate(PAIRS)]
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def write_reviews(path: Path, rows: int = 30, offset: int = 0) -> Path:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["text", "label"])
        for i in range(offset, offset + rows):
            writer.writerow([f"review {i}: the film was {LABELS[i % 3]}", LABELS[i % 3]])
    return path


@pytest.mark.parametrize("suffix", [".csv", ".tsv", ".jsonl"])
def test_simcse_sup_trains_on_a_pair_file(tmp_path, tiny_bert_path, capsys, suffix):
    path = write_pairs(tmp_path, suffix)
    output = tmp_path / "run"
    stdout = trained(capsys, "simcse-sup", output, tiny_bert_path, f"data.path={path}")
    data = report(output)["data"]
    unused = {"unused_columns": ["id"]} if suffix == ".jsonl" else {}  # the JSONL rows' integer id: reported
    assert data == {"source": "data.path", "train": str(path), "columns": ["question", "answer", "hard"],
                    "n_rows": 12, "n_train": 12, **unused}
    assert (f"data: {path}: simcse-sup does not use the column id (it reads question, answer, hard)" in stdout) == bool(
        unused
    )
    saved = yaml.safe_load((output / "config.yaml").read_text())["data"]
    assert saved["path"] == str(path) and saved["task"] is None  # the recipe's nli-triplets was replaced


@pytest.mark.parametrize("suffix", [".txt", ".jsonl"])
def test_simcse_unsup_reads_the_sentences_not_raw_json(tmp_path, tiny_bert_path, capsys, suffix):
    sentences = [f"sentence number {i} of my corpus" for i in range(10)]
    path = tmp_path / f"corpus{suffix}"
    if suffix == ".txt":
        path.write_text("\n".join(sentences) + "\n", encoding="utf-8")
    else:
        path.write_text("".join(json.dumps({"id": i, "text": s}) + "\n" for i, s in enumerate(sentences)), encoding="utf-8")
    output = tmp_path / "run"
    trained(capsys, "simcse-unsup", output, tiny_bert_path, f"data.path={path}")
    assert report(output)["data"]["n_train"] == 10
    if suffix == ".jsonl":
        assert report(output)["data"]["columns"] == ["text"]

    from contrastext.runs.data import load_training_examples
    from contrastext.training.config import load_config

    config = load_config(output / "config.yaml")
    assert [example.texts for example in load_training_examples(config, None, "wiki1m")] == [(s,) for s in sentences]


def test_simcse_unsup_reads_the_named_column_of_a_csv(tmp_path, tiny_bert_path, capsys):
    path = tmp_path / "docs.csv"
    path.write_text("title,body\n" + "".join(f"t{i},body text {i}\n" for i in range(8)), encoding="utf-8")
    output = tmp_path / "run"
    common = [*QUIET, f"model={tiny_bert_path}", f"data.path={path}", "eval.tasks=[]", "train.metric_for_best=null"]
    message = one_line_error(*train(capsys, "simcse-unsup", output, *common)[::2])
    assert "docs.csv has the text columns title, body" in message and "data.columns.text" in message
    code, _, stderr = train(capsys, "simcse-unsup", output, *common, "data.columns.text=body")
    assert code == 0, stderr
    assert report(output)["data"]["columns"] == ["body"]


def test_scl_recipe_trains_on_a_labelled_csv_given_with_set(tmp_path, tiny_bert_path, capsys):
    """`--set data.path=reviews.csv` on recipes/scl.yaml (data.task: sst2) trains on reviews.csv: string labels,
    3 classes, a seeded 20 % holdout split into validation and test, no data root."""
    path = write_reviews(tmp_path / "reviews.csv")
    output = tmp_path / "scl"
    code, stdout, stderr = train(
        capsys, "scl", output, *QUIET, f"model={tiny_bert_path}", f"data.path={path}", "method_args.seeds=[1]",
        "train.eval_every=2",
    )
    assert code == 0, stderr
    assert "reviews_test_accuracy" in stdout
    draw = json.loads((output / "seed-1" / "metrics.json").read_text())
    described = draw["report"]
    assert described["task"] == "reviews" and described["source"] == "data.path"
    assert described["label_names"] == ["bad", "good", "ok"]
    assert described["train"].startswith(str(path)) and "20% holdout (seed 0)" in described["train"]
    assert described["n_train"] == 20  # the recipe's data.few_shot: 20 of the 24 rows left after the holdout
    assert described["n_validation"] + described["n_test"] == 6
    assert "reviews_validation_accuracy" in draw["metrics"] and "reviews_test_accuracy" in described["test_metrics"]
    summary = json.loads((output / "summary.json").read_text())
    assert summary["task"] == str(path)
    saved = yaml.safe_load((output / "seed-1" / "config.yaml").read_text())
    assert saved["data"]["task"] is None and saved["data"]["path"] == str(path) and saved["eval"]["tasks"] == []


def test_the_classifier_has_one_output_per_class_and_the_label_names(tmp_path, tiny_bert_path):
    from contrastext.runs.registry import get_recipe
    from contrastext.runs.scl import build
    from contrastext.training.config import load_config

    path = write_reviews(tmp_path / "reviews.csv")
    recipe = Path(__file__).resolve().parents[2] / "recipes" / "scl.yaml"
    config = load_config(recipe, [f"model={tiny_bert_path}", f"data.path={path}", f"output_dir={tmp_path / 'o'}"])
    args = config.method_args_as(get_recipe("scl").args_model)
    bundle = build(config, args, None)
    assert bundle.method.label_names == ["bad", "good", "ok"]
    assert bundle.method.head.out_proj.out_features == 3  # scl's head: dense_tanh

    numbered = tmp_path / "stars.csv"
    numbered.write_text("text,stars\n" + "".join(f"t{i},{i % 3 + 1}\n" for i in range(30)), encoding="utf-8")
    config = load_config(recipe, [f"model={tiny_bert_path}", f"data.path={numbered}", "data.columns.label=stars",
                                  "data.label_names=[3, 2, 1, 0]", f"output_dir={tmp_path / 'o2'}"])
    bundle = build(config, args, None)
    assert bundle.method.label_names == ["3", "2", "1", "0"]  # the order given; 4 classes although 0 never occurs
    assert bundle.method.head.out_proj.out_features == 4
    assert {example.label for example in bundle.train_examples} <= {0, 1, 2}


def test_reclaim_trains_on_string_labels_with_an_evaluation_file(tmp_path, tiny_bert_path, capsys):
    train_path = write_reviews(tmp_path / "reviews.csv", rows=12)
    dev_path = write_reviews(tmp_path / "reviews-dev.csv", rows=6, offset=100)
    output = tmp_path / "reclaim"
    common = [*QUIET, f"model={tiny_bert_path}", f"data.path={train_path}", "method_args.k=2"]
    code, _, stderr = train(capsys, "reclaim", output, *common, f"data.eval_path={dev_path}")
    assert code == 0, stderr
    summary = json.loads((output / "metrics.json").read_text())
    assert summary["report"]["eval"] == str(dev_path) and summary["report"]["n_train"] == 12
    assert summary["report"]["label_names"] == ["bad", "good", "ok"]
    assert "reviews-dev_eval_accuracy" in summary["metrics"]  # named after the evaluation file, not reviews.csv

    unseen = tmp_path / "unseen.csv"
    unseen.write_text("text,label\nfine,good\nwhat now,terrible\n", encoding="utf-8")
    message = one_line_error(*train(capsys, "reclaim", tmp_path / "r2", *common, f"data.eval_path={unseen}")[::2])
    assert f"{unseen}:3: label 'terrible' was not seen in the training data" in message


def test_a_local_datasets_folder(tmp_path, tiny_bert_path, capsys):
    datasets = pytest.importorskip("datasets")

    def split(rows: int, offset: int = 0):
        texts = [f"review {i}: it was {LABELS[i % 3]}" for i in range(offset, offset + rows)]
        return datasets.Dataset.from_dict({"text": texts, "label": [LABELS[i % 3] for i in range(offset, offset + rows)]})

    folder = tmp_path / "reviews-ds"
    datasets.DatasetDict({"train": split(12), "validation": split(6, 50)}).save_to_disk(str(folder))
    output = tmp_path / "run"
    code, _, stderr = train(
        capsys, "reclaim", output, *QUIET, f"model={tiny_bert_path}", f"data.dataset={folder}",
        "data.eval_split=validation", "method_args.k=2",
    )
    assert code == 0, stderr
    summary = json.loads((output / "metrics.json").read_text())
    assert summary["report"]["train"] == f"{folder}[train]" and summary["report"]["eval"] == f"{folder}[validation]"
    assert "reviews-ds_validation_accuracy" in summary["metrics"]

    pairs = tmp_path / "pairs-ds"
    datasets.Dataset.from_dict({"anchor": [q for q, _, _ in PAIRS], "positive": [a for _, a, _ in PAIRS]}).save_to_disk(
        str(pairs)
    )
    trained(capsys, "simcse-sup", tmp_path / "sup", tiny_bert_path, f"data.dataset={pairs}")
    assert report(tmp_path / "sup")["data"]["columns"] == ["anchor", "positive"]


def test_two_sources_at_one_level_are_one_line_naming_both(tmp_path, capsys):
    path = write_reviews(tmp_path / "reviews.csv")
    dataset = tmp_path / "ds"  # beside the output folder: an output inside an input is refused first
    dataset.mkdir()
    message = one_line_error(*train(
        capsys, "scl", tmp_path / "o", f"data.path={path}", f"data.dataset={dataset}",
    )[::2])
    assert "data.path" in message and "data.dataset" in message and "reviews.csv" in message

    recipe = Path(__file__).resolve().parents[2] / "recipes" / "scl.yaml"
    raw = yaml.safe_load(recipe.read_text())
    raw["data"]["path"] = str(path)  # beside the recipe's data.task: sst2, in the same file
    mine = tmp_path / "mine.yaml"
    mine.write_text(yaml.safe_dump(raw), encoding="utf-8")
    message = one_line_error(*train(capsys, str(mine), tmp_path / "o")[::2])
    assert "mine.yaml" in message and "data.task ('sst2')" in message and "data.path" in message


def test_a_bad_row_is_named_by_file_and_line(tmp_path, tiny_bert_path, capsys):
    path = write_reviews(tmp_path / "reviews.csv", rows=6)
    with path.open("a", encoding="utf-8") as handle:
        handle.write("a row without its label\n")
    message = one_line_error(*train(capsys, "scl", tmp_path / "o", f"model={tiny_bert_path}", f"data.path={path}")[::2])
    assert f"{path}:8: expected 2 columns (text, label), found 1" in message
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text('{"q": "a", "a": "b"}\n{"q": "c", "a": ""}\n', encoding="utf-8")
    message = one_line_error(*train(
        capsys, "simcse-sup", tmp_path / "p", f"model={tiny_bert_path}", f"data.path={pairs}", "eval.tasks=[]",
    )[::2])
    assert f"{pairs}:2: empty text in column 'a'" in message


def test_eval_tasks_beside_a_users_file_is_an_error(tmp_path, capsys):
    path = write_reviews(tmp_path / "reviews.csv")
    message = one_line_error(*train(
        capsys, "scl", tmp_path / "o", f"data.path={path}", "eval.tasks=[sst2:dev]",
    )[::2])
    assert "--set eval.tasks" in message and "data.eval_path" in message


def test_multitask_refuses_a_single_source_and_capt_fine_tunes_on_its_task(tmp_path):
    """A source is never ignored: multitask trains on data.tasks, so data.path there is an error; CAPT
    pre-trains on the user's sentences and its fine-tuning stage reads finetune_task, not that file."""
    from contrastext.runs.capt import CAPTArgs, finetune_config
    from contrastext.runs.data import data_spec, load_multitask_data
    from contrastext.runs.multitask import MultitaskArgs
    from contrastext.training.config import load_config

    recipes = Path(__file__).resolve().parents[2] / "recipes"
    sentences = tmp_path / "corpus.txt"
    sentences.write_text("one sentence\nanother one\n", encoding="utf-8")
    config = load_config(recipes / "multitask.yaml", [f"data.path={sentences}"])
    with pytest.raises(ConfigError, match="data.path: multitask trains on data.tasks"):
        load_multitask_data(config, MultitaskArgs(), None)

    config = load_config(recipes / "capt.yaml", [f"data.path={sentences}"])
    assert data_spec(config).path == str(sentences) and config.data.task is None
    tune = finetune_config(config, config.method_args_as(CAPTArgs), seed=1)
    assert data_spec(tune).source == "task" and tune.data.task == "sst2" and tune.data.path is None


# ---------------------------------------------------------------- retrieval data shapes (issue 23, item 3)

RETRIEVAL = [
    {"query": f"what about {topic}", "pos": [f"a text on {topic}", f"more on {topic}"],
     "neg": [f"a text on {other}" for other in ("rain", "tea", "chess")[: 2 + n % 2]]}
    for n, topic in enumerate(("cats", "pizza", "rome", "guitars", "trains", "coffee"))
]  # fmt: skip


def write_retrieval(folder: Path, kind: str) -> Path:
    if kind == "jsonl":
        path = folder / "retrieval.jsonl"
        path.write_text("".join(json.dumps(row) + "\n" for row in RETRIEVAL), encoding="utf-8")
        return path
    datasets = pytest.importorskip("datasets")
    path = folder / "retrieval-ds"
    datasets.Dataset.from_list(RETRIEVAL).save_to_disk(str(path))
    return path


@pytest.mark.parametrize("kind", ["jsonl", "dataset"])
def test_mnrl_trains_on_lists_of_positives_and_negatives_as_n_tuples(tmp_path, tiny_bert_path, capsys, kind):
    source = write_retrieval(tmp_path, kind)
    key = "data.path" if kind == "jsonl" else "data.dataset"
    where = str(source) if kind == "jsonl" else f"{source}[train]"
    output = tmp_path / "run"
    stdout = trained(capsys, "mnrl", output, tiny_bert_path, f"{key}={source}")
    assert (
        f"data: {where}: list-valued columns read as one row per positive (pos), the anchor 'query' and the negatives "
        "of 'neg' as n-tuple columns: 6 rows -> 12 (anchor, positive, negative_1, negative_2) rows; n = 2 (the "
        "fewest of any row: none dropped), rows hold 2–3 negatives, 0 rows with fewer than 2 dropped"
    ) in stdout
    data = report(output)["data"]
    assert data["columns"] == ["query", "pos", "neg"] and data["n_train"] == 12
    assert data["ntuples"]["negatives_left_out"] == 3

    stdout = trained(capsys, "mnrl", tmp_path / "three", tiny_bert_path, f"{key}={source}", "data.num_negatives=3")
    assert "6 rows -> 6 (anchor, positive, negative_1 … negative_3) rows; n = 3 (data.num_negatives)" in stdout
    assert report(tmp_path / "three")["data"]["ntuples"]["too_few"] == 3


def test_the_data_of_the_issue_is_read_and_a_list_holding_a_non_string_is_one_error_line(tmp_path, tiny_bert_path,
                                                                                          capsys):  # fmt: skip
    path = tmp_path / "retrieval.jsonl"
    path.write_text(json.dumps(RETRIEVAL[0]) + "\n" + json.dumps({"query": "q", "pos": ["a", 7], "neg": []}) + "\n")
    message = one_line_error(*train(
        capsys, "mnrl", tmp_path / "o", f"model={tiny_bert_path}", f"data.path={path}", "eval.tasks=[]",
    )[::2])
    assert message == f"error: {path}:2: key 'pos': item 2 is 7, not a string; a list-valued column holds texts"
    path.write_text("".join(json.dumps(row) + "\n" for row in RETRIEVAL))
    message = one_line_error(*train(
        capsys, "simcse-unsup", tmp_path / "o", f"model={tiny_bert_path}", f"data.path={path}",
        "data.columns.text=pos",
    )[::2])
    assert "data.columns.text: the column 'pos'" in message and "holds lists" in message


def test_a_loss_taking_one_negative_is_refused_on_n_tuples(tmp_path, tiny_bert_path, capsys):
    source = write_retrieval(tmp_path, "jsonl")
    message = one_line_error(*train(
        capsys, "mnrl", tmp_path / "o", f"model={tiny_bert_path}", f"data.path={source}", "eval.tasks=[]",
        "method_args.loss=triplet",
    )[::2])
    assert "method_args.loss=triplet: TripletMargin takes one negative per anchor" in message
    assert "--set data.num_negatives=1" in message
    sets = ("method_args.loss=triplet", "data.num_negatives=1")
    trained(capsys, "mnrl", tmp_path / "one", tiny_bert_path, f"data.path={source}", *sets)


def test_num_negatives_without_a_list_of_negatives_is_one_error_line(tmp_path, tiny_bert_path, capsys, data_root):
    path = write_pairs(tmp_path, ".csv")
    message = one_line_error(*train(
        capsys, "mnrl", tmp_path / "o", f"model={tiny_bert_path}", f"data.path={path}", "eval.tasks=[]",
        "data.num_negatives=2",
    )[::2])
    assert f"data.num_negatives=2: {path} has no list-valued negative column" in message
    message = one_line_error(*run([
        "train", "mnrl", "--output", str(tmp_path / "o"), "--data-root", str(data_root),
        "--set", "data.num_negatives=2", "--set", "eval.tasks=[]",
    ], capsys)[::2])
    assert "data.num_negatives applies to data.path or data.dataset" in message


NLI = [
    ("a dog runs in a park", "an animal is outside", "entailment"),
    ("a dog runs in a park", "a cat sleeps on a sofa", "neutral"),
    ("a dog runs in a park", "the dog is asleep", "contradiction"),
    ("two men cook dinner", "people make food", "0"),
    ("two men cook dinner", "the men are on a plane", "2"),
    ("two men cook dinner", "the men are brothers", "1"),
    ("a girl reads a book", "a child is reading", "entailment"),
    ("a girl reads a book", "the girl plays football", "contradiction"),
    ("a girl reads a book", "a girl reads a novel", "-"),
]


def write_nli(folder: Path) -> Path:
    path = folder / "nli.csv"
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["premise", "hypothesis", "label"])
        writer.writerows(NLI)
    return path


def test_simcse_sup_makes_nli_rows_simcses_triplets_and_says_so(tmp_path, tiny_bert_path, capsys):
    path = write_nli(tmp_path)
    output = tmp_path / "run"
    stdout = trained(capsys, "simcse-sup", output, tiny_bert_path, f"data.path={path}")
    assert (
        f"data: {path}: NLI rows (premise, hypothesis, label) read as SimCSE's triplets (premise, entailment, "
        "contradiction): 9 rows (3 entailment, 3 contradiction, 2 neutral dropped, 1 without a gold label dropped) "
        "-> 3 triplets from 3 premises"
    ) in stdout
    data = report(output)["data"]
    assert data["columns"] == ["premise", "hypothesis", "label"] and data["n_train"] == 3
    assert data["nli"]["neutral"] == 2 and "unused_columns" not in data

    from contrastext.runs.data import load_training_data
    from tests.runs.recipe_runs import recipe_config

    config = recipe_config("simcse-sup", tmp_path / "c", tiny_bert_path, f"data.path={path}")
    examples = load_training_data(config, None, "nli-triplets", nli=True).examples
    assert [example.texts for example in examples] == [
        ("a dog runs in a park", "an animal is outside", "the dog is asleep"),
        ("two men cook dinner", "people make food", "the men are on a plane"),
        ("a girl reads a book", "a child is reading", "the girl plays football"),
    ]


def test_a_label_column_a_recipe_does_not_use_is_reported(tmp_path, tiny_bert_path, capsys, caplog):
    path = write_nli(tmp_path)
    with caplog.at_level("WARNING", logger="contrastext.runs"):
        trained(capsys, "mnrl", tmp_path / "run", tiny_bert_path, f"data.path={path}")
    assert (
        f"data: {path}: mnrl does not use the label column (it reads premise, hypothesis); its rows are all trained "
        "on, whatever their label"
    ) in caplog.messages
    assert report(tmp_path / "run")["data"]["n_train"] == 9  # every row, as the line says

    bad = tmp_path / "binary.csv"
    bad.write_text("premise,hypothesis,label\na,b,entailment\na,c,not_entailment\n", encoding="utf-8")
    message = one_line_error(*train(
        capsys, "simcse-sup", tmp_path / "o", f"model={tiny_bert_path}", f"data.path={bad}", "eval.tasks=[]",
    )[::2])
    assert message.startswith(f"error: {bad}:3: label 'not_entailment' is not an NLI label")


def test_mnrl_trains_on_sentence_transformers_n_tuple_columns(tmp_path, tiny_bert_path, capsys):
    path = tmp_path / "mined.csv"
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["query", "positive", "negative_1", "negative_2", "negative_3"])
        writer.writerows((q, a, h, f"{h} again", f"not {a}") for q, a, h in PAIRS)
    trained(capsys, "mnrl", tmp_path / "run", tiny_bert_path, f"data.path={path}")
    assert report(tmp_path / "run")["data"]["columns"] == ["query", "positive", "negative_1", "negative_2", "negative_3"]
    message = one_line_error(*train(
        capsys, "mnrl", tmp_path / "o", f"model={tiny_bert_path}", f"data.path={path}", "eval.tasks=[]",
        "method_args.loss=dcl",
    )[::2])
    assert "columns 'negative_1, negative_2, negative_3'" in message
