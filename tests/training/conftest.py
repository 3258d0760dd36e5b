"""The engine tests import the tiny method's helper module from this folder (one_thread: tests/conftest.py)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
