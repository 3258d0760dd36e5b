"""Temperatures for contrastive logits ``s / τ``: fixed, learnable, or scheduled (CAPT).

Every temperature shares one small interface, ``value(step=None) -> Tensor | float``:

- :class:`FixedTemperature` ``(0.05)``: always 0.05.
- :class:`LearnableTemperature` ``(init=0.07, min=0.01, max=1.0)``: ``τ = clamp(exp(log_τ), min, max)``
  with ``log_τ`` an ``nn.Parameter`` (log-parametrised as CLIP's logit scale, so τ stays positive).
  Clamping blocks the gradient while τ sits at a bound.
- :class:`InvertedTriangleTemperature` ``(total_steps, floor=0.05)``: CAPT's schedule (Luo et al.,
  "Rethinking denoised auto-encoding in language pre-training", §2.2 Eq. 6: ``τ(t) = (1/T)|t − T/2| + 0.05``,
  "where t denotes the learning step and T refers to the preset total number of updates"):
  ``τ(t) = |t − T/2| / T + floor`` with the paper's 0.05 as the default ``floor``,
  high at the start and the end (0.5 + floor), lowest (floor) in the middle. ``value(step)`` reads
  ``step`` or, when ``None``, the module's own counter (a buffer, so it is checkpointed), which
  :meth:`InvertedTriangleTemperature.advance` moves on.

Objectives accept a float, a 0-dim tensor or any of these modules; :func:`temperature_value` resolves them.

Example::

    >>> schedule = InvertedTriangleTemperature(total_steps=100, floor=0.05)
    >>> schedule.value(0), schedule.value(50), schedule.value(100)
    (0.55, 0.05, 0.55)
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from .checks import check_positive


class Temperature(nn.Module):
    """Base class: ``value(step=None)`` gives τ; ``forward`` returns it as a tensor."""

    def value(self, step: int | None = None) -> Tensor | float:  # pragma: no cover - abstract
        raise NotImplementedError

    def forward(self, step: int | None = None) -> Tensor:
        value = self.value(step)
        return value if isinstance(value, Tensor) else torch.tensor(value)


class FixedTemperature(Temperature):
    """A constant temperature."""

    def __init__(self, temperature: float = 0.05):
        super().__init__()
        self.temperature = check_positive("FixedTemperature", "temperature", temperature)

    def value(self, step: int | None = None) -> float:
        return self.temperature

    def extra_repr(self) -> str:
        return f"temperature={self.temperature}"


class LearnableTemperature(Temperature):
    """A trainable τ = clamp(exp(log_τ), min, max), initialised at ``init``."""

    def __init__(self, init: float = 0.07, min: float = 0.01, max: float = 1.0):  # noqa: A002 - names of the API
        super().__init__()
        init = check_positive("LearnableTemperature", "init", init)
        self.min = check_positive("LearnableTemperature", "min", min)
        self.max = check_positive("LearnableTemperature", "max", max)
        if not self.min <= init <= self.max:
            raise ValueError(f"LearnableTemperature: need min <= init <= max; got min={min}, init={init}, max={max}")
        self.log_temperature = nn.Parameter(torch.tensor(math.log(init)))

    def value(self, step: int | None = None) -> Tensor:
        return self.log_temperature.exp().clamp(self.min, self.max)

    def extra_repr(self) -> str:
        return f"min={self.min}, max={self.max}"


class InvertedTriangleTemperature(Temperature):
    """CAPT's schedule (Eq. 6) τ(t) = |t − T/2| / T + floor for step t of T total steps (t = 0 at the first
    update; past T the value is held at τ(T))."""

    def __init__(self, total_steps: int, floor: float = 0.05):
        super().__init__()
        if isinstance(total_steps, bool) or not isinstance(total_steps, int) or total_steps < 1:
            raise ValueError(f"InvertedTriangleTemperature: `total_steps` must be an integer >= 1; got {total_steps!r}")
        self.total_steps = total_steps
        self.floor = check_positive("InvertedTriangleTemperature", "floor", floor)
        self.register_buffer("step", torch.zeros((), dtype=torch.long))

    def value(self, step: int | None = None) -> float:
        t = int(self.step) if step is None else int(step)
        if t < 0:
            raise ValueError(f"InvertedTriangleTemperature: `step` must be >= 0; got {t}")
        t = min(t, self.total_steps)
        return abs(t - self.total_steps / 2) / self.total_steps + self.floor

    def advance(self, steps: int = 1) -> None:
        """Move the internal step counter on (call once per optimisation step)."""
        self.step += steps

    def set_total_steps(self, total_steps: int) -> None:
        """Set T, the length of the schedule (a trainer calls this with its run's optimiser steps)."""
        if isinstance(total_steps, bool) or not isinstance(total_steps, int) or total_steps < 1:
            raise ValueError(f"InvertedTriangleTemperature: `total_steps` must be an integer >= 1; got {total_steps!r}")
        self.total_steps = total_steps

    def extra_repr(self) -> str:
        return f"total_steps={self.total_steps}, floor={self.floor}"


TemperatureLike = float | Tensor | Temperature


def check_temperature(owner: str, temperature: TemperatureLike) -> TemperatureLike:
    """Validate a temperature given as a positive float, a positive 0-dim tensor or a :class:`Temperature`."""
    if isinstance(temperature, Temperature):
        return temperature
    if isinstance(temperature, Tensor):
        if temperature.dim() != 0 or not temperature.is_floating_point():
            raise ValueError(
                f"{owner}: a tensor `temperature` must be a 0-dim float tensor; got shape "
                f"{tuple(temperature.shape)} dtype {temperature.dtype}"
            )
        if not float(temperature) > 0:
            raise ValueError(f"{owner}: `temperature` must be positive; got {float(temperature)}")
        return temperature
    return check_positive(owner, "temperature", temperature)


def temperature_value(temperature: TemperatureLike, step: int | None = None) -> Tensor | float:
    """Resolve a float, 0-dim tensor or :class:`Temperature` to the number τ to divide logits by."""
    if isinstance(temperature, Temperature):
        return temperature.value(step)
    return temperature
