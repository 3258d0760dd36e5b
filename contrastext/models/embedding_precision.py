"""Embedding precision: float32, int8, uint8, binary and ubinary, as sentence-transformers' ``quantize_embeddings``.

The same definitions as ``sentence_transformers.util.quantization.quantize_embeddings`` (v6), for a 2-D matrix:

- ``float32``: the embeddings as float32;
- ``int8`` / ``uint8``: per dimension, the range [min, max] (``ranges``, shape (2, dim); by default the min and
  max of the embeddings themselves, which ST warns against below 100 rows) is cut into 255 steps;
  ``q = clip(floor((x − min) / step), 0, 255)`` as uint8, or ``q − 128`` as int8 (a zero-width range has step 1);
- ``binary`` / ``ubinary``: one bit per dimension, ``x > 0``, packed 8 to a byte (``np.packbits``, big-endian
  bit order), as uint8, or minus 128 as int8: shape (n, ceil(dim / 8)).

Example::

    >>> quantize_embeddings(np.array([[0.5, -1.0], [1.0, 0.0]]), "ubinary")
    array([[128], [128]], dtype=uint8)
"""

from __future__ import annotations

import logging

import numpy as np

from contrastext.errors import ConfigError, UnknownNameError

PRECISIONS: tuple[str, ...] = ("float32", "int8", "uint8", "binary", "ubinary")
logger = logging.getLogger("contrastext.models")


def quantization_ranges(embeddings: np.ndarray) -> np.ndarray:
    """The (2, dim) per-dimension min and max of ``embeddings`` (ConfigError from a single row)."""
    if embeddings.ndim == 1 or embeddings.shape[0] == 1:
        raise ConfigError("int8 / uint8 ranges cannot be computed from a single embedding: give --ranges")
    if embeddings.shape[0] < 100:
        logger.warning("int8 / uint8 buckets computed from %d embeddings only; ranges from 100 or more (--ranges) "
                       "are more stable", embeddings.shape[0])  # fmt: skip
    return np.vstack((np.min(embeddings, axis=0), np.max(embeddings, axis=0)))


def quantize_embeddings(embeddings: np.ndarray, precision: str, ranges: np.ndarray | None = None) -> np.ndarray:
    """``embeddings`` (n, dim, float) at ``precision`` (see the module docstring)."""
    if precision not in PRECISIONS:
        raise UnknownNameError(f"unknown precision {precision!r}: choose one of {', '.join(PRECISIONS)}")
    embeddings = np.asarray(embeddings)
    if embeddings.dtype in (np.uint8, np.int8):
        raise ConfigError("embeddings to quantize must be floats, not int8 or uint8")
    if precision == "float32":
        return embeddings.astype(np.float32)
    if precision.endswith("int8"):
        if ranges is None:
            ranges = quantization_ranges(embeddings)
        ranges = np.asarray(ranges).astype(np.float32, copy=False)
        if ranges.shape != (2, embeddings.shape[-1]):
            raise ConfigError(f"ranges must have shape (2, {embeddings.shape[-1]}) (min and max per dimension), "
                              f"got {ranges.shape}")  # fmt: skip
        starts = ranges[0, :]
        steps = (ranges[1, :] - starts) / 255
        steps = np.where(steps == 0, 1, steps)
        values = np.clip(np.floor((embeddings - starts) / steps), 0, 255)
        return values.astype(np.uint8) if precision == "uint8" else (values - 128).astype(np.int8)
    packed = np.packbits(embeddings > 0, axis=-1)
    return packed if precision == "ubinary" else (packed - 128).astype(np.int8)
