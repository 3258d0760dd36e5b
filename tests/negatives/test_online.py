"""negatives/online.py: the bank's layout, the filtering of its candidates, its refresh; and the loss with bank
negatives (methods/simcse.py ``infonce_with_bank``) against the InfoNCE equation written out with the extra
candidates."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

from contrastext.methods.simcse import infonce_with_bank
from contrastext.negatives.online import OnlineNegatives, bank_layout, margin_violations
from contrastext.objectives.infonce import InfoNCE

ROWS = [
    ("q1", "p1", "n1"),
    ("q2", "p2", "p1"),  # q2's negative is q1's positive: one bank row for the two
    ("q1", "p1b", "n3"),  # q1 again, another positive
    ("q3", "q1", "n1"),  # q1 banked as q3's positive: q1's own text is then never q1's negative
]


def test_the_layout_holds_each_distinct_text_once_and_the_rows_excluded_per_row():
    layout = bank_layout(ROWS, corpus=["c1", "p2"])
    assert layout.texts == ["p1", "n1", "p2", "p1b", "n3", "q1", "c1"]
    assert layout.row_texts.tolist() == [[0, 1], [2, 0], [3, 4], [5, 1]]
    # q1 (rows 0 and 2): both its positives (p1, p1b) and its own text; q2: p2; q3: its positive q1.
    excluded = [sorted(v for v in row if v >= 0) for row in layout.excluded.tolist()]
    assert excluded == [[0, 3, 5], [2], [0, 3, 5], [5]]


def test_rows_of_unequal_length_are_refused():
    with pytest.raises(ValueError, match="one length"):
        bank_layout([("a", "b"), ("a", "b", "c")])


def online_with(rows_vectors: dict[str, list[float]], k: int, **options) -> OnlineNegatives:
    layout = bank_layout(ROWS, corpus=[text for text in rows_vectors if text not in {t for r in ROWS for t in r[1:]}])
    online = OnlineNegatives(layout, dim=2, k=k, **options)
    online.fill(lambda texts: torch.tensor([rows_vectors[text] for text in texts]))
    return online


def angle(degrees: float) -> list[float]:
    return [math.cos(math.radians(degrees)), math.sin(math.radians(degrees))]


VECTORS = {"p1": angle(0), "p1b": angle(1), "q1": angle(2), "n1": angle(10), "p2": angle(20), "n3": angle(40),
           "c1": angle(60)}  # fmt: skip


def test_own_positives_equal_texts_and_the_anchor_itself_are_never_candidates():
    """Anchor q1 (row 0) at 0°: p1, p1b and q1 are nearest but excluded; n1, p2, n3 follow in order."""
    online = online_with(VECTORS, k=3)
    anchors = torch.tensor([angle(0)])
    vectors, valid = online.candidates(anchors, anchors, torch.tensor([0]))
    assert valid.tolist() == [[True, True, True]]
    torch.testing.assert_close(vectors[0], torch.tensor([VECTORS["n1"], VECTORS["p2"], VECTORS["n3"]]))
    # Row 1 (q2, positive p2) may take p1: it is q1's positive, not q2's.
    vectors, _ = online.candidates(torch.tensor([angle(0)]), torch.tensor([angle(20)]), torch.tensor([1]))
    torch.testing.assert_close(vectors[0, 0], torch.tensor(VECTORS["p1"]))


def test_margins_drop_what_sentence_transformers_miner_drops():
    online = online_with(VECTORS, k=3, absolute_margin=0.05)
    anchors, positives = torch.tensor([angle(0)]), torch.tensor([angle(15)])  # positive similarity cos 15° = 0.966
    vectors, valid = online.candidates(anchors, positives, torch.tensor([0]))
    # n1 (cos 10° = 0.985): 0.985 + 0.05 > 0.966, dropped; p2 (0.940 + 0.05 > 0.966) dropped too; n3, c1 kept.
    assert valid.tolist() == [[True, True, False]]
    torch.testing.assert_close(vectors[0, :2], torch.tensor([VECTORS["n3"], VECTORS["c1"]]))

    scores, positive = torch.tensor([[0.9, 0.5, -0.2]]), torch.tensor([0.8])
    assert margin_violations(scores, positive, None, 0.1).tolist() == [[True, False, False]]  # > 0.8 − 0.08
    assert margin_violations(scores, -positive, None, 0.5).tolist() == [[True, True, True]]  # > −0.8 − 0.4
    assert margin_violations(scores, positive, 0.0, None).tolist() == [[True, False, False]]


def test_an_anchor_short_of_candidates_gets_empty_slots():
    online = online_with(VECTORS, k=5, relative_margin=0.0)
    anchors = torch.tensor([angle(0)])
    counts = [online.candidates(anchors, torch.tensor([angle(degrees)]), torch.tensor([0]))[1].tolist()[0]
              for degrees in (30, 50, 70)]  # fmt: skip
    # Farther than the positive, and so kept: n3 (40°) and c1 (60°); c1 alone; none. The rest of the slots empty.
    assert counts == [[True, True, False, False, False], [True] + [False] * 4, [False] * 5]


def test_momentum_refresh_is_eq_7_on_the_rows_of_the_batch():
    online = online_with(VECTORS, k=2, momentum=0.25)
    before = online.bank.bank.clone()
    fresh_positive, fresh_negative = torch.tensor([[0.0, 1.0]]), torch.tensor([[1.0, 1.0]])
    online.update(torch.tensor([1]), [fresh_positive, fresh_negative])  # row 1: p2, p1
    expected = before.clone()
    expected[2] = 0.75 * fresh_positive[0] + 0.25 * before[2]
    expected[0] = 0.75 * fresh_negative[0] + 0.25 * before[0]
    torch.testing.assert_close(online.bank.bank, expected)


def test_reencode_refresh_encodes_every_n_steps_and_nothing_between():
    online = online_with(VECTORS, k=2, refresh="reencode", reencode_every=2)
    calls = []

    def encode(texts):
        calls.append(len(texts))
        return torch.ones(len(texts), 2)

    online.update(torch.tensor([0]), [torch.zeros(1, 2), torch.zeros(1, 2)])  # no momentum under reencode
    assert online.after_step(encode) is None and not calls
    assert online.after_step(encode) is not None and calls == [len(online.texts)]
    assert torch.equal(online.bank.bank, torch.ones_like(online.bank.bank))
    report = online.report()
    assert report["encodings"] == 2 and report["bytes_per_row"] == 8  # fill + one re-encoding; 2 float32


def test_the_state_is_in_the_state_dict_and_the_layout_is_not():
    online = online_with(VECTORS, k=2)
    assert set(online.state_dict()) == {"bank.bank", "steps", "filled"}


def reference_loss(anchors, positives, negatives, bank, valid, tau, weight=0.0):
    """ℓ_i = −log exp(s_ii/τ) / [Σ_j exp(s(a_i, c_j)/τ + w·[c_j is i's own hard negative]) + Σ_m v_im exp(s(a_i, b_im)/τ)]."""
    batch = anchors.size(0)
    candidates = torch.cat([positives, negatives]) if negatives is not None else positives
    total = 0.0
    for i in range(batch):
        cos = [F.cosine_similarity(anchors[i], c, dim=0) / tau for c in candidates]
        logits = [value + (weight if j >= batch and (j - batch) % batch == i else 0.0) for j, value in enumerate(cos)]
        denominator = sum(torch.exp(value) for value in logits)
        for m in range(bank.size(1)):
            if valid[i, m]:
                denominator = denominator + torch.exp(F.cosine_similarity(anchors[i], bank[i, m], dim=0) / tau)
        total = total - torch.log(torch.exp(logits[i]) / denominator)
    return total / batch


@pytest.mark.parametrize("with_negatives", [False, True])
def test_the_loss_with_bank_negatives_is_infonce_with_the_extra_candidates(with_negatives):
    generator = torch.Generator().manual_seed(0)
    anchors = torch.randn(4, 6, generator=generator, dtype=torch.float64, requires_grad=True)
    positives = torch.randn(4, 6, generator=generator, dtype=torch.float64)
    negatives = torch.randn(4, 6, generator=generator, dtype=torch.float64) if with_negatives else None
    bank = torch.randn(4, 3, 6, generator=generator, dtype=torch.float64, requires_grad=True)
    valid = torch.tensor([[True, True, True], [True, False, True], [False, False, False], [True, True, False]])
    loss = InfoNCE(temperature=0.1, hard_negative_weight=0.5 if with_negatives else 0.0)
    ours = infonce_with_bank(loss, anchors, positives, negatives, bank, valid)
    expected = reference_loss(anchors, positives, negatives, bank, valid, 0.1, 0.5 if with_negatives else 0.0)
    torch.testing.assert_close(ours, expected)
    ours.backward()
    assert anchors.grad is not None and bank.grad is None  # constant candidates: no gradient reaches the bank


def test_no_valid_bank_slot_is_plain_infonce():
    generator = torch.Generator().manual_seed(1)
    anchors, positives, negatives = (torch.randn(5, 8, generator=generator) for _ in range(3))
    bank = torch.randn(5, 2, 8, generator=generator)
    loss = InfoNCE(temperature=0.05, symmetric=True)
    with_nothing = infonce_with_bank(loss, anchors, positives, negatives, bank, torch.zeros(5, 2, dtype=torch.bool))
    torch.testing.assert_close(with_nothing, loss(anchors, positives, negatives))


def bank_worker(rank: int, port: int, out_dir: str) -> None:
    """Rank r's step saw rows {r, r + 2} with its own fresh embeddings; SimCSE.after_step gathers every rank's."""
    import torch.distributed as dist

    from contrastext.methods.simcse import SimCSE

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    try:
        state = SimpleNamespace(negatives=online_with(VECTORS, k=2), encode_texts=None,
                                _pending=[(torch.tensor([rank, rank + 2]), fresh_columns(rank))])  # fmt: skip
        SimCSE.after_step(state)
        torch.save(state.negatives.bank.bank, f"{out_dir}/bank{rank}.pt")
    finally:
        dist.destroy_process_group()


def fresh_columns(rank: int) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(rank)
    return [torch.randn(2, 2, generator=generator) for _ in range(2)]


def test_two_processes_keep_identical_banks_equal_to_one_process_on_the_global_rows(tmp_path):
    import torch.multiprocessing as mp

    from tests.negatives.test_distributed import free_port

    mp.start_processes(bank_worker, args=(free_port(), str(tmp_path)), nprocs=2, start_method="fork")
    single = online_with(VECTORS, k=2)
    columns = [torch.cat(parts) for parts in zip(fresh_columns(0), fresh_columns(1), strict=True)]
    single.update(torch.tensor([0, 2, 1, 3]), columns)
    for rank in range(2):
        assert torch.equal(torch.load(tmp_path / f"bank{rank}.pt"), single.bank.bank), rank


def test_a_kept_ivf_index_gives_the_exact_search_candidates_and_follows_the_updates():
    from contrastext.negatives.search import IVFSearch

    exact = online_with(VECTORS, k=3)
    kept = online_with(VECTORS, k=3, search=IVFSearch(nlist=1, storage="float32", exact_below=0))
    anchors, positives, indices = torch.tensor([angle(7), angle(52)]), torch.tensor([angle(0), angle(55)]), torch.tensor([0, 1])
    for step in range(2):
        for online in (exact, kept):
            online.update(torch.tensor([1]), [torch.tensor([angle(33 * step + 3)]), torch.tensor([angle(47)])])
        ours, theirs = kept.candidates(anchors, positives, indices), exact.candidates(anchors, positives, indices)
        torch.testing.assert_close(ours[0], theirs[0])
        assert torch.equal(ours[1], theirs[1])
    assert kept.search.builds == 1 and kept.search.updated_rows == 2  # built once, then the written rows
