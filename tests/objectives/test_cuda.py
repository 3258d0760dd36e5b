"""The objectives on a CUDA device (marked ``cuda``: skipped without one).

- In float32 on the GPU, every loss built by ``make_objective`` and its gradients equal the CPU float64 values
  within float32 rounding.
- Under ``torch.autocast("cuda")`` in float16 and bfloat16 (embeddings from a linear layer, so the objectives get
  half-precision inputs as in training), at temperature 0.01 with perfectly aligned pairs, and for a batch of one,
  the loss is float32 and finite and so are the gradients; SupCon on a batch without any positive pair too.
"""

from __future__ import annotations

import pytest
import torch

from contrastext.objectives import make_objective
from contrastext.objectives.registry import objective_arguments
from tests.objectives.test_robustness import LABELS, assert_finite_with_finite_grads, call

pytestmark = pytest.mark.cuda

CASES = [
    ("infonce", {"temperature": 0.05}),
    ("infonce", {"temperature": 0.05, "symmetric": True, "mask_duplicate_positives": True}),
    ("supcon", {"temperature": 0.1}),
    ("dcl", {"temperature": 0.05}),
    ("hinged_dcl", {"temperature": 0.05}),
    ("align_uniform", {}),
    ("margin_euclidean", {}),
    ("margin_angle", {}),
    ("margin_product", {}),
    ("capt", {"temperature": 0.05}),
    ("triplet", {}),
]
IDS = [f"{name}-{'-'.join(f'{k}={v}' for k, v in args.items())}" for name, args in CASES]
HALF = [torch.float16, torch.bfloat16]


def leaves(device, dtype: torch.dtype, batch: int = 8, width: int = 16, seed: int = 0) -> list[torch.Tensor]:
    """Two (batch, width) leaves drawn in float64 on the CPU (the same numbers on every device), then cast."""
    generator = torch.Generator().manual_seed(seed)
    drawn = torch.randn(2, batch, width, generator=generator, dtype=torch.float64)
    return [part.to(device=device, dtype=dtype).requires_grad_() for part in drawn]


def loss_and_gradients(objective, device, dtype: torch.dtype) -> tuple[torch.Tensor, list[torch.Tensor]]:
    x, y = leaves(device, dtype)
    loss = call(objective, x, y)
    assert loss.device.type == torch.device(device).type
    loss.backward()
    return loss.detach(), [x.grad, y.grad]


@pytest.mark.parametrize(("name", "args"), CASES, ids=IDS)
def test_cuda_float32_loss_and_gradients_equal_the_cpu_float64_values(cuda_device, name, args):
    objective = make_objective(name, **args)
    loss, gradients = loss_and_gradients(objective.to(cuda_device), cuda_device, torch.float32)
    expected_loss, expected_gradients = loss_and_gradients(objective.cpu(), "cpu", torch.float64)
    assert loss.dtype == torch.float32
    torch.testing.assert_close(loss.cpu().double(), expected_loss, rtol=1e-5, atol=1e-5)
    assert any(float(g.abs().max()) > 1e-3 for g in expected_gradients if g is not None)  # not all ~0
    for gradient, expected in zip(gradients, expected_gradients, strict=True):
        if expected is None:  # an input the loss does not read (none here, but allowed)
            assert gradient is None
            continue
        assert gradient.dtype == torch.float32
        torch.testing.assert_close(gradient.cpu().double(), expected, rtol=1e-4, atol=1e-5)


def low_temperature(name: str, args: dict) -> dict:
    return {**args, "temperature": 0.01} if "temperature" in objective_arguments(name) else args


def autocast_call(objective, x: torch.Tensor, y: torch.Tensor, dtype: torch.dtype, weight: torch.Tensor):
    """The objective on ``x @ weight`` and ``y @ weight`` computed under autocast: half-precision embeddings."""
    with torch.autocast(x.device.type, dtype=dtype):
        anchors, positives = x @ weight, y @ weight
        assert anchors.dtype == dtype
        return call(objective, anchors, positives)


@pytest.mark.parametrize("dtype", HALF, ids=str)
@pytest.mark.parametrize(("name", "args"), CASES, ids=IDS)
def test_cuda_autocast_at_temperature_001_and_for_a_batch_of_one_is_finite(cuda_device, name, args, dtype):
    objective = make_objective(name, **low_temperature(name, args)).to(cuda_device)
    weight = (torch.eye(16) + 0.01 * torch.ones(16, 16)).to(cuda_device).requires_grad_()
    x, y = leaves(cuda_device, torch.float32)
    with torch.no_grad():
        y[:4] = 10 * x[:4]  # perfectly aligned pairs: logits of 1 / 0.01 = 100, past float16's exp range
    loss = autocast_call(objective, x, y, dtype, weight)
    assert loss.dtype == torch.float32
    assert_finite_with_finite_grads(loss, x, y)
    assert weight.grad is not None and torch.isfinite(weight.grad).all()

    one_x, one_y = leaves(cuda_device, torch.float32, batch=1, seed=1)
    loss = autocast_call(objective, one_x, one_y, dtype, weight)
    assert loss.requires_grad, "a batch of one must still give a loss connected to the inputs"
    assert_finite_with_finite_grads(loss, one_x, one_y)


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_cuda_autocast_supcon_without_any_positive_pair_is_zero_with_finite_gradients(cuda_device, dtype):
    objective = make_objective("supcon", temperature=0.01)
    weight = torch.eye(16, device=cuda_device)
    x, _ = leaves(cuda_device, torch.float32, batch=5)
    with torch.autocast(cuda_device.type, dtype=dtype):
        loss = objective(x @ weight, torch.arange(5, device=cuda_device))  # every label distinct: no positive
    assert loss.item() == 0.0 and loss.grad_fn is not None
    loss.backward()
    assert torch.equal(x.grad, torch.zeros_like(x))
    with torch.autocast(cuda_device.type, dtype=dtype):
        loss = objective(x @ weight, LABELS[:5])  # labels on the CPU, embeddings on the device: SupCon moves them
    assert_finite_with_finite_grads(loss, x)
