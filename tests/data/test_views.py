"""Views: deterministic under a generator, special tokens never touched, the advertised statistics."""

from __future__ import annotations

import pytest
import torch

from contrastext.data.views import IGNORE_INDEX, VIEWS, View, make_view
from contrastext.errors import ConfigError, UnknownNameError

CLS, SEP, PAD, MASK, VOCAB = 101, 102, 0, 103, 30522


def _batch(rows: int = 64, length: int = 40, seed: int = 0) -> dict[str, torch.Tensor]:
    """[CLS] w.. [SEP] w.. [SEP] [PAD].. rows of random words (ids 1000..1999), varied lengths."""
    generator = torch.Generator().manual_seed(seed)
    ids = torch.full((rows, length), PAD)
    special = torch.ones(rows, length, dtype=torch.long)
    attention = torch.zeros(rows, length, dtype=torch.long)
    for row in range(rows):
        size = int(torch.randint(8, length + 1, (), generator=generator))
        middle = size // 2
        ids[row, :size] = torch.randint(1000, 2000, (size,), generator=generator)
        ids[row, 0], ids[row, middle], ids[row, size - 1] = CLS, SEP, SEP
        special[row, 1:size] = 0
        special[row, middle] = special[row, size - 1] = 1
        attention[row, :size] = 1
    return {
        "input_ids": ids,
        "attention_mask": attention,
        "special_tokens_mask": special,
        "token_type_ids": torch.zeros_like(ids),
    }


# A value for every argument a view may take; each registered view gets the ones it accepts.
VIEW_ARGUMENTS = {"mask_token_id": MASK, "vocab_size": VOCAB, "pad_token_id": PAD, "k": 3, "probability": 0.2}


def view_arguments(name: str) -> dict:
    """The arguments of ``VIEW_ARGUMENTS`` that the view ``name`` accepts."""
    accepted = VIEWS.accepted_arguments(name)
    return {key: value for key, value in VIEW_ARGUMENTS.items() if key in accepted}


@pytest.mark.parametrize("name", VIEWS.names())
def test_deterministic_and_special_tokens_untouched(name):
    batch = _batch()
    view = make_view(name, **view_arguments(name))
    first = view(batch, torch.Generator().manual_seed(1))
    second = view(batch, torch.Generator().manual_seed(1))
    assert all(torch.equal(first[key], second[key]) for key in first)
    assert torch.equal(batch["input_ids"], _batch()["input_ids"])  # input not modified in place
    special = first["special_tokens_mask"].bool()
    originals = [
        row[mask.bool()].tolist()
        for row, mask in zip(batch["input_ids"], batch["special_tokens_mask"], strict=True)
    ]
    kept = [row[mask].tolist() for row, mask in zip(first["input_ids"], special, strict=True)]
    if name == "delete":  # rows shrink: compare the special tokens of the attended part
        originals = [[t for t in row if t != PAD] for row in originals]
        kept = [[t for t in row if t != PAD] for row in kept]
    assert kept == originals
    if name != "identity":
        other = view(batch, torch.Generator().manual_seed(2))
        assert not torch.equal(first["input_ids"], other["input_ids"])


def test_identity_returns_the_same_ids():
    batch = _batch()
    assert torch.equal(make_view("identity")(batch)["input_ids"], batch["input_ids"])


def test_token_mask_rate_and_80_10_10():
    batch = _batch(rows=400, length=64)
    out = make_view("token_mask", mask_token_id=MASK, vocab_size=VOCAB)(
        batch, torch.Generator().manual_seed(0)
    )
    ordinary = batch["attention_mask"].bool() & ~batch["special_tokens_mask"].bool()
    chosen = out["labels"] != IGNORE_INDEX
    assert not (chosen & ~ordinary).any()
    assert torch.equal(out["labels"][chosen], batch["input_ids"][chosen])
    rate = chosen.sum().item() / ordinary.sum().item()
    assert rate == pytest.approx(0.15, abs=0.01)
    masked = (out["input_ids"][chosen] == MASK).float().mean().item()
    unchanged = (out["input_ids"][chosen] == batch["input_ids"][chosen]).float().mean().item()
    assert masked == pytest.approx(0.8, abs=0.03)
    assert unchanged == pytest.approx(0.1, abs=0.03)


