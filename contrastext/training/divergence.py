"""Divergence guards: a non-finite loss or gradient stops a run (or skips the step), and NaN weights are
never written as a checkpoint, ``best`` or ``final``.

``train.on_nonfinite``:

- ``stop`` (default): a step whose loss (or any loss part) or gradient norm is NaN or infinite raises
  :class:`DivergenceError` naming the step and the values, before the optimiser applies it; the last good
  checkpoint stays the latest, so a ``--resume`` with a smaller ``train.lr`` goes on from there;
- ``skip``: such a step is dropped (gradients zeroed, no optimiser or schedule step) and counted in the log
  (``skipped_nonfinite``); the run goes on.

Under fp16 mixed precision an infinite gradient norm is the loss scaler's business (it skips the step and
lowers the scale), so only the loss is checked there.

Example::

    >>> check_finite_step(12, {"infonce": 0.7, "__total__": float("nan")}, grad_norm=1.3)
    Traceback (most recent call last):
    DivergenceError: training diverged at step 12: the loss is nan (infonce=0.7) ...
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch
from torch import nn

from contrastext.errors import ContrastextError

TOTAL = "__total__"  # the weighted total among the summed parts


class DivergenceError(ContrastextError):
    """A training step produced a non-finite loss, gradient or weights."""


def nonfinite_reason(parts: Mapping[str, float], grad_norm: float | None, check_gradient: bool = True) -> str | None:
    """What is not finite in a step (None when everything is)."""
    bad_parts = {name: value for name, value in parts.items() if not math.isfinite(value)}
    if bad_parts:
        total = parts.get(TOTAL, float("nan"))
        shown = ", ".join(f"{name}={value}" for name, value in parts.items() if name != TOTAL)
        return f"the loss is {total} ({shown})"
    if check_gradient and grad_norm is not None and not math.isfinite(grad_norm):
        return f"the gradient norm is {grad_norm}"
    return None


def check_finite_step(step: int, parts: Mapping[str, float], grad_norm: float | None, check_gradient: bool = True):
    """Raise :class:`DivergenceError` when the loss parts or the gradient norm of ``step`` are not finite."""
    reason = nonfinite_reason(parts, grad_norm, check_gradient)
    if reason is not None:
        raise DivergenceError(divergence_message(step, reason))


def divergence_message(step: int, reason: str) -> str:
    return (
        f"training diverged at step {step}: {reason}; nothing of this step was saved. Lower train.lr (or check "
        "the data), then --resume from the last checkpoint, or set train.on_nonfinite=skip to drop such steps"
    )


def first_nonfinite_tensor(module: nn.Module) -> str | None:
    """The name of the first parameter or floating buffer holding NaN or ±inf (None when all are finite)."""
    with torch.no_grad():
        for name, tensor in [*module.named_parameters(), *module.named_buffers()]:
            if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
                return name
    return None


def check_finite_weights(module: nn.Module, step: int, what: str) -> None:
    """Refuse to write ``what`` (a checkpoint, ``best``, ``final``) when the weights are not finite."""
    name = first_nonfinite_tensor(module)
    if name is not None:
        raise DivergenceError(divergence_message(step, f"the weights are not finite ({name}); {what} not written"))
