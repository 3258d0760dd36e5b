"""Optimiser and learning-rate schedules.

- :func:`build_optimizer`: AdamW (default), Adam, Adafactor or SGD with two parameter groups, no weight decay
  on biases and normalisation weights (BERT's recipe, as in Hugging Face's Trainer); with ``head_lr`` each
  group is split again into the encoder's parameters and the rest (heads), the rest at ``head_lr``.
- :func:`build_scheduler`: after a linear warmup from 0, ``"linear"`` decay to 0, ``"constant"``,
  ``"cosine"`` (half a cosine down to 0), ``"polynomial"`` (to ``lr_end`` with ``power``) or
  ``"warmup_stable_decay"`` (constant, then a decay over the last ``decay_steps``), each the function of
  ``transformers`` that Hugging Face's Trainer uses for its ``lr_scheduler_type`` of that name, with its
  defaults.
- :func:`optimizer_from_config` / :func:`scheduler_from_config`: the same from a ``train`` section.

Example::

    >>> optimizer = build_optimizer(model, lr=3e-5, weight_decay=0.01)
    >>> scheduler = build_scheduler(optimizer, "linear", total_steps=1000, warmup_steps=100)
"""

from __future__ import annotations

import math

import torch
from torch import nn
from transformers import (
    get_constant_schedule_with_warmup,
    get_cosine_schedule_with_warmup,
    get_linear_schedule_with_warmup,
    get_polynomial_decay_schedule_with_warmup,
    get_wsd_schedule,
)

from contrastext.errors import ConfigError

SCHEDULES = ("linear", "constant", "cosine", "polynomial", "warmup_stable_decay")
OPTIMIZERS = ("adamw", "adam", "adafactor", "sgd")
NORM_LAYERS: tuple[type[nn.Module], ...] = (nn.LayerNorm, nn.GroupNorm, nn.BatchNorm1d, nn.RMSNorm)


def parameter_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """Trainable parameters split into decayed ones and biases / normalisation weights (no decay)."""
    decay, no_decay, seen = [], [], set()
    for module_name, module in model.named_modules():
        for name, parameter in module.named_parameters(recurse=False):
            if not parameter.requires_grad or id(parameter) in seen:
                continue
            seen.add(id(parameter))
            is_norm = isinstance(module, NORM_LAYERS) or "layernorm" in module_name.lower().replace("_", "")
            if name == "bias" or name.endswith("bias") or is_norm:
                no_decay.append(parameter)
            else:
                decay.append(parameter)
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return [group for group in groups if group["params"]]


def split_head_groups(model: nn.Module, groups: list[dict], head_lr: float) -> list[dict]:
    """Each group split into the parameters of ``model.encoder`` and the rest, the rest at ``head_lr``."""
    encoder = getattr(model, "encoder", None)
    if not isinstance(encoder, nn.Module):
        raise ConfigError(
            f"train.head_lr: {type(model).__name__} has no `encoder` module to tell the heads from; leave "
            "train.head_lr unset (null) for this method"
        )
    in_encoder = {id(parameter) for parameter in encoder.parameters()}
    split = []
    for group in groups:
        body = [p for p in group["params"] if id(p) in in_encoder]
        heads = [p for p in group["params"] if id(p) not in in_encoder]
        split += [{**group, "params": body}, {**group, "params": heads, "lr": head_lr}]
    return [group for group in split if group["params"]]


def build_optimizer(
    model: nn.Module,
    lr: float,
    weight_decay: float = 0.0,
    betas: tuple[float, float] = (0.9, 0.999),
    eps: float = 1e-8,
    head_lr: float | None = None,
    name: str = "adamw",
    momentum: float = 0.0,
) -> torch.optim.Optimizer:
    """The optimiser ``name`` over the trainable parameters of ``model``; no decay on biases and normalisation
    weights. ``name`` (``train.optimizer``; Hugging Face's ``optim``):

    - ``adamw`` (default): AdamW, decoupled weight decay, the fused kernel (below);
    - ``adam``: Adam, ``betas`` and ``eps`` as AdamW's; its weight decay is the L2 penalty added to the gradient;
    - ``adafactor``: ``transformers.Adafactor`` with Hugging Face Trainer's settings for ``optim="adafactor"``
      (``scale_parameter=False, relative_step=False``: the external learning rate and schedule; its other
      arguments at their defaults; ``betas`` and ``eps`` are not used);
    - ``sgd``: SGD with ``momentum`` (Hugging Face: ``optim="sgd", optim_args="momentum=..."``; default 0).

    ``head_lr``: the parameters outside ``model.encoder`` (heads, projections, critics) get this learning rate
    instead of ``lr`` (the schedule scales both alike). Fresh heads on a pre-trained encoder often need a
    larger one than the encoder's fine-tuning rate, most of all in short runs: AdamW moves a parameter by at
    most about its learning rate per step.

    The fused implementation where the parameters' device has it (CPU and CUDA), as Hugging Face's Trainer
    does by default (``adamw_torch_fused``); the same update to float rounding (≤ 1e-7 after a few steps).
    """
    groups = parameter_groups(model, weight_decay)
    if not groups:
        raise ValueError(f"{type(model).__name__} has no trainable parameters")
    if head_lr is not None:
        groups = split_head_groups(model, groups, head_lr)
    if name not in OPTIMIZERS:
        raise ConfigError(f"train.optimizer: unknown optimizer {name!r}; known: {', '.join(OPTIMIZERS)}")
    if name == "adafactor":
        from transformers.optimization import Adafactor

        return Adafactor(groups, lr=lr, scale_parameter=False, relative_step=False)
    if name == "sgd":
        return torch.optim.SGD(groups, lr=lr, momentum=momentum)
    for beta_name, beta in zip(("beta1", "beta2"), betas, strict=True):
        if not 0.0 <= beta < 1.0:
            raise ConfigError(f"train.adam_betas: {beta_name} must be in [0, 1), got {beta}")
    kind = torch.optim.AdamW if name == "adamw" else torch.optim.Adam
    try:  # the fused kernel: one pass over all parameters (8x faster steps than the per-tensor loop on CPU)
        return kind(groups, lr=lr, betas=tuple(betas), eps=eps, fused=True)
    except (RuntimeError, ValueError):  # a device or dtype without the fused kernel
        return kind(groups, lr=lr, betas=tuple(betas), eps=eps)


