"""Negative sources: queues, memory banks, top-K search and cross-process gathering."""

from contrastext.negatives.bank import MemoryBank
from contrastext.negatives.distributed import (
    GatheredBatch,
    all_gather_rows,
    all_gather_with_grad,
    gather_for_contrastive,
)
from contrastext.negatives.queue import Queue
from contrastext.negatives.search import ExactSearch, FaissSearch, NearestNeighbourSearch, make_search

__all__ = [
    "ExactSearch",
    "FaissSearch",
    "GatheredBatch",
    "MemoryBank",
    "all_gather_rows",
    "NearestNeighbourSearch",
    "Queue",
    "all_gather_with_grad",
    "gather_for_contrastive",
    "make_search",
]
