"""Optimiser groups, schedules and seeding helpers."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch
from torch import nn

from contrastext.errors import ConfigError
from contrastext.runtime.seeding import capture_rng_state, derive_seed, make_generator, restore_rng_state
from contrastext.training.schedules import build_optimizer, build_scheduler, resolve_warmup_steps


def test_no_weight_decay_on_bias_and_layernorm():
    model = nn.Sequential(nn.Linear(4, 4), nn.LayerNorm(4), nn.Linear(4, 2))
    optimizer = build_optimizer(model, lr=1e-3, weight_decay=0.01)
    decayed, plain = optimizer.param_groups
    assert decayed["weight_decay"] == 0.01 and plain["weight_decay"] == 0.0
    assert {id(p) for p in decayed["params"]} == {id(model[0].weight), id(model[2].weight)}
    assert len(plain["params"]) == 4  # two biases, LayerNorm weight and bias


def test_linear_and_constant_schedules():
    parameter = nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.AdamW([parameter], lr=1.0)
    scheduler = build_scheduler(optimizer, "linear", total_steps=10, warmup_steps=2)
    lrs = []
    for _ in range(10):
        lrs.append(scheduler.get_last_lr()[0])
        optimizer.step()
        scheduler.step()
    assert lrs[:3] == [0.0, 0.5, 1.0] and lrs[-1] == pytest.approx(0.125)
    constant = build_scheduler(torch.optim.AdamW([parameter], lr=1.0), "constant", 10, warmup_steps=0)
    assert constant.get_last_lr() == [1.0]
    with pytest.raises(ConfigError, match="unknown schedule"):
        build_scheduler(optimizer, "cosine", 10)
    assert resolve_warmup_steps(100, warmup_ratio=0.06) == 6
    assert resolve_warmup_steps(100, warmup_ratio=0.06, warmup_steps=3) == 3


def test_generators_depend_on_position_only():
    assert torch.equal(
        torch.rand(3, generator=make_generator(1, 2)), torch.rand(3, generator=make_generator(1, 2))
    )
    assert not torch.equal(
        torch.rand(3, generator=make_generator(1, 2)), torch.rand(3, generator=make_generator(1, 3))
    )
    assert derive_seed(1, 2) != derive_seed(2, 1)


def test_rng_state_roundtrip():
    state = capture_rng_state()
    first = (random.random(), float(np.random.rand()), float(torch.rand(1)))
    restore_rng_state(state)
    assert (random.random(), float(np.random.rand()), float(torch.rand(1))) == first


def test_the_optimizer_takes_the_configured_betas_and_epsilon():
    from contrastext.errors import ConfigError
    from contrastext.training.schedules import build_optimizer

    model = torch.nn.Linear(3, 2)
    optimizer = build_optimizer(model, 1e-3, 0.01, betas=(0.9, 0.98), eps=1e-6)
    assert all(group["betas"] == (0.9, 0.98) and group["eps"] == 1e-6 for group in optimizer.param_groups)
    with pytest.raises(ConfigError, match="adam_betas"):
        build_optimizer(model, 1e-3, betas=(0.9, 1.0))


def test_head_lr_applies_to_every_parameter_outside_the_encoder():
    class WithEncoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Sequential(nn.Linear(4, 4), nn.LayerNorm(4))
            self.head = nn.Linear(4, 2)

    model = WithEncoder()
    optimizer = build_optimizer(model, lr=1e-5, weight_decay=0.01, head_lr=1e-3)
    lr_of = {id(p): group["lr"] for group in optimizer.param_groups for p in group["params"]}
    decay_of = {id(p): group["weight_decay"] for group in optimizer.param_groups for p in group["params"]}
    assert len(lr_of) == len(list(model.parameters()))
    assert all(lr_of[id(p)] == 1e-5 for p in model.encoder.parameters())
    assert all(lr_of[id(p)] == 1e-3 for p in model.head.parameters())
    assert decay_of[id(model.head.weight)] == 0.01 and decay_of[id(model.head.bias)] == 0.0
    # the schedule scales both rates alike
    scheduler = build_scheduler(optimizer, "linear", total_steps=10, warmup_steps=0)
    for _ in range(5):
        optimizer.step()
        scheduler.step()
    assert sorted(set(scheduler.get_last_lr())) == pytest.approx([0.5e-5, 0.5e-3])
    assert [g["lr"] for g in build_optimizer(model, lr=1e-5).param_groups] == [1e-5, 1e-5]


def test_head_lr_needs_an_encoder_to_tell_the_heads_from():
    with pytest.raises(ConfigError, match="train.head_lr"):
        build_optimizer(nn.Linear(3, 2), lr=1e-5, head_lr=1e-3)