def resolve_warmup_steps(total_steps: int, warmup_ratio: float = 0.0, warmup_steps: int | None = None) -> int:
    """``warmup_steps`` when given, else ``ceil(warmup_ratio * total_steps)``."""
    if warmup_steps is not None:
        return warmup_steps
    return math.ceil(warmup_ratio * total_steps)


def build_scheduler(
    optimizer: torch.optim.Optimizer,
    name: str,
    total_steps: int,
    warmup_steps: int = 0,
    *,
    lr_end: float = 1e-7,
    power: float = 1.0,
    decay_steps: int | None = None,
    decay_type: str = "cosine",
    min_lr_ratio: float = 0.0,
) -> torch.optim.lr_scheduler.LambdaLR:
    """A per-optimiser-step schedule (see the module docstring); the learning rate rises linearly from 0 over
    ``warmup_steps`` first.

    ``lr_end`` and ``power``: ``"polynomial"`` only; its ``lr_end`` is absolute, for the optimiser's default
    rate (``train.lr``: a ``head_lr`` group ends at ``head_lr * lr_end / lr``, as in ``transformers``).
    ``decay_steps``, ``decay_type`` and ``min_lr_ratio``: ``"warmup_stable_decay"`` only (stable for
    ``total_steps - warmup_steps - decay_steps`` steps; ``decay_steps`` is required).
    """
    if name == "linear":
        return get_linear_schedule_with_warmup(optimizer, warmup_steps, total_steps)
    if name == "constant":
        return get_constant_schedule_with_warmup(optimizer, warmup_steps)
    if name == "cosine":
        return get_cosine_schedule_with_warmup(optimizer, warmup_steps, total_steps)
    if name == "polynomial":
        lr = optimizer.defaults["lr"]
        if not lr > lr_end:
            raise ConfigError(f"train.lr_end: the polynomial schedule's end ({lr_end}) must be below train.lr ({lr})")
        return get_polynomial_decay_schedule_with_warmup(optimizer, warmup_steps, total_steps, lr_end=lr_end,
                                                         power=power)
    if name == "warmup_stable_decay":
        if decay_steps is None:
            raise ConfigError("train.decay_steps: the warmup_stable_decay schedule needs its decay steps")
        if warmup_steps + decay_steps > total_steps:
            raise ConfigError(
                f"train.decay_steps / train.decay_ratio: {warmup_steps} warmup + {decay_steps} decay steps are "
                f"more than the run's {total_steps} steps"
            )
        return get_wsd_schedule(optimizer, warmup_steps, decay_steps, num_training_steps=total_steps,
                                decay_type=decay_type, min_lr_ratio=min_lr_ratio)
    raise ConfigError(f"train.schedule: unknown schedule {name!r}; known: {', '.join(SCHEDULES)}")


def optimizer_from_config(model: nn.Module, train) -> torch.optim.Optimizer:
    """:func:`build_optimizer` with a ``train`` section's settings (``train.optimizer``, ``lr``, ...)."""
    return build_optimizer(model, train.lr, train.weight_decay, train.adam_betas, train.adam_epsilon,
                           head_lr=train.head_lr, name=train.optimizer, momentum=train.momentum)


def scheduler_from_config(optimizer: torch.optim.Optimizer, train, total_steps: int) -> torch.optim.lr_scheduler.LambdaLR:
    """:func:`build_scheduler` with a ``train`` section's settings: the warmup from ``warmup_steps`` (else
    ``warmup_ratio``), a warmup-stable-decay's decay from ``decay_steps`` (else ``decay_ratio``), the same way."""
    warmup = resolve_warmup_steps(total_steps, train.warmup_ratio, train.warmup_steps)
    decay = resolve_warmup_steps(total_steps, train.decay_ratio, train.decay_steps)
    return build_scheduler(optimizer, train.schedule, total_steps, warmup, lr_end=train.lr_end, power=train.power,
                           decay_steps=decay, decay_type=train.decay_type, min_lr_ratio=train.min_lr_ratio)
