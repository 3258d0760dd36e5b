"""Guards of the trainer: divergence stops a run and nothing NaN is saved; a refused run changes nothing on
disk; --resume refuses a changed config; a killed run's leftovers and damaged checkpoints are handled."""

from __future__ import annotations

import math
import os

import pytest
import torch

from contrastext.errors import ConfigError
from contrastext.runtime.run_log import read_log
from contrastext.training.divergence import DivergenceError
from contrastext.training.trainer import Trainer
from tests.training._tiny_training import TinyMethod, build, make_config, sentences


class PoisonedAt(TinyMethod):
    """The tiny method whose loss is NaN from optimiser step ``bad_step`` on (1-based; 2 micro-batches a step)."""

    def __init__(self, *args, bad_step: int, **kwargs):
        super().__init__(*args, **kwargs)
        self.bad_step, self.calls = bad_step, 0

    def forward(self, batch):
        parts = super().forward(batch)
        self.calls += 1
        if self.training and (self.calls + 1) // 2 >= self.bad_step:
            parts["infonce"] = parts["infonce"] * float("nan")
        return parts


def poisoned(tokenizer_path, bad_step: int) -> PoisonedAt:
    from transformers import AutoTokenizer

    torch.manual_seed(0)
    return PoisonedAt(AutoTokenizer.from_pretrained(tokenizer_path), bad_step=bad_step)


def finite_weights(folder) -> bool:
    from safetensors.torch import load_file

    return all(bool(torch.isfinite(t).all()) for t in load_file(str(folder / "method.safetensors")).values())


def test_a_nan_loss_stops_the_run_naming_the_step_and_saves_nothing_nan(tmp_path, minilm_path, one_thread):
    config = make_config(tmp_path, max_steps=6, save_every=2)
    with pytest.raises(DivergenceError) as error:
        Trainer(poisoned(minilm_path, bad_step=4), sentences(), config).train()
    assert "step 4" in str(error.value) and "nan" in str(error.value) and "train.lr" in str(error.value)
    checkpoints = sorted(p.name for p in (tmp_path / "checkpoints").glob("step-*"))
    assert checkpoints == ["step-000002"]  # step 4's checkpoint was never written; the last good one stays
    assert finite_weights(tmp_path / "checkpoints" / "step-000002")
    assert not (tmp_path / "final").exists()
    assert [r["step"] for r in read_log(tmp_path / "train_log.jsonl")] == [1, 2, 3]


def test_skip_mode_drops_the_bad_steps_and_keeps_the_weights_finite(tmp_path, minilm_path, one_thread):
    config = make_config(tmp_path, max_steps=5, save_every=None, on_nonfinite="skip")
    method = poisoned(minilm_path, bad_step=4)
    Trainer(method, sentences(), config).train()
    records = read_log(tmp_path / "train_log.jsonl")
    assert [r.get("skipped_nonfinite", 0) for r in records] == [0, 0, 0, 1, 2]
    assert all(bool(torch.isfinite(p).all()) for p in method.parameters())
    assert (tmp_path / "final" / "encoder").is_dir()


def test_weights_that_became_nan_are_never_written(tmp_path, minilm_path, one_thread):
    method = build(minilm_path)
    config = make_config(tmp_path, max_steps=2, save_every=1)
    trainer = Trainer(method, sentences(), config)
    original_after_step = method.after_step

    def poison_weights():  # as an infinite learning rate would: the update itself makes the weights NaN
        original_after_step()
        with torch.no_grad():
            method.encoder.backbone.embeddings.word_embeddings.weight.fill_(math.nan)

    method.after_step = poison_weights
    with pytest.raises(DivergenceError, match="weights are not finite"):
        trainer.train()
    assert not (tmp_path / "checkpoints").exists() or not list((tmp_path / "checkpoints").glob("step-*"))
    assert not (tmp_path / "final").exists()


def test_a_refused_fresh_run_changes_nothing_on_disk(tmp_path, minilm_path, one_thread):
    Trainer(build(minilm_path), sentences(), make_config(tmp_path, max_steps=2)).train()
    before = {path: path.read_bytes() for path in tmp_path.rglob("*") if path.is_file()}
    with pytest.raises(ConfigError, match="already holds a run"):
        Trainer(build(minilm_path), sentences(), make_config(tmp_path, max_steps=2, lr=1e-2)).train()
    after = {path: path.read_bytes() for path in tmp_path.rglob("*") if path.is_file()}
    assert after == before  # config.yaml still says the first run's lr


def test_resume_with_a_changed_lr_is_refused_naming_the_key(tmp_path, minilm_path, one_thread):
    Trainer(build(minilm_path), sentences(), make_config(tmp_path, max_steps=2)).train()
    config_text = (tmp_path / "config.yaml").read_text()
    with pytest.raises(ConfigError) as error:
        Trainer(build(minilm_path), sentences(), make_config(tmp_path, max_steps=4, lr=1e-2)).train(resume=True)
    assert "train.lr" in str(error.value) and "0.001" in str(error.value) and "0.01" in str(error.value)
    differing = str(error.value).split(" in ", 1)[1].split("; ", 1)[0]
    assert "train.max_steps" not in differing  # a safe key: going on for longer is allowed
    assert (tmp_path / "config.yaml").read_text() == config_text
    # the same config with more steps resumes
    result = Trainer(build(minilm_path), sentences(), make_config(tmp_path, max_steps=4)).train(resume=True)
    assert result.last_step == 4


def test_resuming_before_the_first_checkpoint_does_not_repeat_log_steps(tmp_path, minilm_path, one_thread):
    Trainer(build(minilm_path), sentences(), make_config(tmp_path, max_steps=3, save_every=None)).train()
    for checkpoint in (tmp_path / "checkpoints").glob("step-*"):  # as if killed before any checkpoint
        import shutil

        shutil.rmtree(checkpoint)
    (tmp_path / "checkpoints" / "latest").unlink()
    Trainer(build(minilm_path), sentences(), make_config(tmp_path, max_steps=3, save_every=None)).train(resume=True)
    assert [r["step"] for r in read_log(tmp_path / "train_log.jsonl")] == [1, 2, 3]


def test_resume_skips_a_truncated_latest_checkpoint_and_removes_leftover_temporaries(
    tmp_path, minilm_path, one_thread
):
    Trainer(build(minilm_path), sentences(), make_config(tmp_path, max_steps=4, save_every=2, keep_last=3)).train()
    latest = tmp_path / "checkpoints" / "step-000004" / "method.safetensors"
    with latest.open("r+b") as handle:
        handle.truncate(os.path.getsize(latest) // 2)
    leftover = tmp_path / "checkpoints" / f".contrastext-tmp.step-000006.{'0123abcd' * 4}.tmp"  # as write_folder_atomically names it
    leftover.mkdir()
    (leftover / "method.safetensors").write_bytes(b"half")
    result = Trainer(build(minilm_path), sentences(), make_config(tmp_path, max_steps=4, save_every=2,
                                                                     keep_last=3)).train(resume=True)
    assert result.last_step == 4
    assert not leftover.exists()
    assert [r["step"] for r in read_log(tmp_path / "train_log.jsonl")] == [1, 2, 3, 4]  # 3, 4 redone from step 2
