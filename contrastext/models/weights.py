"""Safe, checked loading of weight files: safetensors headers are checked before use, pickles only hold tensors.

A model folder is user input: its files may be empty, truncated, overwritten with junk or crafted. Every
function here either returns what the file holds or raises a one-line error naming the file:

- :class:`~contrastext.errors.CorruptFileError` for an empty, truncated or malformed file;
- :class:`~contrastext.errors.UnsafeLoadError` for a ``.bin`` pickle holding anything but tensors
  (``torch.load(weights_only=True)`` refuses it; nothing in it is run).

Example::

    >>> check_safetensors("model/model.safetensors")          # doctest: +SKIP
    >>> state = load_safetensors("model/2_Dense/model.safetensors")  # doctest: +SKIP
"""

from __future__ import annotations

import json
import math
import os
import pickle
import re
import struct
from collections.abc import Sequence
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file

from contrastext.errors import CorruptFileError, ModelFolderError, UnsafeLoadError

MAX_HEADER_BYTES = 100_000_000
"""safetensors' own limit on the JSON header."""

DTYPE_BYTES: dict[str, int] = {
    "BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1,
    "I16": 2, "U16": 2, "F16": 2, "BF16": 2,
    "I32": 4, "U32": 4, "F32": 4,
    "I64": 8, "U64": 8, "F64": 8,
}  # fmt: skip
"""Bytes per element of the safetensors dtypes whose size is checked (other dtypes are left to safetensors)."""


def _read_header(path: Path) -> tuple[dict, int]:
    """The JSON header of a safetensors file and the size of its data buffer; CorruptFileError when malformed."""
    size = path.stat().st_size
    if size < 8:
        raise CorruptFileError(path, None, f"not a safetensors file: {size} bytes, shorter than the 8-byte header size")
    with path.open("rb") as handle:
        (header_bytes,) = struct.unpack("<Q", handle.read(8))
        if header_bytes == 0 or header_bytes > min(MAX_HEADER_BYTES, size - 8):
            raise CorruptFileError(
                path, None, f"not a safetensors file or truncated: header of {header_bytes} bytes in a file of {size}"
            )
        raw = handle.read(header_bytes)
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise CorruptFileError(path, None, f"not a safetensors file: its header is not valid JSON ({error})") from None
    if not isinstance(header, dict):
        raise CorruptFileError(path, None, "not a safetensors file: its header is not a JSON object")
    return header, size - 8 - header_bytes


def _check_entry(path: Path, name: str, entry: object, buffer: int) -> int:
    """Check one tensor's header entry; returns the end of its bytes in the data buffer."""
    if not isinstance(entry, dict):
        raise CorruptFileError(path, None, f"tensor {name!r}: malformed header entry")
    offsets, shape, dtype = entry.get("data_offsets"), entry.get("shape"), entry.get("dtype")
    valid_offsets = isinstance(offsets, list) and len(offsets) == 2 and all(type(o) is int for o in offsets)
    if not valid_offsets or not 0 <= offsets[0] <= offsets[1]:
        raise CorruptFileError(path, None, f"tensor {name!r}: bad data_offsets {offsets!r}")
    if not isinstance(shape, list) or not all(type(dim) is int and dim >= 0 for dim in shape):
        raise CorruptFileError(path, None, f"tensor {name!r}: bad shape {shape!r}")
    if offsets[1] > buffer:
        raise CorruptFileError(
            path, None, f"truncated: tensor {name!r} ends at byte {offsets[1]} of a {buffer}-byte data buffer"
        )
    if dtype in DTYPE_BYTES and (offsets[1] - offsets[0]) != math.prod(shape) * DTYPE_BYTES[dtype]:
        raise CorruptFileError(path, None, f"tensor {name!r}: {dtype} {shape} does not fit its {offsets} bytes")
    return offsets[1]


def check_safetensors(path: str | os.PathLike) -> None:
    """Raise CorruptFileError naming ``path`` unless its header is valid and covers the whole file.

    Reads the header only (a few kilobytes), so it is cheap to call before handing the file to a loader.
    """
    path = Path(path)
    header, buffer = _read_header(path)
    ends = [_check_entry(path, name, entry, buffer) for name, entry in header.items() if name != "__metadata__"]
    if max(ends, default=0) != buffer:
        raise CorruptFileError(
            path, None, f"truncated or padded: the tensors cover {max(ends, default=0)} of {buffer} data bytes"
        )


