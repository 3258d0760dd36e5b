"""Builders of hostile inputs shared by the robustness tests: damaged model folders, crafted pickles,
custom-code model folders, and damaged files in general.

Every builder works on a copy (``copy_model``) of a small saved model, so the originals stay intact.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import torch

REPO_ROOT = Path(__file__).resolve().parents[2]

CORRUPTIONS = ("truncated", "empty", "garbage", "bad_header_size", "bad_header_json", "missing_tensor_bytes")
"""Ways :func:`corrupt_safetensors` damages a file."""


def copy_model(source: str | Path, destination: Path) -> Path:
    """A fresh copy of a model folder."""
    shutil.copytree(source, destination)
    return destination


def corrupt_safetensors(path: Path, how: str) -> Path:
    """Damage a safetensors file in one of the :data:`CORRUPTIONS` ways."""
    data = path.read_bytes()
    (header_size,) = struct.unpack("<Q", data[:8])
    if how == "truncated":
        damaged = data[: len(data) // 2]
    elif how == "empty":
        damaged = b""
    elif how == "garbage":
        damaged = b"this is not a safetensors file at all\n" * 3
    elif how == "bad_header_size":
        damaged = struct.pack("<Q", 2**40) + data[8:]
    elif how == "bad_header_json":
        damaged = data[:8] + b"\x00" * header_size + data[8 + header_size :]
    elif how == "missing_tensor_bytes":
        damaged = data[:-4]
    else:
        raise ValueError(how)
    path.write_bytes(damaged)
    return path


def add_remote_code(folder: Path, marker: Path, known_model_type: bool) -> Path:
    """Make ``config.json`` map the model to a ``custom.py`` in the folder that creates ``marker`` when run."""
    model_type = "bert" if known_model_type else "contrastext-hostile"
    (folder / "custom.py").write_text(
        "import pathlib\n"
        f"pathlib.Path({str(marker)!r}).write_text('the folder code ran')\n"
        "from transformers import BertConfig, BertModel\n"
        "class CustomConfig(BertConfig):\n"
        f"    model_type = {model_type!r}\n"
        "class CustomModel(BertModel):\n"
        "    config_class = CustomConfig\n",
        encoding="utf-8",
    )
    config_path = folder / "config.json"
    config = json.loads(config_path.read_text(encoding="utf-8"))
    config["model_type"] = model_type
    config["auto_map"] = {"AutoConfig": "custom.CustomConfig", "AutoModel": "custom.CustomModel"}
    config_path.write_text(json.dumps(config), encoding="utf-8")
    return folder


class _Payload:
    """Unpickling this runs ``touch marker``: what weights_only=True must refuse."""

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.system, (f"touch {shlex.quote(self.marker)}",))


def replace_weights_with_pickle(folder: Path, marker: Path) -> Path:
    """Swap ``model.safetensors`` for a ``pytorch_model.bin`` whose unpickling would create ``marker``."""
    (folder / "model.safetensors").unlink()
    torch.save({"embeddings.word_embeddings.weight": _Payload(marker)}, folder / "pytorch_model.bin")
    return folder


def drop_tokenizer(folder: Path) -> Path:
    """Remove every tokenizer file (what an incomplete copy of a model folder looks like)."""
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        (folder / name).unlink(missing_ok=True)
    return folder


def grow_tokenizer(folder: Path, extra: int = 3) -> Path:
    """Add tokens to the folder's tokenizer so that it is larger than the embedding matrix."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    tokenizer.add_tokens([f"hostiletoken{index}" for index in range(extra)])
    tokenizer.save_pretrained(str(folder))
    return folder


def nan_model(source: str | Path, destination: Path) -> Path:
    """A copy of a saved encoder whose every weight is NaN (a diverged training)."""
    from contrastext.models import TextEncoder

    encoder = TextEncoder.load(source)
    with torch.no_grad():
        for parameter in encoder.parameters():
            parameter.fill_(float("nan"))
    encoder.save(destination)
    return destination


def with_training_projection(source: str | Path, destination: Path) -> Path:
    """A copy of a saved encoder with a training-only projection (``contrastext_projection.safetensors``)."""
    from contrastext.models import TextEncoder

    encoder = TextEncoder.load(source)
    TextEncoder(encoder.backbone, encoder.tokenizer, pooling=encoder.pooling, projection="mlp").save(destination)
    return destination


def set_json_key(path: Path, key: str, value) -> Path:
    """Set one key of a JSON object file."""
    content = json.loads(path.read_text(encoding="utf-8"))
    content[key] = value
    path.write_text(json.dumps(content), encoding="utf-8")
    return path


