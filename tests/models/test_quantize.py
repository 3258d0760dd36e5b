"""``--quantize-weights int8``: dynamic int8 linear layers for encoding.

- ``quantize_encoder(encoder, "int8")`` returns a copy whose ``nn.Linear`` layers are dynamic int8 ones (the
  float encoder is left as it was); its embeddings stay close to the float ones (cosine ≥ 0.85 on every text,
  ≥ 0.95 on average) and it still runs through the packed forward, whose projections it calls module by module;
  ``"none"`` returns the encoder itself.
- ``contrastext encode --quantize-weights int8`` writes the quantised embeddings (unit rows, close to the float ones); an
  unknown value is a one-line usage error.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from contrastext.cli.encode_command import quantize_encoder
from contrastext.errors import ContrastextError
from contrastext.models import TextEncoder
from tests.cli.cli_runs import run

pytestmark = pytest.mark.usefixtures("single_torch_thread")


def linear_kinds(module: nn.Module) -> set[str]:
    """The classes of the linear layers (float or quantised; not their packed-parameter holders)."""
    return {type(child).__module__ + "." + type(child).__name__ for child in module.modules()
            if type(child).__name__ == "Linear"}


def test_int8_is_a_quantised_copy_close_to_the_float_encoder(minilm, texts):
    quantised = quantize_encoder(minilm, "int8")
    assert quantised is not minilm
    assert all("quantized.dynamic" in kind for kind in linear_kinds(quantised.backbone))
    assert all(type(child) is nn.Linear for child in minilm.backbone.modules() if isinstance(child, nn.Linear))
    float_embeddings = minilm.encode(texts)
    int8_embeddings = quantised.encode(texts)
    cosines = (float_embeddings * int8_embeddings).sum(axis=1)
    assert cosines.min() >= 0.85 and cosines.mean() >= 0.95  # short texts ("ok") lose the most
    assert np.abs(int8_embeddings - float_embeddings).max() > 1e-4  # it is quantised


def test_int8_runs_through_the_packed_forward(minilm, texts, monkeypatch):
    import contrastext.models.encoder as encoder_module

    quantised = quantize_encoder(minilm, "int8")
    results = []
    original = encoder_module.packed_forward
    monkeypatch.setattr(encoder_module, "packed_forward", lambda *a, **kw: results.append(original(*a, **kw)) or
                        results[-1])
    with torch.inference_mode():
        quantised.eval()(**quantised.tokenize(texts))
    assert results and results[0] is not None


def test_none_returns_the_encoder_and_an_unknown_mode_is_refused(minilm):
    assert quantize_encoder(minilm, "none") is minilm
    with pytest.raises(ContrastextError, match="--quantize-weights 'int4'"):
        quantize_encoder(minilm, "int4")


def test_encode_command_with_quantize_int8(minilm_path, tmp_path, capsys):
    texts = tmp_path / "texts.txt"
    texts.write_text("A man is playing a guitar.\nA woman slices an onion.\nThe cat sleeps.\n", encoding="utf-8")
    outputs = {}
    for mode in ("none", "int8"):
        out = tmp_path / f"{mode}.npy"
        argv = ["encode", "--model", minilm_path, "--input", str(texts), "--output", str(out), "--no-progress",
                "--quantize-weights", mode]
        code, _, stderr = run(argv, capsys)
        assert code == 0, stderr
        outputs[mode] = np.load(out)
    np.testing.assert_allclose(np.linalg.norm(outputs["int8"], axis=1), 1.0, atol=1e-5)
    assert (outputs["int8"] * outputs["none"]).sum(axis=1).min() >= 0.85
    expected = TextEncoder.from_pretrained(minilm_path).encode(texts.read_text().splitlines())
    assert np.abs(outputs["none"] - expected).max() <= 1e-6


def test_encode_command_refuses_an_unknown_quantization(minilm_path, tmp_path, capsys):
    texts = tmp_path / "texts.txt"
    texts.write_text("one\n", encoding="utf-8")
    argv = ["encode", "-m", minilm_path, "-i", str(texts), "-o", str(tmp_path / "e.npy"), "--quantize-weights", "int4"]
    code, _, stderr = run(argv, capsys)
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and "--quantize" in lines[0], stderr
    assert not (tmp_path / "e.npy").exists()


def test_encode_command_refuses_int8_off_the_cpu(tiny_bert_path, tmp_path, capsys):
    import torch

    texts = tmp_path / "texts.txt"
    texts.write_text("One text.\n", encoding="utf-8")
    device = "cuda" if torch.cuda.is_available() else "meta"
    argv = ["encode", "-m", tiny_bert_path, "-i", str(texts), "-o", str(tmp_path / "e.npy"), "--quantize-weights", "int8",
            "--device", device, "--no-progress"]
    code, _, stderr = run(argv, capsys)
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and "--device" in lines[0], stderr