def load_safetensors(path: str | os.PathLike, device: str = "cpu") -> dict[str, torch.Tensor]:
    """``safetensors.torch.load_file`` after :func:`check_safetensors`; any failure names the file."""
    check_safetensors(path)
    try:
        return load_file(str(path), device=device)
    except (SafetensorError, OSError, ValueError, RuntimeError) as error:
        raise CorruptFileError(path, None, f"cannot read the safetensors file ({first_line(error)})") from None


def load_torch_weights(path: str | os.PathLike) -> dict[str, torch.Tensor]:
    """A ``.bin``/``.pt`` state dict through ``torch.load(weights_only=True)``: tensors only, nothing run."""
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as error:
        raise refused_pickle(path, error) from None
    except (EOFError, RuntimeError, OSError, ValueError) as error:
        raise CorruptFileError(path, None, f"not a readable torch weights file ({first_line(error)})") from None


def refused_pickle(path: str | os.PathLike, error: BaseException) -> UnsafeLoadError:
    """The one-line error for a pickle that ``weights_only=True`` refused (it holds more than tensors)."""
    reasons = [line.strip() for line in str(error).splitlines() if "GLOBAL" in line or "Unsupported" in line]
    reason = reasons[0] if reasons else first_line(error)
    return UnsafeLoadError(
        f"{path}: refused to unpickle: the file holds objects other than tensors ({reason}); "
        "contrastext loads .bin weights with weights_only=True only: convert the file to safetensors from a "
        "trusted environment"
    )


def first_line(error: BaseException) -> str:
    """The first non-empty line of an exception's message (or its type name)."""
    for line in str(error).splitlines():
        if line.strip():
            return line.strip()
    return type(error).__name__


def check_backbone_weights(folder: str | os.PathLike) -> None:
    """Check every ``*.safetensors`` file at the top of a local backbone folder before transformers reads it."""
    folder = Path(folder)
    if not folder.is_dir():
        return
    for path in sorted(folder.glob("*.safetensors")):
        check_safetensors(path)


# ----------------------------------------------------------------------------------- weights against the config

FLOAT_DTYPES: frozenset[str] = frozenset({"F16", "BF16", "F32", "F64", "F8_E4M3", "F8_E5M2"})
"""safetensors dtypes of floating-point tensors: the only ones a model's parameters may be stored in."""

LAYER_INDEX = re.compile(r"(?:^|\.)(?:layer|layers|h|block|blocks)\.(\d+)\.")
"""The index of a transformer layer in a tensor name (``encoder.layer.3.attention...`` -> 3)."""


