"""Loading hostile model folders: no code from the folder runs, damaged files are one-line errors naming them,
missing tokenizers and oversized tokenizers or lengths are refused (issue 10, items 1-3)."""

from __future__ import annotations

import logging
import shutil
import struct

import pytest
import torch

from contrastext.errors import (
    ConfigError,
    ContrastextError,
    CorruptFileError,
    MissingDataError,
    UnsafeLoadError,
)
from contrastext.models import TextEncoder
from contrastext.models.weights import check_safetensors, load_safetensors, load_torch_weights
from tests.robustness import hostile


@pytest.fixture
def folder(tiny_bert_path, tmp_path):
    """A fresh copy of the tiny BERT (CLS pooling, MiniLM vocabulary, 512 positions)."""
    return hostile.copy_model(tiny_bert_path, tmp_path / "model")


def one_line(error: BaseException) -> str:
    message = str(error)
    assert "\n" not in message, message
    return message


# ------------------------------------------------------------------------------------------ remote code


def test_auto_map_with_a_known_model_type_loads_the_builtin_class_without_running_the_code(folder, tmp_path, caplog):
    marker = tmp_path / "ran"
    hostile.add_remote_code(folder, marker, known_model_type=True)
    with caplog.at_level(logging.WARNING, logger="contrastext.models"):
        encoder = TextEncoder.load(folder)
    assert type(encoder.backbone).__name__ == "BertModel"
    assert not marker.exists()
    assert "auto_map" in caplog.text and "not run" in caplog.text


def test_auto_map_needing_the_folder_code_is_refused_without_running_it(folder, tmp_path):
    marker = tmp_path / "ran"
    hostile.add_remote_code(folder, marker, known_model_type=False)
    with pytest.raises(UnsafeLoadError, match="trust_remote_code") as caught:
        TextEncoder.load(folder)
    assert str(folder / "config.json") in one_line(caught.value)
    assert not marker.exists()


def test_remote_code_never_prompts_from_the_command_line(folder, tmp_path):
    """Before the fix transformers asked "run the custom code? [y/N]" on the terminal."""
    marker = tmp_path / "ran"
    hostile.add_remote_code(folder, marker, known_model_type=False)
    texts = tmp_path / "texts.txt"
    texts.write_text("a text\n", encoding="utf-8")
    done = hostile.run_cli(["encode", "-m", str(folder), "-i", str(texts), "-o", str(tmp_path / "e.npy"), "--no-progress"])
    assert done.returncode == 2, done.stderr
    assert "[y/N]" not in done.stdout + done.stderr and "Traceback" not in done.stderr
    assert [line for line in done.stderr.splitlines() if line.startswith("error:")] == [done.stderr.strip()]
    assert "--trust-remote-code" in done.stderr
    assert not marker.exists()


def test_trust_remote_code_is_an_explicit_parameter_that_defaults_to_off():
    import inspect

    for method in (TextEncoder.from_pretrained, TextEncoder.load):
        assert inspect.signature(method).parameters["trust_remote_code"].default is False


def test_every_from_pretrained_call_passes_trust_remote_code(folder, monkeypatch):
    import transformers

    seen = []
    for cls in (transformers.AutoModel, transformers.AutoTokenizer):
        original = cls.from_pretrained.__func__

        def spy(klass, *args, _original=original, **kwargs):
            seen.append((klass.__name__, kwargs.get("trust_remote_code", "absent")))
            return _original(klass, *args, **kwargs)

        monkeypatch.setattr(cls, "from_pretrained", classmethod(spy))
    TextEncoder.load(folder)
    assert seen and all(value is False for _, value in seen), seen


# ------------------------------------------------------------------------------------------ pickles


def test_a_pickle_holding_code_is_refused_in_one_line(folder, tmp_path):
    marker = tmp_path / "pwned"
    hostile.replace_weights_with_pickle(folder, marker)
    with pytest.raises(UnsafeLoadError, match="refused to unpickle") as caught:
        TextEncoder.load(folder)
    assert str(folder / "pytorch_model.bin") in one_line(caught.value)
    assert not marker.exists()
    with pytest.raises(UnsafeLoadError, match="weights_only"):
        load_torch_weights(folder / "pytorch_model.bin")
    assert not marker.exists()


def test_plain_tensor_bin_weights_still_load(folder, tmp_path):
    state = load_safetensors(folder / "model.safetensors")
    (folder / "model.safetensors").unlink()
    torch.save(state, folder / "pytorch_model.bin")
    assert TextEncoder.load(folder).hidden_size == 32


# ------------------------------------------------------------------------------------------ damaged weights


@pytest.mark.parametrize("how", hostile.CORRUPTIONS)
def test_damaged_backbone_weights_name_the_file(folder, how):
    hostile.corrupt_safetensors(folder / "model.safetensors", how)
    with pytest.raises(CorruptFileError) as caught:
        TextEncoder.load(folder)
    assert one_line(caught.value).startswith(str(folder / "model.safetensors"))


