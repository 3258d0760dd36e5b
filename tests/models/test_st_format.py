"""The sentence-transformers folder layout: ST loads what we save (exactly), we load ST folders, round trips."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from sentence_transformers import SentenceTransformer

from contrastext.errors import ConfigError
from contrastext.models import TextEncoder
from contrastext.models.st_format import CONTRASTEXT_PROJECTION, read_st_folder, read_st_pooling


def st_encode(path: Path, texts: list[str]) -> np.ndarray:
    return SentenceTransformer(str(path), device="cpu").encode(texts, batch_size=4, normalize_embeddings=False)


@pytest.mark.parametrize("normalize", [False, True])
@pytest.mark.parametrize("pooling", ["cls", "mean", "max"])
def test_sentence_transformers_loads_our_folder_exactly(variant, texts, tmp_path, pooling, normalize):
    encoder = variant(pooling=pooling, normalize=normalize)
    encoder.save(tmp_path)
    model = SentenceTransformer(str(tmp_path), device="cpu")
    assert model.max_seq_length == encoder.max_seq_length
    theirs = model.encode(texts, batch_size=4)
    assert np.abs(encoder.encode(texts) - theirs).max() <= 1e-5
    modules = [module["type"].rsplit(".", 1)[-1] for module in json.loads((tmp_path / "modules.json").read_text())]
    assert modules == ["Transformer", "Pooling"] + (["Normalize"] if normalize else [])


def test_projection_at_inference_becomes_dense_modules(variant, texts, tmp_path):
    torch.manual_seed(0)
    encoder = variant(pooling="mean", projection={"name": "mlp2", "output_dim": 48}, projection_at_inference=True, normalize=True)
    encoder.save(tmp_path)
    model = SentenceTransformer(str(tmp_path), device="cpu")
    theirs = model.encode(texts, batch_size=4)
    assert theirs.shape == (len(texts), 48)
    assert np.abs(encoder.encode(texts) - theirs).max() <= 1e-5
    modules = [module["type"].rsplit(".", 1)[-1] for module in json.loads((tmp_path / "modules.json").read_text())]
    assert modules == ["Transformer", "Pooling", "Dense", "Dense", "Normalize"]
    loaded = TextEncoder.load(tmp_path)
    assert loaded.projection_at_inference and loaded.embedding_dim == 48 and loaded.normalize
    assert np.abs(loaded.encode(texts) - theirs).max() <= 1e-5


@pytest.mark.parametrize("pooling", ["pooler", "first_last_avg"])
def test_poolings_sentence_transformers_lacks_round_trip_through_our_config(variant, texts, tmp_path, pooling):
    encoder = variant(pooling=pooling)
    encoder.save(tmp_path)
    loaded = TextEncoder.load(tmp_path)
    assert loaded.pooling == pooling
    assert np.abs(loaded.encode(texts) - encoder.encode(texts)).max() <= 1e-5
    SentenceTransformer(str(tmp_path), device="cpu")  # ST still loads the folder (nearest ST pooling)
    assert not json.loads((tmp_path / "contrastext_config.json").read_text())["exact_in_sentence_transformers"]


def test_training_only_projection_is_kept(variant, texts, tmp_path):
    torch.manual_seed(0)
    encoder = variant(pooling="cls_before_pooler", projection="mlp")
    encoder.save(tmp_path)
    assert (tmp_path / CONTRASTEXT_PROJECTION).is_file()
    assert not any(path.name.endswith("_Dense") for path in tmp_path.iterdir())
    loaded = TextEncoder.load(tmp_path)
    assert (loaded.pooling, loaded.projection_at_inference, loaded.embedding_dim) == ("cls_before_pooler", False, 384)
    for ours, theirs in zip(loaded.projection.state_dict().values(), encoder.projection.state_dict().values(), strict=True):
        assert torch.equal(ours, theirs)
    assert np.abs(loaded.encode(texts) - encoder.encode(texts)).max() <= 1e-5
    # ST sees the raw [CLS] vector, which is exactly what we evaluate with.
    assert np.abs(st_encode(tmp_path, texts) - encoder.encode(texts)).max() <= 1e-5


def test_backbone_in_a_0_transformer_subfolder(minilm, minilm_path, texts, tmp_path):
    source = Path(minilm_path)
    (tmp_path / "0_Transformer").mkdir()
    for name in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "vocab.txt",
                 "special_tokens_map.json", "sentence_bert_config.json"):
        (tmp_path / "0_Transformer" / name).symlink_to(source / name)
    (tmp_path / "1_Pooling").mkdir()
    (tmp_path / "1_Pooling" / "config.json").write_text(json.dumps({"embedding_dimension": 384, "pooling_mode": "max"}))
    modules = [
        {"idx": 0, "name": "0", "path": "0_Transformer", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    ]
    (tmp_path / "modules.json").write_text(json.dumps(modules))
    loaded = TextEncoder.load(tmp_path)
    assert (loaded.pooling, loaded.normalize, loaded.max_seq_length) == ("max", False, 256)
    assert np.abs(loaded.encode(texts) - st_encode(tmp_path, texts)).max() <= 1e-5


def test_reading_st_pooling_configs_and_unsupported_layouts(minilm_path, tmp_path):
    assert read_st_pooling({"pooling_mode_cls_token": True}, tmp_path) == "cls"
    assert read_st_pooling({"pooling_mode": ["max"]}, tmp_path) == "max"
    with pytest.raises(ConfigError, match="lasttoken"):
        read_st_pooling({"pooling_mode": "lasttoken"}, tmp_path / "1_Pooling" / "config.json")
    folder = read_st_folder(minilm_path)
    assert (folder.pooling, folder.normalize, folder.max_seq_length, folder.dense) == ("mean", True, 256, None)
    (tmp_path / "modules.json").write_text(
        json.dumps([{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
                    {"idx": 1, "name": "1", "path": "1_LSTM", "type": "sentence_transformers.models.LSTM"}])
    )
    with pytest.raises(ConfigError, match="LSTM"):
        read_st_folder(tmp_path)


def test_prompts_round_trip_and_sentence_transformers_resolves_them_as_we_do(variant, texts, tmp_path):
    encoder = variant(pooling="mean", normalize=True)
    encoder.prompts, encoder.default_prompt_name = {"query": "query: ", "passage": "passage: "}, "query"
    encoder.save(tmp_path)
    loaded, model = TextEncoder.load(tmp_path), SentenceTransformer(str(tmp_path), device="cpu")
    assert (loaded.prompts, loaded.default_prompt_name) == (encoder.prompts, "query")
    assert {name: model.prompts[name] for name in encoder.prompts} == encoder.prompts  # ST adds empty defaults
    assert model.default_prompt_name == "query"
    for arguments in ({}, {"prompt_name": "passage"}, {"prompt": "other: "}, {"prompt": ""}):
        np.testing.assert_allclose(loaded.encode(texts, **arguments), model.encode(texts, **arguments), atol=1e-5)


def test_bad_prompts_in_the_sentence_transformers_config_name_the_file_and_key(variant, tmp_path):
    variant().save(tmp_path)
    config_file = tmp_path / "config_sentence_transformers.json"
    config = json.loads(config_file.read_text())
    for prompts, default, key in (({"query": 3}, None, "'prompts'"), ({"query": "q: "}, "passage", "'default_prompt_name'")):
        config_file.write_text(json.dumps({**config, "prompts": prompts, "default_prompt_name": default}))
        with pytest.raises(ConfigError, match=f"config_sentence_transformers.json: key {key}"):
            TextEncoder.load(tmp_path)


def test_a_pooling_that_leaves_prompts_out_is_refused_only_with_a_prompt(variant, texts, tmp_path):
    variant(pooling="mean").save(tmp_path)
    pooling_file = tmp_path / "1_Pooling" / "config.json"
    pooling_file.write_text(json.dumps({**json.loads(pooling_file.read_text()), "include_prompt": False}))
    loaded = TextEncoder.load(tmp_path)
    loaded.encode(texts)  # no prompt: as sentence-transformers
    with pytest.raises(ConfigError, match="include_prompt: false"):
        loaded.encode(texts, prompt="query: ")
