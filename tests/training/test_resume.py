"""Kill a training with SIGKILL right after its step-6 checkpoint, resume it, and get the exact weights of
an uninterrupted run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from contrastext.errors import ConfigError
from contrastext.runtime.run_log import read_log
from contrastext.training.checkpoint import TrainerState, latest_checkpoint
from contrastext.training.trainer import Trainer, adopt_history
from tests.training._tiny_training import build, make_config, sentences

SCRIPT = Path(__file__).with_name("_tiny_training.py")
REPO = Path(__file__).resolve().parents[2]


def _wait_for(path: Path, process: subprocess.Popen, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if process.poll() is not None:
            raise AssertionError(
                f"training exited ({process.returncode}) before {path}: {process.stderr.read()}"
            )
        if time.monotonic() > deadline:
            process.kill()
            raise AssertionError(f"{path} did not appear within {timeout} s")
        time.sleep(0.05)


def test_killed_run_resumes_to_the_same_weights(tmp_path, minilm_path, one_thread):
    reference = build(minilm_path)
    Trainer(reference, sentences(), make_config(tmp_path / "reference")).train()

    killed_dir = tmp_path / "killed"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    process = subprocess.Popen(
        [sys.executable, str(SCRIPT), str(killed_dir), "12", minilm_path, "--pause-at", "6"],
        env=env,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    _wait_for(killed_dir / "PAUSED", process)
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)
    assert process.returncode == -signal.SIGKILL
    assert latest_checkpoint(killed_dir).name == "step-000006"

    # resume_from_checkpoint into a new folder (issue 22, item 4): the same weights; the killed run untouched
    before = {path: path.read_bytes() for path in sorted(killed_dir.rglob("*")) if path.is_file()}
    elsewhere = build(minilm_path, init_seed=7)
    checkpoint = killed_dir / "checkpoints" / "step-000006"
    result = Trainer(elsewhere, sentences(), make_config(tmp_path / "elsewhere")).train(resume=checkpoint)
    assert result.last_step == 12
    for name, tensor in reference.state_dict().items():
        assert torch.equal(tensor, elsewhere.state_dict()[name]), name
    assert {path: path.read_bytes() for path in sorted(killed_dir.rglob("*")) if path.is_file()} == before
    steps = [record["step"] for record in read_log(tmp_path / "elsewhere" / "train_log.jsonl")]
    assert steps == list(range(1, 13))  # the killed run's records up to step 6, then the new ones

    resumed = build(
        minilm_path, init_seed=123
    )  # other initial weights: everything must come from the checkpoint
    result = Trainer(resumed, sentences(), make_config(killed_dir)).train(resume=True)

    assert result.last_step == 12
    expected, actual = reference.state_dict(), resumed.state_dict()
    assert expected.keys() == actual.keys()
    for name in expected:
        assert torch.equal(expected[name], actual[name]), name
    steps = [record["step"] for record in read_log(killed_dir / "train_log.jsonl")]
    assert steps == list(range(1, 13))  # lines after the checkpoint were dropped, none repeated
    losses = [record["loss"] for record in read_log(killed_dir / "train_log.jsonl")]
    assert losses == [record["loss"] for record in read_log(tmp_path / "reference" / "train_log.jsonl")]


def test_resume_without_checkpoint_starts_fresh(tmp_path, minilm_path, one_thread):
    result = Trainer(build(minilm_path), sentences(), make_config(tmp_path, max_steps=2)).train(resume=True)
    assert result.last_step == 2


def test_resume_of_a_finished_run_does_nothing_more(tmp_path, minilm_path, one_thread):
    method = build(minilm_path)
    Trainer(method, sentences(), make_config(tmp_path, max_steps=4)).train()
    before = {name: tensor.clone() for name, tensor in method.state_dict().items()}
    again = build(minilm_path, init_seed=5)
    result = Trainer(again, sentences(), make_config(tmp_path, max_steps=4)).train(resume=True)
    assert result.last_step == 4
    assert all(torch.equal(before[name], tensor) for name, tensor in again.state_dict().items())


def test_a_checkpoint_of_another_run_is_not_continued_into_that_run_s_folders(tmp_path, minilm_path, one_thread):
    source = tmp_path / "source"
    Trainer(build(minilm_path), sentences(), make_config(source, max_steps=2)).train()
    checkpoint = latest_checkpoint(source)
    for output in (source / "inside", tmp_path):
        with pytest.raises(ConfigError, match="--resume-from"):
            Trainer(build(minilm_path), sentences(), make_config(output, max_steps=4)).train(resume=checkpoint)
    assert not (source / "inside").exists()


def test_adopt_history_copies_the_log_up_to_the_step_and_best_only_when_it_is_the_checkpoint_s(tmp_path, caplog):
    source, new = tmp_path / "source", tmp_path / "new"
    (source / "best").mkdir(parents=True)
    (source / "train_log.jsonl").write_text("".join(json.dumps({"step": step}) + "\n" for step in (1, 2, 3, 4)))
    (source / "best" / "trainer_state.json").write_text(json.dumps({"best_step": 4}))
    adopt_history(source, new, TrainerState(step=2, best_step=2, best_metric=0.5))
    assert [record["step"] for record in read_log(new / "train_log.jsonl")] == [1, 2]
    assert not (new / "best").exists() and "does not hold the checkpoint's best weights (step 2)" in caplog.text
    adopt_history(source, new, TrainerState(step=4, best_step=4, best_metric=0.5))
    assert (new / "best" / "trainer_state.json").read_text() == json.dumps({"best_step": 4})
