"""Which process this is: rank and world size of a torch.distributed group, or (0, 1) without one.

Example::

    >>> rank_and_world_size()
    (0, 1)
    >>> is_main_process()
    True
"""

from __future__ import annotations

import torch.distributed as dist


def is_distributed() -> bool:
    """True when a torch.distributed process group is initialised."""
    return dist.is_available() and dist.is_initialized()


def rank_and_world_size() -> tuple[int, int]:
    """(rank, world size), or (0, 1) outside a process group."""
    if is_distributed():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def is_main_process() -> bool:
    """True on rank 0 (and always in a single process): the process that writes files."""
    return rank_and_world_size()[0] == 0
