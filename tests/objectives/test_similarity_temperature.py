"""pairwise_similarity, the temperatures, and objectives driven by a temperature module."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from contrastext.objectives import (
    CAPT,
    FixedTemperature,
    InfoNCE,
    InvertedTriangleTemperature,
    LearnableTemperature,
    pairwise_similarity,
)
from tests.objectives import naive_objectives as naive


def test_pairwise_similarity_cos_and_dot():
    a, b = torch.randn(3, 5, dtype=torch.float64), torch.randn(4, 5, dtype=torch.float64)
    cos = pairwise_similarity(a, b, "cos")
    assert cos.shape == (3, 4)
    for i in range(3):
        for j in range(4):
            assert cos[i, j].item() == pytest.approx(F.cosine_similarity(a[i], b[j], dim=0).item())
    torch.testing.assert_close(pairwise_similarity(a, b, "dot"), a @ b.T)
    with pytest.raises(ValueError, match="'cos', 'dot'"):
        pairwise_similarity(a, b, "l2")
    with pytest.raises(ValueError, match=r"\(N, 5\)"):
        pairwise_similarity(a, torch.randn(4, 6))


def test_fixed_temperature():
    assert FixedTemperature(0.05).value() == 0.05
    assert FixedTemperature(0.05).value(step=123) == 0.05
    assert float(FixedTemperature(0.05)()) == pytest.approx(0.05)
    with pytest.raises(ValueError):
        FixedTemperature(0.0)


def test_learnable_temperature_is_a_clamped_log_parameter():
    temperature = LearnableTemperature(init=0.07, min=0.01, max=1.0)
    assert temperature.value().item() == pytest.approx(0.07)
    assert [name for name, _ in temperature.named_parameters()] == ["log_temperature"]
    with torch.no_grad():
        temperature.log_temperature.fill_(math.log(5.0))
    assert temperature.value().item() == pytest.approx(1.0)
    with torch.no_grad():
        temperature.log_temperature.fill_(math.log(1e-4))
    assert temperature().item() == pytest.approx(0.01)
    with pytest.raises(ValueError, match="min <= init <= max"):
        LearnableTemperature(init=2.0, min=0.01, max=1.0)


def test_learnable_temperature_trains_inside_infonce():
    temperature = LearnableTemperature(init=0.5, min=0.01, max=1.0)
    objective = InfoNCE(temperature=temperature)
    assert list(objective.parameters()) == [temperature.log_temperature]
    a = torch.randn(8, 4)
    p = a + 0.01 * torch.randn(8, 4)  # well separated pairs: a lower τ lowers the loss
    objective(a, p).backward()
    assert temperature.log_temperature.grad.item() > 0
    expected = naive.infonce(a, p, tau=0.5)
    assert objective(a, p).item() == pytest.approx(expected, rel=1e-5)


def test_inverted_triangle_schedule():
    schedule = InvertedTriangleTemperature(total_steps=100, floor=0.05)
    assert schedule.value(0) == pytest.approx(0.55)
    assert schedule.value(25) == pytest.approx(0.30)
    assert schedule.value(50) == pytest.approx(0.05)
    assert schedule.value(100) == pytest.approx(0.55)
    assert schedule.value(500) == pytest.approx(0.55)  # past the end: held at the last value
    assert schedule.value() == pytest.approx(0.55)  # the internal counter starts at 0
    schedule.advance(50)
    assert schedule.value() == pytest.approx(0.05)
    assert int(schedule.state_dict()["step"]) == 50
    with pytest.raises(ValueError):
        InvertedTriangleTemperature(total_steps=0)
    with pytest.raises(ValueError):
        schedule.value(-1)


def test_inverted_triangle_odd_length_and_retold_length():
    """Eq. 6, τ(t) = |t − T/2| / T + 0.05, evaluated by hand for T = 5 and T = 4."""
    schedule = InvertedTriangleTemperature(total_steps=5)  # the paper's 0.05 is the default floor
    assert [schedule.value(t) for t in range(6)] == pytest.approx([0.55, 0.35, 0.15, 0.15, 0.35, 0.55])
    schedule.set_total_steps(4)  # the trainer tells T once it knows the run's length
    assert [schedule.value(t) for t in range(5)] == pytest.approx([0.55, 0.30, 0.05, 0.30, 0.55])
    assert InvertedTriangleTemperature(total_steps=4, floor=0.1).value(2) == pytest.approx(0.1)
    for steps in (0, 2.5, True):
        with pytest.raises(ValueError):
            schedule.set_total_steps(steps)


def test_capt_follows_its_schedule():
    s, t = torch.randn(6, 8, dtype=torch.float64), torch.randn(6, 8, dtype=torch.float64)
    schedule = InvertedTriangleTemperature(total_steps=10, floor=0.05)
    objective = CAPT(temperature=schedule)
    assert objective(s, t).item() == pytest.approx(naive.capt(s, t, tau=0.55))
    schedule.advance(5)
    assert objective(s, t).item() == pytest.approx(naive.capt(s, t, tau=0.05))
