"""Training curves from runs' JSONL logs, drawn as PNG files with matplotlib (Agg, no display needed).

One run (:func:`plot_run`):

- ``losses.png``: the total and every ``loss/<part>`` against the step;
- ``eval.png``: every ``eval/<metric>`` against the step (geometry and gradient keys excepted);
- ``alignment_uniformity.png``: ``align`` and ``uniform`` (Wang & Isola 2020) when logged;
- ``gradient_norms.png``: ``grad_alignment`` and ``grad_uniformity`` (the gradient-dissipation
  diagnostics) when logged.

A key is matched by its last ``/``-separated name, so ``eval/align`` counts as ``align``. Keys whose curves are
the same numbers are drawn once (:func:`distinct_keys`): ``score`` and ``<task>_<split>_score`` repeat the task's
own metric, and a run with one loss part logs it twice (``loss`` and ``loss/<part>``); the kept curve's label
names the keys it stands for. The evaluation plot marks the step whose weights ``best/`` holds (the run's
``train.metric_for_best`` in its ``config.yaml``; for seeds, the best step of the mean curve).

A multi-seed folder (SCL's and CAPT's fine-tuning write ``<output_dir>/seed-<s>/``, each a run of its own)
is drawn as the mean over the seeds with a band of ± one sample standard deviation, the seeds that logged a
step counted at that step.

Several runs (:func:`compare_runs`, ``contrastext compare``): one panel per evaluation metric, one curve (or
mean and band) per run, and a summary of each run's last and best values (:class:`MetricSummary`).

Example::

    >>> plot_run("runs/simcse")
    [PosixPath('runs/simcse/plots/losses.png'), PosixPath('runs/simcse/plots/eval.png')]
    >>> path, summaries = compare_runs(["runs/simcse", "runs/scl"], "compare.png")
"""

from __future__ import annotations

import math
import os
import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib
import yaml

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from contrastext.errors import ConfigError, MissingDataError  # noqa: E402
from contrastext.runtime.run_log import LOG_NAME, read_log  # noqa: E402
from contrastext.runtime.yaml_reader import read_yaml  # noqa: E402

GEOMETRY_KEYS = ("align", "uniform")
GRADIENT_KEYS = ("grad_alignment", "grad_uniformity")
SEED_FOLDER = re.compile(r"^seed-(\d+)$")
EVAL_PREFIX = "eval/"
CONFIG_FILE = "config.yaml"


def _leaf(key: str) -> str:
    return key.rsplit("/", 1)[-1]


def _series(records: list[dict], key: str) -> tuple[list[float], list[float]]:
    points = [
        (r["step"], r[key])
        for r in records
        if isinstance(r.get(key), int | float) and not isinstance(r.get(key), bool) and "step" in r
    ]
    return [step for step, _ in points], [value for _, value in points]


# ------------------------------------------------------------------------------------------------------
# Runs and multi-seed groups


@dataclass
class RunGroup:
    """One run, or the seeds of a multi-seed folder: the logs' records, one list per seed."""

    path: Path  # what the user named
    name: str  # the label in plots and tables
    folders: list[Path]  # each run's folder (one for a plain run)
    records: list[list[dict]]  # each run's log records
    seeds: list[str] = field(default_factory=list)  # "seed-1", ... for a multi-seed folder

    @property
    def multi_seed(self) -> bool:
        return bool(self.seeds)

    def numeric_keys(self) -> list[str]:
        """Every numeric key logged by any of the runs (``step`` excepted), sorted."""
        keys = {key for records in self.records for record in records for key in record if key != "step"}
        return sorted(key for key in keys if any(_series(records, key)[0] for records in self.records))


def seed_folders(folder: Path) -> list[Path]:
    """The ``seed-<s>/`` subfolders of ``folder`` that hold a training log, by seed number."""
    if not folder.is_dir():
        return []
    found = [
        child for child in folder.iterdir() if SEED_FOLDER.match(child.name) and (child / LOG_NAME).is_file()
    ]
    return sorted(found, key=lambda child: int(SEED_FOLDER.match(child.name).group(1)))


def find_log(run: str | os.PathLike) -> Path:
    """The log of a run folder (``<run>/train_log.jsonl``) or the given .jsonl file itself."""
    run = Path(run)
    return run if run.is_file() else run / LOG_NAME


