"""Fault injection on checkpoints (issue 10): damage each file of the newest checkpoint in turn; resuming must
fall back to the previous, intact checkpoint with a warning, and loading the damaged one must be a one-line
error naming the file. A tiny module and optimiser stand in for a training run.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest
import torch
from torch import nn

from contrastext.errors import ContrastextError
from contrastext.training.checkpoint import (
    CHECKPOINTS_DIR,
    TrainerState,
    latest_intact_checkpoint,
    load_checkpoint,
    save_checkpoint,
    verify_checkpoint,
)
from contrastext.training.schedules import build_optimizer, build_scheduler

pytestmark = pytest.mark.usefixtures("single_torch_thread")

CHECKPOINT_FILES = (
    "method.safetensors",
    "optimizer.pt",
    "scheduler.pt",
    "rng.pt",
    "trainer_state.json",
    "config.yaml",
    "manifest.json",
)
DAMAGES = ("truncate_half", "truncate_to_zero", "flip_a_byte", "delete")


def parts(seed: int = 0):
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
    optimizer = build_optimizer(model, lr=0.1, weight_decay=0.01)
    scheduler = build_scheduler(optimizer, "linear", total_steps=10, warmup_steps=1)
    return model, optimizer, scheduler


def train_step(model, optimizer, scheduler) -> None:
    loss = model(torch.randn(3, 4)).pow(2).mean()
    loss.backward()
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad()


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> tuple[Path, dict[int, dict[str, torch.Tensor]]]:
    """A run folder with checkpoints at steps 2 and 4, and the model weights at each."""
    output = tmp_path_factory.mktemp("run")
    model, optimizer, scheduler = parts()
    weights = {}
    for step in range(1, 5):
        train_step(model, optimizer, scheduler)
        if step % 2 == 0:
            save_checkpoint(output, model, optimizer, scheduler, TrainerState(step=step), f"step: {step}\n")
            weights[step] = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    return output, weights


def damage(path: Path, how: str) -> None:
    data = path.read_bytes()
    if how == "truncate_half":
        path.write_bytes(data[: len(data) // 2])
    elif how == "truncate_to_zero":
        path.write_bytes(b"")
    elif how == "flip_a_byte":
        middle = len(data) // 2
        path.write_bytes(data[:middle] + bytes([data[middle] ^ 0xFF]) + data[middle + 1 :])
    elif how == "delete":
        path.unlink()
    else:
        raise ValueError(how)


@pytest.mark.parametrize("how", DAMAGES)
@pytest.mark.parametrize("name", CHECKPOINT_FILES)
def test_resume_falls_back_to_the_previous_intact_checkpoint(run, tmp_path, caplog, name, how):
    source, weights = run
    output = shutil.copytree(source, tmp_path / "run")
    newest = output / CHECKPOINTS_DIR / "step-000004"
    damage(newest / name, how)
    if (name, how) == ("manifest.json", "delete"):
        # Read as a checkpoint saved before manifests existed: its files are intact, so it is used.
        assert latest_intact_checkpoint(output) == newest
        assert load_checkpoint(newest, *parts()).step == 4
        return

    with caplog.at_level(logging.WARNING, logger="contrastext.training"):
        folder = latest_intact_checkpoint(output)
    assert folder is not None and folder.name == "step-000002"
    assert "skipping checkpoint step-000004" in caplog.text and name in caplog.text

    model, optimizer, scheduler = parts(seed=1)
    state = load_checkpoint(folder, model, optimizer, scheduler)  # the resume itself
    assert state.step == 2
    for key, tensor in weights[2].items():
        assert torch.equal(model.state_dict()[key], tensor), key

    with pytest.raises(ContrastextError) as caught:  # the damaged one: one line naming the file
        load_checkpoint(newest, *parts())
    message = str(caught.value)
    assert "\n" not in message and (name in message or "not a complete checkpoint" in message)


def test_an_intact_run_resumes_from_its_newest_checkpoint(run, tmp_path):
    source, weights = run
    output = shutil.copytree(source, tmp_path / "run")
    folder = latest_intact_checkpoint(output)
    assert folder.name == "step-000004"
    model, optimizer, scheduler = parts(seed=1)
    assert load_checkpoint(folder, model, optimizer, scheduler).step == 4
    for key, tensor in weights[4].items():
        assert torch.equal(model.state_dict()[key], tensor), key


def test_every_checkpoint_damaged_means_no_checkpoint(run, tmp_path, caplog):
    source, _ = run
    output = shutil.copytree(source, tmp_path / "run")
    for folder in (output / CHECKPOINTS_DIR).glob("step-*"):
        damage(folder / "method.safetensors", "truncate_half")
    with caplog.at_level(logging.WARNING, logger="contrastext.training"):
        assert latest_intact_checkpoint(output) is None
    assert caplog.text.count("skipping checkpoint") == 2


def test_verify_names_the_damaged_file(run, tmp_path):
    source, _ = run
    output = shutil.copytree(source, tmp_path / "run")
    newest = output / CHECKPOINTS_DIR / "step-000004"
    verify_checkpoint(newest)
    damage(newest / "optimizer.pt", "flip_a_byte")
    verify_checkpoint(newest, checksums=False)  # same size: only the checksum sees it
    with pytest.raises(ContrastextError, match=r"optimizer\.pt: its SHA-256 differs"):
        verify_checkpoint(newest)
