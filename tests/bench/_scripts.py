"""Load a ``bench/<name>.py`` script as a module for its smoke test, and run its arms in the test process."""

from __future__ import annotations

import contextlib
import importlib.util
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import torch

BENCH = Path(__file__).resolve().parents[2] / "bench"


@contextlib.contextmanager
def loaded_bench(name: str) -> Iterator[ModuleType]:
    """``bench/<name>.py`` as the module ``bench_<name>`` (its ``main`` not run), removed from sys.modules after."""
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    try:
        yield module
    finally:
        del sys.modules[spec.name]


def run_arms_in_process(bench: ModuleType, monkeypatch) -> None:
    """Replace ``child_process.run_child`` with a call of the script's ``main`` on the child's arguments (the threads
    setting restored afterwards): seconds instead of an interpreter and library start-up per arm;
    tests/bench/test_child_process.py covers the child process itself."""

    def run_child(command, timeout, env=None):
        threads = torch.get_num_threads()
        start = time.perf_counter()
        try:
            code = bench.main(list(command[2:]))
        finally:
            torch.set_num_threads(threads)
        return bench.child_process.ChildResult(code, time.perf_counter() - start, 0.0, "", "", False)

    monkeypatch.setattr(bench.child_process, "run_child", run_child)
