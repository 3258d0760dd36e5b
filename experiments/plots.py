"""The plots of the experiment pages, by kind (issue 25, items 1 and 10), drawn from a spec's ``plots:``.

- ``dots``: one panel per metric; per x group, one column of dots per series (every seed a dot, the mean a
  bar-less marker with its standard deviation), so no axis has to start at 0 to be honest; a dashed line at the
  task's majority rate where the spec gives one.
  ``majority`` gives one rate per metric (a line across) or per group (a line over each group).
- ``curves``: one panel per metric; each series against the groups as numbers (N, a flip rate, a labelled
  share: every seed a dot, the means joined by a line); or, with ``steps_of``, against the training steps of the
  records' curves (every seed a thin line, the mean over the seeds a thick one).
- ``paired_delta``: one panel per metric; per comparison (treatment − baseline, paired by seed; those matching
  ``comparisons`` when given), every seed's difference and the mean with its 95 % t-interval, and the zero line.

Every figure is 13 inches wide at 110 dpi (1,430 px), with legends at 11 pt.
"""

from __future__ import annotations

import fnmatch
import math
import statistics
from collections.abc import Callable
from pathlib import Path

import harness
import significance as sig
import spec as specs

WIDTH_IN, DPI, FONT = 13.0, 110, 11
COLORS = ("#4c4c4c", "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b")
Values = Callable[[str, str], dict[int, float]]


def draw(figure: specs.Plot, store: harness.RecordStore, values: Values, path: Path,
         comparisons: list[tuple[str, str, str]] | None = None) -> Path:  # fmt: skip
    """Draw ``figure`` into ``path`` (``comparisons``: (treatment, baseline, metric) of a paired_delta plot)."""
    plt = harness.pyplot()
    plt.rcParams.update({"font.size": FONT, "legend.fontsize": FONT})
    panels = list(figure.metrics.items())
    fig, axes = plt.subplots(1, len(panels), figsize=(WIDTH_IN, 4.8), squeeze=False)
    for axis, (key, title) in zip(axes[0], panels, strict=True):
        if figure.kind == "dots":
            _dots(axis, figure, key, values)
        elif figure.kind == "curves" and figure.steps_of:
            _steps(axis, figure, key, store)
        elif figure.kind == "curves":
            _curves(axis, figure, key, values)
        else:
            _deltas(axis, _chosen(figure, [(t, b) for t, b, k in comparisons or [] if k == key]), key, values)
        axis.set_title(title)
        axis.set_ylabel(figure.ylabel)
        axis.set_xlabel(figure.xlabel)
        axis.set_yscale(figure.yscale)
        axis.grid(axis="y", alpha=0.3)
    handles, labels = axes[0][0].get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="upper center", ncol=min(len(labels), 4), frameon=False)
    fig.suptitle(figure.title, y=0.02, va="bottom", fontsize=FONT)
    fig.tight_layout(rect=(0, 0.06, 1, 0.9 if handles else 0.97))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


def _dots(axis, figure: specs.Plot, key: str, values: Values) -> None:
    count = len(figure.series)
    for offset, (template, label) in enumerate(figure.series.items()):
        for position, group in enumerate(figure.groups):
            found = list(values(specs.render(template, {"group": group}), key).values())
            x = position + (offset - (count - 1) / 2) * 0.8 / max(count, 1)
            color = COLORS[offset % len(COLORS)]
            if not found:
                continue
            mean = statistics.fmean(found)
            std = statistics.stdev(found) if len(found) > 1 else 0.0
            axis.scatter([x] * len(found), found, s=16, color=color, alpha=0.55, zorder=2)
            axis.errorbar([x], [mean], yerr=[std], fmt="_", markersize=18, color=color, capsize=4, zorder=3,
                          label=label if position == 0 else None)
    line = figure.majority.get(key)
    if isinstance(line, dict):
        for position, group in enumerate(g for g in figure.groups if g in line):
            axis.hlines(line[group], figure.groups.index(group) - 0.45, figure.groups.index(group) + 0.45,
                        linestyles="--", color="black", linewidth=1, label="majority rate" if position == 0 else None)
    elif line is not None:
        axis.axhline(line, linestyle="--", color="black", linewidth=1, label="majority rate")
    axis.set_xticks(range(len(figure.groups)), figure.groups)


