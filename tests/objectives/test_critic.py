"""WassersteinCritic (1-Lipschitz score, broadcasting) and CriticNCE against RECLAIM's Eq. 6 (naive_objectives)."""

import copy
import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from contrastext.errors import UnknownNameError
from contrastext.objectives.critic import CriticNCE, WassersteinCritic
from tests.objectives.naive_objectives import reclaim_ans

DIM_U, DIM_V = 5, 7


pytestmark = pytest.mark.usefixtures("single_torch_thread")  # tiny tensors: one intra-op thread


def make_critic(seed: int = 0, hidden: int = 16) -> WassersteinCritic:
    torch.manual_seed(seed)
    return WassersteinCritic(DIM_U, DIM_V, hidden=hidden)


def settle(critic: WassersteinCritic, steps: int = 50) -> WassersteinCritic:
    """Run forwards in train mode so every spectral norm's power iteration converges, then freeze."""
    critic.train()
    with torch.no_grad():
        for _ in range(steps):
            critic.score(torch.randn(4, DIM_U), torch.randn(4, DIM_V))
    return critic.eval()


def inflate(critic: WassersteinCritic, factor: float) -> None:
    """Scale every raw (pre-normalisation) weight, to make an unconstrained net far from 1-Lipschitz."""
    with torch.no_grad():
        for module in critic.modules():
            if isinstance(module, torch.nn.Linear):
                module.parametrizations.weight.original.mul_(factor)


def input_gradient_norms(score_fn, u, v):
    u, v = u.clone().requires_grad_(True), v.clone().requires_grad_(True)
    grad_u, grad_v = torch.autograd.grad(score_fn(u, v).sum(), [u, v])
    return torch.sqrt(grad_u.pow(2).sum(1) + grad_v.pow(2).sum(1))


def test_score_is_one_lipschitz():
    critic = make_critic()
    inflate(critic, 5.0)
    settle(critic)
    # Every effective weight has operator norm <= 1 (up to the power-iteration estimate).
    for module in critic.modules():
        if isinstance(module, torch.nn.Linear):
            assert torch.linalg.matrix_norm(module.weight, ord=2) <= 1.0 + 1e-3
    generator = torch.Generator().manual_seed(1)
    u, v = torch.randn(2000, DIM_U, generator=generator), torch.randn(2000, DIM_V, generator=generator)
    u2 = u + torch.randn(2000, DIM_U, generator=generator) * torch.rand(2000, 1, generator=generator)
    v2 = v + torch.randn(2000, DIM_V, generator=generator) * torch.rand(2000, 1, generator=generator)
    with torch.no_grad():
        change = (critic.score(u, v) - critic.score(u2, v2)).abs()
    distance = torch.sqrt((u - u2).pow(2).sum(1) + (v - v2).pow(2).sum(1))
    assert (change / distance).max() <= 1.0 + 1e-3
    assert input_gradient_norms(critic.score, u, v).max() <= 1.0 + 1e-3


def test_lipschitz_test_has_teeth_without_spectral_norm():
    """The same inflated weights used raw (no normalisation) give gradients far above 1."""
    critic = make_critic()
    inflate(critic, 5.0)
    plain = copy.deepcopy(critic)
    for module in plain.modules():
        if isinstance(module, torch.nn.Linear):
            torch.nn.utils.parametrize.remove_parametrizations(module, "weight", leave_parametrized=False)
    u, v = torch.randn(200, DIM_U), torch.randn(200, DIM_V)
    assert input_gradient_norms(plain.score, u, v).max() > 2.0


def test_score_broadcasts_and_matches_pairwise_calls():
    critic = settle(make_critic())
    u, v = torch.randn(3, DIM_U), torch.randn(3, 4, DIM_V)
    many = critic.score(u.unsqueeze(1), v)
    assert many.shape == (3, 4)
    for i in range(3):
        for k in range(4):
            assert torch.allclose(many[i, k], critic.score(u[i], v[i, k]), atol=1e-6)
    all_pairs = critic.score(u.unsqueeze(1), v[:, 0].unsqueeze(0))
    assert all_pairs.shape == (3, 3)
    assert torch.allclose(all_pairs[0, 2], critic.score(u[0], v[2, 0]), atol=1e-6)
    g = critic(u, v[:, 0])
    assert ((g > 0) & (g < 1)).all()
    with pytest.raises(ValueError, match=r"u \(\.\.\., 5\)"):
        critic.score(torch.randn(3, 4), v)
    with pytest.raises(ValueError, match="do not broadcast"):
        critic.score(torch.randn(3, DIM_U), torch.randn(4, DIM_V))


