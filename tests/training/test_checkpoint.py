"""Checkpoints: atomic writes, tied tensors, RNG states, the latest pointer and pruning."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch
from torch import nn

from contrastext.errors import MissingDataError
from contrastext.training.checkpoint import (
    TrainerState,
    atomic_write_text,
    latest_checkpoint,
    load_checkpoint,
    prune_checkpoints,
    save_checkpoint,
)
from contrastext.training.schedules import build_optimizer, build_scheduler


class Tied(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(10, 4)
        self.out = nn.Linear(4, 10, bias=False)
        self.out.weight = self.embed.weight
        self.norm = nn.LayerNorm(4)
        self.register_buffer("queue", torch.zeros(3, 4))


def _parts():
    model = Tied()
    optimizer = build_optimizer(model, lr=0.1, weight_decay=0.01)
    scheduler = build_scheduler(optimizer, "linear", total_steps=10, warmup_steps=2)
    return model, optimizer, scheduler


def test_roundtrip_restores_weights_tied_tensors_optimizer_and_rng(tmp_path):
    model, optimizer, scheduler = _parts()
    loss = model.out(model.embed(torch.tensor([1, 2]))).sum()
    loss.backward()
    optimizer.step()
    scheduler.step()
    model.queue.fill_(3.0)
    state = TrainerState(step=1, epoch=0, batch_index=1, best_metric=0.5, best_step=1)
    folder = save_checkpoint(tmp_path, model, optimizer, scheduler, state, "seed: 1\n")
    expected_random = (random.random(), np.random.rand(), torch.rand(2))

    other, other_optimizer, other_scheduler = _parts()
    restored = load_checkpoint(folder, other, other_optimizer, other_scheduler)
    assert restored == state
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, other.state_dict()[name]), name
    assert other.out.weight.data_ptr() == other.embed.weight.data_ptr()  # still tied
    assert other_scheduler.get_last_lr() == scheduler.get_last_lr()
    assert other_optimizer.state_dict()["state"].keys() == optimizer.state_dict()["state"].keys()
    assert (random.random(), np.random.rand()) == expected_random[:2]
    assert torch.equal(torch.rand(2), expected_random[2])


def test_latest_pointer_and_pruning(tmp_path):
    model, optimizer, scheduler = _parts()
    for step in (2, 4, 6):
        save_checkpoint(tmp_path, model, optimizer, scheduler, TrainerState(step=step), "")
        prune_checkpoints(tmp_path, keep_last=2)
    assert latest_checkpoint(tmp_path).name == "step-000006"
    assert sorted(p.name for p in (tmp_path / "checkpoints").glob("step-*")) == ["step-000004", "step-000006"]
    assert not list((tmp_path / "checkpoints").glob(".*"))  # no temporary leftovers
    # A half-written newest folder (no state file) is never picked.
    (tmp_path / "checkpoints" / "step-000008").mkdir()
    (tmp_path / "checkpoints" / "latest").write_text("step-000008\n")
    assert latest_checkpoint(tmp_path).name == "step-000006"


def test_incomplete_checkpoint_is_a_clear_error(tmp_path):
    model, optimizer, scheduler = _parts()
    with pytest.raises(MissingDataError, match="not a complete checkpoint"):
        load_checkpoint(tmp_path, model, optimizer, scheduler)


def test_atomic_write_replaces_whole_file(tmp_path):
    path = tmp_path / "latest"
    atomic_write_text(path, "a\n")
    atomic_write_text(path, "b\n")
    assert path.read_text() == "b\n"
    assert [p.name for p in tmp_path.iterdir()] == ["latest"]
