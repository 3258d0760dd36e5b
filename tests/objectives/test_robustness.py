"""Edge cases: low temperature, half precision, batch of one, no positive pair, duplicate rows, bad input."""

from __future__ import annotations

import pytest
import torch

from contrastext.objectives import (
    CAPT,
    DCL,
    Alignment,
    AlignUniform,
    CEPlusSupCon,
    HingedDCL,
    InfoNCE,
    MarginAngle,
    MarginEuclidean,
    MarginProduct,
    SupCon,
    TripletMargin,
    Uniformity,
)

LABELS = torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])


def pair_objectives(temperature: float = 0.05) -> list[torch.nn.Module]:
    return [
        InfoNCE(temperature=temperature),
        InfoNCE(temperature=temperature, symmetric=True, mask_duplicate_positives=True),
        CAPT(temperature=temperature),
        Alignment(),
        AlignUniform(),
        DCL(temperature=temperature),
        HingedDCL(temperature=temperature),
        MarginEuclidean(),
        MarginAngle(),
        MarginProduct(),
    ]


def call(objective: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    if isinstance(objective, SupCon):
        return objective(x, LABELS[: x.shape[0]])
    if isinstance(objective, TripletMargin):
        return objective(x, y, y.flip(0))
    return objective(x, y)


def all_objectives(temperature: float = 0.05) -> list[torch.nn.Module]:
    return [*pair_objectives(temperature), SupCon(temperature=temperature), TripletMargin()]


def inputs(batch: int = 8, width: int = 16, dtype: torch.dtype = torch.float32, seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, width, generator=generator).to(dtype).requires_grad_()
    y = torch.randn(batch, width, generator=generator).to(dtype).requires_grad_()
    return x, y


def assert_finite_with_finite_grads(loss: torch.Tensor, *leaves: torch.Tensor) -> None:
    """Finite loss; after backward, every leaf that received a gradient has a finite one (x always does)."""
    assert loss.dim() == 0 and torch.isfinite(loss), loss
    loss.backward()
    assert leaves[0].grad is not None
    for leaf in leaves:
        assert leaf.grad is None or torch.isfinite(leaf.grad).all()


@pytest.mark.parametrize("objective", all_objectives(temperature=0.01), ids=repr)
def test_finite_at_temperature_001(objective):
    x, y = inputs()
    with torch.no_grad():
        y[:4] = 10 * x[:4]  # perfectly aligned pairs: logits of 100
    x, y = x.detach().requires_grad_(), y.detach().requires_grad_()
    assert_finite_with_finite_grads(call(objective, x, y), x, y)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("objective", all_objectives(temperature=0.01), ids=repr)
def test_half_precision_inputs_are_upcast(objective, dtype):
    x, y = inputs(dtype=dtype)
    loss = call(objective, x, y)
    assert loss.dtype == torch.float32
    assert_finite_with_finite_grads(loss, x, y)
    assert x.grad.dtype == dtype
    reference = call(objective, x.detach().float(), y.detach().float())
    torch.testing.assert_close(loss.detach(), reference, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("objective", all_objectives(), ids=repr)
def test_batch_of_one(objective):
    """InfoNCE/CAPT: the positive is the only candidate -> 0. DCL, margins, uniformity, SupCon: no negative
    or no pair -> 0 connected to the graph. Alignment and TripletMargin are defined on one row."""
    x, y = inputs(batch=1)
    loss = call(objective, x, y)
    assert loss.requires_grad, "a batch of one must still give a loss connected to the inputs"
    assert_finite_with_finite_grads(loss, x, y)
    if not isinstance(objective, Alignment | AlignUniform | TripletMargin):
        assert loss.item() == pytest.approx(0.0, abs=1e-6)


def test_uniformity_batch_of_one_is_zero_with_grad():
    x, _ = inputs(batch=1)
    loss = Uniformity()(x)
    assert loss.item() == 0.0 and loss.grad_fn is not None


def test_infonce_with_extra_negatives_and_batch_of_one():
    x, y = inputs(batch=1)
    negatives = torch.randn(3, 16)
    loss = InfoNCE()(x, y, negatives)
    assert loss.item() > 0
    assert_finite_with_finite_grads(loss, x, y)


def test_supcon_without_any_positive_pair_is_zero_with_grad():
    x, _ = inputs(batch=5)
    loss = SupCon()(x, torch.arange(5))
    assert loss.item() == 0.0 and loss.grad_fn is not None
    loss.backward()
    assert torch.equal(x.grad, torch.zeros_like(x))


def test_supcon_anchor_without_positive_is_excluded_from_the_mean():
    """Giving the singleton anchor's (undefined) term weight 0 would lower the mean: it must not count."""
    x, _ = inputs(batch=5)
    labels = torch.tensor([0, 0, 1, 1, 2])
    loss = SupCon()(x, labels)
    per_anchor = []
    for i in range(4):  # anchors 0..3 have exactly one positive each
        z = torch.nn.functional.normalize(x.detach(), dim=1)
        logits = z @ z.T / 0.1
        partner = i ^ 1
        others = [a for a in range(5) if a != i]
        per_anchor.append(-(logits[i, partner] - torch.logsumexp(logits[i, others], dim=0)))
    assert loss.item() == pytest.approx(torch.stack(per_anchor).mean().item(), rel=1e-5)


@pytest.mark.parametrize("objective", all_objectives(), ids=repr)
def test_duplicate_rows_keep_gradients_finite(objective):
    x, y = inputs()
    with torch.no_grad():
        x[1] = x[0]
        y[0] = x[0]  # a pair at zero distance, and repeated rows
        y[2] = y[3]
    x, y = x.detach().requires_grad_(), y.detach().requires_grad_()
    assert_finite_with_finite_grads(call(objective, x, y), x, y)


def test_margin_losses_finite_at_opposite_rows():
    x, _ = inputs(batch=4)
    y = (-x).detach().requires_grad_()
    for objective in (MarginAngle(), MarginEuclidean(), MarginProduct()):
        x.grad = None
        assert_finite_with_finite_grads(objective(x, y), x, y)


def test_infonce_masks_equal_hard_negative():
    x, y = inputs(batch=4)
    negatives = torch.randn(4, 16)
    negatives[2] = y[1].detach()  # a "hard negative" that is anchor 1's positive
    masked = InfoNCE(temperature=0.5, mask_duplicate_positives=True)(x, y, negatives)
    kept = InfoNCE(temperature=0.5)(x, y, negatives)
    reference = InfoNCE(temperature=0.5)(x, y, torch.cat([negatives[:2], negatives[3:]]))
    assert masked.item() < kept.item()
    # Row 1 no longer sees the duplicate; the other rows still do, so masked != reference in general.
    assert masked.item() != pytest.approx(reference.item())


# --- bad input ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call_bad", "fragment"),
    [
        (lambda: InfoNCE()(torch.randn(4, 8), torch.randn(4, 7)), "(4, 8)"),
        (lambda: InfoNCE()(torch.randn(4, 8), torch.randn(3, 8)), "(4, 8)"),
        (lambda: InfoNCE()(torch.randn(4, 8), torch.randn(4, 8), torch.randn(5, 7)), "(N, 8)"),
        (lambda: InfoNCE()(torch.randn(8), torch.randn(8)), "(B, d)"),
        (lambda: InfoNCE()(torch.randint(0, 3, (4, 8)), torch.randn(4, 8)), "floating-point"),
        (lambda: InfoNCE(hard_negative_weight=1.0)(torch.randn(4, 8), torch.randn(4, 8), torch.randn(5, 8)), "(m*B, d)"),
        (lambda: InfoNCE()(torch.randn(4, 8), torch.randn(4, 8), positive_ids=torch.arange(3)), "(4,)"),
        (lambda: SupCon()(torch.randn(4, 8), torch.tensor([0, 1, 0])), "(4,)"),
        (lambda: SupCon()(torch.randn(4, 8), torch.tensor([0.0, 1.0, 0.0, 1.0])), "integer"),
        (lambda: SupCon()(torch.randn(4, 8, 2), torch.arange(4)), "(B, d)"),
        (lambda: CEPlusSupCon()(torch.randn(3, 2), torch.randn(4, 8), torch.arange(4) % 2), "(4, d)"),
        (lambda: CEPlusSupCon()(torch.randn(4, 2), torch.randn(4, 8), torch.tensor([0, 1, 2, 0])), "[0, 2)"),
        (lambda: CAPT()(torch.randn(4, 8), torch.randn(4, 8), torch.randn(6, 5)), "(N, 8)"),
        (lambda: CAPT()(torch.randn(4, 8), torch.randn(5, 8)), "(4, 8)"),
        (lambda: Uniformity()(torch.randn(0, 8)), "at least 1"),
        (lambda: DCL()(torch.randn(4, 8), torch.randn(4, 9)), "(4, 8)"),
        (lambda: MarginAngle()(torch.randn(4, 8), "y"), "got str"),
        (lambda: TripletMargin()(torch.randn(4, 8), torch.randn(4, 8), torch.randn(4, 6)), "(4, 8)"),
    ],
)
def test_bad_inputs_name_the_expected_shape(call_bad, fragment):
    with pytest.raises(ValueError) as error:
        call_bad()
    assert fragment in str(error.value)


@pytest.mark.parametrize(
    "build",
    [
        lambda: InfoNCE(temperature=0.0),
        lambda: InfoNCE(temperature=-1.0),
        lambda: InfoNCE(similarity="euclid"),
        lambda: SupCon(temperature=torch.tensor([0.1, 0.2])),
        lambda: CEPlusSupCon(lam=1.5),
        lambda: MarginEuclidean(margin=-0.1),
        lambda: TripletMargin(distance="manhattan"),
        lambda: AlignUniform(t=0.0),
    ],
)
def test_bad_hyper_parameters(build):
    with pytest.raises(ValueError):
        build()


@pytest.mark.parametrize("objective", all_objectives(temperature=0.01), ids=repr)
def test_autocast_does_not_lower_the_loss_precision(objective):
    x, y = inputs()
    reference = call(objective, x, y)
    with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
        loss = call(objective, x, y)
    assert loss.dtype == torch.float32
    torch.testing.assert_close(loss, reference)