def _runs_below(folder: Path, limit: int = 5) -> list[str]:
    """Folders under ``folder`` that hold a log (or seed folders), to suggest when ``folder`` holds none."""
    if not folder.is_dir():
        return []
    found = sorted({log.parent for log in folder.rglob(LOG_NAME)})
    shown = sorted({path.parent if SEED_FOLDER.match(path.name) else path for path in found})
    return [str(path) for path in shown[:limit]]


def load_run_group(run: str | os.PathLike, name: str | None = None) -> RunGroup:
    """A run folder (or its ``train_log.jsonl``), or a folder of ``seed-<s>/`` runs; MissingDataError naming
    the log expected (and the run folders found below it) when there is none."""
    path = Path(run)
    log = find_log(path)
    label = name or str(path)
    if log.is_file():
        return RunGroup(path, label, [log.parent], [read_log(log)])
    seeds = seed_folders(path)
    if seeds:
        return RunGroup(
            path, label, seeds, [read_log(folder / LOG_NAME) for folder in seeds], [folder.name for folder in seeds]
        )
    below = _runs_below(path)
    hint = f"; runs below it: {', '.join(below)}" if below else ""
    raise MissingDataError(f"no training log at {log} (nor seed-*/{LOG_NAME} under {path}){hint}")


def mean_band(group: RunGroup, key: str) -> tuple[list[float], list[float], list[float]]:
    """(steps, mean, sample std) of ``key`` over the group's runs; at each step the runs that logged it
    count (std 0 where only one did)."""
    by_step: dict[float, list[float]] = {}
    for records in group.records:
        for step, value in zip(*_series(records, key), strict=True):
            by_step.setdefault(step, []).append(value)
    steps = sorted(by_step)
    means = [statistics.fmean(by_step[step]) for step in steps]
    stds = [statistics.stdev(by_step[step]) if len(by_step[step]) > 1 else 0.0 for step in steps]
    return steps, means, stds


def _curve(axes, group: RunGroup, key: str, label: str) -> None:
    """One curve of ``key``: the run's values, or for several seeds the mean with a ± std band."""
    steps, means, stds = mean_band(group, key)
    marker = "." if len(steps) < 50 else None
    if not group.multi_seed:
        axes.plot(steps, means, marker=marker, label=label)
        return
    (line,) = axes.plot(steps, means, marker=marker, label=f"{label} (mean ± std, {len(group.seeds)} seeds)")
    low = [mean - std for mean, std in zip(means, stds, strict=True)]
    high = [mean + std for mean, std in zip(means, stds, strict=True)]
    axes.fill_between(steps, low, high, color=line.get_color(), alpha=0.2, linewidth=0)


def _same_numbers(group: RunGroup, key: str) -> tuple:
    """What a curve of ``key`` draws: every run's (steps, values), for spotting keys that repeat another."""
    return tuple((tuple(steps), tuple(values)) for steps, values in (_series(r, key) for r in group.records))


def distinct_keys(group: RunGroup, keys: list[str]) -> dict[str, list[str]]:
    """``{key drawn: [keys with the same numbers]}``: one curve per distinct series. The key kept is the first
    that is not an alias (``score``, ``*_score``), else the first; so ``loss`` stands for a single ``loss/<part>``
    and ``<task>_spearman`` for ``score`` and ``<task>_score``."""
    groups: dict[tuple, list[str]] = {}
    for key in keys:
        groups.setdefault(_same_numbers(group, key), []).append(key)
    drawn: dict[str, list[str]] = {}
    for same in groups.values():
        plain = [key for key in same if not _is_alias(key.removeprefix(EVAL_PREFIX))]
        kept = (plain or same)[0]
        drawn[kept] = [key for key in same if key != kept]
    return {key: drawn[key] for key in keys if key in drawn}  # in the keys' order


def best_mark(group: RunGroup) -> tuple[str, int] | None:
    """(metric, step) of the best evaluation by the run's ``train.metric_for_best`` (for seeds: of the mean
    curve), step 0 excepted; None when the run selects no checkpoint or did not log the metric."""
    metric, greater_is_better = _selection(group.folders[0])
    if metric is None:
        return None
    steps, means, _ = mean_band(group, EVAL_PREFIX + metric)
    record = [{"step": step, EVAL_PREFIX + metric: mean} for step, mean in zip(steps, means, strict=True)]
    step = best_step(record, metric, greater_is_better)
    return None if step is None else (metric, step)


