"""Training curves from a run's JSONL log, drawn as PNG files with matplotlib (Agg, no display needed).

- ``losses.png``: the total and every ``loss/<part>`` against the step;
- ``eval.png``: every ``eval/<metric>`` against the step (geometry and gradient keys excepted);
- ``alignment_uniformity.png``: ``align`` and ``uniform`` (Wang & Isola 2020) when logged;
- ``gradient_norms.png``: ``grad_alignment`` and ``grad_uniformity`` (the gradient-dissipation
  diagnostics) when logged.

A key is matched by its last ``/``-separated name, so ``eval/align`` counts as ``align``.

Example::

    >>> plot_run("runs/simcse")
    [PosixPath('runs/simcse/plots/losses.png'), PosixPath('runs/simcse/plots/eval.png')]
"""

from __future__ import annotations

import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from contrastext.runtime.run_log import LOG_NAME, read_log  # noqa: E402

GEOMETRY_KEYS = ("align", "uniform")
GRADIENT_KEYS = ("grad_alignment", "grad_uniformity")


def _leaf(key: str) -> str:
    return key.rsplit("/", 1)[-1]


def _series(records: list[dict], key: str) -> tuple[list[float], list[float]]:
    points = [(r["step"], r[key]) for r in records if isinstance(r.get(key), int | float) and "step" in r]
    return [step for step, _ in points], [value for _, value in points]


def _draw(records: list[dict], keys: list[str], title: str, ylabel: str, path: Path) -> Path:
    figure, axes = plt.subplots(figsize=(7, 4.2))
    for key in keys:
        steps, values = _series(records, key)
        axes.plot(steps, values, marker="." if len(steps) < 50 else None, label=key)
    axes.set_xlabel("step")
    axes.set_ylabel(ylabel)
    axes.set_title(title)
    axes.grid(alpha=0.3)
    axes.legend(fontsize="small")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def find_log(run: str | os.PathLike) -> Path:
    """The log of a run folder (``<run>/train_log.jsonl``) or the given .jsonl file itself."""
    run = Path(run)
    return run if run.is_file() else run / LOG_NAME


def plot_run(run: str | os.PathLike, out_dir: str | os.PathLike | None = None) -> list[Path]:
    """Draw the PNGs of a run (see the module docstring) into ``out_dir`` (default ``<run>/plots``)."""
    log = find_log(run)
    records = read_log(log)
    out = Path(out_dir) if out_dir is not None else log.parent / "plots"
    out.mkdir(parents=True, exist_ok=True)
    keys = sorted({key for record in records for key in record if key != "step"})
    numeric = [key for key in keys if _series(records, key)[0]]
    special = set(GEOMETRY_KEYS) | set(GRADIENT_KEYS)
    losses = [key for key in numeric if key == "loss" or key.startswith("loss/")]
    evals = [key for key in numeric if key.startswith("eval/") and _leaf(key) not in special]
    geometry = [key for key in numeric if _leaf(key) in GEOMETRY_KEYS]
    gradients = [key for key in numeric if _leaf(key) in GRADIENT_KEYS]
    paths = []
    if losses:
        paths.append(_draw(records, losses, "training loss", "loss", out / "losses.png"))
    if evals:
        paths.append(_draw(records, evals, "evaluation", "metric", out / "eval.png"))
    if geometry:
        paths.append(_draw(records, geometry, "alignment and uniformity", "value", out / "alignment_uniformity.png"))
    if gradients:
        paths.append(_draw(records, gradients, "gradient norms", "norm", out / "gradient_norms.png"))
    return paths
