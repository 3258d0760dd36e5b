"""ANS: top-K bank negatives (own row excluded), random-subset and in-batch modes, momentum updates.

Expected losses are RECLAIM's Eq. 6 written out in ``naive_objectives.reclaim_ans`` on critic scores taken
pair by pair, never the module's own CriticNCE.
"""

import copy
import math

import pytest
import torch
import torch.nn.functional as F

from contrastext.errors import UnknownNameError
from contrastext.objectives.ans import ANS
from contrastext.objectives.critic import WassersteinCritic
from tests.objectives.naive_objectives import reclaim_ans

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


def eq6(critic, u, v, negatives_u, negatives_v, reduction="half_sum"):
    """−L_ANS of Eq. 6 with negatives (B, K, d) per row, from scores s(u_i, v_i), s(u_i, v′_ik), s(u′_ik, v_i)."""
    with torch.no_grad():
        positive = torch.stack([critic.score(u[i], v[i]) for i in range(len(u))])
        against_v = torch.stack([torch.stack([critic.score(u[i], n) for n in negatives_v[i]]) for i in range(len(u))])
        against_u = torch.stack([torch.stack([critic.score(n, v[i]) for n in negatives_u[i]]) for i in range(len(u))])
    return reclaim_ans(positive, against_v, against_u, reduction)


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
    expected = eq6(ans.critic, u, v, ans.bank_u.bank[near_u], ans.bank_v.bank[near_v])
    assert ans(u, v, indices).item() == pytest.approx(expected, abs=1e-5)


def test_mean_reduction_option_weighs_each_side_by_one_over_k():
    ans = make_ans(k=5, negative_reduction="mean")
    u, v, indices = batch()
    near_u, near_v = ans.nearest_negatives(u, v, indices)
    expected = eq6(ans.critic, u, v, ans.bank_u.bank[near_u], ans.bank_v.bank[near_v], reduction="mean")
    assert ans(u, v, indices).item() == pytest.approx(expected, abs=1e-5)
    assert make_ans().nce.negative_reduction == "half_sum"


def test_banks_start_as_standard_gaussian_noise_unless_unit_is_asked():
    ans = ANS(WassersteinCritic(DIM_U, DIM_V), bank_size=2000, dim_u=DIM_U, dim_v=DIM_V, k=5)
    for bank in (ans.bank_u.bank, ans.bank_v.bank):
        assert abs(bank.var().item() - 1.0) < 0.05  # N(0, I), RECLAIM §3.4
    unit = ANS(WassersteinCritic(DIM_U, DIM_V), bank_size=50, dim_u=DIM_U, dim_v=DIM_V, k=5, bank_init="unit")
    assert torch.allclose(unit.bank_v.bank.norm(dim=1), torch.ones(50), atol=1e-6)


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
    shared_u, shared_v = ans.bank_u.bank[rows].expand(4, -1, -1), ans.bank_v.bank[rows].expand(4, -1, -1)
    assert loss.item() == pytest.approx(eq6(ans.critic, u, v, shared_u, shared_v), abs=1e-5)
    # The default 80% of 40 rows would need 32 negatives but only 36 are outside the batch: fine.
    assert make_ans(mode="random").random_negatives(indices).numel() == 32


def test_in_batch_mode_contrasts_each_pair_with_the_other_rows():
    ans = make_ans(mode="in_batch")
    u, v, indices = batch()
    others = [[j for j in range(4) if j != i] for i in range(4)]
    expected = eq6(ans.critic, u, v, torch.stack([u[row] for row in others]), torch.stack([v[row] for row in others]))
    assert ans(u, v, indices).item() == pytest.approx(expected, abs=1e-5)


def test_update_moves_bank_rows_by_momentum():
    ans = make_ans(momentum=0.3)  # ρ ≠ 0.5: Eq. 7 is ũ ← (1 − ρ)·u + ρ·ũ, the fresh feature weighs 0.7
    u, v, indices = batch()
    before_u, before_v = ans.bank_u.bank.clone(), ans.bank_v.bank.clone()
    ans.update(indices, u.requires_grad_(True), v)
    assert torch.allclose(ans.bank_u.bank[indices], 0.7 * u.detach() + 0.3 * before_u[indices])
    assert torch.allclose(ans.bank_v.bank[indices], 0.7 * v + 0.3 * before_v[indices])
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


