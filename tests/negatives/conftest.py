"""One intra-op thread for these tests: their tensors are tiny, and on a shared 2-core machine OpenMP
threads spin against other processes (a 20 ms step then takes a second). Restored afterwards."""

import pytest


@pytest.fixture(autouse=True, scope="module")
def single_thread(single_torch_thread) -> None:
    """Every module in this folder uses ``single_torch_thread`` (tests/conftest.py)."""
