"""SupCon's two reductions against Gunel et al.'s Eq. 3, on a hand-computed batch and against the explicit loop."""

from __future__ import annotations

import math

import pytest
import torch

from contrastext.objectives import SupCon
from tests.objectives import naive_objectives as naive


def test_eq_3_on_a_batch_computed_by_hand():
    """Φ = (1,0), (0,1), (1,0) (already unit), y = 0, 0, 1, τ = 1.

    i = 0: its positive is 1; Φ0·Φ1 = 0, Φ0·Φ2 = 1 -> −log(e⁰ / (e⁰ + e¹)) = log(1 + e).
    i = 1: its positive is 0; Φ1·Φ0 = Φ1·Φ2 = 0 -> −log(1/2) = log 2.
    i = 2: alone in its class (N_y − 1 = 0): no term.
    """
    z = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]])
    y = torch.tensor([0, 0, 1])
    total = math.log(1 + math.e) + math.log(2)
    assert SupCon(temperature=1.0, reduction="sum")(z, y).item() == pytest.approx(total, rel=1e-6)
    assert SupCon(temperature=1.0)(z, y).item() == pytest.approx(total / 2, rel=1e-6)
    assert naive.supcon(z, y, tau=1.0, reduction="sum") == pytest.approx(total, rel=1e-12)


@pytest.mark.parametrize("labels", [[0, 0, 1, 1, 2, 2, 2], [0, 1, 1, 2, 3, 4, 0], [5, 5, 5, 5, 5, 5, 5]])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_sum_reduction_is_eq_3(labels, dtype):
    generator = torch.Generator().manual_seed(3)
    z = torch.randn(7, 5, generator=generator, dtype=torch.float64).to(dtype)
    y = torch.tensor(labels)
    tolerance = dict(rel=1e-4, abs=1e-4) if dtype == torch.float32 else dict(rel=1e-9, abs=1e-9)
    loss = SupCon(temperature=0.3, reduction="sum")(z, y)
    assert loss.item() == pytest.approx(naive.supcon(z, y, tau=0.3, reduction="sum"), **tolerance)


def test_sum_without_any_positive_pair_is_zero_with_grad():
    z = torch.randn(4, 3, requires_grad=True)
    loss = SupCon(reduction="sum")(z, torch.arange(4))
    assert loss.item() == 0.0
    loss.backward()
    assert torch.equal(z.grad, torch.zeros_like(z))


def test_unknown_reduction_names_the_argument():
    with pytest.raises(ValueError, match="`reduction` must be one of mean, sum; got 'max'"):
        SupCon(reduction="max")
    assert "reduction='sum'" in repr(SupCon(reduction="sum"))
