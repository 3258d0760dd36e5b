"""Optimiser groups, schedules and seeding helpers."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch
from torch import nn

from contrastext.errors import ConfigError
from contrastext.runtime.seeding import capture_rng_state, derive_seed, make_generator, restore_rng_state
from contrastext.training.config import TrainSection
from contrastext.training.schedules import (
    build_optimizer,
    build_scheduler,
    optimizer_from_config,
    resolve_warmup_steps,
    scheduler_from_config,
)


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
        build_scheduler(optimizer, "cosine_with_restarts", 10)
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


def _lrs(scheduler, optimizer, steps):
    """The learning rate of every group at steps 0 .. steps (inclusive: past the end too)."""
    rates = []
    for _ in range(steps + 1):
        rates.append(scheduler.get_last_lr())
        optimizer.step()
        scheduler.step()
    return rates


def _two_groups(lr=1e-3, head_lr=None):
    model = nn.Sequential(nn.Linear(3, 3), nn.LayerNorm(3))
    model.encoder = model[0]
    groups = [{"params": model[0].parameters()}, {"params": model[1].parameters()}]
    if head_lr is not None:
        groups[1]["lr"] = head_lr
    return torch.optim.AdamW(groups, lr=lr)


@pytest.mark.parametrize(
    ("settings", "hf_name", "hf_kwargs"),
    [
        ({"schedule": "linear"}, "linear", {}),
        ({"schedule": "constant"}, "constant_with_warmup", {}),
        ({"schedule": "cosine"}, "cosine", {}),
        ({"schedule": "polynomial"}, "polynomial", {}),  # HF's defaults: power 1.0, lr_end 1e-7
        ({"schedule": "polynomial", "power": 2.0, "lr_end": 1e-5}, "polynomial", {"power": 2.0, "lr_end": 1e-5}),
        ({"schedule": "warmup_stable_decay", "decay_steps": 7}, "warmup_stable_decay", {"num_decay_steps": 7}),
        ({"schedule": "wsd", "decay_ratio": 0.25, "decay_type": "1-sqrt", "min_lr_ratio": 0.1},
         "warmup_stable_decay", {"num_decay_steps": 8, "decay_type": "1-sqrt", "min_lr_ratio": 0.1}),
        ({"schedule": "warmup_stable_decay", "decay_steps": 10, "decay_type": "linear", "warmup_steps": 0},
         "warmup_stable_decay", {"num_decay_steps": 10, "decay_type": "linear"}),
    ],
)
@pytest.mark.parametrize("head_lr", [None, 5e-3])
def test_every_schedule_gives_transformers_learning_rate_at_every_step(settings, hf_name, hf_kwargs, head_lr):
    """Each train.schedule is Hugging Face's lr_scheduler_type of that name (get_scheduler, the Trainer's
    path) on the same settings: the same learning rate for every group at every step."""
    from transformers import get_scheduler

    total = 30
    train = TrainSection(max_steps=total, lr=1e-3, **{"warmup_steps": 3, **settings})
    warmup = train.warmup_steps
    ours_optimizer, theirs_optimizer = _two_groups(head_lr=head_lr), _two_groups(head_lr=head_lr)
    ours = scheduler_from_config(ours_optimizer, train, total)
    theirs = get_scheduler(hf_name, theirs_optimizer, num_warmup_steps=warmup, num_training_steps=total,
                           scheduler_specific_kwargs=hf_kwargs)
    assert _lrs(ours, ours_optimizer, total) == _lrs(theirs, theirs_optimizer, total)


def test_the_new_schedules_have_their_shapes():
    total, lr = 20, 1.0
    def rates(**settings):
        optimizer = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=lr)
        train = TrainSection(max_steps=total, lr=lr, warmup_steps=4, **settings)
        return [group[0] for group in _lrs(scheduler_from_config(optimizer, train, total), optimizer, total)]

    cosine = rates(schedule="cosine")
    assert cosine[:5] == [0.0, 0.25, 0.5, 0.75, 1.0] and cosine[12] == pytest.approx(0.5) and cosine[-1] == 0.0
    squared = rates(schedule="polynomial", power=2.0, lr_end=0.0)
    assert squared[12] == pytest.approx(0.25) and squared[-1] == 0.0
    assert rates(schedule="polynomial")[-1] == pytest.approx(1e-7)
    wsd = rates(schedule="warmup_stable_decay", decay_steps=4)
    assert wsd[4:17] == [1.0] * 13 and wsd[18] == pytest.approx(0.5) and wsd[-1] == 0.0


def test_schedule_settings_that_cannot_run_are_config_errors():
    from contrastext.errors import ConfigError as Error

    with pytest.raises(ValueError, match="train.lr_end"):
        TrainSection(max_steps=10, lr=1e-5, schedule="polynomial", lr_end=1e-4)
    with pytest.raises(ValueError, match="decay_ratio"):
        TrainSection(max_steps=10, schedule="warmup_stable_decay", warmup_ratio=0.5, decay_ratio=0.6)
    optimizer = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=1.0)
    train = TrainSection(max_steps=10, schedule="warmup_stable_decay", warmup_steps=5, decay_steps=6)
    with pytest.raises(Error, match="train.decay_steps"):
        scheduler_from_config(optimizer, train, 10)


@pytest.mark.parametrize(
    ("name", "kind"),
    [("adamw", torch.optim.AdamW), ("adam", torch.optim.Adam), ("sgd", torch.optim.SGD), ("adafactor", None)],
)
def test_train_optimizer_builds_the_named_optimizer_with_the_same_groups(name, kind):
    from transformers.optimization import Adafactor

    model = nn.Sequential(nn.Linear(4, 4), nn.LayerNorm(4))
    train = TrainSection(max_steps=10, lr=1e-3, weight_decay=0.01, optimizer=name, momentum=0.9)
    optimizer = optimizer_from_config(model, train)
    assert type(optimizer) is (kind or Adafactor)
    assert [group["weight_decay"] for group in optimizer.param_groups] == [0.01, 0.0]
    assert all(group["lr"] == 1e-3 for group in optimizer.param_groups)
    if name == "sgd":
        assert all(group["momentum"] == 0.9 for group in optimizer.param_groups)
    if name == "adafactor":  # Hugging Face Trainer's optim="adafactor": the external lr and schedule
        group = optimizer.param_groups[0]
        assert (group["scale_parameter"], group["relative_step"], group["warmup_init"]) == (False, False, False)
        assert group["eps"] == (1e-30, 1e-3) and group["clip_threshold"] == 1.0 and group["beta1"] is None
    if name in ("adamw", "adam"):
        assert all(group["betas"] == (0.9, 0.999) for group in optimizer.param_groups)
    before = [parameter.detach().clone() for parameter in model.parameters()]
    model(torch.ones(2, 4)).pow(2).sum().backward()
    optimizer.step()
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))


def test_adamw_stays_the_fused_adamw_and_unknown_optimizers_name_the_key():
    model = nn.Linear(3, 2)
    optimizer = optimizer_from_config(model, TrainSection(max_steps=10))
    assert type(optimizer) is torch.optim.AdamW and optimizer.defaults["fused"] is True
    with pytest.raises(ConfigError, match="train.optimizer: unknown optimizer 'lion'"):
        build_optimizer(model, 1e-3, name="lion")
    with pytest.raises(ValueError, match="optimizer"):
        TrainSection(max_steps=10, optimizer="lion")
