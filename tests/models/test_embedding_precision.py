"""Embedding precision equals sentence-transformers' quantize_embeddings; ``encode --precision`` writes it."""

from __future__ import annotations

import numpy as np
import pytest

from contrastext.errors import ConfigError, UnknownNameError
from contrastext.models.embedding_precision import PRECISIONS, quantize_embeddings
from tests.cli.cli_runs import run

st_quantization = pytest.importorskip("sentence_transformers.util.quantization")


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("dim", [16, 13])  # 13: the last byte of the bits is padded
def test_equals_st(precision, dim):
    generator = np.random.default_rng(dim)
    embeddings = generator.normal(size=(150, dim)).astype(np.float32)
    embeddings[:, 0] = 0.25  # a dimension with one value: a zero-width range
    mine, theirs = quantize_embeddings(embeddings, precision), st_quantization.quantize_embeddings(embeddings, precision)
    assert mine.dtype == theirs.dtype and mine.shape == theirs.shape
    np.testing.assert_array_equal(mine, theirs)
    if precision.endswith("int8"):
        ranges = np.vstack([embeddings.min(axis=0) - 0.5, embeddings.max(axis=0) - 0.5])  # some values fall outside
        np.testing.assert_array_equal(
            quantize_embeddings(embeddings, precision, ranges),
            st_quantization.quantize_embeddings(embeddings, precision, ranges=ranges),
        )


def test_bad_requests_are_named():
    with pytest.raises(UnknownNameError, match="int4"):
        quantize_embeddings(np.ones((2, 3)), "int4")
    with pytest.raises(ConfigError, match="single embedding"):
        quantize_embeddings(np.ones((1, 3)), "int8")
    with pytest.raises(ConfigError, match=r"shape \(2, 3\)"):
        quantize_embeddings(np.ones((2, 3)), "uint8", np.zeros((3, 3)))


def test_encode_precision_writes_st_quantized_embeddings(minilm_path, tmp_path, capsys):
    texts = tmp_path / "texts.txt"
    texts.write_text("A man is playing a guitar.\nA woman slices an onion.\nThe cat sleeps.\n", encoding="utf-8")
    base = ["encode", "-m", minilm_path, "-i", str(texts), "--no-progress"]
    code, _, err = run([*base, "-o", str(tmp_path / "f.npy")], capsys)
    assert code == 0, err
    floats = np.load(tmp_path / "f.npy")
    for precision in ("ubinary", "binary", "float32"):
        code, _, err = run([*base, "-o", str(tmp_path / f"{precision}.npy"), "--precision", precision], capsys)
        assert code == 0, err
        np.testing.assert_array_equal(np.load(tmp_path / f"{precision}.npy"),
                                      st_quantization.quantize_embeddings(floats, precision))  # fmt: skip
    ranges = np.vstack([floats.min(axis=0), floats.max(axis=0)])
    np.save(tmp_path / "ranges.npy", ranges)
    code, _, err = run([*base, "-o", str(tmp_path / "i8.npy"), "--precision", "int8", "--ranges",
                        str(tmp_path / "ranges.npy")], capsys)  # fmt: skip
    assert code == 0, err
    np.testing.assert_array_equal(np.load(tmp_path / "i8.npy"),
                                  st_quantization.quantize_embeddings(floats, "int8", ranges=ranges))  # fmt: skip


def test_old_quantize_name_and_bad_precision_are_one_line(minilm_path, tmp_path, capsys, no_model_loads):
    texts = tmp_path / "texts.txt"
    texts.write_text("one\n", encoding="utf-8")
    base = ["encode", "-m", minilm_path, "-i", str(texts), "-o", str(tmp_path / "e.npy")]
    for extra, expected in ((["--quantize", "int8"], "--quantize-weights int8"), (["--precision", "int4"], "int4"),
                            (["--precision", "binary", "--ranges", "r.npy"], "--ranges")):  # fmt: skip
        code, _, err = run([*base, *extra], capsys)
        lines = [line for line in err.splitlines() if line.strip()]
        assert code == 2 and len(lines) == 1 and expected in lines[0], err
    assert not (tmp_path / "e.npy").exists()
