"""Seeds and random-number-generator states: everything a run needs to be repeatable and resumable.

- :func:`set_seed` seeds Python, NumPy and torch (CPU and CUDA) at the start of a fresh run.
- :func:`derive_seed` / :func:`make_generator` turn ``(seed, epoch, batch)`` into an independent stream, so
  the shuffling of an epoch and the views of a batch depend on their position only, never on history.
- :func:`capture_rng_state` / :func:`restore_rng_state` save and restore the global streams (dropout draws
  from torch's global generator) in a form ``torch.load(weights_only=True)`` accepts.

Example::

    >>> g = make_generator(42, 0, 3)          # the views of batch 3 of epoch 0
    >>> torch.randint(10, (3,), generator=g)  # the same numbers on every run
"""

from __future__ import annotations

import random

import numpy as np
import torch


def set_seed(seed: int) -> None:
    """Seed Python's ``random``, NumPy's global generator and torch (CPU and every CUDA device)."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)  # also seeds every CUDA device


def derive_seed(*parts: int) -> int:
    """A 63-bit seed that depends on all ``parts`` (NumPy's SeedSequence mixes them well)."""
    if any(part < 0 for part in parts):
        raise ValueError(f"seed parts must be non-negative integers, got {parts}")
    words = np.random.SeedSequence(list(parts)).generate_state(2, dtype=np.uint32)
    return (int(words[0]) << 31) ^ int(words[1])


def make_generator(*parts: int) -> torch.Generator:
    """A CPU ``torch.Generator`` seeded with :func:`derive_seed` of ``parts``."""
    generator = torch.Generator()
    generator.manual_seed(derive_seed(*parts))
    return generator


def capture_rng_state() -> dict:
    """The state of Python's, NumPy's and torch's global generators (CPU and CUDA)."""
    version, internal, gauss = random.getstate()
    numpy_state = np.random.get_state(legacy=False)
    return {
        "python": {"version": version, "internal": list(internal), "gauss": gauss},
        "numpy": {
            "bit_generator": numpy_state["bit_generator"],
            "key": torch.from_numpy(numpy_state["state"]["key"].astype(np.int64)),
            "pos": int(numpy_state["state"]["pos"]),
            "has_gauss": int(numpy_state["has_gauss"]),
            "gauss": float(numpy_state["gauss"]),
        },
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
    }


def restore_rng_state(state: dict) -> None:
    """Put back what :func:`capture_rng_state` returned."""
    python = state["python"]
    random.setstate((python["version"], tuple(python["internal"]), python["gauss"]))
    numpy_state = state["numpy"]
    np.random.set_state(
        {
            "bit_generator": numpy_state["bit_generator"],
            "state": {"key": numpy_state["key"].numpy().astype(np.uint32), "pos": numpy_state["pos"]},
            "has_gauss": numpy_state["has_gauss"],
            "gauss": numpy_state["gauss"],
        }
    )
    torch.set_rng_state(state["torch"])
    if state["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
