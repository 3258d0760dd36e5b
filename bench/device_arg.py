"""The ``--device`` argument of the bench scripts: ``cpu`` or ``cuda[:N]``, normalised by ``torch.device``."""

from __future__ import annotations

import argparse


def device_name(text: str) -> str:
    """argparse type of ``--device``: ``cpu`` or ``cuda[:N]``, normalised by ``torch.device``."""
    import torch

    try:
        device = torch.device(text)
    except RuntimeError:
        raise argparse.ArgumentTypeError(f"expected cpu or cuda[:N], got {text!r}") from None
    if device.type not in ("cpu", "cuda"):
        raise argparse.ArgumentTypeError(f"expected cpu or cuda[:N], got {text!r}")
    return "cpu" if device.type == "cpu" else str(device)
