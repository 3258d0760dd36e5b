"""Which process this is: rank and world size of a torch.distributed group, or (0, 1) without one.

Example::

    >>> rank_and_world_size()
    (0, 1)
    >>> is_main_process()
    True
    >>> describe_world(2, "gloo", "cpu")
    'world size 2 (gloo, cpu)'
"""

from __future__ import annotations

import os

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
    """True on rank 0 (and always in a single process): the process that writes files and prints.

    Before the process group exists (a launcher has started the processes, the trainer has not set the group up
    yet), the launcher's ``RANK`` variable says which process this is (``torchrun`` and ``accelerate launch`` set
    it), so a line printed at start-up is printed once, not once per process.
    """
    if is_distributed():
        return dist.get_rank() == 0
    return os.environ.get("RANK", "0").strip() in ("", "0")


def describe_world(world_size: int, backend: str | None, device: str) -> str:
    """The line a run prints about its processes: ``world size 2 (gloo, cpu)``, ``world size 1 (single process,
    cuda: NVIDIA H100)``."""
    return f"world size {world_size} ({backend or 'single process'}, {device})"