def _draw(
    group: RunGroup, keys: list[str], title: str, ylabel: str, path: Path, mark: tuple[str, int] | None = None
) -> Path:
    figure, axes = plt.subplots(figsize=(7, 4.2))
    for key, aliases in distinct_keys(group, keys).items():
        _curve(axes, group, key, key + (f" (= {', '.join(aliases)})" if aliases else ""))
    if mark is not None:
        metric, step = mark
        axes.axvline(step, color="black", linestyle="--", linewidth=1, label=f"best: step {step} ({metric})")
    axes.set_xlabel("step")
    axes.xaxis.set_major_locator(MaxNLocator(integer=True))
    axes.set_ylabel(ylabel)
    axes.set_title(title + (f" ({len(group.seeds)} seeds)" if group.multi_seed else ""))
    axes.grid(alpha=0.3)
    axes.legend(fontsize="small")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def plot_run(run: str | os.PathLike, out_dir: str | os.PathLike | None = None) -> list[Path]:
    """Draw the PNGs of a run or a multi-seed folder (see the module docstring) into ``out_dir`` (default
    ``<run>/plots``)."""
    group = load_run_group(run)
    default = group.folders[0] if not group.multi_seed else Path(run)
    out = Path(out_dir) if out_dir is not None else default / "plots"
    out.mkdir(parents=True, exist_ok=True)
    numeric = group.numeric_keys()
    special = set(GEOMETRY_KEYS) | set(GRADIENT_KEYS)
    losses = [key for key in numeric if key == "loss" or key.startswith("loss/")]
    evals = [key for key in numeric if key.startswith(EVAL_PREFIX) and _leaf(key) not in special]
    geometry = [key for key in numeric if _leaf(key) in GEOMETRY_KEYS]
    gradients = [key for key in numeric if _leaf(key) in GRADIENT_KEYS]
    paths = []
    if losses:
        paths.append(_draw(group, losses, "training loss", "loss", out / "losses.png"))
    if evals:
        paths.append(_draw(group, evals, "evaluation", "metric", out / "eval.png", best_mark(group)))
    if geometry:
        paths.append(_draw(group, geometry, "alignment and uniformity", "value", out / "alignment_uniformity.png"))
    if gradients:
        paths.append(_draw(group, gradients, "gradient norms", "norm", out / "gradient_norms.png"))
    return paths


# ------------------------------------------------------------------------------------------------------
# Comparing runs


@dataclass
class MetricSummary:
    """One metric of one run (or group of seeds): the last evaluation and the best checkpoint's value.

    ``best`` is the value at the step the run's ``train.metric_for_best`` selected (what ``best/`` holds),
    None when the run selects no checkpoint. For seeds, the values are the mean and ``*_std`` the sample
    standard deviation over the seeds that have them (0 with one seed).
    """

    last: float | None
    best: float | None
    last_std: float | None = None
    best_std: float | None = None
    seeds: int = 1


def _selection(folder: Path) -> tuple[str | None, bool]:
    """(``train.metric_for_best``, ``train.greater_is_better``) of the run's ``config.yaml`` (None: none)."""
    path = folder / CONFIG_FILE
    if not path.is_file():
        return None, True
    try:
        config = read_yaml(path.read_text(encoding="utf-8")) or {}
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None, True
    train = config.get("train") if isinstance(config, dict) else None
    if not isinstance(train, dict):
        return None, True
    return train.get("metric_for_best"), bool(train.get("greater_is_better", True))


def best_step(records: list[dict], metric: str | None, greater_is_better: bool = True) -> int | None:
    """The step the trainer keeps as best: the first evaluation (after step 0) with the best value of
    ``metric``; None without a metric or its values."""
    if metric is None:
        return None
    key = EVAL_PREFIX + metric
    best: tuple[int, float] | None = None
    for step, value in zip(*_series(records, key), strict=True):
        if step == 0 or not math.isfinite(value):  # step 0 (eval_at_start) is never a candidate
            continue
        if best is None or (value > best[1] if greater_is_better else value < best[1]):
            best = (step, value)
    return None if best is None else best[0]


def _last_and_best(folder: Path, records: list[dict], key: str) -> tuple[float | None, float | None]:
    steps, values = _series(records, key)
    last = values[-1] if values else None
    selected = best_step(records, *_selection(folder))
    best = next((value for step, value in zip(steps, values, strict=True) if step == selected), None)
    return last, best


