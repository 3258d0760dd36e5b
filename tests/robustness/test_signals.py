"""Fault suite, signals (issue 21, item 6): SIGTERM (a cluster preempting the job) during training.

- A real ``contrastext train`` process on the tiny BERT gets SIGTERM after a few steps: it finishes the step,
  saves a checkpoint, prints one line naming the checkpoint and the command that resumes it, and exits with
  143; that command ends with final weights byte-identical to an uninterrupted run's, and the same log.
- In-process, ``Trainer.train`` raises ``TrainingPreempted`` after the step's checkpoint; ``train(resume=True)``
  ends with the uninterrupted weights; the previous SIGTERM handler is back after training (also after the
  stop), and SIGINT's is never touched.
- A second SIGTERM exits at once (``SystemExit(143)``, no checkpoint), the lock released and no temporary left.
- The handler is installed in the main thread only.
- Under ``torchrun`` (2 processes, slow): SIGTERM to the launcher reaches both processes, which stop at the same
  step; the main one alone saves the checkpoint and prints the line; ``--resume`` under torchrun ends with the
  uninterrupted 2-process run's weights (dropout off: only the main process's RNG state is saved).
"""

from __future__ import annotations

import hashlib
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from contrastext.runtime.lock import LOCK_NAME
from contrastext.runtime.run_log import read_log
from contrastext.runtime.signals import PREEMPTED_EXIT_CODE, TrainingPreempted
from contrastext.training.checkpoint import TEMPORARY_PREFIX, latest_intact_checkpoint, verify_checkpoint
from contrastext.training.trainer import Trainer
from tests.cli.cli_runs import run
from tests.cli.test_train_command import with_sets
from tests.robustness.hostile import REPO_ROOT
from tests.robustness.test_outputs_apart_from_inputs import TEXTS, own_data_argv
from tests.training._tiny_training import TinyMethod, make_config, sentences

STEPS = 40
ENV = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def train_argv(model: str, data: Path, output: Path) -> list[str]:
    argv = own_data_argv(Path(model), data, output)
    return [*argv, *with_sets(f"train.max_steps={STEPS}", "train.log_every=1", "train.eval_every=null")]


def start(argv: list[str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "contrastext", *argv], cwd=REPO_ROOT, env=ENV, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def wait_for_step(output: Path, process: subprocess.Popen, step: int, timeout: float = 120.0) -> None:
    """Wait until the run's log holds ``step`` (the training loop, with its SIGTERM handler, is running)."""
    log = output / "train_log.jsonl"
    deadline = time.monotonic() + timeout
    while True:
        if log.is_file() and any(record["step"] >= step for record in read_log(log)):
            return
        if process.poll() is not None:
            raise AssertionError(f"training exited ({process.returncode}) before step {step}: {process.stderr.read()}")
        if time.monotonic() > deadline:
            process.kill()
            raise AssertionError(f"step {step} not logged within {timeout} s")
        time.sleep(0.02)


def weight_hashes(folder: Path) -> dict[str, str]:
    return {path.name: hashlib.sha256(path.read_bytes()).hexdigest() for path in sorted(folder.glob("*.safetensors"))}


@pytest.fixture
def data(tmp_path) -> Path:
    path = tmp_path / "texts.txt"
    path.write_text(TEXTS, encoding="utf-8")
    return path


def test_sigterm_saves_a_checkpoint_and_the_resume_command_ends_with_the_uninterrupted_weights(
    tmp_path, tiny_bert_path, data, one_thread, capsys
):
    reference = tmp_path / "reference"  # in-process, on one thread as the processes (OMP_NUM_THREADS=1)
    code, _, stderr = run(train_argv(tiny_bert_path, data, reference), capsys)
    assert code == 0, stderr

    output = tmp_path / "stopped"
    process = start(train_argv(tiny_bert_path, data, output))
    wait_for_step(output, process, 3)
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == PREEMPTED_EXIT_CODE, stderr
    last = stderr.strip().splitlines()[-1]
    assert last.startswith("stopped by SIGTERM at step ") and "; resume with: contrastext train " in last, stderr
    assert "SIGTERM: saving a checkpoint at the end of this step" in stderr
    step = int(last.split("at step ")[1].split()[0])
    assert 3 <= step < STEPS, "the run ended before the signal arrived: make it longer"
    checkpoint = output / "checkpoints" / f"step-{step:06d}"
    assert f"checkpoint saved in {checkpoint}" in last
    assert latest_intact_checkpoint(output) == verify_checkpoint(checkpoint)
    assert not (output / LOCK_NAME).exists() and not (output / "final").exists()
    assert max(record["step"] for record in read_log(output / "train_log.jsonl")) == step

    command = shlex.split(last.split("; resume with: ")[1])
    assert command[:2] == ["contrastext", "train"] and command[-1] == "--resume"
    code, _, stderr = run(command[1:], capsys)  # the command as printed, in-process on one thread as the reference
    assert code == 0, stderr
    expected = weight_hashes(reference / "final" / "encoder")
    assert expected and weight_hashes(output / "final" / "encoder") == expected  # byte for byte
    steps = [record["step"] for record in read_log(output / "train_log.jsonl")]
    assert steps == list(range(1, STEPS + 1))
    losses = [record["loss"] for record in read_log(output / "train_log.jsonl")]
    assert losses == [record["loss"] for record in read_log(reference / "train_log.jsonl")]


class SignalledMethod(TinyMethod):
    """The tiny method that sends this process ``signals`` SIGTERMs during step ``at`` (as a cluster would)."""

    at, signals = 3, 1

    def after_step(self):
        super().after_step()
        self.steps = getattr(self, "steps", 0) + 1
        if self.steps == self.at:
            for _ in range(self.signals):
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(0.01)  # each delivered (and handled) on its own


class SignalledTwice(SignalledMethod):
    signals = 2


def build(minilm_path: str, cls=TinyMethod, init_seed: int = 0):
    from transformers import AutoTokenizer

    torch.manual_seed(init_seed)
    return cls(AutoTokenizer.from_pretrained(minilm_path))


def test_trainer_stops_after_the_step_s_checkpoint_and_resumes_to_the_same_weights(tmp_path, minilm_path, one_thread):
    reference = build(minilm_path)
    Trainer(reference, sentences(), make_config(tmp_path / "reference")).train()

    mine = []
    interrupt = signal.getsignal(signal.SIGINT)  # SIG_IGN in a job started with & by a shell without job control
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: mine.append(signum))
    try:
        stopped = build(minilm_path, SignalledMethod)
        with pytest.raises(TrainingPreempted) as stop:
            Trainer(stopped, sentences(), make_config(tmp_path / "run")).train()
        assert signal.getsignal(signal.SIGTERM) is not None and not mine
        handler = signal.getsignal(signal.SIGTERM)
        assert callable(handler) and handler.__name__ == "<lambda>"  # the user's handler is back
        assert signal.getsignal(signal.SIGINT) is interrupt  # SIGINT never touched
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert stop.value.step == 3 and stop.value.checkpoint == tmp_path / "run" / "checkpoints" / "step-000003"
    verify_checkpoint(stop.value.checkpoint)

    resumed = build(minilm_path, init_seed=9)
    result = Trainer(resumed, sentences(), make_config(tmp_path / "run")).train(resume=True)
    assert result.last_step == 12
    for name, tensor in reference.state_dict().items():
        assert torch.equal(tensor, resumed.state_dict()[name]), name