# ------------------------------------------------------------- ANS with a search kept across steps (search="ivf")


def test_each_bank_gets_its_own_search():
    ans = make_ans(search="ivf", search_options={"nprobe": 3})
    assert ans.search_u is not ans.search_v and ans.search_u.options == ans.search_v.options
    assert ans.search_u.nprobe == 3 and ans.search is ans.search_u
    from contrastext.negatives.search import IVFSearch

    given = IVFSearch(nprobe=2)
    ans = make_ans(search=given)
    assert ans.search_u is given and ans.search_v is not given and ans.search_v.nprobe == 2
    exact = make_ans(search="exact")
    assert exact.search_u is exact.search_v  # stateless: one object serves both banks
    with pytest.raises(ValueError, match="search_options"):
        make_ans(search=given, search_options={"nprobe": 1})


def same_neighbours(found, queries, bank, exclude, atol=1e-5) -> bool:
    """``found`` (B, K) are the brute-force top-K up to ties: their cosines equal the best K, position by
    position (two sums in another order may swap rows whose cosines differ by ~1e-7)."""
    scores = F.normalize(queries, dim=1) @ F.normalize(bank, dim=1).T
    scores[torch.arange(len(queries)), exclude] = float("-inf")
    best = scores.topk(found.size(1), dim=1).values
    return torch.allclose(scores.gather(1, found), best, atol=atol)


def test_kept_index_follows_the_momentum_updates_exactly():
    """A training-like loop (search, then update the batch's rows) with an exhaustive kept index (nprobe =
    nlist) chooses the brute-force neighbours at every step and gives the exact search's loss; each step
    re-indexes only the rows the previous update wrote."""
    bank_size = 600
    kept = ANS(
        WassersteinCritic(DIM_U, DIM_V, hidden=16), bank_size, DIM_U, DIM_V, k=20, momentum=0.3,
        search="ivf", search_options={"nlist": 8, "nprobe": 8, "storage": "float32", "exact_below": 0},
    ).eval()
    plain = ANS(WassersteinCritic(DIM_U, DIM_V, hidden=16), bank_size, DIM_U, DIM_V, k=20, momentum=0.3).eval()
    plain.load_state_dict(kept.state_dict())
    generator = torch.Generator().manual_seed(3)
    for _ in range(5):
        indices = torch.randperm(bank_size, generator=generator)[:16]
        u, v = torch.randn(16, DIM_U, generator=generator), torch.randn(16, DIM_V, generator=generator)
        near_u, near_v = kept.nearest_negatives(u, v, indices)
        assert same_neighbours(near_u, u, kept.bank_u.bank, indices)
        assert same_neighbours(near_v, v, kept.bank_v.bank, indices)
        assert kept(u, v, indices).item() == pytest.approx(plain(u, v, indices).item(), abs=1e-5)
        kept.update(indices, u, v)
        plain.update(indices, u, v)
    for search in (kept.search_u, kept.search_v):
        assert search.builds == 1
        # the first forward of each step searched after the previous update: 4 updates of 16 rows each
        assert search.updated_rows == 4 * 16


def test_kept_index_sees_rows_written_outside_update():
    ans = make_ans(k=5, search="ivf", search_options={"nlist": 4, "nprobe": 4, "exact_below": 0})
    u, v, indices = batch()
    ans.nearest_negatives(u, v, indices)
    # Plant a perfect match for row 0 directly in the buffers (not through update): the index must see it.
    ans.bank_u.bank[7] = u[0]
    ans.bank_v.bank[7] = v[0]
    near_u, near_v = ans.nearest_negatives(u, v, indices)
    assert near_u[0, 0] == 7 and near_v[0, 0] == 7
    assert torch.equal(near_u, brute_force_neighbours(u, ans.bank_u.bank, 5, indices))


