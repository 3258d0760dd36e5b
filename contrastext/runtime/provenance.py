"""Provenance: what produced a run, as a JSON-able dict kept in its record.

:func:`provenance` answers: which code (the git commit of the checkout the code runs from, or else of the working
directory, and whether its tree was dirty: modified or untracked files), which libraries (Python, torch,
transformers, sentence-transformers, datasets, faiss, accelerate and contrastext versions), which machine (the
torch thread count, the CPU count and model), which settings (the fully resolved config, when the caller gives
it), which data (the data files' fingerprints with their SHA-256, from
:func:`contrastext.runtime.fingerprint.data_fingerprints`: the caller passes what it already hashed, nothing is
hashed twice) and the process's CPU time against its wall time so far (:func:`process_times`).

Nothing here fails a run: a missing ``git``, a folder that is not a checkout, an absent package or an unreadable
``/proc`` gives ``None`` for that field.

Example::

    >>> record = provenance(data=data_fingerprints([("data.path", "pairs.csv")]), config=config.model_dump())
    >>> record["git_commit"], record["git_dirty"], record["versions"]["torch"], record["torch_threads"]
    ('e572c28...', False, '2.13.0+cpu', 2)
    >>> provenance_line(record)
    'git e572c28b1a2f, Python 3.11.7, torch 2.13.0+cpu, ..., 2 torch threads, 2 CPUs (Intel(R) Xeon(R) ...)'
"""

from __future__ import annotations

import datetime as _dt
import importlib.metadata
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

PACKAGES: dict[str, tuple[str, ...]] = {
    "torch": ("torch",),
    "transformers": ("transformers",),
    "sentence_transformers": ("sentence-transformers",),
    "datasets": ("datasets",),
    "faiss": ("faiss-cpu", "faiss-gpu", "faiss", "faiss-gpu-cu12", "faiss-gpu-cu11"),
    "accelerate": ("accelerate",),
    "contrastext": ("contrastext",),
}
"""Version key -> the distribution names that may provide it (the first installed one is reported)."""

GIT_TIMEOUT_S = 10.0
_IMPORTED_AT = time.time()  # the wall-clock fallback when the process's start time cannot be read


def package_version(distributions: tuple[str, ...]) -> str | None:
    """The installed version of the first of ``distributions`` that is installed; None when none is."""
    for name in distributions:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def versions() -> dict[str, str | None]:
    """``{"python": ..., "torch": ..., ...}``: Python's version and each of :data:`PACKAGES` (None if absent)."""
    found: dict[str, str | None] = {"python": platform.python_version()}
    found.update({key: package_version(names) for key, names in PACKAGES.items()})
    return found


def _git(folder: Path, *arguments: str) -> str | None:
    """``git -C folder arguments`` stdout, stripped; None when git is missing, fails or times out."""
    try:
        result = subprocess.run(
            ["git", "-C", str(folder), *arguments], capture_output=True, text=True, timeout=GIT_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return result.stdout.strip() if result.returncode == 0 else None


def code_folder() -> Path:
    """The folder the contrastext package was imported from (its parent: the checkout, for a source tree)."""
    return Path(__file__).resolve().parents[2]


def git_state(folder: str | os.PathLike | None = None, outputs: tuple[str, ...] = ()) -> dict:
    """``{"git_repository", "git_commit", "git_dirty"}`` of the git checkout holding ``folder``: by default the
    one the code runs from, else the working directory's. ``git_dirty`` is True when a tracked file is modified
    or a file is untracked (ignored files do not count, nor the paths in ``outputs``: files the run itself writes
    into the checkout, relative to its root). All None when neither is a checkout (or git is missing)."""
    candidates = [Path(folder)] if folder is not None else [code_folder(), Path.cwd()]
    for candidate in candidates:
        root = _git(candidate, "rev-parse", "--show-toplevel")
        if not root:
            continue
        commit = _git(candidate, "rev-parse", "HEAD")  # None in a repository without a commit yet
        excluded = [f":(top,exclude){path}" for path in outputs]
        status = _git(candidate, "status", "--porcelain", *(["--", ":(top)", *excluded] if excluded else []))
        return {"git_repository": root, "git_commit": commit, "git_dirty": None if status is None else bool(status)}
    return {"git_repository": None, "git_commit": None, "git_dirty": None}


def cpu_model() -> str | None:
    """The CPU's model name (``/proc/cpuinfo``, else :func:`platform.processor`); None when unknown."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if line.startswith("model name") and ":" in line:
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or None


def torch_threads() -> int | None:
    """``torch.get_num_threads()``; None when torch is not installed."""
    try:
        import torch
    except ImportError:
        return None
    return int(torch.get_num_threads())


def _process_wall_s() -> float:
    """Seconds since this process started (``/proc/self/stat`` against ``/proc/uptime``); since this module was
    imported where those cannot be read."""
    try:
        stat = Path("/proc/self/stat").read_text(encoding="utf-8")
        started_ticks = int(stat.rsplit(")", 1)[1].split()[19])  # field 22, counted after the command name
        uptime = float(Path("/proc/uptime").read_text(encoding="utf-8").split()[0])
        return max(0.0, uptime - started_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return time.time() - _IMPORTED_AT


def process_times() -> dict[str, float]:
    """The process's CPU time against its wall time so far: ``cpu_time_s`` (user + system of this process, all
    its threads), ``children_cpu_time_s`` (of the child processes it waited for), ``wall_time_s`` (since it
    started) and ``cpu_per_wall`` (cpu over wall: about the busy cores)."""
    times = os.times()
    cpu = times.user + times.system
    wall = _process_wall_s()
    return {
        "cpu_time_s": round(cpu, 3),
        "children_cpu_time_s": round(times.children_user + times.children_system, 3),
        "wall_time_s": round(wall, 3),
        "cpu_per_wall": round(cpu / wall, 3) if wall > 0 else None,
    }


def provenance(data: dict | None = None, config: dict | None = None,
               repository: str | os.PathLike | None = None, outputs: tuple[str, ...] = ()) -> dict:
    """What produced a run (see the module docstring): a JSON-able dict.

    ``data``: the data files' fingerprints already taken (:func:`~contrastext.runtime.fingerprint.data_fingerprints`,
    ``{key: {"path", "fingerprint": {"size", "sha256", ...}}}``), kept as ``data``; ``config``: the fully resolved
    config (every key, defaults included), kept as ``config``; ``repository``: the folder whose git state to
    record (default: the code's checkout, else the working directory's); ``outputs``: paths relative to that
    checkout's root that the run itself writes, which do not make it dirty."""
    record: dict = {"recorded_at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")}
    record.update(git_state(repository, outputs))
    record.update({
        "python": platform.python_version(),
        "python_executable": sys.executable,
        "versions": versions(),
        "torch_threads": torch_threads(),
        "cpu_count": os.cpu_count(),
        "cpu_model": cpu_model(),
        "platform": platform.platform(),
        **process_times(),
    })
    if data is not None:
        record["data"] = data
    if config is not None:
        record["config"] = config
    return record


def provenance_line(record: dict) -> str:
    """One line for a page's header: commit (and a dirty tree), versions, threads and CPU."""
    commit = record.get("git_commit")
    code = f"git {commit[:12]}" + (" (tree dirty)" if record.get("git_dirty") else "") if commit else "no git checkout"
    found = record.get("versions") or {}
    libraries = ", ".join(f"{key} {value}" for key, value in found.items() if key != "python" and value)
    return (f"{code}, Python {record.get('python')}, {libraries}, {record.get('torch_threads')} torch threads, "
            f"{record.get('cpu_count')} CPUs ({record.get('cpu_model')})")