def test_a_second_sigterm_exits_at_once_without_a_checkpoint(tmp_path, minilm_path, one_thread):
    output = tmp_path / "run"
    with pytest.raises(SystemExit) as stop:
        Trainer(build(minilm_path, SignalledTwice), sentences(), make_config(output, save_every=None)).train()
    assert stop.value.code == PREEMPTED_EXIT_CODE
    assert not (output / "checkpoints").exists()  # no checkpoint: it stopped during step 3, before any was due
    assert not (output / LOCK_NAME).exists()  # released while the exit unwound
    assert not [path for path in output.rglob("*") if path.name.startswith(TEMPORARY_PREFIX)]
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # pytest's (the default) handler is back


def test_the_watch_installs_only_in_the_main_thread_and_puts_the_previous_handler_back():
    import threading

    from contrastext.runtime.signals import PreemptionWatch

    before, interrupt = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    with PreemptionWatch() as watch:
        assert watch.installed and signal.getsignal(signal.SIGTERM) == watch._handle
        assert signal.getsignal(signal.SIGINT) is interrupt  # SIGINT never touched
    assert signal.getsignal(signal.SIGTERM) == before

    seen = {}

    def in_a_thread():
        with PreemptionWatch() as watch:
            seen["installed"] = watch.installed

    thread = threading.Thread(target=in_a_thread)
    thread.start()
    thread.join()
    assert seen == {"installed": False} and signal.getsignal(signal.SIGTERM) == before


@pytest.fixture
def dropout_free_tiny_bert(tmp_path, tiny_bert_path) -> Path:
    """The tiny BERT without dropout: only the main process saves ``rng.pt``, so under a launcher the other
    processes' dropout masks after a resume are not the uninterrupted run's (a limit of checkpoints, not of the
    stop); without dropout both runs compute the same numbers."""
    import json
    import shutil

    folder = tmp_path / "tiny-no-dropout"
    shutil.copytree(tiny_bert_path, folder)
    config = json.loads((folder / "config.json").read_text())
    config.update(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    (folder / "config.json").write_text(json.dumps(config))
    return folder


@pytest.mark.slow
def test_under_torchrun_every_process_stops_at_one_step_and_only_the_main_one_saves(
    tmp_path, dropout_free_tiny_bert, data
):
    torchrun = [str(Path(sys.executable).with_name("torchrun")), "--standalone", "--nproc_per_node", "2", "-m",
                "contrastext"]
    env = {**ENV, "TOKENIZERS_PARALLELISM": "false"}
    reference = tmp_path / "reference"
    done = subprocess.run([*torchrun, *train_argv(str(dropout_free_tiny_bert), data, reference)], cwd=REPO_ROOT,
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]

    output = tmp_path / "stopped"
    process = subprocess.Popen([*torchrun, *train_argv(str(dropout_free_tiny_bert), data, output)], cwd=REPO_ROOT,
                               env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wait_for_step(output, process, 2)
    process.send_signal(signal.SIGTERM)  # torchrun passes it on to both processes, as a cluster's agent would
    _, stderr = process.communicate(timeout=300)
    stops = [line for line in stderr.splitlines() if line.startswith("stopped by SIGTERM at step ")]
    assert len(stops) == 1, stderr[-3000:]  # the main process says it, once
    assert stderr.count("SIGTERM: saving a checkpoint at the end of this step") == 1
    step = int(stops[0].split("at step ")[1].split()[0])
    assert 2 <= step < STEPS
    assert [path.name for path in (output / "checkpoints").glob("step-*")] == [f"step-{step:06d}"]
    verify_checkpoint(output / "checkpoints" / f"step-{step:06d}")
    assert not (output / LOCK_NAME).exists()

    resumed = subprocess.run([*torchrun, *train_argv(str(dropout_free_tiny_bert), data, output), "--resume"],
                             cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    expected = weight_hashes(reference / "final" / "encoder")
    assert weight_hashes(output / "final" / "encoder") == expected
