"""Damaged model folders are refused before use (issue 21, item 4): config.json must fit the weights (layers,
width, vocabulary), weights are floating point, missing tensors are refused instead of randomly initialised, the
pooling config fits the model, and the tokenizer can tokenize. Each refusal is one line naming the folder and the
file or key, from the library and from `encode`, `eval` and `train` (exit 2, no traceback, nothing written).

Every damaged folder is built from the tiny BERT (2 layers, width 32, MiniLM's vocabulary, CLS pooling).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import torch

from contrastext.errors import ConfigError, ContrastextError, ModelFolderError
from contrastext.models import TextEncoder
from contrastext.models.weights import load_safetensors
from tests.cli.cli_runs import run
from tests.robustness import hostile

pytestmark = pytest.mark.usefixtures("single_torch_thread")


@pytest.fixture
def folder(tiny_bert_path, tmp_path) -> Path:
    return hostile.copy_model(tiny_bert_path, tmp_path / "model")


def one_line(error: BaseException) -> str:
    message = str(error)
    assert "\n" not in message, message
    return message


def config_key(key, value):
    return lambda folder: hostile.set_json_key(folder / "config.json", key, value)


def pooling_key(key, value):
    return lambda folder: hostile.set_json_key(folder / "1_Pooling" / "config.json", key, value)


DAMAGES = {
    # config.json against the weights
    "no layers in the config": (config_key("num_hidden_layers", 0), ["config.json", "'num_hidden_layers' is 0", "2 layers"]),
    "more layers in the config": (config_key("num_hidden_layers", 3), ["config.json", "'num_hidden_layers' is 3", "layer 2"]),
    "wider config": (config_key("hidden_size", 64), ["config.json", "'hidden_size' is 64", "32 wide"]),
    "smaller vocab_size": (config_key("vocab_size", 100), ["config.json", "'vocab_size' is 100", "30522 rows"]),
    "larger vocab_size": (config_key("vocab_size", 40000), ["config.json", "'vocab_size' is 40000", "30522 rows"]),
    # the weights themselves
    "a layer's tensors missing": (
        lambda folder: hostile.without_tensors(folder, ".layer.0."),
        ["model.safetensors", "lack(s) 16 tensor(s)", "encoder.layer.0", "randomly initialised"],
    ),
    "one tensor missing": (
        lambda folder: hostile.without_tensors(folder, "embeddings.LayerNorm.weight"),
        ["model.safetensors", "'embeddings.LayerNorm.weight'"],
    ),
    "int64 embeddings": (
        lambda folder: hostile.integer_tensors(folder, "word_embeddings"),
        ["model.safetensors", "'embeddings.word_embeddings.weight'", "I64", "floating point"],
    ),
    "a tensor the config has no place for": (
        lambda folder: hostile.extra_tensor(folder, "encoder.layer.0.attention.self.gate.weight"),
        ["model.safetensors", "'encoder.layer.0.attention.self.gate.weight'", "silently unused"],
    ),
    # the pooling config
    "unknown pooling flag": (
        pooling_key("pooling_mode_weird_tokens", True),
        ["1_Pooling/config.json", "'pooling_mode_weird_tokens'"],
    ),
    "every pooling flag false": (pooling_key("pooling_mode_cls_token", False), ["1_Pooling/config.json", "false"]),
    "pooling flag not a boolean": (
        pooling_key("pooling_mode_cls_token", "yes"),
        ["1_Pooling/config.json", "'pooling_mode_cls_token'", "true or false"],
    ),
    "unknown pooling_mode": (pooling_key("pooling_mode", "weird"), ["1_Pooling/config.json", "weird"]),
    "pooling of another width": (
        pooling_key("word_embedding_dimension", 999),
        ["1_Pooling/config.json", "'word_embedding_dimension' is 999", "hidden size is 32"],
    ),
    "pooling width not a number": (
        pooling_key("word_embedding_dimension", "32"),
        ["1_Pooling/config.json", "'word_embedding_dimension'", "positive integer"],
    ),
    # the tokenizer
    "empty vocab.txt": (lambda folder: hostile.set_vocabulary(folder, []), ["vocab.txt", "cannot tokenize"]),
    "special tokens only": (
        lambda folder: hostile.set_vocabulary(folder, ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]),
        ["vocab.txt", "empty vocabulary"],
    ),
}


@pytest.mark.parametrize("damage", list(DAMAGES))
def test_a_damaged_folder_is_refused_in_one_line_naming_folder_and_file(folder, damage):
    build, expected = DAMAGES[damage]
    build(folder)
    with pytest.raises(ConfigError) as caught:
        TextEncoder.load(folder)
    message = one_line(caught.value)
    assert str(folder) in message, message
    for part in expected:
        assert part in message, (part, message)


def test_bin_weights_stored_as_integers_are_refused_too(folder):
    state = load_safetensors(folder / "model.safetensors")
    (folder / "model.safetensors").unlink()
    state["embeddings.word_embeddings.weight"] = state["embeddings.word_embeddings.weight"].long()
    torch.save(state, folder / "pytorch_model.bin")
    with pytest.raises(ModelFolderError, match=r"pytorch_model\.bin: tensor 'embeddings.word_embeddings.weight'.*I64"):
        TextEncoder.load(folder)


def test_a_dense_module_of_another_width_names_its_config(tiny_bert_path, tmp_path):
    encoder = TextEncoder.load(tiny_bert_path)
    folder = tmp_path / "dense"
    TextEncoder(encoder.backbone, encoder.tokenizer, projection="mlp", projection_at_inference=True).save(folder)
    hostile.narrow_first_layer(folder / "2_Dense" / "config.json", folder / "2_Dense" / "model.safetensors", "linear.", 16)
    with pytest.raises(ModelFolderError) as caught:
        TextEncoder.load(folder)
    message = one_line(caught.value)
    assert message.startswith(str(folder / "2_Dense" / "config.json")) and "'in_features' is 16" in message
    assert "hidden size is 32" in message


def test_a_training_projection_of_another_width_names_our_config(tiny_bert_path, tmp_path):
    folder = hostile.with_training_projection(tiny_bert_path, tmp_path / "projected")
    with_projection = folder / "contrastext_config.json"
    content = json.loads(with_projection.read_text(encoding="utf-8"))
    projection = tmp_path / "projection.json"
    projection.write_text(json.dumps(content["projection"]), encoding="utf-8")
    hostile.narrow_first_layer(projection, folder / "contrastext_projection.safetensors", "layers.0.linear.", 16)
    hostile.set_json_key(with_projection, "projection", json.loads(projection.read_text()))
    with pytest.raises(ModelFolderError) as caught:
        TextEncoder.load(folder)
    message = one_line(caught.value)
    assert message.startswith(str(with_projection)) and "'projection'" in message and "is 16" in message


def test_other_files_beside_the_weights_are_not_read(folder):
    """A fine-tuned folder often holds training_args.bin, a pickle of objects: it is not the model's weights."""
    from pathlib import PurePosixPath

    state = load_safetensors(folder / "model.safetensors")
    (folder / "model.safetensors").unlink()
    torch.save(state, folder / "pytorch_model.bin")
    torch.save({"output_dir": PurePosixPath("out")}, folder / "training_args.bin")  # weights_only refuses it
    assert TextEncoder.load(folder).encode(["a text"]).shape == (1, 32)