def weight_files(folder: str | os.PathLike) -> list[Path]:
    """The backbone weight files of a local folder, as transformers names them: ``model*.safetensors``, else
    ``pytorch_model*.bin`` (shards and variants included). Other files (``training_args.bin``, our
    ``contrastext_projection.safetensors``) are not the backbone's and are never read here."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    return sorted(folder.glob("model*.safetensors")) or sorted(folder.glob("pytorch_model*.bin"))


def stored_dtypes(folder: str | os.PathLike) -> dict[str, tuple[str, Path]]:
    """Each tensor of a local backbone folder's weight files -> (its stored dtype, its file).

    safetensors dtypes are read from the headers (no tensor is read); ``.bin`` files are memory-mapped with
    ``weights_only=True`` and their torch dtypes given in safetensors' names (``torch.int64`` -> ``I64``).
    """
    dtypes: dict[str, tuple[str, Path]] = {}
    for path in weight_files(folder):
        if path.suffix == ".safetensors":
            header, _ = _read_header(path)
            for name, entry in header.items():
                if name != "__metadata__" and isinstance(entry, dict):
                    dtypes[name] = (str(entry.get("dtype")), path)
            continue
        try:
            state = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
        except RuntimeError:  # the legacy (non-zip) format cannot be memory-mapped
            state = load_torch_weights(path)
        if isinstance(state, dict):
            for name, tensor in state.items():
                if isinstance(tensor, torch.Tensor):
                    dtypes[name] = (_TORCH_DTYPE_NAMES.get(tensor.dtype, str(tensor.dtype)), path)
    return dtypes


_TORCH_DTYPE_NAMES: dict[torch.dtype, str] = {
    torch.float16: "F16", torch.bfloat16: "BF16", torch.float32: "F32", torch.float64: "F64",
    torch.int8: "I8", torch.uint8: "U8", torch.int16: "I16", torch.int32: "I32", torch.int64: "I64",
    torch.bool: "BOOL",
}  # fmt: skip


def _files_named(folder: Path) -> str:
    files = weight_files(folder)
    return ", ".join(path.name for path in files) if files else "the weights"


def _shape(shape) -> str:
    return "[" + ", ".join(str(int(dim)) for dim in shape) + "]"


def _tensor_path(backbone: torch.nn.Module, module: torch.nn.Module | None) -> str | None:
    for name, candidate in backbone.named_modules():
        if candidate is module:
            return f"{name}.weight" if name else "weight"
    return None


def _mismatch_message(backbone: torch.nn.Module, mismatched: list, folder: Path) -> str:
    """One line naming the first tensor whose stored shape differs from what config.json builds, and the key."""
    embedding = _tensor_path(backbone, backbone.get_input_embeddings())
    mismatched = sorted(mismatched, key=lambda item: item[0] != embedding)  # the embedding matrix tells the most
    name, stored, expected = mismatched[0]
    config = backbone.config
    where = f"{folder / 'config.json'} does not fit {_files_named(folder)}"
    shapes = f"tensor {name!r} is {_shape(stored)} in the weights but config.json builds {_shape(expected)}"
    if name == embedding and len(stored) == 2 and len(expected) == 2:
        if stored[0] != expected[0]:
            return (
                f"{where}: key 'vocab_size' is {config.vocab_size} but the embedding matrix has {stored[0]} rows "
                f"({shapes})"
            )
        return f"{where}: key 'hidden_size' is {config.hidden_size} but the weights are {stored[1]} wide ({shapes})"
    differing = {int(e) for s, e in zip(stored, expected, strict=False) if s != e}
    keys = sorted(key for key, value in config.to_dict().items() if type(value) is int and value in differing)
    hint = f" (key(s) {', '.join(repr(key) for key in keys)})" if keys else ""
    return f"{where}: {shapes}{hint}; {len(mismatched)} tensor(s) differ"


def _layer_count_message(backbone: torch.nn.Module, missing: set[str], unexpected: set[str], folder: Path) -> str | None:
    """A line naming ``num_hidden_layers`` when the missing or unexpected tensors are whole transformer layers."""
    configured = getattr(backbone.config, "num_hidden_layers", None)
    if not isinstance(configured, int):
        return None
    extra = sorted({int(m.group(1)) for key in unexpected if (m := LAYER_INDEX.search(key))})
    absent = sorted({int(m.group(1)) for key in missing if (m := LAYER_INDEX.search(key))})
    where = f"{folder / 'config.json'}: key 'num_hidden_layers' is {configured} but {_files_named(folder)}"
    if extra and extra[0] >= configured:
        return (
            f"{where} hold(s) {extra[-1] + 1} layers ({_layers(configured, extra[-1])} would be silently unused); "
            "set num_hidden_layers to the layers the weights hold"
        )
    whole = absent and all(_layer_tensors(backbone, index) <= missing for index in absent)
    if whole and absent == list(range(absent[0], configured)) and absent[0] > 0:
        return (
            f"{where} hold(s) only {absent[0]} layer(s) ({_layers(absent[0], configured - 1)} would be random); "
            "set num_hidden_layers to the layers the weights hold"
        )
    return None


def _layer_tensors(backbone: torch.nn.Module, index: int) -> set[str]:
    """The parameter names of transformer layer ``index`` of the backbone."""
    return {
        name for name, _ in backbone.named_parameters() if (m := LAYER_INDEX.search(name)) and int(m.group(1)) == index
    }


def _layers(first: int, last: int) -> str:
    return f"layer {first}" if first == last else f"layers {first}-{last}"


def _own_tensor(backbone: torch.nn.Module, key: str) -> bool:
    """Whether a tensor name belongs to the backbone's own modules (not to a head of another task, e.g. ``cls.``)."""
    prefix = getattr(backbone, "base_model_prefix", "")
    base = getattr(backbone, "base_model", backbone)
    if prefix and key.startswith(prefix + ".") and base is not backbone:  # a task model: bert.encoder...
        return key[len(prefix) + 1 :].split(".", 1)[0] in {name for name, _ in base.named_children()}
    if prefix and key.startswith(prefix + "."):
        key = key[len(prefix) + 1 :]
    return key.split(".", 1)[0] in {name for name, _ in backbone.named_children()}