def _mean_std(values: list[float]) -> tuple[float | None, float | None]:
    if not values:
        return None, None
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def summarize_metric(group: RunGroup, key: str) -> MetricSummary:
    """Last and best value of ``key`` (an ``eval/...`` log key) for a run, or mean ± std over its seeds."""
    pairs = [_last_and_best(folder, records, key) for folder, records in zip(group.folders, group.records, strict=True)]
    if not group.multi_seed:
        last, best = pairs[0]
        return MetricSummary(last, best)
    last, last_std = _mean_std([last for last, _ in pairs if last is not None])
    best, best_std = _mean_std([best for _, best in pairs if best is not None])
    return MetricSummary(last, best, last_std, best_std, seeds=len(pairs))


def seed_values(group: RunGroup, key: str) -> dict[int, float]:
    """``{seed: value}`` of ``key`` (an ``eval/...`` log key) over a multi-seed folder's runs: each run's best
    checkpoint's value, or its last evaluation when it selects none (the seed is the ``seed-<s>`` number)."""
    found = {}
    for name, folder, records in zip(group.seeds, group.folders, group.records, strict=True):
        last, best = _last_and_best(folder, records, key)
        value = best if best is not None else last
        if value is not None:
            found[int(SEED_FOLDER.match(name).group(1))] = value
    return found


def _is_alias(metric: str) -> bool:
    """``score`` and ``<task>_<split>_score`` repeat another key (the first set's / the task's own metric)."""
    return metric == "score" or metric.endswith("_score")


def eval_metrics(groups: Sequence[RunGroup], chosen: Sequence[str] = ()) -> list[str]:
    """The metrics to compare (names without ``eval/``): ``chosen`` (each must be logged by some run,
    ConfigError listing the logged ones otherwise), else every logged one but the ``score`` aliases."""
    logged = sorted(
        {key[len(EVAL_PREFIX):] for group in groups for key in group.numeric_keys() if key.startswith(EVAL_PREFIX)}
    )
    if chosen:
        missing = [name for name in chosen if name.removeprefix(EVAL_PREFIX) not in logged]
        if missing:
            raise ConfigError(
                f"--metric {', '.join(missing)}: not logged by any of the runs; logged: {', '.join(logged) or 'none'}"
            )
        return list(dict.fromkeys(name.removeprefix(EVAL_PREFIX) for name in chosen))
    plain = [name for name in logged if not _is_alias(name)]
    return plain or logged


def run_labels(paths: Sequence[str | os.PathLike]) -> list[str]:
    """Short, distinct labels: each folder's name, or more of its path where two names are the same."""
    paths = [Path(path).resolve() for path in paths]
    for depth in range(1, max((len(path.parts) for path in paths), default=1) + 1):
        labels = ["/".join(path.parts[-depth:]) for path in paths]
        if len(set(labels)) == len(labels):
            return labels
    return [str(path) for path in paths]


def compare_runs(
    runs: Sequence[str | os.PathLike], out: str | os.PathLike, metrics: Sequence[str] = ()
) -> tuple[Path, list[RunGroup], dict[str, dict[str, MetricSummary]]]:
    """Draw the evaluation curves of several runs (or multi-seed folders) on one figure, one panel per
    metric, into the PNG ``out``; return its path, the runs and ``{metric: {run label: MetricSummary}}``."""
    groups = [load_run_group(run, label) for run, label in zip(runs, run_labels(runs), strict=True)]
    names = eval_metrics(groups, metrics)
    if not names:
        raise MissingDataError(
            f"none of the runs logged an evaluation (eval/... keys in {LOG_NAME}): nothing to compare; "
            "train with eval.tasks and train.eval_every"
        )
    columns = min(3, len(names))
    rows = math.ceil(len(names) / columns)
    figure, axes = plt.subplots(rows, columns, figsize=(5.2 * columns, 3.6 * rows), squeeze=False)
    for index, name in enumerate(names):
        panel = axes[index // columns][index % columns]
        for group in groups:
            if any(_series(records, EVAL_PREFIX + name)[0] for records in group.records):
                _curve(panel, group, EVAL_PREFIX + name, group.name)
        panel.set_title(name, fontsize="medium")
        panel.set_xlabel("step")
        panel.xaxis.set_major_locator(MaxNLocator(integer=True))
        panel.grid(alpha=0.3)
        panel.legend(fontsize="x-small")
    for index in range(len(names), rows * columns):
        axes[index // columns][index % columns].set_visible(False)
    figure.tight_layout()
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    table = {name: {group.name: summarize_metric(group, EVAL_PREFIX + name) for group in groups} for name in names}
    return path, groups, table