def run_cli(args: list[str], timeout: int = 300) -> subprocess.CompletedProcess:
    """``python -m contrastext ARGS`` in a subprocess with stdin closed (no prompt can be answered)."""
    return subprocess.run(
        [sys.executable, "-m", "contrastext", *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO_ROOT,
    )


# ----------------------------------------------------------------------------------------------- data roots

STSB_DEV = "stsb/original/sts-dev.csv"
SICK_DEV = "senteval/downstream/SICK/SICK_trial.txt"
STS12 = "senteval/downstream/STS/STS12-en-test"
SST2_TRAIN = "glue/SST-2/train.tsv"
SST2_DEV = "glue/SST-2/dev.tsv"


def _head(source: Path, destination: Path, lines: int) -> None:
    destination.parent.mkdir(parents=True, exist_ok=True)
    with source.open("rb") as handle:
        destination.write_bytes(b"".join(line for _, line in zip(range(lines), handle, strict=False)))


def _balanced_sst2(source: Path, destination: Path, per_class: int) -> None:
    """The header and the first ``per_class`` rows of each label, interleaved."""
    rows = source.read_bytes().split(b"\n")
    by_label: dict[bytes, list[bytes]] = {b"0": [], b"1": []}
    for row in rows[1:]:
        label = row.rsplit(b"\t", 1)[-1].strip()
        if label in by_label and len(by_label[label]) < per_class:
            by_label[label].append(row)
    chosen = [row for pair in zip(by_label[b"0"], by_label[b"1"], strict=True) for row in pair]
    destination.parent.mkdir(parents=True, exist_ok=True)
    destination.write_bytes(b"\n".join([rows[0], *chosen]) + b"\n")


def small_data_root(real_root: Path, destination: Path, rows: int = 20) -> Path:
    """A data root with the first ``rows`` rows of STS-B dev, SICK trial, every STS12 subset and SST-2."""
    _head(real_root / STSB_DEV, destination / STSB_DEV, rows)
    _head(real_root / SICK_DEV, destination / SICK_DEV, rows + 1)
    for path in sorted((real_root / STS12).glob("STS.*.txt")):
        _head(path, destination / STS12 / path.name, rows)
    _balanced_sst2(real_root / SST2_TRAIN, destination / SST2_TRAIN, rows // 2)
    _head(real_root / SST2_DEV, destination / SST2_DEV, rows + 1)
    return destination


# ----------------------------------------------------------------------------------------------- model-folder damage


def edit_weights(folder: Path, edit) -> Path:
    """Rewrite ``model.safetensors`` with ``edit(state) -> state`` (drop, add or retype tensors)."""
    from safetensors.torch import load_file, save_file

    path = folder / "model.safetensors"
    save_file(edit(load_file(str(path))), str(path), metadata={"format": "pt"})
    return folder


def without_tensors(folder: Path, part: str) -> Path:
    """Drop every tensor whose name contains ``part`` (``".layer.0."``: a whole layer; ``"pooler"``)."""
    return edit_weights(folder, lambda state: {k: v for k, v in state.items() if part not in k})


def integer_tensors(folder: Path, part: str) -> Path:
    """Store the tensors whose name contains ``part`` as int64 (a wrong conversion of the weights)."""
    return edit_weights(folder, lambda state: {k: v.long() if part in k else v for k, v in state.items()})


def extra_tensor(folder: Path, name: str, shape: tuple[int, ...] = (4,)) -> Path:
    """Add one tensor ``name`` to the weights."""
    return edit_weights(folder, lambda state: {**state, name: torch.zeros(shape)})


def set_vocabulary(folder: Path, tokens: list[str]) -> Path:
    """Replace the tokenizer by a WordPiece ``vocab.txt`` holding ``tokens`` (empty: an empty file)."""
    (folder / "tokenizer.json").unlink(missing_ok=True)
    (folder / "vocab.txt").write_text("".join(f"{token}\n" for token in tokens), encoding="utf-8")
    return folder


def folder_digest(folder: Path) -> dict[str, str]:
    """sha256 of every file under ``folder`` (to show a refused command changed nothing)."""
    import hashlib

    return {
        str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


def narrow_first_layer(config_path: Path, weights_path: Path, prefix: str, width: int) -> None:
    """Make a saved projection (a Dense module, or our training projection) take inputs of ``width``: its config's
    ``in_features`` and its first weight matrix agree with each other, not with the model."""
    from safetensors.torch import load_file, save_file

    state = load_file(str(weights_path))
    state[f"{prefix}weight"] = state[f"{prefix}weight"][:, :width].contiguous()
    save_file(state, str(weights_path))
    config = json.loads(config_path.read_text(encoding="utf-8"))
    (config["layers"][0] if "layers" in config else config)["in_features"] = width
    config_path.write_text(json.dumps(config), encoding="utf-8")
