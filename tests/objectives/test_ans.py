"""ANS: top-K bank negatives (own row excluded), random-subset and in-batch modes, momentum updates."""

import math

import pytest
import torch
import torch.nn.functional as F

from contrastext.errors import UnknownNameError
from contrastext.objectives.ans import ANS
from contrastext.objectives.critic import CriticNCE, WassersteinCritic

DIM_U, DIM_V, BANK = 6, 5, 40


pytestmark = pytest.mark.usefixtures("single_torch_thread")  # tiny tensors: one intra-op thread


def make_ans(**kwargs) -> ANS:
    kwargs.setdefault("k", 5)
    torch.manual_seed(0)
    ans = ANS(WassersteinCritic(DIM_U, DIM_V, hidden=16), bank_size=BANK, dim_u=DIM_U, dim_v=DIM_V, **kwargs)
    return ans.eval()  # frozen spectral-norm estimates, so repeated critic calls agree


def batch(seed: int = 1):
    generator = torch.Generator().manual_seed(seed)
    indices = torch.tensor([3, 17, 25, 39])
    return torch.randn(4, DIM_U, generator=generator), torch.randn(4, DIM_V, generator=generator), indices


def brute_force_neighbours(queries, bank, k, exclude):
    scores = F.normalize(queries, dim=1) @ F.normalize(bank, dim=1).T
    scores[torch.arange(len(queries)), exclude] = float("-inf")
    return scores.topk(k, dim=1).indices


@pytest.mark.parametrize("search", ["exact", "faiss"])
def test_topk_mode_uses_nearest_bank_rows(search):
    ans = make_ans(k=5, search=search)
    u, v, indices = batch()
    # Put each example's own (perfect) match in the bank: it must be excluded, not chosen.
    ans.bank_u.bank[indices] = u
    ans.bank_v.bank[indices] = v
    near_u, near_v = ans.nearest_negatives(u, v, indices)
    assert torch.equal(near_u, brute_force_neighbours(u, ans.bank_u.bank, 5, indices))
    assert torch.equal(near_v, brute_force_neighbours(v, ans.bank_v.bank, 5, indices))
    assert not (near_u == indices.unsqueeze(1)).any() and not (near_v == indices.unsqueeze(1)).any()
    expected = CriticNCE(ans.critic)(
        u, v, negatives_u=ans.bank_u.bank[near_u], negatives_v=ans.bank_v.bank[near_v]
    )
    assert torch.allclose(ans(u, v, indices), expected, atol=1e-6)


def test_random_mode_uses_a_fraction_of_the_bank_outside_the_batch():
    ans = make_ans(mode="random", random_fraction=0.5)
    u, v, indices = batch()
    torch.manual_seed(7)
    rows = ans.random_negatives(indices)
    assert rows.numel() == math.ceil(0.5 * BANK)
    assert len(set(rows.tolist())) == rows.numel()
    assert not set(rows.tolist()) & set(indices.tolist())
    torch.manual_seed(7)
    loss = ans(u, v, indices)
    expected = CriticNCE(ans.critic)(u, v, negatives_u=ans.bank_u.bank[rows], negatives_v=ans.bank_v.bank[rows])
    assert torch.allclose(loss, expected, atol=1e-6)
    # The default 80% of 40 rows would need 32 negatives but only 36 are outside the batch: fine.
    assert make_ans(mode="random").random_negatives(indices).numel() == 32


def test_in_batch_mode_is_plain_critic_nce():
    ans = make_ans(mode="in_batch")
    u, v, indices = batch()
    assert torch.allclose(ans(u, v, indices), CriticNCE(ans.critic)(u, v))


def test_update_moves_bank_rows_by_momentum():
    ans = make_ans(momentum=0.5)
    u, v, indices = batch()
    before_u, before_v = ans.bank_u.bank.clone(), ans.bank_v.bank.clone()
    ans.update(indices, u.requires_grad_(True), v)
    assert torch.allclose(ans.bank_u.bank[indices], 0.5 * u.detach() + 0.5 * before_u[indices])
    assert torch.allclose(ans.bank_v.bank[indices], 0.5 * v + 0.5 * before_v[indices])
    others = torch.tensor([0, 1, 2, 4])
    assert torch.equal(ans.bank_u.bank[others], before_u[others])


def test_state_dict_holds_banks_and_critic():
    state = make_ans().state_dict()
    assert "bank_u.bank" in state and "bank_v.bank" in state
    assert any(key.startswith("nce.critic.") for key in state)


def test_gradients_flow_to_features_and_critic_not_banks():
    ans = make_ans(k=3).train()
    u, v, indices = batch()
    u.requires_grad_(True)
    v.requires_grad_(True)
    ans(u, v, indices).backward()
    assert u.grad.abs().sum() > 0 and v.grad.abs().sum() > 0
    assert all(p.grad is not None for p in ans.critic.parameters())
    assert not ans.bank_u.bank.requires_grad


def test_training_separates_true_pairs_from_neighbours():
    """A few Adam steps on features where v is a fixed function of u: the loss falls clearly.

    Features are scaled up (×4) because a 1-Lipschitz critic can only separate points that are apart.
    """
    torch.manual_seed(0)
    features_u = 4 * torch.randn(BANK, DIM_U)
    features_v = 4 * torch.tanh(features_u @ torch.randn(DIM_U, DIM_V) / 4)
    ans = ANS(WassersteinCritic(DIM_U, DIM_V, hidden=32), BANK, DIM_U, DIM_V, k=8)
    ans.bank_u.update(torch.arange(BANK), features_u)
    ans.bank_v.update(torch.arange(BANK), features_v)
    optimiser = torch.optim.Adam(ans.critic.parameters(), lr=1e-2)
    losses = []
    for _ in range(40):
        indices = torch.randperm(BANK)[:8]
        loss = ans(features_u[indices], features_v[indices], indices)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        ans.update(indices, features_u[indices], features_v[indices])
        losses.append(loss.item())
    assert sum(losses[-5:]) / 5 < sum(losses[:5]) / 5 - 0.1


def test_configuration_errors():
    critic = WassersteinCritic(DIM_U, DIM_V)
    with pytest.raises(ValueError, match="k=40.*between 1 and 39"):
        ANS(critic, BANK, DIM_U, DIM_V, k=40)
    with pytest.raises(UnknownNameError, match="topk, random, in_batch"):
        ANS(critic, BANK, DIM_U, DIM_V, mode="hardest")
    ans = make_ans(k=3)
    u, v, indices = batch()
    with pytest.raises(ValueError, match=r"indices \(B,\)"):
        ans(u, v, indices[:2])
