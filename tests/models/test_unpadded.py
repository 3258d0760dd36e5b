"""The packed (unpadded) forward equals the padded Hugging Face forward.

- Eval mode: every real token's hidden state, every layer's hidden states and the pooler output equal the padded
  forward's (≤ 1e-5) for BERT, RoBERTa, XLM-RoBERTa and ELECTRA (its embedding projection included), with the
  sdpa and the eager attention, a second segment and rows of very different lengths; all-MiniLM-L6-v2 too.
- Train mode: with dropout off the gradients of every parameter equal the padded path's (≤ 1e-5), through
  ``TextEncoder`` on all-MiniLM-L6-v2 (its word-embedding output included); with dropout on, the same seed gives
  the same masks, so the outputs and gradients are the padded path's as well, and the generator ends in the
  same state.
- ``TextEncoder``: every pooling gives the padded encoder's features; ``encode`` gives the padded path's
  embeddings, in input order, and sees weights updated between calls (by a fused AdamW step); a trainer run of
  SimCSE logs the padded run's losses (≤ 1e-4) and ends with its weights (≤ 1e-5).
- Fallbacks: other architectures (DistilBERT), relative positions, decoders, gradient checkpointing, hooks on
  the layers and batches whose rows do not start with a real token take the plain forward.
- CUDA (marked ``cuda``): the same equalities against the padded forward on the GPU (≤ 1e-4), the dropout masks
  of CUDA's fused kernel (also under float16 / bfloat16 autocast), every pooling of the tiny random BERT, and a
  trainer run with unpadding logging the padded run's losses.
"""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch
from torch import nn
from transformers import (
    AutoModel,
    BertConfig,
    DistilBertConfig,
    ElectraConfig,
    RobertaConfig,
    XLMRobertaConfig,
)

from contrastext.data.examples import Example
from contrastext.methods.simcse import SimCSE
from contrastext.models import TextEncoder
from contrastext.models.pooling import POOLING_NAMES
from contrastext.models.unpadded import packed_forward, pad_rows, unpadding_refusal
from contrastext.objectives import InfoNCE
from contrastext.runtime.run_log import read_log
from contrastext.training.config import TrainConfig
from contrastext.training.trainer import Trainer
from tests.devices import on_device, rng_state

TOLERANCE = 1e-5
SHAPE = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 64}
CONFIGS = {
    "bert": lambda **kw: BertConfig(vocab_size=99, type_vocab_size=2, **SHAPE, **kw),
    "roberta": lambda **kw: RobertaConfig(vocab_size=99, pad_token_id=1, max_position_embeddings=66, **SHAPE, **kw),
    "xlm-roberta": lambda **kw: XLMRobertaConfig(
        vocab_size=99, pad_token_id=1, max_position_embeddings=66, **SHAPE, **kw
    ),
    "electra": lambda **kw: ElectraConfig(vocab_size=99, embedding_size=16, **SHAPE, **kw),
}
LENGTHS = [5, 17, 1, 9, 17, 3]