def test_a_tokenizer_far_smaller_than_the_embedding_matrix_is_announced(folder, caplog):
    """Its ids index real rows, but rows of other words: a tokenizer from another model."""
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "short", "probe", "sentence", ",", "123", "."]
    hostile.set_vocabulary(folder, tokens)
    with caplog.at_level(logging.WARNING, logger="contrastext.models"):
        TextEncoder.load(folder)
    assert "12 tokens for an embedding matrix of 30522 rows" in caplog.text and str(folder) in caplog.text


@pytest.fixture
def classifier_folder(tiny_bert_path, tmp_path) -> Path:
    from contrastext.data.tasks import get_task
    from contrastext.methods.classification import FineTuneMethod

    torch.manual_seed(0)
    method = FineTuneMethod(TextEncoder.load(tiny_bert_path), get_task("sst2")).eval()
    return method.export_classifier(tmp_path / "classifier", label_names=["negative", "positive"])


def test_a_classifier_export_still_loads(classifier_folder):
    from contrastext.models.hf_export import load_classifier

    assert load_classifier(classifier_folder).predict([]).shape == (0,)


@pytest.mark.parametrize(("damage", "expected"), [
    ("head", ["lack(s) 4 tensor(s)", "'classifier.", "classifier/ folder a fine-tuning run exported"]),
    ("layers", ["'num_hidden_layers' is 0", "2 layers"]),
])  # fmt: skip
def test_a_damaged_classifier_export_is_refused_not_given_a_random_head(classifier_folder, damage, expected):
    from contrastext.models.hf_export import load_classifier

    if damage == "head":
        hostile.without_tensors(classifier_folder, "classifier.")
    else:
        hostile.set_json_key(classifier_folder / "config.json", "num_hidden_layers", 0)
    with pytest.raises(ModelFolderError) as caught:
        load_classifier(classifier_folder)
    message = one_line(caught.value)
    assert str(classifier_folder) in message and all(part in message for part in expected), message


def test_the_transformers_load_report_is_not_printed(folder, capfd):
    hostile.without_tensors(folder, ".layer.1.")
    with pytest.raises(ModelFolderError):
        TextEncoder.load(folder)
    captured = capfd.readouterr()
    assert "LOAD REPORT" not in captured.out + captured.err


# ----------------------------------------------------------------------------- tensors that are meant to be new


def test_an_absent_pooler_is_accepted_when_the_pooling_does_not_read_it(folder, caplog):
    """RoBERTa's hub checkpoints lack the pooler: under cls / mean pooling it is never used."""
    hostile.without_tensors(folder, "pooler")
    with caplog.at_level(logging.INFO, logger="contrastext.models"):
        encoder = TextEncoder.load(folder)
    assert encoder.encode(["a text"]).shape == (1, 32)
    assert "pooler" in caplog.text and "initialised new" in caplog.text
    assert TextEncoder.from_pretrained(folder, pooling="mean").pooling == "mean"


