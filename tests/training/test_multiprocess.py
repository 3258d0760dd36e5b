"""Multi-process training on CPU (gloo): two processes on halves of each global batch end with the weights
of one process on the whole batch. Launched with ``torchrun``, as a user would (docs/methods/simcse-unsup.md).

Dropout is off in this test's all-MiniLM-L6-v2: dropout masks are drawn per process, so only without dropout are
the two runs the same computation (the one-process run is a session fixture, shared with test_grad_cache.py).
SimCSE gathers the embeddings of both processes (with gradients), so each process's loss sees the global batch's
candidates; DDP averages the gradients. The 2-process run prints its
banner and ``world size 2 (gloo, cpu)`` once and records the world size (metrics.json, every log record).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from safetensors.torch import load_file

from contrastext.runtime.run_log import read_log
from tests.training.two_processes import assert_same_weights, on_two_processes, simcse_argv

pytestmark = pytest.mark.slow


def test_two_processes_equal_one_process_on_the_same_global_batch(tmp_path, dropout_free_bert, data_root,
                                                                  one_process_simcse_run):
    two = on_two_processes(simcse_argv(tmp_path / "two", dropout_free_bert, data_root))
    # issue 22: the banner printed once per process, and nothing said or recorded how many processes trained
    assert two.stdout.count("training simcse-unsup from") == 1, two.stdout
    assert two.stdout.splitlines().count("world size 2 (gloo, cpu)") == 1, two.stdout
    assert json.loads((tmp_path / "two" / "metrics.json").read_text())["world_size"] == 2
    assert {record["world_size"] for record in read_log(tmp_path / "two" / "train_log.jsonl")} == {2}
    folders = {"one": one_process_simcse_run, "two": tmp_path / "two"}
    before = load_file(str(Path(dropout_free_bert) / "model.safetensors"))
    weights_two = load_file(str(folders["two"] / "final" / "encoder" / "model.safetensors"))
    weights_one = load_file(str(folders["one"] / "final" / "encoder" / "model.safetensors"))
    assert weights_two.keys() == weights_one.keys()
    moved = max(float((weights_one[name] - before[name]).abs().max()) for name in before if name in weights_one)
    assert moved > 2e-4  # the training did change the weights (3 steps, lr 1e-4)
    assert_same_weights(weights_one, weights_two, steps=3, lr=1e-4)
    losses = {run: [r["loss"] for r in read_log(folder / "train_log.jsonl")] for run, folder in folders.items()}
    assert len(losses["one"]) == 3 and losses["two"] == pytest.approx(losses["one"], abs=1e-5)
