"""``data.storage: columns`` through ``contrastext train``: the same training as the in-memory path on the same
file (losses step for step, with each batch sampler), triplets, the rows a run reports, and the keys it cannot
take (one ``error:`` line naming the key). The store goes to a temporary cache ($CONTRASTEXT_CACHE)."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

import contrastext.cli.train_command  # noqa: F401  (registers the command)
from contrastext.runtime.run_log import read_log
from tests.runs.test_own_data import QUIET, one_line_error, report, train

pytestmark = pytest.mark.usefixtures("single_torch_thread")

ROWS = [(f"question {i} about topic {i % 5}", f"answer {i % 9}", f"a wrong answer {i}") for i in range(40)]


@pytest.fixture(autouse=True)
def cache(monkeypatch, tmp_path):
    monkeypatch.delenv("CONTRASTEXT_DATA", raising=False)
    monkeypatch.setenv("CONTRASTEXT_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def write_rows(path: Path, width: int) -> Path:
    names = ["anchor", "positive", "negative"][:width]
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(names)
        writer.writerows(row[:width] for row in ROWS)
    return path


def losses(capsys, output: Path, model: str, recipe: str, path: Path, *overrides: str) -> list[float]:
    code, _, stderr = train(capsys, recipe, output, *QUIET, "train.max_steps=4", f"model={model}",
                            f"data.path={path}", "eval.tasks=[]", "train.metric_for_best=null", *overrides)  # fmt: skip
    assert code == 0, stderr
    return [record["loss"] for record in read_log(output / "train_log.jsonl") if "loss" in record]


@pytest.mark.parametrize("sampler", [[], ["train.group_by_length=true"], ["data.batch_sampler=no_duplicates"]],
                         ids=["random", "group_by_length", "no_duplicates"])  # fmt: skip
def test_columns_train_as_memory_does(tmp_path, tiny_bert_path, capsys, cache, sampler):
    path = write_rows(tmp_path / "pairs.csv", 2)
    memory = losses(capsys, tmp_path / "memory", tiny_bert_path, "mnrl", path, *sampler)
    columns = losses(capsys, tmp_path / "columns", tiny_bert_path, "mnrl", path, "data.storage=columns", *sampler)
    assert len(memory) == 4
    assert columns == pytest.approx(memory, abs=1e-6)
    assert report(tmp_path / "columns")["data"]["n_train"] == len(ROWS)
    assert any(cache.rglob("texts.arrow")), "the store is in the cache, not beside the input"
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_file()) == ["pairs.csv"]


def test_triplets_from_columns(tmp_path, tiny_bert_path, capsys):
    path = write_rows(tmp_path / "triplets.csv", 3)
    memory = losses(capsys, tmp_path / "memory", tiny_bert_path, "simcse-sup", path)
    columns = losses(capsys, tmp_path / "columns", tiny_bert_path, "simcse-sup", path, "data.storage=columns")
    assert columns == pytest.approx(memory, abs=1e-6)


@pytest.mark.parametrize("key", ["data.limit=10", "data.prompts=query_"])
def test_keys_that_rewrite_rows_in_memory_are_refused(tmp_path, tiny_bert_path, capsys, key):
    path = write_rows(tmp_path / "pairs.csv", 2)
    code, _, stderr = train(capsys, "mnrl", tmp_path / "o", *QUIET, f"model={tiny_bert_path}", f"data.path={path}",
                            "eval.tasks=[]", "data.storage=columns", key)  # fmt: skip
    message = one_line_error(code, stderr)
    assert f"{key.split('=')[0]} with data.storage=columns" in message
    assert not (tmp_path / "o").exists() or not any((tmp_path / "o").iterdir())


def test_columns_on_a_registry_task_is_refused(tmp_path, tiny_bert_path, capsys):
    code, _, stderr = train(capsys, "mnrl", tmp_path / "o", *QUIET, f"model={tiny_bert_path}", "eval.tasks=[]",
                            "data.storage=columns")  # fmt: skip
    assert "data.storage=columns reads data.path or data.dataset" in one_line_error(code, stderr)
