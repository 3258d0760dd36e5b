"""The experiments' modules (``experiments/<name>.py``) as ``python experiments/run.py`` sees them (``harness``
beside them), without running a ``main``: ``harness.load_module``, the runner's loader of the hooks."""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"
if str(EXPERIMENTS) not in sys.path:
    sys.path.insert(0, str(EXPERIMENTS))

import harness  # noqa: E402


def load_experiment(name: str) -> ModuleType:
    """A fresh module object for ``experiments/<name>.py`` (named ``<name>_experiment``)."""
    return harness.load_module(EXPERIMENTS / f"{name}.py", f"{name}_experiment")