@pytest.mark.parametrize("how", hostile.CORRUPTIONS)
def test_damaged_projection_weights_name_the_file(tiny_bert_path, tmp_path, how):
    folder = hostile.with_training_projection(tiny_bert_path, tmp_path / "projected")
    path = folder / "contrastext_projection.safetensors"
    hostile.corrupt_safetensors(path, how)
    with pytest.raises(CorruptFileError) as caught:
        TextEncoder.load(folder)
    assert one_line(caught.value).startswith(str(path))


def test_damaged_dense_module_weights_name_the_file(tiny_bert_path, tmp_path):
    encoder = TextEncoder.load(tiny_bert_path)
    folder = tmp_path / "dense"
    TextEncoder(encoder.backbone, encoder.tokenizer, projection="mlp", projection_at_inference=True).save(folder)
    path = folder / "2_Dense" / "model.safetensors"
    hostile.corrupt_safetensors(path, "truncated")
    with pytest.raises(CorruptFileError, match="truncated") as caught:
        TextEncoder.load(folder)
    assert one_line(caught.value).startswith(str(path))


def test_check_safetensors_accepts_a_valid_file_and_names_a_padded_one(folder):
    path = folder / "model.safetensors"
    check_safetensors(path)
    path.write_bytes(path.read_bytes() + b"\x00" * 16)
    with pytest.raises(CorruptFileError, match="padded"):
        check_safetensors(path)


def test_header_entry_that_does_not_fit_its_bytes_is_named(tmp_path):
    header = b'{"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 8]}}'
    path = tmp_path / "w.safetensors"
    path.write_bytes(struct.pack("<Q", len(header)) + header + b"\x00" * 8)
    with pytest.raises(CorruptFileError, match="'w'.*does not fit"):
        check_safetensors(path)


# ------------------------------------------------------------------------------------------ tokenizer, lengths


def test_a_folder_without_tokenizer_files_is_an_error(folder):
    """Before the fix transformers built a 5-token tokenizer: every word became [UNK]."""
    hostile.drop_tokenizer(folder)
    with pytest.raises(MissingDataError, match="no tokenizer files") as caught:
        TextEncoder.load(folder)
    assert str(folder) in one_line(caught.value)


def test_a_tokenizer_larger_than_the_embedding_matrix_is_an_error(folder):
    hostile.grow_tokenizer(folder, extra=3)
    with pytest.raises(ConfigError, match=r"30525 tokens .* 30522 rows"):
        TextEncoder.load(folder)


def test_explicit_max_length_above_the_position_limit_is_refused(folder):
    with pytest.raises(ConfigError, match="position limit of 512"):
        TextEncoder.from_pretrained(folder, max_seq_length=4096)
    encoder = TextEncoder.load(folder)
    with pytest.raises(ConfigError, match="position limit"):
        encoder.tokenize(["a text"], max_length=600)
    too_long = torch.ones((1, 600), dtype=torch.long)
    with pytest.raises(ConfigError, match="longer than the model's position limit"):
        encoder(input_ids=too_long, attention_mask=too_long)


def test_a_folder_max_length_above_the_position_limit_is_clamped_with_a_warning(folder, caplog):
    hostile.set_json_key(folder / "sentence_bert_config.json", "max_seq_length", 100_000)
    with caplog.at_level(logging.WARNING, logger="contrastext.models"):
        encoder = TextEncoder.load(folder)
    assert encoder.max_seq_length == encoder.position_limit == 512
    assert "100000" in caplog.text and "512" in caplog.text
    long_text = " ".join(["word"] * 2000)
    assert encoder.encode([long_text]).shape == (1, 32)  # truncated to the limit, no index error


@pytest.mark.parametrize("value", ["256", -1, 0, 2.5, None])
def test_a_bad_max_seq_length_in_the_folder_names_the_file(folder, value):
    hostile.set_json_key(folder / "sentence_bert_config.json", "max_seq_length", value)
    if value is None:
        assert TextEncoder.load(folder).max_seq_length == 512
        return
    with pytest.raises(ConfigError, match="sentence_bert_config.json: key 'max_seq_length'"):
        TextEncoder.load(folder)


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("modules.json", '["not", "objects"]'),
        ("modules.json", "{not json"),
        ("1_Pooling/config.json", "[1, 2]"),
        ("1_Pooling/config.json", '{"pooling_mode": 3}'),
        ("contrastext_config.json", '"a string"'),
        ("sentence_bert_config.json", b"\xff\xfe not utf-8"),
    ],
)
def test_malformed_folder_configs_are_one_line_errors_naming_the_file(folder, name, content):
    path = folder / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(ContrastextError) as caught:
        TextEncoder.load(folder)
    assert str(path) in one_line(caught.value)


def test_the_original_folder_still_loads(tiny_bert_path, tmp_path):
    copy = shutil.copytree(tiny_bert_path, tmp_path / "copy")
    encoder = TextEncoder.load(copy)
    assert encoder.encode(["a text", "another one"]).shape == (2, 32)
