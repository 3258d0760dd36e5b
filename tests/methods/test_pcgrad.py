"""PCGrad against hand-computed two-task examples, and its gradient plumbing (per-parameter gradients, surrogate)."""

from __future__ import annotations

import pytest
import torch

from contrastext.methods.pcgrad import pcgrad, pcgrad_gradients, pcgrad_surrogate, project_conflicting


def test_conflicting_pair_matches_hand_computation():
    g1, g2 = torch.tensor([1.0, 0.0]), torch.tensor([-1.0, 1.0])
    # g1·g2 = −1 < 0.  g1' = g1 − (−1/2)·g2 = (0.5, 0.5);  g2' = g2 − (−1/1)·g1 = (0, 1).
    p1, p2 = project_conflicting([g1, g2])
    assert torch.allclose(p1, torch.tensor([0.5, 0.5]))
    assert torch.allclose(p2, torch.tensor([0.0, 1.0]))
    # Projected gradients no longer conflict with the other task's original gradient.
    assert torch.dot(p1, g2) >= -1e-7 and torch.dot(p2, g1) >= -1e-7
    assert torch.allclose(pcgrad([g1, g2]), torch.tensor([0.5, 1.5]))


def test_non_conflicting_pair_is_the_plain_sum():
    g1, g2 = torch.tensor([1.0, 0.0]), torch.tensor([1.0, 1.0])
    p1, p2 = project_conflicting([g1, g2])
    assert torch.equal(p1, g1) and torch.equal(p2, g2)
    assert torch.allclose(pcgrad([g1, g2]), torch.tensor([2.0, 1.0]))


def test_orthogonal_and_zero_gradients_pass_unchanged():
    g1, g2, zero = torch.tensor([1.0, 0.0]), torch.tensor([0.0, 3.0]), torch.zeros(2)
    assert torch.allclose(pcgrad([g1, g2, zero]), torch.tensor([1.0, 3.0]))


def test_float64_and_three_tasks_in_any_order_stay_non_conflicting_when_two_agree():
    g = [torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64), torch.tensor([-1.0, 1.0, 0.0], dtype=torch.float64),
         torch.tensor([0.0, 0.0, 1.0], dtype=torch.float64)]
    for seed in range(3):
        projected = project_conflicting(g, generator=torch.Generator().manual_seed(seed))
        assert projected[0].dtype == torch.float64
        assert torch.allclose(projected[2], g[2])  # conflicts with no one


def test_bad_shapes_are_clear_errors():
    with pytest.raises(ValueError, match="flat gradients"):
        project_conflicting([torch.zeros(2), torch.zeros(3)])
    with pytest.raises(ValueError, match="at least one"):
        project_conflicting([])


def _two_task_model():
    torch.manual_seed(0)
    shared = torch.nn.Linear(2, 2, bias=False)
    with torch.no_grad():
        shared.weight.copy_(torch.eye(2))
    heads = torch.nn.ModuleList([torch.nn.Linear(2, 1, bias=False), torch.nn.Linear(2, 1, bias=False)])
    with torch.no_grad():
        heads[0].weight.copy_(torch.tensor([[1.0, 0.0]]))
        heads[1].weight.copy_(torch.tensor([[-1.0, 1.0]]))
    x = torch.tensor([[1.0, 1.0]])
    losses = [heads[0](shared(x)).sum(), heads[1](shared(x)).sum()]
    return shared, heads, losses


def test_gradients_split_shared_and_specific():
    shared, heads, losses = _two_task_model()
    combined = pcgrad_gradients(losses, list(shared.parameters()), list(heads.parameters()))
    # Shared grads: d(h·Wx)/dW = h xᵀ -> task 0 [[1,1],[0,0]], task 1 [[-1,-1],[1,1]] (flat dot = −2 < 0).
    g1, g2 = torch.tensor([1.0, 1.0, 0.0, 0.0]), torch.tensor([-1.0, -1.0, 1.0, 1.0])
    assert torch.allclose(combined[0].reshape(-1), pcgrad([g1, g2]))
    # Heads get their own task's gradient only: d(h·Wx)/dh = Wx = (1, 1).
    assert torch.allclose(combined[1], torch.tensor([[1.0, 1.0]]))
    assert torch.allclose(combined[2], torch.tensor([[1.0, 1.0]]))


def test_the_surrogate_backward_gives_the_combined_grads():
    shared, heads, losses = _two_task_model()
    expected = pcgrad_gradients(losses, list(shared.parameters()), list(heads.parameters()))

    shared, heads, losses = _two_task_model()
    surrogate = pcgrad_surrogate(losses, list(shared.parameters()), list(heads.parameters()))
    assert float(surrogate.detach()) == 0.0
    surrogate.backward()
    for parameter, grad in zip([*shared.parameters(), *heads.parameters()], expected, strict=True):
        assert torch.allclose(parameter.grad, grad)


def test_mean_reduction_averages_the_projected_gradients():
    # CS224N report §4: "We set the final gradient as the mean of the input gradients".
    g1, g2 = torch.tensor([1.0, 0.0]), torch.tensor([-1.0, 1.0])
    # projected: (0.5, 0.5) and (0, 1) (see above); mean = (0.25, 0.75), sum = (0.5, 1.5).
    assert torch.allclose(pcgrad([g1, g2], reduction="mean"), torch.tensor([0.25, 0.75]))
    with pytest.raises(ValueError, match="reduction"):
        pcgrad([g1, g2], reduction="max")


def test_mean_reduction_leaves_task_specific_gradients_whole():
    shared, heads, losses = _two_task_model()
    combined = pcgrad_gradients(losses, list(shared.parameters()), list(heads.parameters()), reduction="mean")
    # Shared, by hand: g1 = (1, 1, 0, 0), g2 = (-1, -1, 1, 1), g1·g2 = -2; g1' = g1 + (2/4)·g2 = (0.5, 0.5, 0.5, 0.5),
    # g2' = g2 + (2/2)·g1 = (0, 0, 1, 1); the mean is (0.25, 0.25, 0.75, 0.75).
    assert torch.allclose(combined[0].reshape(-1), torch.tensor([0.25, 0.25, 0.75, 0.75]))
    assert torch.allclose(combined[1], torch.tensor([[1.0, 1.0]]))  # each head: its own task's gradient, not halved
    assert torch.allclose(combined[2], torch.tensor([[1.0, 1.0]]))