def random_backbone(model_type: str, attention: str = "sdpa", dropout: float = 0.0) -> nn.Module:
    config = CONFIGS[model_type](hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        return AutoModel.from_config(config, attn_implementation=attention)


def random_batch(backbone: nn.Module, lengths=LENGTHS, segments: bool = True) -> dict[str, torch.Tensor]:
    """Right-padded rows of random ids (never the pad id), a second segment in the back half of each row."""
    pad = backbone.config.pad_token_id or 0
    generator = torch.Generator().manual_seed(1)
    longest = max(lengths)
    ids = torch.randint(3, backbone.config.vocab_size, (len(lengths), longest), generator=generator)
    mask = (torch.arange(longest)[None, :] < torch.tensor(lengths)[:, None]).long()
    batch = {"input_ids": ids.masked_fill(mask == 0, pad), "attention_mask": mask}
    if segments and backbone.config.type_vocab_size > 1:
        second = torch.arange(longest)[None, :] >= (torch.tensor(lengths)[:, None] // 2)
        batch["token_type_ids"] = (second & (mask == 1)).long()
    return batch


def real(tensor: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return tensor[mask.bool()]


def max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max().detach())


def packed(backbone, batch, **kwargs):
    return packed_forward(backbone, batch["input_ids"], batch["attention_mask"], batch.get("token_type_ids"), **kwargs)


def padded(backbone, batch):
    return backbone(**batch, output_hidden_states=True)


# ------------------------------------------------------------------------------------------- eval mode


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
@pytest.mark.parametrize("model_type", sorted(CONFIGS))
def test_packed_forward_equals_the_padded_forward_in_eval_mode(model_type, attention):
    assert_packed_equals_padded_in_eval_mode(random_backbone(model_type, attention), "cpu", TOLERANCE)


def assert_packed_equals_padded_in_eval_mode(backbone: nn.Module, device, tolerance: float) -> None:
    """Every layer's hidden states and the pooler output of the packed forward equal the padded forward's, on
    ``device``; padding positions hold zeros."""
    backbone = backbone.to(device).eval()
    assert unpadding_refusal(backbone) is None
    batch = on_device(random_batch(backbone), device)
    mask = batch["attention_mask"]
    with torch.no_grad():
        reference = padded(backbone, batch)
        ours = packed(backbone, batch, output_hidden_states=True, output_pooler=True)
    assert ours is not None
    assert ours.last_hidden_state.shape == reference.last_hidden_state.shape
    assert ours.last_hidden_state.device == reference.last_hidden_state.device
    assert max_diff(real(ours.last_hidden_state, mask), real(reference.last_hidden_state, mask)) <= tolerance
    assert float(ours.last_hidden_state[mask == 0].abs().max()) == 0.0  # padding positions hold zeros
    assert len(ours.hidden_states) == len(reference.hidden_states)
    for layer, (mine, theirs) in enumerate(zip(ours.hidden_states, reference.hidden_states, strict=True)):
        assert max_diff(real(mine, mask), real(theirs, mask)) <= tolerance, layer
    if getattr(reference, "pooler_output", None) is not None:  # ELECTRA has no pooler
        assert max_diff(ours.pooler_output, reference.pooler_output) <= tolerance


def test_minilm_packed_forward_equals_the_padded_forward(minilm, texts):
    backbone = minilm.backbone.eval()
    batch = minilm.tokenize(texts)
    with torch.no_grad():
        reference = backbone(**batch).last_hidden_state
        ours = packed(backbone, batch).last_hidden_state
    assert max_diff(real(ours, batch["attention_mask"]), real(reference, batch["attention_mask"])) <= TOLERANCE


def test_a_batch_without_padding_takes_the_no_gather_path():
    backbone = random_backbone("bert").eval()
    batch = random_batch(backbone, lengths=[7, 7, 7])
    with torch.no_grad():
        reference, ours = padded(backbone, batch), packed(backbone, batch)
    assert max_diff(ours.last_hidden_state, reference.last_hidden_state) <= TOLERANCE


# ------------------------------------------------------------------------------------------ train mode


def gradients(module: nn.Module) -> dict[str, torch.Tensor]:
    return {name: p.grad.clone() for name, p in module.named_parameters() if p.grad is not None}


def loss_of(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """A loss touching every real token differently (padding positions weigh nothing), gradients of order 1."""
    weights = torch.linspace(-1.0, 1.0, hidden.shape[-1], device=hidden.device)
    return (((hidden * weights).sum(-1).tanh() * mask).sum() + hidden[:, 0].pow(2).sum()) / mask.sum()


@pytest.mark.parametrize("model_type", ["bert", "roberta"])
def test_gradients_equal_the_padded_path_with_dropout_off(model_type):
    backbone = random_backbone(model_type, dropout=0.0).train()
    batch = random_batch(backbone)
    mask = batch["attention_mask"]
    loss_of(backbone(**batch).last_hidden_state, mask).backward()
    reference = gradients(backbone)
    backbone.zero_grad(set_to_none=True)
    loss_of(packed(backbone, batch).last_hidden_state, mask).backward()
    ours = gradients(backbone)
    assert set(ours) <= set(reference) and len(ours) >= len(reference) - 2  # the pooler is not run
    for name, grad in ours.items():
        assert max_diff(grad, reference[name]) <= TOLERANCE, name


def test_with_dropout_the_same_seed_gives_the_padded_paths_masks():
    assert_dropout_masks_are_the_padded_paths("cpu", TOLERANCE)


def assert_dropout_masks_are_the_padded_paths(device, tolerance: float) -> None:
    """From the same seed the packed forward draws the padded forward's random numbers (the generator of
    ``device`` ends in the same state) and keeps the same elements: the outputs and gradients agree; another seed
    gives other masks."""
    backbone = random_backbone("bert", dropout=0.3).to(device).train()
    batch = on_device(random_batch(backbone), device)
    mask = batch["attention_mask"]
    torch.manual_seed(5)
    reference = backbone(**batch).last_hidden_state
    reference_state = rng_state(device)
    loss_of(reference, mask).backward()
    reference_grads = gradients(backbone)
    backbone.zero_grad(set_to_none=True)
    torch.manual_seed(5)
    ours = packed(backbone, batch).last_hidden_state
    assert torch.equal(rng_state(device), reference_state)  # the same random numbers were drawn
    assert max_diff(real(ours, mask), real(reference, mask)) <= tolerance
    loss_of(ours, mask).backward()
    ours_grads = gradients(backbone)
    assert set(ours_grads) <= set(reference_grads) and len(ours_grads) >= len(reference_grads) - 2  # no pooler
    for name, grad in ours_grads.items():
        assert max_diff(grad, reference_grads[name]) <= tolerance, name
    torch.manual_seed(6)  # and another seed gives other masks
    other = packed(backbone, batch).last_hidden_state
    assert max_diff(real(other, mask), real(reference, mask)) > 1e-2


def without_dropout(module: nn.Module) -> nn.Module:
    for child in module.modules():
        if isinstance(child, nn.Dropout):
            child.p = 0.0
    return module


@pytest.mark.parametrize("pooling", ["cls", "mean"])
def test_text_encoder_training_gradients_equal_the_padded_path(minilm_path, texts, pooling):
    with torch.random.fork_rng():
        torch.manual_seed(0)
        encoder = without_dropout(TextEncoder.from_pretrained(minilm_path, pooling=pooling, projection="mlp"))
    encoder.train()
    batch = encoder.tokenize(texts)
    results = {}
    for unpad in (False, True):
        encoder.unpad = unpad
        encoder.zero_grad(set_to_none=True)
        output = encoder(**batch)
        output.input_embeddings.retain_grad()
        InfoNCE(temperature=0.05)(output.embedding, output.embedding.roll(1, dims=0)).backward()
        results[unpad] = (output, gradients(encoder), output.input_embeddings.grad)
    (plain, plain_grads, plain_input_grad), (ours, our_grads, our_input_grad) = results[False], results[True]
    assert max_diff(ours.embedding, plain.embedding) <= TOLERANCE
    assert max_diff(ours.input_embeddings, plain.input_embeddings) == 0.0
    assert max_diff(our_input_grad, plain_input_grad) <= TOLERANCE  # RECLAIM's v features see the same gradient
    assert set(our_grads) <= set(plain_grads)
    assert max(float(g.abs().max()) for g in our_grads.values()) > 1e-3  # gradients are not all near zero
    for name, grad in our_grads.items():
        assert max_diff(grad, plain_grads[name]) <= TOLERANCE, name


# ---------------------------------------------------------------------------------------- TextEncoder


@pytest.mark.parametrize("pooling", POOLING_NAMES)
def test_every_pooling_gives_the_padded_encoders_features(variant, texts, pooling):
    assert_packed_features_equal_the_padded_ones(variant(pooling=pooling), texts, TOLERANCE)


def assert_packed_features_equal_the_padded_ones(encoder: TextEncoder, texts: list[str], tolerance: float) -> None:
    encoder.eval()
    batch = on_device(encoder.tokenize(texts), encoder.device)
    with torch.no_grad():
        encoder.unpad = False
        plain = encoder(**batch)
        encoder.unpad = True
        ours = encoder(**batch)
    mask = batch["attention_mask"]
    assert max_diff(ours.embedding, plain.embedding) <= tolerance
    assert max_diff(ours.pooled, plain.pooled) <= tolerance
    assert max_diff(real(ours.token_embeddings, mask), real(plain.token_embeddings, mask)) <= tolerance
    assert torch.equal(ours.input_embeddings, plain.input_embeddings)
    assert ours.token_embeddings.shape == plain.token_embeddings.shape


def test_hidden_states_and_pooler_are_computed_only_when_the_pooling_needs_them(variant, monkeypatch):
    import contrastext.models.encoder as encoder_module

    seen = []
    original = encoder_module.packed_forward
    monkeypatch.setattr(encoder_module, "packed_forward", lambda *a, **kw: seen.append(kw) or original(*a, **kw))
    with torch.no_grad():
        for pooling in ("mean", "first_last_avg", "pooler"):
            encoder = variant(pooling=pooling)
            encoder.unpad_min_padding = 0.0  # one text: no padding at all
            encoder(**encoder.tokenize(["a short text"]))
    assert [(kw["output_hidden_states"], kw["output_pooler"]) for kw in seen] == [
        (False, False), (True, False), (False, True)
    ]


def test_encode_equals_the_padded_path_in_input_order(minilm, texts, monkeypatch):
    monkeypatch.setattr(minilm, "unpad_min_padding", 0.0)  # pack even the nearly unpadded sorted batches
    ours = minilm.encode(texts, batch_size=3)
    minilm.unpad = False
    try:
        plain = minilm.encode(texts, batch_size=3)
    finally:
        minilm.unpad = True
    assert np.abs(ours - plain).max() <= 1e-6
    one_by_one = np.concatenate([minilm.encode([text]) for text in texts])
    assert np.abs(ours - one_by_one).max() <= TOLERANCE


def test_only_batches_with_enough_padding_are_packed(minilm, monkeypatch):
    """Length-sorted inference batches carry little padding: there the gathers of the packed path cost more
    than they save, so the padded forward runs below ``unpad_min_padding`` (10 % by default)."""
    import contrastext.models.encoder as encoder_module

    calls = []
    original = encoder_module.packed_forward
    monkeypatch.setattr(encoder_module, "packed_forward", lambda *a, **kw: calls.append(1) or original(*a, **kw))
    assert minilm.unpad_min_padding == encoder_module.UNPAD_MIN_PADDING == 0.1
    even = minilm.tokenize(["one two three four", "five six seven eight"])  # same length: no padding
    uneven = minilm.tokenize(["one", "five six seven eight nine ten eleven twelve"])
    assert encoder_module.padding_share(even["attention_mask"]) == 0.0
    assert encoder_module.padding_share(uneven["attention_mask"]) >= 0.1
    with torch.no_grad():
        minilm(**even)
        assert calls == []
        minilm(**uneven)
        assert calls == [1]
    assert encoder_module.padding_share(torch.zeros(0, 4)) == 0.0


def test_pad_rows_pads_as_the_tokenizer_does(minilm, texts):
    encoded = minilm.tokenizer(texts, truncation=True, max_length=minilm.max_seq_length)
    rows = [2, 0, 5]
    values = {"input_ids": minilm.tokenizer.pad_token_id, "attention_mask": 0, "token_type_ids": 0}
    expected = minilm.tokenizer([texts[i] for i in rows], padding=True, return_tensors="pt")
    for left in (False, True):
        batch = pad_rows(encoded, rows, values, left=left)
        if not left:
            for name in values:
                assert torch.equal(batch[name], expected[name]), name
        else:
            assert batch["attention_mask"][:, -1].all() and not batch["attention_mask"][:, 0].all()


def test_left_padding_falls_back_to_the_plain_forward(minilm_path, texts):
    """BERT's positions count from the left edge of the padded row, so left padding changes the numbers in the
    plain forward as well: the packed path must not run, and ``encode`` pads on the left as the tokenizer would."""
    encoder = TextEncoder.from_pretrained(minilm_path)
    assert packed(encoder.backbone, encoder.tokenize(texts)) is not None
    encoder.tokenizer.padding_side = "left"
    left_batch = encoder.tokenize(texts)
    assert packed(encoder.backbone, left_batch) is None  # a row that does not start with a real token
    ours = encoder.encode(texts, batch_size=4)
    order = sorted(range(len(texts)), key=lambda i: -len(encoder.tokenizer(texts[i])["input_ids"]))
    expected = np.empty_like(ours)
    with torch.no_grad():
        for start in range(0, len(texts), 4):
            rows = order[start : start + 4]
            embedding = encoder.eval()(**encoder.tokenize([texts[i] for i in rows])).embedding
            expected[rows] = torch.nn.functional.normalize(embedding, dim=-1).numpy()
    assert np.abs(ours - expected).max() <= 1e-6


def test_encode_sees_weights_updated_between_calls(minilm_path, texts):
    """The fused query/key/value weights are kept for one encode call only: a fused AdamW step updates the
    weights in place without bumping their version counters, and the next call must see the new weights."""
    encoder = TextEncoder.from_pretrained(minilm_path)
    encoder.unpad_min_padding = 0.0  # pack even the nearly unpadded sorted batches
    before = encoder.encode(texts)
    optimizer = torch.optim.AdamW(encoder.parameters(), lr=1e-2, fused=True)
    for parameter in encoder.parameters():
        parameter.grad = torch.ones_like(parameter)
    optimizer.step()
    after = encoder.encode(texts)
    encoder.unpad = False
    plain = encoder.encode(texts)
    assert np.abs(after - before).max() > 1e-3
    assert np.abs(after - plain).max() <= 1e-6


def test_trainer_with_unpadding_logs_the_padded_runs_losses_and_weights(tmp_path, minilm_path):
    (plain, plain_losses), (ours, our_losses) = simcse_runs_with_and_without_unpadding(tmp_path, minilm_path)
    assert len(our_losses) == 3 and our_losses == pytest.approx(plain_losses, abs=1e-4)  # dropout on, same masks
    for name, value in ours.items():
        assert torch.allclose(value, plain[name], atol=TOLERANCE, rtol=0), name


def simcse_runs_with_and_without_unpadding(tmp_path, model_path: str, device_type: str = "cpu"):
    """((state, losses) of the padded run, (state, losses) of the packed run): 3 steps of unsupervised SimCSE
    (dropout on) from the same seed on 24 sentences of 2 to 10 words; the trainer's device must be ``device_type``."""
    sentences = [Example((text,), source=f"s:{i}") for i, text in enumerate(
        " ".join(["word"] * (1 + i % 9) + [str(i)]) for i in range(24))]
    runs = {}
    for unpad in (False, True):
        with torch.random.fork_rng():
            torch.manual_seed(0)
            encoder = TextEncoder.from_pretrained(model_path, pooling="cls", max_seq_length=16, projection="mlp")
        method = SimCSE(encoder, InfoNCE(temperature=0.05), supervised=False)
        settings = {"max_steps": 3, "batch_size": 8, "lr": 1e-4, "log_every": 1, "progress_bar": False,
                    "mixed_precision": "no", "unpad": unpad}
        config = TrainConfig(method="simcse-unsup", model="minilm", output_dir=str(tmp_path / str(unpad)), seed=3,
                             train=settings)
        Trainer(method, sentences, config).train()
        assert encoder.unpad is unpad and encoder.device.type == device_type
        state = {name: value.cpu() for name, value in method.state_dict().items()}
        runs[unpad] = (state, [r["loss"] for r in read_log(tmp_path / str(unpad) / "train_log.jsonl")])
    return runs[False], runs[True]


# ------------------------------------------------------------------------------------------- fallbacks


def test_other_architectures_are_refused_and_encode_through_the_plain_forward(minilm):
    config = DistilBertConfig(vocab_size=len(minilm.tokenizer), dim=32, n_layers=2, n_heads=2, hidden_dim=64)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        backbone = AutoModel.from_config(config)
    assert "distilbert" in unpadding_refusal(backbone)
    encoder = TextEncoder(backbone, minilm.tokenizer)
    texts = ["a cat", "a much longer sentence about a dog"]
    assert packed(backbone, encoder.tokenize(texts)) is None
    ours = encoder.encode(texts)
    encoder.unpad = False
    assert np.abs(ours - encoder.encode(texts)).max() == 0.0


@pytest.mark.parametrize(
    "change, reason",
    [
        ({"position_embedding_type": "relative_key"}, "position_embedding_type"),
        ({"is_decoder": True}, "decoder"),
    ],
)
def test_configurations_outside_bert_layout_are_refused(change, reason):
    config = CONFIGS["bert"]()
    for key, value in change.items():
        setattr(config, key, value)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        backbone = AutoModel.from_config(config)
    assert reason in unpadding_refusal(backbone)
    assert packed(backbone, random_batch(backbone)) is None


def test_gradient_checkpointing_and_hooks_take_the_plain_forward():
    backbone = random_backbone("bert")
    batch = random_batch(backbone)
    checkpointed = copy.deepcopy(backbone)
    checkpointed.gradient_checkpointing_enable()
    assert "checkpointing" in unpadding_refusal(checkpointed)
    handle = backbone.encoder.layer[1].register_forward_hook(lambda *args: None)
    assert packed(backbone, batch) is None  # the hook would not fire
    handle.remove()
    assert packed(backbone, batch) is not None


# ------------------------------------------------------------------------------------------------ CUDA
# Compared with the padded forward on the same CUDA device (CUDA's sdpa and matrix products may differ slightly
# from the CPU's), within 1e-4: float32 sums in another order, and atomics in some backward kernels.

CUDA_TOLERANCE = 1e-4


@pytest.mark.cuda
@pytest.mark.parametrize("attention", ["sdpa", "eager"])
@pytest.mark.parametrize("model_type", sorted(CONFIGS))
def test_cuda_packed_forward_equals_the_padded_forward_in_eval_mode(cuda_device, model_type, attention):
    assert_packed_equals_padded_in_eval_mode(random_backbone(model_type, attention), cuda_device, CUDA_TOLERANCE)


@pytest.mark.cuda
def test_cuda_with_dropout_the_same_seed_gives_the_padded_paths_masks(cuda_device):
    """The module docstring's claim for CUDA's fused dropout kernel: each mask is drawn as ``F.dropout`` of ones
    of the padded shape, so the CUDA generator advances as in the padded forward and keeps the same elements."""
    assert_dropout_masks_are_the_padded_paths(cuda_device, CUDA_TOLERANCE)


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_cuda_under_autocast_with_dropout_the_same_seed_gives_the_padded_paths_masks(cuda_device, dtype):
    """Under autocast the dropout inputs are half precision in both paths: the same draws, the same kept
    elements (outputs equal to half-precision rounding), and another seed gives other masks."""
    backbone = random_backbone("bert", dropout=0.3).to(cuda_device).train()
    batch = on_device(random_batch(backbone), cuda_device)
    mask = batch["attention_mask"]
    outputs = {}
    with torch.no_grad(), torch.autocast(cuda_device.type, dtype=dtype):
        for name, forward, seed in (("padded", backbone, 5), ("packed", packed, 5), ("other", packed, 6)):
            torch.manual_seed(seed)
            hidden = (forward(**batch) if forward is backbone else forward(backbone, batch)).last_hidden_state
            outputs[name] = (real(hidden.float(), mask), rng_state(cuda_device))
    (reference, reference_state), (ours, our_state), (other, _) = outputs["padded"], outputs["packed"], outputs["other"]
    assert torch.equal(our_state, reference_state)
    assert torch.isfinite(ours).all() and max_diff(ours, reference) <= 0.1
    assert max_diff(other, reference) > 0.5


@pytest.mark.cuda
@pytest.mark.parametrize("pooling", POOLING_NAMES)
def test_cuda_tiny_bert_every_pooling_gives_the_padded_encoders_features(cuda_device, tiny_bert_path, texts, pooling):
    encoder = TextEncoder.from_pretrained(tiny_bert_path, pooling=pooling).to(cuda_device)
    assert_packed_features_equal_the_padded_ones(encoder, texts, CUDA_TOLERANCE)


@pytest.mark.cuda
def test_cuda_trainer_with_unpadding_logs_the_padded_runs_losses(cuda_device, tmp_path, tiny_bert_path):
    """Dropout on: the packed run draws the padded run's masks on the GPU too, so its losses are the padded run's.
    (Weights are not compared: an AdamW step turns a float-rounding difference of a near-zero gradient into
    up to lr, the same bound a run with other masks stays within.)"""
    (_, plain_losses), (_, our_losses) = simcse_runs_with_and_without_unpadding(
        tmp_path, tiny_bert_path, cuda_device.type
    )
    assert len(our_losses) == 3 and all(math.isfinite(loss) for loss in our_losses)
    assert our_losses == pytest.approx(plain_losses, abs=1e-4)