def test_span_mask_masks_contiguous_spans_near_the_rate():
    batch = _batch(rows=200, length=64)
    out = make_view("span_mask", mask_token_id=MASK, vocab_size=VOCAB)(
        batch, torch.Generator().manual_seed(0)
    )
    ordinary = batch["attention_mask"].bool() & ~batch["special_tokens_mask"].bool()
    chosen = out["labels"] != IGNORE_INDEX
    assert chosen.sum().item() / ordinary.sum().item() == pytest.approx(0.15, abs=0.03)
    starts = (chosen[:, 1:] & ~chosen[:, :-1]).sum().item()
    assert starts < chosen.sum().item() / 1.5  # spans, not isolated tokens


@pytest.mark.parametrize("k", [1, 3, 5])
def test_shuffle_moves_tokens_at_most_k_places_and_reaches_k(k):
    """Lample et al. 2018 §2.3 (CAPT §5.2, k = 3): |σ(i) − i| ≤ k, and k itself is reached."""
    batch = _batch(rows=400, length=48)
    batch["input_ids"] = torch.where(  # distinct ids per position so every token can be tracked
        batch["special_tokens_mask"].bool(),
        batch["input_ids"],
        torch.arange(batch["input_ids"].shape[1]) + 5000,
    )
    out = make_view("shuffle", k=k)(batch, torch.Generator().manual_seed(0))
    special = batch["special_tokens_mask"].bool()
    assert torch.equal(out["input_ids"][special], batch["input_ids"][special])  # special tokens never move
    largest = 0
    for before, after, fixed in zip(batch["input_ids"].tolist(), out["input_ids"].tolist(), special.tolist(),
                                    strict=True):
        assert sorted(before) == sorted(after)
        boundaries = [position for position, is_special in enumerate(fixed) if is_special]
        for position, token in enumerate(after):
            if token >= 5000:
                origin = before.index(token)
                segment = sum(b < origin for b in boundaries)  # which run between special tokens
                assert sum(b < position for b in boundaries) == segment, "a token crossed a special token"
                largest = max(largest, abs(origin - position))
    assert largest == k


def test_delete_repads_and_keeps_every_row_nonempty():
    batch = _batch()
    out = make_view("delete", probability=0.9, pad_token_id=PAD)(batch, torch.Generator().manual_seed(0))
    ordinary = out["attention_mask"].bool() & ~out["special_tokens_mask"].bool()
    assert (ordinary.sum(1) >= 1).all()
    assert out["input_ids"].shape[1] <= batch["input_ids"].shape[1]
    assert torch.equal(out["input_ids"] == PAD, out["attention_mask"] == 0)
    assert out["token_type_ids"].shape == out["input_ids"].shape


def test_unknown_view_lists_the_known_ones():
    with pytest.raises(UnknownNameError, match="known views: delete, identity"):
        make_view("rotate")
    with pytest.raises(UnknownNameError) as error:
        make_view("rotate")
    assert all(name in str(error.value) for name in VIEWS.names())
    with pytest.raises(ValueError, match="missing special_tokens_mask"):
        make_view("identity")({"input_ids": torch.ones(1, 2), "attention_mask": torch.ones(1, 2)})


@pytest.mark.parametrize("name", VIEWS.names())
def test_every_view_is_registered_under_its_own_name(name):
    view = make_view(name, **view_arguments(name))
    assert isinstance(view, View) and view.name == name


def test_a_bad_argument_is_a_config_error_naming_the_view_and_the_key():
    with pytest.raises(ConfigError, match=r"view 'shuffle': unknown argument\(s\) window; accepted: k"):
        make_view("shuffle", window=3)
    with pytest.raises(ConfigError, match=r"view 'token_mask': missing a required argument: 'vocab_size'"):
        make_view("token_mask", mask_token_id=MASK)
    with pytest.raises(ConfigError, match=r"view 'delete': invalid value for probability: .*\[0, 1\)"):
        make_view("delete", probability=1.5, pad_token_id=PAD)