def naive_nce(critic, u, v, negatives_u, negatives_v, reduction="half_sum"):
    """Eq. 6 on scores taken pair by pair: s(u_i, v_i), s(u_i, v′_ik), s(u′_ik, v_i), then naive_objectives."""
    with torch.no_grad():
        positive = torch.stack([critic.score(u[i], v[i]) for i in range(len(u))])
        against_v = torch.stack([torch.stack([critic.score(u[i], n) for n in negatives_v[i]]) for i in range(len(u))])
        against_u = torch.stack([torch.stack([critic.score(n, v[i]) for n in negatives_u[i]]) for i in range(len(u))])
    return reclaim_ans(positive, against_v, against_u, reduction)


class ZeroCritic(nn.Module):
    """s(u, v) ≡ 0, so g ≡ ½ everywhere: the loss is then a number one can write down."""

    def __init__(self, dim_u: int, dim_v: int):
        super().__init__()
        self.dim_u, self.dim_v = dim_u, dim_v
        self.scale = nn.Parameter(torch.zeros(()))

    def score(self, u, v):
        return self.scale * (u[..., 0] + v[..., 0])


def test_nce_at_g_one_half_is_the_hand_computed_value():
    """g ≡ ½: Eq. 6 gives −[log ½ + ½·K·log ½ + ½·K·log ½] = (1 + K)·log 2; the mean form gives 3·log 2."""
    u, v = torch.randn(3, DIM_U), torch.randn(3, DIM_V)
    nu, nv = torch.randn(3, 4, DIM_U), torch.randn(3, 4, DIM_V)
    paper = CriticNCE(ZeroCritic(DIM_U, DIM_V))
    assert paper.negative_reduction == "half_sum"
    assert paper(u, v, negatives_u=nu, negatives_v=nv).item() == pytest.approx(5 * math.log(2), rel=1e-6)
    mean = CriticNCE(ZeroCritic(DIM_U, DIM_V), negative_reduction="mean")
    assert mean(u, v, negatives_u=nu, negatives_v=nv).item() == pytest.approx(3 * math.log(2), rel=1e-6)
    # In-batch: K = B − 1 = 2 negatives per side.
    assert paper(u, v).item() == pytest.approx(3 * math.log(2), rel=1e-6)
    with pytest.raises(UnknownNameError, match="half_sum, mean"):
        CriticNCE(ZeroCritic(DIM_U, DIM_V), negative_reduction="sum")


