"""One intra-op thread for these tests: their tensors are tiny, and on a shared 2-core machine OpenMP
threads spin against other processes (a 20 ms step then takes a second). Restored afterwards."""

import pytest
import torch


@pytest.fixture(autouse=True, scope="module")
def single_thread():
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)