def test_an_absent_pooler_is_refused_under_pooler_pooling_unless_named_new(folder):
    hostile.without_tensors(folder, "pooler")
    with pytest.raises(ModelFolderError, match=r"'pooler\.dense\.\w+'.*new_weights=\['pooler'\]"):
        TextEncoder.from_pretrained(folder, pooling="pooler")
    encoder = TextEncoder.from_pretrained(folder, pooling="pooler", new_weights=["pooler"])
    assert encoder.pooling == "pooler" and encoder.encode(["a text"]).shape == (1, 32)


def test_new_weights_names_only_what_it_allows(folder):
    hostile.without_tensors(folder, ".layer.1.attention.")
    with pytest.raises(ModelFolderError, match="encoder.layer.1.attention"):
        TextEncoder.from_pretrained(folder, new_weights=["pooler"])
    assert TextEncoder.from_pretrained(folder, new_weights=["encoder.layer.1.attention"]).hidden_size == 32


def test_heads_of_other_tasks_in_the_weights_are_ignored(folder):
    """A pre-training checkpoint holds the MLM head (cls.predictions...): not part of the encoder, not refused."""
    hostile.extra_tensor(folder, "cls.predictions.bias", (30522,))
    assert TextEncoder.load(folder).encode(["a text"]).shape == (1, 32)


def test_heads_and_projections_a_recipe_adds_are_not_affected(tiny_bert_path, tmp_path):
    encoder = TextEncoder.from_pretrained(tiny_bert_path, projection="mlp")  # SimCSE's MLP: new, built apart
    assert encoder.projection is not None
    saved = hostile.with_training_projection(tiny_bert_path, tmp_path / "projected")
    assert TextEncoder.load(saved).projection is not None
    dense = tmp_path / "dense"
    TextEncoder(encoder.backbone, encoder.tokenizer, projection="mlp", projection_at_inference=True).save(dense)
    assert TextEncoder.load(dense).embedding_dim == 32


def test_the_bundled_minilm_loads_with_nothing_new(minilm_path, caplog):
    with caplog.at_level(logging.INFO, logger="contrastext.models"):
        encoder = TextEncoder.load(minilm_path)
    assert encoder.hidden_size == 384 and "initialised new" not in caplog.text


# ----------------------------------------------------------------------------------------- through the CLI


def error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    assert "Traceback" not in stderr
    return lines[0]


CLI_DAMAGES = ("no layers in the config", "int64 embeddings", "a layer's tensors missing", "pooling of another width",
               "empty vocab.txt")  # fmt: skip


@pytest.mark.parametrize("damage", CLI_DAMAGES)
def test_encode_eval_and_train_refuse_a_damaged_folder_in_one_line(folder, tmp_path, data_root, capsys, damage):
    build, expected = DAMAGES[damage]
    build(folder)
    before = hostile.folder_digest(folder)
    texts = tmp_path / "texts.txt"
    texts.write_text("a first text\nthe second text\n", encoding="utf-8")
    data = tmp_path / "sentences.txt"
    data.write_text("".join(f"sentence {i} about topic {i % 3}.\n" for i in range(8)), encoding="utf-8")
    output = tmp_path / "run"
    small_root = hostile.small_data_root(data_root, tmp_path / "data")
    commands = {
        "encode": ["encode", "-m", str(folder), "-i", str(texts), "-o", str(tmp_path / "e.npy"), "--no-progress"],
        "eval": ["eval", "-m", str(folder), "--tasks", "stsb:dev", "--data-root", str(small_root), "--no-progress"],
        "train": [
            "train", "simcse-unsup", "--set", f"model={folder}", f"data.path={data}", "data.task=null",
            "eval.tasks=[]", "train.max_steps=1", "train.batch_size=4", "train.progress_bar=false",
            "--output", str(output),
        ],
    }  # fmt: skip
    for name, argv in commands.items():
        code, _, stderr = run(argv, capsys)
        assert code == 2, (name, stderr)
        line = error_line(stderr)
        assert str(folder) in line and all(part in line for part in expected), (name, line)
    assert not (tmp_path / "e.npy").exists()
    assert not (output / "train_log.jsonl").exists() and not (output / "checkpoints").exists()
    assert hostile.folder_digest(folder) == before


def test_a_sound_folder_still_encodes_through_the_cli(tiny_bert_path, tmp_path, capsys):
    texts = tmp_path / "texts.txt"
    texts.write_text("a first text\nthe second text\n", encoding="utf-8")
    code, _, stderr = run(["encode", "-m", tiny_bert_path, "-i", str(texts), "-o", str(tmp_path / "e.npy"),
                           "--no-progress"], capsys)  # fmt: skip
    assert code == 0, stderr


def test_every_refusal_is_a_contrastext_error():
    assert issubclass(ModelFolderError, ConfigError) and issubclass(ModelFolderError, ContrastextError)
