"""Device helpers of the tests that also run on a CUDA GPU (marked ``cuda``)."""

from __future__ import annotations

import torch


def rng_state(device: torch.device | str) -> torch.Tensor:
    """The state of the global generator that dropout on ``device`` draws from."""
    device = torch.device(device)
    return torch.cuda.get_rng_state(device) if device.type == "cuda" else torch.get_rng_state()


def on_device(batch: dict, device: torch.device | str) -> dict:
    """``batch`` with its tensors moved to ``device`` (other entries as they are)."""
    return {name: value.to(device) if isinstance(value, torch.Tensor) else value for name, value in batch.items()}
