"""Load an ``experiments/<name>.py`` script as a module, the way ``python experiments/<name>.py`` sees its
folder (the scripts import ``harness`` from beside them), without running its ``main``."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"


def load_experiment(name: str) -> ModuleType:
    """A fresh module object for ``experiments/<name>.py`` (named ``<name>_experiment``)."""
    if str(EXPERIMENTS) not in sys.path:
        sys.path.insert(0, str(EXPERIMENTS))
    spec = importlib.util.spec_from_file_location(f"{name}_experiment", EXPERIMENTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
