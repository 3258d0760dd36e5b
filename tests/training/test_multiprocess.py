"""Multi-process training on CPU (gloo): two processes on halves of each global batch end with the weights
of one process on the whole batch. Launched with ``torchrun``, as a user would (docs/methods/simcse-unsup.md).

Dropout is off in this test's tiny BERT: dropout masks are drawn per process, so only without dropout are the
two runs the same computation. SimCSE gathers the embeddings of both processes (with gradients), so each
process's loss sees the global batch's candidates; DDP averages the gradients. The 2-process run prints its
banner and ``world size 2 (gloo, cpu)`` once and records the world size (metrics.json, every log record).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

import contrastext.cli.train_command  # noqa: F401  (registers the command)
from contrastext.runtime.run_log import read_log
from tests.cli.cli_runs import run

pytestmark = pytest.mark.slow

SETTINGS = [
    "train.max_steps=3",
    "train.epochs=null",
    "train.batch_size=8",
    "train.lr=1e-4",
    "train.eval_every=null",
    "train.save_every=null",
    "train.metric_for_best=null",
    "train.progress_bar=false",
    "train.report_to=none",
    "data.limit=64",
    "data.max_length=8",  # wiki1m sentences are longer: every row is 8 tokens, no padding differs by process
    "train.log_every=1",
    "eval.tasks=[]",
]


@pytest.fixture(scope="module")
def dropout_free_bert(tmp_path_factory, minilm_path) -> str:
    """all-MiniLM-L6-v2 with dropout off. A real model, not a random one: on a random BERT every embedding is
    nearly the same, the loss sits at log B and its gradient is a difference of nearly equal terms, so the
    float rounding of two different batch splits would show in the weights."""
    folder = tmp_path_factory.mktemp("minilm-no-dropout")
    shutil.copytree(minilm_path, folder, dirs_exist_ok=True)
    config = json.loads((folder / "config.json").read_text())
    config.update(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    (folder / "config.json").write_text(json.dumps(config))
    return str(folder)


def train_argv(output: Path, model: str, data_root: Path) -> list[str]:
    sets = [argument for setting in [*SETTINGS, f"model={model}"] for argument in ("--set", setting)]
    return ["train", "simcse-unsup", *sets, "--output", str(output), "--data-root", str(data_root)]


def on_two_processes(argv: list[str]) -> subprocess.CompletedProcess:
    """``contrastext *argv`` under ``torchrun`` with 2 processes of one thread each; it must exit 0."""
    torchrun = Path(sys.executable).with_name("torchrun")
    environment = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    done = subprocess.run([str(torchrun), "--standalone", "--nproc_per_node", "2", "-m", "contrastext", *argv],
                          capture_output=True, text=True, timeout=600, env=environment)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def test_two_processes_equal_one_process_on_the_same_global_batch(
    tmp_path, dropout_free_bert, data_root, capsys, single_torch_thread
):
    """The one process runs in this one, on one thread as each of the two (OMP_NUM_THREADS=1)."""
    two = on_two_processes(train_argv(tmp_path / "two", dropout_free_bert, data_root))
    # issue 22: the banner printed once per process, and nothing said or recorded how many processes trained
    assert two.stdout.count("training simcse-unsup from") == 1, two.stdout
    assert two.stdout.splitlines().count("world size 2 (gloo, cpu)") == 1, two.stdout
    assert json.loads((tmp_path / "two" / "metrics.json").read_text())["world_size"] == 2
    assert {record["world_size"] for record in read_log(tmp_path / "two" / "train_log.jsonl")} == {2}
    code, _, stderr = run(train_argv(tmp_path / "one", dropout_free_bert, data_root), capsys)
    assert code == 0, stderr[-3000:]
    before = load_file(str(Path(dropout_free_bert) / "model.safetensors"))
    weights_two = load_file(str(tmp_path / "two" / "final" / "encoder" / "model.safetensors"))
    weights_one = load_file(str(tmp_path / "one" / "final" / "encoder" / "model.safetensors"))
    assert weights_two.keys() == weights_one.keys()
    moved = max(float((weights_one[name] - before[name]).abs().max()) for name in before if name in weights_one)
    assert moved > 2e-4  # the training did change the weights (3 steps, lr 1e-4)
    for name in weights_one:
        assert torch.allclose(weights_two[name], weights_one[name], atol=1e-5), name
    losses = {run: [r["loss"] for r in read_log(tmp_path / run / "train_log.jsonl")] for run in ("one", "two")}
    assert len(losses["one"]) == 3 and losses["two"] == pytest.approx(losses["one"], abs=1e-5)