def _curves(axis, figure: specs.Plot, key: str, values: Values) -> None:
    xs, count = [float(group) for group in figure.groups], len(figure.series)
    for offset, (template, label) in enumerate(figure.series.items()):
        color, shift = COLORS[offset % len(COLORS)], (offset - (count - 1) / 2) * 0.012
        means = []
        for x, group in zip(xs, figure.groups, strict=True):
            found = list(values(specs.render(template, {"group": group}), key).values())
            means.append(statistics.fmean(found) if found else math.nan)
            nudged = x * 10 ** shift if figure.xscale == "log" else x + shift * (max(xs) - min(xs))
            axis.scatter([nudged] * len(found), found, s=12, color=color, alpha=0.45, zorder=2)
        axis.plot(xs, means, marker="o", color=color, label=label, zorder=3)
    line = figure.majority.get(key)
    if line is not None:
        rates = [line.get(g, math.nan) for g in figure.groups] if isinstance(line, dict) else [line] * len(xs)
        axis.plot(xs, rates, linestyle="--", color="black", linewidth=1, label="majority rate")
    axis.set_xscale(figure.xscale)
    axis.set_xticks(xs, figure.groups)
    axis.minorticks_off()


def _steps(axis, figure: specs.Plot, key: str, store: harness.RecordStore) -> None:
    for offset, (setting, label) in enumerate(figure.series.items()):
        color = COLORS[offset % len(COLORS)]
        curves = [r["metrics"][figure.steps_of] for r in store.records
                  if r["setting"] == setting and key in (r["metrics"].get(figure.steps_of) or {})]
        at: dict[float, list[float]] = {}
        for curve in curves:
            points = [(x, y) for x, y in zip(curve["steps"], curve[key], strict=True) if y is not None]
            axis.plot([x for x, _ in points], [y for _, y in points], color=color, alpha=0.25, linewidth=0.8)
            for x, y in points:
                at.setdefault(x, []).append(y)
        if at:
            steps = sorted(at)
            axis.plot(steps, [statistics.fmean(at[x]) for x in steps], color=color, linewidth=2,
                      label=f"{label} (n={len(curves)})")


def _chosen(figure: specs.Plot, pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The pairs whose ``treatment − baseline`` matches a pattern of the figure's ``comparisons`` (all without)."""
    if not figure.comparisons:
        return pairs
    return [(t, b) for t, b in pairs if any(fnmatch.fnmatchcase(f"{t} − {b}", p) for p in figure.comparisons)]


def _deltas(axis, pairs: list[tuple[str, str]], key: str, values: Values) -> None:
    for position, (treatment, baseline) in enumerate(pairs):
        stats = sig.paired(values(treatment, key), values(baseline, key))
        _, differences = sig.paired_differences(values(treatment, key), values(baseline, key))
        color = COLORS[1 + position % (len(COLORS) - 1)]
        if stats.n == 0:
            continue
        axis.scatter([position] * stats.n, differences, s=16, color=color, alpha=0.55, zorder=2)
        if not math.isnan(stats.low):
            axis.errorbar([position], [stats.delta], yerr=[[stats.delta - stats.low], [stats.high - stats.delta]],
                          fmt="D", color=color, capsize=5, zorder=3)
    axis.axhline(0.0, color="black", linewidth=1)
    if len(pairs) <= 4:
        axis.set_xticks(range(len(pairs)), [f"{t}\n− {b}" for t, b in pairs], fontsize=FONT - 2)
    else:  # many: one line each, slanted
        axis.set_xticks(range(len(pairs)), [f"{t} − {b}" for t, b in pairs], fontsize=FONT - 3, rotation=35,
                        ha="right", rotation_mode="anchor")
