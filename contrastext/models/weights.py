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
import struct
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file

from contrastext.errors import CorruptFileError, UnsafeLoadError

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