def _allowed(key: str, prefixes: Sequence[str]) -> bool:
    return any(key == prefix or key.startswith(prefix.rstrip(".") + ".") for prefix in prefixes)


def check_loaded_backbone(
    backbone: torch.nn.Module,
    loading_info: dict,
    folder: str | os.PathLike,
    new_weights: Sequence[str] = (),
    unused: Sequence[str] = (),
    remedy: str = "use a complete model folder, or, when these weights are meant to be new, pass new_weights=[{prefix!r}] "
    "to TextEncoder.from_pretrained",
) -> list[str]:
    """Refuse a backbone whose weights do not fit its config.json; returns the missing tensors accepted.

    ``loading_info`` is what ``from_pretrained(..., output_loading_info=True, ignore_mismatched_sizes=True)``
    returned. Refused, with a :class:`~contrastext.errors.ModelFolderError` naming the folder and the file or key:

    - a tensor whose shape differs from what config.json builds (``hidden_size``, ``vocab_size``...);
    - a layer count that differs from the layers stored (``num_hidden_layers``), in either direction;
    - tensors of the backbone's own modules left over (they would be silently unused);
    - tensors the model needs that the files lack (they would be randomly initialised), unless their name
      starts with one of ``new_weights`` (meant to be new) or ``unused`` (never read by this encoder, e.g. the
      BERT pooler under ``mean`` pooling); those are returned (``remedy`` ends the refusal: what to do);
    - a parameter stored as integers or booleans (only floating-point weights are loaded).

    Tensors of other tasks' heads (``cls.predictions...`` of a pre-training checkpoint) are ignored.
    """
    folder = Path(folder)
    missing = set(loading_info.get("missing_keys") or ())
    unexpected = set(loading_info.get("unexpected_keys") or ())
    mismatched = list(loading_info.get("mismatched_keys") or ())
    if mismatched:
        raise ModelFolderError(_mismatch_message(backbone, mismatched, folder))
    layers = _layer_count_message(backbone, missing, unexpected, folder)
    if layers is not None:
        raise ModelFolderError(layers)
    leftover = sorted(key for key in unexpected if _own_tensor(backbone, key))
    if leftover:
        raise ModelFolderError(
            f"{folder}: {_files_named(folder)} hold(s) {len(leftover)} tensor(s) the model built from config.json "
            f"has no place for, e.g. {leftover[0]!r}; they would be silently unused: the config does not describe "
            "these weights"
        )
    accepted = sorted(key for key in missing if _allowed(key, new_weights) or _allowed(key, unused))
    refused = sorted(missing - set(accepted))
    if refused:
        parts = sorted({key.rsplit(".", 1)[0] for key in refused})
        raise ModelFolderError(
            f"{folder}: {_files_named(folder)} lack(s) {len(refused)} tensor(s) the model needs, e.g. {refused[0]!r} "
            f"(in {len(parts)} module(s): {', '.join(parts[:3])}{' ...' if len(parts) > 3 else ''}); they would be "
            f"randomly initialised: {remedy.format(prefix=parts[0].split('.')[0])}"
        )
    _check_float_parameters(backbone, folder)
    return accepted


def _check_float_parameters(backbone: torch.nn.Module, folder: Path) -> None:
    """ModelFolderError naming the file and tensor when a parameter is stored as integers or booleans."""
    parameters = {name for name, _ in backbone.named_parameters()}
    prefix = getattr(backbone, "base_model_prefix", "")
    for name, (dtype, path) in stored_dtypes(folder).items():
        key = name[len(prefix) + 1 :] if prefix and name.startswith(prefix + ".") else name
        if (key in parameters or name in parameters) and dtype not in FLOAT_DTYPES:
            raise ModelFolderError(
                f"{path}: tensor {name!r} is stored as {dtype}; model weights must be floating point "
                f"({', '.join(sorted(FLOAT_DTYPES))}): the file is not a model's weights, or was converted wrongly"
            )
