"""ReclaimMethod: at λ = 0 a step is plain fine-tuning's and no ANS work runs (issue 24, item 1)."""

from __future__ import annotations

from contextlib import ExitStack
from unittest import mock

import pytest
import torch

from contrastext.data.examples import IndexedExample
from contrastext.data.tasks import get_task
from contrastext.methods.classification import FineTuneMethod
from contrastext.methods.reclaim import ReclaimMethod
from contrastext.models.encoder import TextEncoder
from contrastext.training.method import total_loss

pytestmark = pytest.mark.usefixtures("single_torch_thread")

TEXTS = [
    ("a warm and funny film", 1),
    ("dull from start to end", 0),
    ("the cast is wonderful", 1),
    ("i want my two hours back", 0),
    ("a quiet gem", 1),
    ("clumsy and loud", 0),
]


def examples() -> list[IndexedExample]:
    return [IndexedExample((text,), label, f"t.csv:{i}", index=i) for i, (text, label) in enumerate(TEXTS)]


def gradients(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {name: p.grad.clone() for name, p in module.named_parameters() if p.grad is not None}


def spies_on(ans) -> dict:
    """Patches that record calls to the searches (class method: one search object may serve both banks), the
    critic, the bank gathers and updates and the ANS objective itself."""
    return {
        "search": mock.patch.object(type(ans.search_u), "topk", autospec=True, side_effect=type(ans.search_u).topk),
        "critic": mock.patch.object(type(ans.critic), "score", autospec=True, side_effect=type(ans.critic).score),
        "bank_get": mock.patch.object(type(ans.bank_u), "get", autospec=True, side_effect=type(ans.bank_u).get),
        "bank_update": mock.patch.object(
            type(ans.bank_u), "update", autospec=True, side_effect=type(ans.bank_u).update
        ),
    }


def test_lambda_zero_step_is_plain_fine_tuning_and_runs_no_ans_work(tiny_bert_path):
    """λ = 0: the loss and every gradient equal FineTuneMethod's on the same weights and dropout draws; the
    searches, the critic, the bank gathers and the bank updates are never called."""
    torch.manual_seed(0)
    reclaim = ReclaimMethod(TextEncoder.load(tiny_bert_path), get_task("sst2"), num_train=len(TEXTS), lam=0.0, k=2)
    plain = FineTuneMethod(TextEncoder.load(tiny_bert_path), get_task("sst2"))
    plain.head.load_state_dict(reclaim.head.state_dict())
    batch = reclaim.collate(examples())
    ans = reclaim.ans
    banks_before = ans.bank_u.bank.clone(), ans.bank_v.bank.clone()
    reclaim.train(), plain.train()
    with ExitStack() as stack:
        spies = {name: stack.enter_context(spy) for name, spy in spies_on(ans).items()}
        torch.manual_seed(5)
        parts = reclaim(batch)
        loss = total_loss(parts, reclaim.loss_weights)
        loss.backward()
        reclaim.after_step()
    for name, spy in spies.items():
        assert not spy.called, f"{name} was called at λ = 0"
    assert set(parts) == {"task"}
    assert torch.equal(ans.bank_u.bank, banks_before[0]) and torch.equal(ans.bank_v.bank, banks_before[1])

    torch.manual_seed(5)  # the same dropout draws
    expected = plain(batch)["ce"]
    expected.backward()
    assert loss.item() == pytest.approx(expected.item(), abs=1e-6)
    ours, theirs = gradients(reclaim), gradients(plain)
    assert ours.keys() == theirs.keys() and ours  # the critic holds no gradient: it never ran
    for name, grad in theirs.items():
        torch.testing.assert_close(ours[name], grad, atol=1e-6, rtol=1e-5, msg=name)


def test_a_positive_lambda_still_runs_the_critic_and_the_searches(tiny_bert_path):
    """The counterpart: at λ = 0.1 the same spies see both searches, the critic and the bank updates."""
    torch.manual_seed(0)
    reclaim = ReclaimMethod(TextEncoder.load(tiny_bert_path), get_task("sst2"), num_train=len(TEXTS), lam=0.1, k=2)
    with ExitStack() as stack:
        spies = {name: stack.enter_context(spy) for name, spy in spies_on(reclaim.ans).items()}
        parts = reclaim.train()(reclaim.collate(examples()))
        reclaim.after_step()
    assert set(parts) == {"task", "ans"}
    assert spies["search"].call_count == 2 and spies["bank_update"].call_count == 2  # one per bank
    assert spies["critic"].called and spies["bank_get"].called
