"""``data.batch_sampler=no_duplicates`` under ``torchrun`` with 2 processes (gloo, CPU): each process builds its own
sampler, the two agree on every global batch and on their count (no process waits for a batch the other never
takes: the hang sentence-transformers' sampler once caused under DDP), and the run ends with the weights of one
process on the whole batches. The pattern of tests/training/test_multiprocess.py (dropout off: the conftest's dropout_free_bert)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from safetensors.torch import load_file

import contrastext.cli.train_command  # noqa: F401  (registers the command)
from contrastext.runtime.run_log import read_log
from tests.cli.cli_runs import run
from tests.training.two_processes import assert_same_weights, on_two_processes

pytestmark = pytest.mark.slow


def train_argv(output: Path, model: str, data: Path) -> list[str]:
    settings = ["train.max_steps=4", "train.epochs=null", "train.batch_size=8", "train.lr=1e-4",
                "train.eval_every=null", "train.save_every=null", "train.metric_for_best=null",
                "train.progress_bar=false", "train.report_to=none", "train.log_every=1", "data.max_length=8",
                "eval.tasks=[]", f"data.path={data}", "data.batch_sampler=no_duplicates", f"model={model}"]
    return ["train", "simcse-unsup", *[part for setting in settings for part in ("--set", setting)], "--output",
            str(output)]


def test_two_processes_take_the_same_batches_without_duplicates_as_one(
    tmp_path, dropout_free_bert, capsys, single_torch_thread
):
    """24 sentences, each twice (48 rows): 6 batches of 8 an epoch, 4 steps; rank r takes batch[r::2]. The one
    process runs in this one, on one thread as each of the two (OMP_NUM_THREADS=1)."""
    sentences = [f"the {word} sat on a mat number {index}" for index, word in enumerate(
        ["cat", "dog", "bird", "fox", "cow", "owl", "bee", "ant", "elk", "yak", "emu", "gnu"] * 2)]
    data = tmp_path / "sentences.txt"
    data.write_text("".join(f"{sentence}\n" for sentence in sentences * 2))
    on_two_processes(train_argv(tmp_path / "two", dropout_free_bert, data))
    assert json.loads((tmp_path / "two" / "metrics.json").read_text())["world_size"] == 2
    code, _, stderr = run(train_argv(tmp_path / "one", dropout_free_bert, data), capsys)
    assert code == 0, stderr[-3000:]
    losses = {run: [record["loss"] for record in read_log(tmp_path / run / "train_log.jsonl")] for run in ("one", "two")}
    assert len(losses["one"]) == 4 and losses["two"] == pytest.approx(losses["one"], abs=1e-5)
    weights_two = load_file(str(tmp_path / "two" / "final" / "encoder" / "model.safetensors"))
    weights_one = load_file(str(tmp_path / "one" / "final" / "encoder" / "model.safetensors"))
    assert_same_weights(weights_one, weights_two, steps=4, lr=1e-4)
