"""TextEncoder on all-MiniLM-L6-v2: parity with sentence-transformers, order, padding, features, from_config."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sentence_transformers import SentenceTransformer

from contrastext.errors import ConfigError, MissingDataError, UnknownNameError
from contrastext.models import TextEncoder

SMALL_BERT = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64}


def test_original_minilm_folder_settings_and_parity_with_sentence_transformers(minilm, minilm_path, texts):
    assert (minilm.pooling, minilm.normalize, minilm.max_seq_length) == ("mean", True, 256)
    assert (minilm.hidden_size, minilm.embedding_dim) == (384, 384)
    theirs = SentenceTransformer(minilm_path, device="cpu").encode(texts, batch_size=3)
    ours = minilm.encode(texts)
    assert ours.dtype == np.float32 and ours.shape == (len(texts), 384)
    assert np.abs(ours - theirs).max() <= 1e-5


def test_encode_keeps_input_order_with_mixed_lengths(minilm, texts):
    one_by_one = np.concatenate([minilm.encode([text]) for text in texts])
    for batch_size in (2, 64):
        assert np.abs(minilm.encode(texts, batch_size=batch_size) - one_by_one).max() <= 1e-5
    as_torch = minilm.encode(texts, convert_to="torch")
    assert isinstance(as_torch, torch.Tensor) and as_torch.dtype == torch.float32
    assert np.abs(as_torch.numpy() - one_by_one).max() <= 1e-5


def test_encode_in_chunks_gives_the_rows_of_one_pass_and_one_progress_total(minilm, texts, monkeypatch, capsys):
    """A corpus larger than ENCODE_CHUNK is tokenised chunk by chunk (bounded memory at 1M texts): same rows."""
    import contrastext.models.encoder as encoder_module

    whole = minilm.encode(texts, batch_size=2)
    monkeypatch.setattr(encoder_module, "ENCODE_CHUNK", 3)
    chunked = minilm.encode(texts, batch_size=2, show_progress=True)
    assert np.abs(chunked - whole).max() <= 1e-5
    chunk_sizes = [min(3, len(texts) - start) for start in range(0, len(texts), 3)]
    assert f"{sum(-(-size // 2) for size in chunk_sizes)}/{sum(-(-size // 2) for size in chunk_sizes)}" in (
        capsys.readouterr().err
    )


@pytest.mark.parametrize("pooling", ["mean", "max", "cls", "first_last_avg", "pooler"])
def test_padding_never_changes_an_embedding(minilm, pooling, texts, variant):
    encoder = variant(pooling=pooling)
    batched = encoder.encode(texts, batch_size=len(texts))
    alone = np.concatenate([encoder.encode([text]) for text in texts])
    assert np.abs(batched - alone).max() <= 1e-5


def test_normalize_argument_and_default(minilm, texts):
    raw = minilm.encode(texts[:3], normalize=False)
    unit = minilm.encode(texts[:3])
    np.testing.assert_allclose(np.linalg.norm(unit, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(unit, raw / np.linalg.norm(raw, axis=1, keepdims=True), atol=1e-6)


def test_empty_input_gives_zero_rows(minilm, variant):
    assert minilm.encode([]).shape == (0, 384)
    projected = variant(projection={"name": "mlp2", "output_dim": 16}, projection_at_inference=True)
    empty = projected.encode([], convert_to="torch")
    assert isinstance(empty, torch.Tensor) and empty.shape == (0, 16)


def test_truncate_dim_cuts_before_normalising(minilm, texts):
    raw = minilm.encode(texts[:3], normalize=False)
    cut = minilm.encode(texts[:3], truncate_dim=64)
    np.testing.assert_allclose(cut, raw[:, :64] / np.linalg.norm(raw[:, :64], axis=1, keepdims=True), atol=1e-6)
    np.testing.assert_allclose(minilm.encode(texts[:3], normalize=False, truncate_dim=8), raw[:, :8], atol=1e-6)
    assert minilm.encode([], truncate_dim=8).shape == (0, 8)


def test_truncate_dim_attribute_is_the_default_and_is_checked(minilm_path, texts):
    encoder = TextEncoder.from_pretrained(minilm_path)
    full = encoder.encode(texts[:2])
    encoder.truncate_dim = 32
    np.testing.assert_allclose(encoder.encode(texts[:2]), encoder.encode(texts[:2], truncate_dim=32))
    assert encoder.encode(texts[:2], truncate_dim=384).shape == full.shape
    for bad in (0, 385, 2.5):
        with pytest.raises(ConfigError, match="truncate_dim"):
            encoder.encode(texts[:2], truncate_dim=bad)


def test_forward_fields_and_projection_only_in_training(minilm, texts, variant):
    torch.manual_seed(0)
    encoder = variant(pooling="cls_before_pooler", projection="mlp")
    batch = encoder.tokenize(texts[:3])
    assert set(batch) == {"input_ids", "attention_mask", "token_type_ids"}
    encoder.eval()
    with torch.no_grad():
        out = encoder(**batch)
    seq = batch["input_ids"].shape[1]
    assert out.token_embeddings.shape == (3, seq, 384) and out.input_embeddings.shape == (3, seq, 384)
    torch.testing.assert_close(out.input_embeddings, minilm.backbone.get_input_embeddings()(batch["input_ids"]))
    torch.testing.assert_close(out.pooled, out.token_embeddings[:, 0])
    torch.testing.assert_close(out.embedding, out.pooled)  # eval: the training-only MLP is skipped
    torch.testing.assert_close(out.projected, encoder.projection(out.pooled))
    assert torch.equal(out.attention_mask, batch["attention_mask"])
    encoder.train()
    try:
        out = encoder(**batch)
        assert out.embedding.requires_grad
        assert out.embedding.shape == (3, 384) and not torch.allclose(out.embedding, out.pooled)
    finally:
        encoder.eval()


def test_hidden_states_requested_only_when_the_pooling_needs_them(minilm, monkeypatch, variant):
    seen = []
    original = minilm.backbone.forward
    monkeypatch.setattr(minilm.backbone, "forward", lambda **kw: seen.append(kw) or original(**kw))
    monkeypatch.setattr("contrastext.models.encoder.packed_forward", lambda *args, **kwargs: None)  # plain path
    batch = minilm.tokenize(["a short text"])
    with torch.no_grad():
        minilm(**batch)
        variant(pooling="first_last_avg")(**batch)
    assert [kw.get("output_hidden_states", False) for kw in seen] == [False, True]


def test_from_config_builds_a_random_small_bert_with_the_minilm_vocab(minilm_path, minilm, texts):
    torch.manual_seed(0)
    encoder = TextEncoder.from_config(SMALL_BERT, minilm_path, pooling="cls")
    config = encoder.backbone.config
    assert (config.vocab_size, config.hidden_size, config.num_hidden_layers) == (30522, 32, 2)
    assert encoder.tokenizer.get_vocab() == minilm.tokenizer.get_vocab()
    embeddings = encoder.encode(texts[:2])
    assert embeddings.shape == (2, 32) and np.isfinite(embeddings).all()
    with pytest.raises(ConfigError, match="num_hidden_layer"):
        TextEncoder.from_config({"num_hidden_layer": 2}, minilm_path)
    with pytest.raises(ConfigError, match="vocab_size"):
        TextEncoder.from_config({**SMALL_BERT, "vocab_size": 100}, minilm_path)


def test_backbone_without_token_type_ids_or_pooler(minilm_path, texts):
    config = {"model_type": "distilbert", "dim": 32, "n_layers": 1, "n_heads": 2, "hidden_dim": 64}
    encoder = TextEncoder.from_config(config, minilm_path)
    batch = encoder.tokenize(texts[:2])
    assert "token_type_ids" not in batch
    with torch.no_grad():
        out = encoder(**batch, token_type_ids=torch.zeros_like(batch["input_ids"]))
    assert out.embedding.shape == (2, 32)
    assert encoder.encode(texts[:2]).shape == (2, 32)
    with pytest.raises(ConfigError, match="pooler"):
        TextEncoder.from_config(config, minilm_path, pooling="pooler")


def test_clear_errors(minilm, minilm_path, tmp_path, variant):
    with pytest.raises(UnknownNameError, match="first_last_avg"):
        TextEncoder.from_pretrained(minilm_path, pooling="avg")
    with pytest.raises(UnknownNameError, match="mean"):
        variant(pooling="weightedmean")
    with pytest.raises(ConfigError, match="cls_before_pooler"):
        variant(pooling="cls_before_pooler", projection="mlp", projection_at_inference=True)
    with pytest.raises(TypeError, match=r"\[text\]"):
        minilm.encode("one string")
    with pytest.raises(TypeError, match=r"texts\[1\]"):
        minilm.encode(["fine", 3])
    with pytest.raises(UnknownNameError, match="numpy"):
        minilm.encode(["x"], convert_to="list")
    with pytest.raises(MissingDataError, match="no saved encoder"):
        TextEncoder.load(tmp_path / "missing")
    with pytest.raises(MissingDataError, match="no model at"):
        TextEncoder.from_pretrained(str(tmp_path / "missing"))


@pytest.mark.cuda
@pytest.mark.parametrize("unpad", [True, False], ids=["packed", "padded"])
def test_cuda_encode_equals_the_cpu_encode(cuda_device, tiny_bert_path, texts, unpad):
    """The tiny random BERT (MiniLM's vocabulary) encodes on the GPU as on the CPU, in input order, every batch
    packed (``unpad_min_padding`` 0) or none; the results come back as CPU float32 arrays or tensors."""
    encoder = TextEncoder.from_pretrained(tiny_bert_path, pooling="mean")
    encoder.unpad, encoder.unpad_min_padding = unpad, 0.0
    on_cpu = encoder.encode(texts, batch_size=3)
    encoder.to(cuda_device)
    assert encoder.device.type == cuda_device.type
    ours = encoder.encode(texts, batch_size=3)
    assert ours.dtype == np.float32 and ours.shape == on_cpu.shape
    assert np.abs(ours - on_cpu).max() <= 1e-4
    as_torch = encoder.encode(texts, batch_size=3, convert_to="torch")
    assert as_torch.device.type == "cpu" and np.abs(as_torch.numpy() - on_cpu).max() <= 1e-4
    with torch.autocast(cuda_device.type, dtype=torch.bfloat16):
        half = encoder.encode(texts, batch_size=3)  # float32 out, near the float32 result
    assert half.dtype == np.float32 and np.isfinite(half).all() and np.abs(half - on_cpu).max() <= 0.1
