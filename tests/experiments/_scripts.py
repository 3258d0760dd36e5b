"""The experiments' scripts as modules, as ``python experiments/<name>.py`` sees them (``harness`` beside them),
without running their ``main``: ``harness.load_experiment``, the loader of ``experiments/results_page.py``."""

from __future__ import annotations

import sys
from pathlib import Path

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"
if str(EXPERIMENTS) not in sys.path:
    sys.path.insert(0, str(EXPERIMENTS))

import harness  # noqa: E402

load_experiment = harness.load_experiment  # a fresh module object for experiments/<name>.py, named <name>_experiment
