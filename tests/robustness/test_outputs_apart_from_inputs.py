"""Fault suite, overwritten inputs (issue 21, item 2): no output path equals, or lies inside, an input.

``encode --output``, ``eval --json`` and ``train --output`` naming the texts, a task file, the data file or the
model folder (or a path inside it, or a link to it) are refused before any model loads: one ``error:`` line,
exit 2, and the input byte-identical (hashed before and after). ``train -o`` naming an existing file is refused
the same way. Temporaries carry the project's name: a user's file that only looks like a leftover temporary
survives a fresh run.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

import contrastext.cli.encode_command  # noqa: F401  (registers the commands)
import contrastext.cli.eval_command  # noqa: F401
import contrastext.cli.predict_command  # noqa: F401
import contrastext.cli.train_command  # noqa: F401
from tests.cli.cli_runs import run
from tests.cli.test_train_command import FAST, RECIPE, with_sets
from tests.robustness.hostile import copy_model, folder_digest

TEXTS = "a first sentence\na second sentence\nthe third one\n" * 8


def digest(path: Path) -> str | dict:
    return folder_digest(path) if path.is_dir() else hashlib.sha256(path.read_bytes()).hexdigest()


def refused(argv: list[str], capsys, *inputs: Path, says: str = "writing there would destroy it") -> str:
    """Run ``argv``; assert one error line, exit 2, and every input unchanged; return the line."""
    before = [digest(path) for path in inputs]
    code, _, stderr = run(argv, capsys)
    lines = stderr.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error:"), stderr
    assert says in lines[0], lines[0]
    assert [digest(path) for path in inputs] == before
    return lines[0]


@pytest.fixture
def model(tmp_path, tiny_bert_path) -> Path:
    return copy_model(tiny_bert_path, tmp_path / "model")


@pytest.fixture
def texts(tmp_path) -> Path:
    path = tmp_path / "texts.txt"
    path.write_text(TEXTS, encoding="utf-8")
    return path


def test_encode_output_equal_to_input_is_refused(texts, model, capsys, no_model_loads):
    line = refused(["encode", "-m", str(model), "-i", str(texts), "-o", str(texts)], capsys, texts)
    assert "--output" in line and "(--input)" in line


@pytest.mark.parametrize("where", ["the input", "inside the model"])
def test_predict_output_over_an_input_is_refused(tmp_path, model, where, capsys, no_model_loads):
    texts = tmp_path / "texts.csv"  # a suffix predict writes, so only the overlap can refuse it
    texts.write_text(TEXTS, encoding="utf-8")
    output = texts if where == "the input" else model / "labels.jsonl"
    refused(["predict", "-m", str(model), "-i", str(texts), "-o", str(output)], capsys, texts, model)


def test_encode_output_through_a_link_to_the_input_is_refused(tmp_path, texts, model, capsys, no_model_loads):
    link = tmp_path / "link.npy"
    link.symlink_to(texts)
    refused(["encode", "-m", str(model), "-i", str(texts), "-o", str(link)], capsys, texts)


def test_encode_output_inside_the_model_folder_is_refused(texts, model, capsys, no_model_loads):
    line = refused(["encode", "-m", str(model), "-i", str(texts), "-o", str(model / "config.json")], capsys, model)
    assert "lies inside the input folder (--model)" in line


@pytest.mark.parametrize("inside", ["config.json", "model.safetensors", "new.json", "."])
def test_eval_json_in_the_model_folder_is_refused(model, data_root, inside, capsys, no_model_loads):
    target = model / inside
    argv = ["eval", "-m", str(model), "--tasks", "stsb:dev", "--data-root", str(data_root), "--json", str(target)]
    refused(argv, capsys, model, says="--json")
    assert not (model / "new.json").exists()


def test_eval_json_over_an_own_task_file_is_refused(tmp_path, model, capsys, no_model_loads):
    task = tmp_path / "pairs.csv"
    task.write_text("a,b,score\none,two,1.0\nthree,four,2.0\nfive,six,3.0\n", encoding="utf-8")
    line = refused(["eval", "-m", str(model), "--tasks", f"sts:{task}", "--json", str(task)], capsys, task)
    assert "(--tasks)" in line


def own_data_argv(model: Path, data: Path, output: Path) -> list[str]:
    sets = [*FAST, f"model={model}", f"data.path={data}", "data.task=null", "eval.tasks=", "train.metric_for_best=null"]
    return ["train", RECIPE, *with_sets(*sets), "--output", str(output)]


@pytest.mark.parametrize("where", ["the data file", "under the data file", "the model folder", "inside the model"])
def test_train_output_over_an_input_is_refused(texts, model, where, capsys, no_model_loads):
    output = {"the data file": texts, "under the data file": texts / "run", "the model folder": model,
              "inside the model": model / "run"}[where]
    line = refused(own_data_argv(model, texts, output), capsys, texts, model)
    assert ("(data.path)" if "data" in where else "(model)") in line
    assert not (model / "run").exists()


def test_train_output_naming_an_existing_file_is_refused(tmp_path, texts, model, capsys, no_model_loads):
    other = tmp_path / "notes.txt"
    other.write_text("mine\n", encoding="utf-8")
    refused(own_data_argv(model, texts, other), capsys, other, says="is an existing file, not a folder")


def test_a_fresh_run_leaves_a_users_files_that_look_like_temporaries(tmp_path, texts, tiny_bert_path, capsys):
    output = tmp_path / "run"
    (output / "checkpoints").mkdir(parents=True)
    lookalikes = [output / f".X.{'ab' * 16}.tmp", output / f".best.{'cd' * 16}.old",
                  output / "checkpoints" / f".notes.{'ef' * 16}.tmp", output / "train_log.jsonl.tmp"]
    for path in lookalikes:
        path.write_text("mine\n", encoding="utf-8")
    code, _, stderr = run(own_data_argv(Path(tiny_bert_path), texts, output), capsys)
    assert code == 0, stderr
    assert all(path.read_text(encoding="utf-8") == "mine\n" for path in lookalikes)
    assert (output / "final").is_dir()