@pytest.mark.parametrize("reduction", ["half_sum", "mean"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_nce_with_given_negatives_matches_loop(dtype, reduction):
    critic = settle(make_critic()).to(dtype)
    batch, k = 4, 3
    u, v = torch.randn(batch, DIM_U, dtype=dtype), torch.randn(batch, DIM_V, dtype=dtype)
    nu, nv = torch.randn(batch, k, DIM_U, dtype=dtype), torch.randn(batch, k, DIM_V, dtype=dtype)
    loss = CriticNCE(critic, negative_reduction=reduction)(u, v, negatives_u=nu, negatives_v=nv)
    tolerance = 1e-5 if dtype == torch.float32 else 1e-10
    assert loss.dtype == dtype
    assert loss.item() == pytest.approx(naive_nce(critic, u, v, nu, nv, reduction), abs=tolerance)


def test_nce_in_batch_matches_loop():
    critic = settle(make_critic()).double()
    batch = 5
    u, v = torch.randn(batch, DIM_U, dtype=torch.float64), torch.randn(batch, DIM_V, dtype=torch.float64)
    others = [[j for j in range(batch) if j != i] for i in range(batch)]
    nu = torch.stack([u[row] for row in others])
    nv = torch.stack([v[row] for row in others])
    expected = naive_nce(critic, u, v, nu, nv)
    nce = CriticNCE(critic)
    assert nce(u, v).item() == pytest.approx(expected, abs=1e-10)
    # One side given, the other in-batch.
    assert nce(u, v, negatives_u=nu).item() == pytest.approx(expected, abs=1e-10)
    assert nce(u, v, negatives_v=nv).item() == pytest.approx(expected, abs=1e-10)


def test_shared_negatives_equal_expanded_ones():
    critic = settle(make_critic())
    u, v = torch.randn(4, DIM_U), torch.randn(4, DIM_V)
    nu, nv = torch.randn(6, DIM_U), torch.randn(6, DIM_V)
    nce = CriticNCE(critic)
    shared = nce(u, v, negatives_u=nu, negatives_v=nv)
    expanded = nce(u, v, negatives_u=nu.expand(4, -1, -1), negatives_v=nv.expand(4, -1, -1))
    assert torch.allclose(shared, expanded, atol=1e-6)


def test_nce_is_exact_for_extreme_scores_and_half_inputs():
    """Scores in the thousands (g within 1e-300 of 0 or 1): the loss still equals Eq. 6 in double precision."""
    critic = settle(make_critic())
    inflate(critic, 1e4)  # spectral norm removes the scale of the weights, not of the inputs
    settle(critic)
    u, v = 1e4 * torch.randn(4, DIM_U), 1e4 * torch.randn(4, DIM_V)
    others = [[j for j in range(4) if j != i] for i in range(4)]
    nu, nv = torch.stack([u[row] for row in others]), torch.stack([v[row] for row in others])
    expected = naive_nce(critic, u, v, nu, nv)
    assert expected > 100  # far outside the range where a naive log(1 − g) would be finite in float32
    assert CriticNCE(critic)(u, v).item() == pytest.approx(expected, rel=1e-4)
    u16, v16 = u.to(torch.bfloat16), v.to(torch.bfloat16)
    half = CriticNCE(critic)(u16, v16)
    assert half.dtype == torch.float32
    assert half.item() == pytest.approx(CriticNCE(critic)(u16.float(), v16.float()).item(), rel=1e-6)
    assert F.logsigmoid(torch.tensor(-1e4)).isfinite()


def test_gradients_match_finite_differences_and_reach_the_critic():
    critic = settle(make_critic()).double()
    nce = CriticNCE(critic)
    u = torch.randn(4, DIM_U, dtype=torch.float64, requires_grad=True)
    v = torch.randn(4, DIM_V, dtype=torch.float64, requires_grad=True)
    nv = torch.randn(4, 3, DIM_V, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a, b, c: nce(a, b, negatives_v=c), (u, v, nv))
    critic.train()
    nce(u, v).backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in critic.parameters())


def test_bad_shapes_are_clear_errors():
    nce = CriticNCE(make_critic())
    with pytest.raises(ValueError, match="same B"):
        nce(torch.randn(4, DIM_U), torch.randn(3, DIM_V))
    with pytest.raises(ValueError, match="at least 2"):
        nce(torch.randn(1, DIM_U), torch.randn(1, DIM_V))
    with pytest.raises(ValueError, match=r"\(B=4, K, d\)"):
        nce(torch.randn(4, DIM_U), torch.randn(4, DIM_V), negatives_v=torch.randn(3, 2, DIM_V))


# ------------------------------------------------- the factorised first layer and deduplicated negative rows


def pairwise_score(critic, u, v):
    """s(u, v) = W5 σ(W4 σ(W3 [p_u(u); p_v(v)])) with the concatenation written out (rows already paired)."""
    return critic.head(torch.cat([critic.project_u(u), critic.project_v(v)], dim=-1)).squeeze(-1)


def test_factorised_score_equals_the_concatenation_through_the_head():
    critic = settle(make_critic())
    u, v = torch.randn(3, DIM_U), torch.randn(3, 4, DIM_V)
    expected = pairwise_score(critic, u.unsqueeze(1).expand(3, 4, DIM_U), v)
    torch.testing.assert_close(critic.score(u.unsqueeze(1), v), expected, atol=1e-6, rtol=0)
    weight_u, weight_v, _ = critic.first_layer_halves()
    assert torch.equal(torch.cat([weight_u, weight_v], dim=1), critic.head[0].weight)


@pytest.mark.parametrize("fixed_is_u", [True, False])
def test_score_indexed_equals_score_on_the_gathered_rows(fixed_is_u):
    critic = settle(make_critic())
    fixed = torch.randn(4, DIM_U if fixed_is_u else DIM_V)
    rows = torch.randn(6, DIM_V if fixed_is_u else DIM_U)
    index = torch.tensor([[0, 1, 2], [2, 3, 0], [5, 5, 1], [4, 0, 3]])
    gathered = rows[index]
    pairs = (fixed.unsqueeze(1), gathered) if fixed_is_u else (gathered, fixed.unsqueeze(1))
    expected = critic.score(*pairs)
    torch.testing.assert_close(critic.score_indexed(fixed, rows, index, fixed_is_u), expected, atol=1e-6, rtol=0)


@pytest.mark.parametrize("reduction", ["half_sum", "mean"])
def test_nce_with_indexed_distinct_rows_equals_gathered_negatives(reduction):
    """negatives (M, d) + negative_index (B, K) give the loss and gradients of the gathered (B, K, d) rows; a
    critic without ``score_indexed`` (ZeroCritic) is given the gathered rows."""
    critic = settle(make_critic()).double()
    u = torch.randn(4, DIM_U, dtype=torch.float64, requires_grad=True)
    v = torch.randn(4, DIM_V, dtype=torch.float64, requires_grad=True)
    rows_u, rows_v = torch.randn(5, DIM_U, dtype=torch.float64), torch.randn(7, DIM_V, dtype=torch.float64)
    index_u = torch.tensor([[0, 1, 4], [4, 3, 0], [2, 2, 1], [0, 1, 3]])
    index_v = torch.tensor([[6, 1, 2], [0, 5, 3], [2, 4, 1], [3, 6, 0]])
    nce = CriticNCE(critic, negative_reduction=reduction)
    indexed = nce(u, v, negatives_u=rows_u, negatives_v=rows_v, negative_index_u=index_u, negative_index_v=index_v)
    grads = torch.autograd.grad(indexed, [u, v, *critic.parameters()])
    gathered = nce(u, v, negatives_u=rows_u[index_u], negatives_v=rows_v[index_v])
    expected = torch.autograd.grad(gathered, [u, v, *critic.parameters()])
    assert indexed.item() == pytest.approx(gathered.item(), abs=1e-12)
    for ours, theirs in zip(grads, expected, strict=True):
        torch.testing.assert_close(ours, theirs, atol=1e-12, rtol=0)
    zero = CriticNCE(ZeroCritic(DIM_U, DIM_V))
    loss = zero(u, v, negatives_u=rows_u, negatives_v=rows_v, negative_index_u=index_u, negative_index_v=index_v)
    assert loss.item() == pytest.approx(4 * math.log(2), rel=1e-6)  # g ≡ ½, half_sum: (1 + K)·log 2, K = 3


def test_bad_negative_indices_are_clear_errors():
    nce = CriticNCE(make_critic())
    u, v, rows = torch.randn(4, DIM_U), torch.randn(4, DIM_V), torch.randn(5, DIM_V)
    with pytest.raises(ValueError, match=r"`negative_index_v` values must address the 5 rows .* \[0, 5\]"):
        nce(u, v, negatives_v=rows, negative_index_v=torch.tensor([[0, 5]] * 4))
    with pytest.raises(ValueError, match=r"`negative_index_v` must be a \(B=4, K\) integer tensor"):
        nce(u, v, negatives_v=rows, negative_index_v=torch.tensor([[0, 1]] * 3))
    with pytest.raises(ValueError, match=r"give `negatives_u` as \(M, d\)"):
        nce(u, v, negative_index_u=torch.zeros(4, 2, dtype=torch.long))