# ------------------------------------- the factorised critic on deduplicated bank rows equals the pairwise form


def reference_score(critic, u, v):
    """s(u, v) = W5 σ(W4 σ(W3 [p_u(u); p_v(v)])) on rows already paired (the same leading shape): every pair's
    projections concatenated and sent through the whole head, the critic's computation before it was
    factorised (one access of each layer's spectral-normalised weight per call, as there)."""
    return critic.head(torch.cat([critic.project_u(u), critic.project_v(v)], dim=-1)).squeeze(-1)


def reference_loss(critic, u, v, negatives_u, negatives_v, reduction="half_sum"):
    """−Eq. 6 with the negatives gathered per pair, (B, K, d): s(u_i, v_i), s(u_i, ṽ_ik), s(ũ_ik, v_i)."""
    batch, k = negatives_v.shape[:2]
    positive = reference_score(critic, u, v)
    against_v = reference_score(critic, u.unsqueeze(1).expand(batch, k, -1), negatives_v)
    against_u = reference_score(critic, negatives_u, v.unsqueeze(1).expand(batch, k, -1))

    def reduce(terms):
        return 0.5 * terms.sum(1) if reduction == "half_sum" else terms.mean(1)

    return -(F.logsigmoid(positive) + reduce(F.logsigmoid(-against_v)) + reduce(F.logsigmoid(-against_u))).mean()


@pytest.mark.parametrize("reduction", ["half_sum", "mean"])
@pytest.mark.parametrize("training", [False, True])
def test_loss_and_gradients_equal_the_pairwise_critic_on_the_same_negatives(training, reduction):
    """Overlapping top-K sets (6 queries × K = 12 of 40 rows): the loss and the gradients with respect to every
    critic parameter and to u and v equal the pairwise form's within 1e-5, in eval mode and in training mode
    (where each spectral norm takes the same power-iteration steps in both)."""
    ans = make_ans(k=12, negative_reduction=reduction)
    generator = torch.Generator().manual_seed(4)
    ans.bank_u.bank.copy_(torch.randn(BANK, DIM_U, generator=generator))
    ans.bank_v.bank.copy_(torch.randn(BANK, DIM_V, generator=generator))
    indices = torch.tensor([0, 5, 11, 19, 26, 33])
    u, v = torch.randn(6, DIM_U, generator=generator), torch.randn(6, DIM_V, generator=generator)
    near_u, near_v = ans.nearest_negatives(u, v, indices)
    assert torch.unique(near_v).numel() < near_v.numel()  # the sets overlap: deduplication has work to do
    reference_critic = copy.deepcopy(ans.critic)
    ans.train(training), reference_critic.train(training)

    u_ours, v_ours = u.clone().requires_grad_(True), v.clone().requires_grad_(True)
    ours = ans(u_ours, v_ours, indices)
    ours.backward()
    u_ref, v_ref = u.clone().requires_grad_(True), v.clone().requires_grad_(True)
    expected = reference_loss(reference_critic, u_ref, v_ref, ans.bank_u.bank[near_u], ans.bank_v.bank[near_v], reduction)
    expected.backward()

    assert ours.item() == pytest.approx(expected.item(), abs=1e-5)
    torch.testing.assert_close(u_ours.grad, u_ref.grad, atol=1e-5, rtol=0)
    torch.testing.assert_close(v_ours.grad, v_ref.grad, atol=1e-5, rtol=0)
    reference_parameters = dict(reference_critic.named_parameters())
    for name, parameter in ans.critic.named_parameters():
        assert parameter.grad is not None, name
        torch.testing.assert_close(parameter.grad, reference_parameters[name].grad, atol=1e-5, rtol=0, msg=name)
    if training:  # the same power-iteration steps: the spectral norms' estimates moved alike
        for name, buffer in reference_critic.named_buffers():
            torch.testing.assert_close(dict(ans.critic.named_buffers())[name], buffer, atol=1e-6, rtol=0, msg=name)
