"""Issue 25's statistics over the records: every declared comparison of a spec as a :class:`Row` (n, Δ, 95 %
t-interval, t-test and sign-flip permutation p, TOST p at a declared margin, the two-level bootstrap, the floor
check and a caveat), and the seven papers' primaries with their Holm p and verdict (:func:`significance.verdict`).

A section's "Comparisons" table is :func:`comparison_table`; the head of docs/RESULTS.md is :func:`section`
(experiments/pages/verdicts.md over the primaries' table). No run is made.

    python experiments/verdicts.py            # print the section
"""

from __future__ import annotations

import math
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402
import run  # noqa: E402
import significance as sig  # noqa: E402
import spec as specs  # noqa: E402

EXPERIMENTS = ("scl_few_shot", "scl_noise", "reclaim", "capt", "gd_losses", "multitask", "simcse")
"""The seven papers' experiments: each spec declares its ``primary:`` (experiments/spec.py ``Primary``)."""
PAGE = Path(__file__).resolve().parent / "pages" / "verdicts.md"

Values = Callable[[str, str], dict[int, float]]
FloorCheck = tuple[str, str, str, str]  # (setting, metrics key, task, "accuracy" | "f1")


class ConfigError(ValueError):
    """A floors file or a primary that does not declare what the verdicts need."""


@dataclass
class Row:
    """One comparison, treatment − baseline on ``metric``, paired by seed."""

    experiment: str
    treatment: str
    baseline: str
    metric: str
    direction: int
    stats: sig.Paired
    floor: str | None
    margin: float | None = None
    tost: float | None = None
    two_level: str = "–"
    note: str = ""

    @property
    def label(self) -> str:
        return f"{self.treatment} − {self.baseline}"


def load_primaries(floors_path: Path = sig.FLOORS, experiments: tuple[str, ...] = EXPERIMENTS
                   ) -> tuple[dict[str, sig.Floor], list[dict]]:
    """The task floors and each experiment's declared primary (``{"experiment": name, **spec.primary}``), checked:
    every experiment has one and its floors name known tasks (one ConfigError naming the spec and the key)."""
    floors = sig.load_floors(floors_path)
    primaries = []
    for name in experiments:
        declared = specs.load_spec(name).primary
        where = f"experiments/specs/{name}.yaml"
        if declared is None:
            raise ConfigError(f"error: {where}: primary is missing (each of the seven papers declares one)")
        for index, check in enumerate(declared.floors):
            if check.task not in floors:
                raise ConfigError(f"error: {where}: primary.floors.{index}.task {check.task!r} is not in {floors_path.name}")
        primaries.append({"experiment": name, **declared.model_dump(exclude_none=True)})
    return floors, primaries


# ------------------------------------------------------------------------------------------------- rows


def comparisons(experiment: specs.Spec, store: harness.RecordStore) -> list[tuple[specs.ComparisonSpec, sig.Paired, str, str]]:
    """Every declared comparison at every grid point: (its spec at the point, the paired statistics, treatment,
    baseline)."""
    values = run.values_reader(experiment, store)
    found = []
    for declared in experiment.comparisons:
        for point in specs.Setting(name="", recipe="", cost="0", grid=declared.grid).points():
            at = declared.at(point)
            found.append((at, sig.paired(values(at.treatment, at.metric), values(at.baseline, at.metric)),
                          at.treatment, at.baseline))
    return found


def floor_checks(declared: specs.ComparisonSpec) -> list[FloorCheck]:
    """Every floor check of a comparison at its point (from :func:`comparisons`): both arms on its metric against
    ``floor_task``, then its ``floors``."""
    checks = [(arm, declared.metric, declared.floor_task) for arm in (declared.treatment, declared.baseline)
              if declared.floor_task]
    checks += [(check.setting, check.metric, check.task) for check in declared.floors]
    return [(setting, key, task, "f1" if "f1" in key else "accuracy") for setting, key, task in checks]


def floor_of(values: Values, checks: list[FloorCheck], floors: dict[str, sig.Floor]) -> str | None:
    """The floor reasons of every (arm, metric, task) in ``checks`` (arm mean over its seeds)."""
    reasons = []
    for setting, key, task, kind in checks:
        found = list(values(setting, key).values())
        if found and task in floors:
            reason = sig.floor_reason({setting: statistics.fmean(found)}, floors[task], kind)
            if reason:
                reasons.append(reason)
    return "; ".join(dict.fromkeys(reasons)) or None


def two_level(values: Values, declared: specs.ComparisonSpec) -> str:
    """The 95 % two-level bootstrap interval (seeds × the test items, :mod:`significance`) of a comparison that
    names its ``items``: of the accuracy ×100, or of Spearman ×100 when its metric is one; over the seeds both arms
    recorded the same items for; "–" otherwise."""
    if not declared.items:
        return "–"
    key = harness.ITEMS + declared.items
    treatment, baseline = values(declared.treatment, key), values(declared.baseline, key)
    seeds = sorted(set(treatment) & set(baseline))
    labels = [treatment[seed]["label"] for seed in seeds] + [baseline[seed]["label"] for seed in seeds]
    if len(seeds) < 2 or any(label != labels[0] for label in labels):
        return "–"
    t, b = (np.array([arm[seed]["prediction"] for seed in seeds], dtype=float) for arm in (treatment, baseline))
    gold = np.array(labels[0], dtype=float)
    if "spearman" in declared.metric:
        low, high = sig.two_level_spearman(t, b, gold)
    else:
        low, high = sig.two_level_bootstrap(100.0 * (t == gold), 100.0 * (b == gold))
    return f"[{sig.signed(low)}, {sig.signed(high)}] (n = {len(seeds)} × {len(labels[0])})"


def small_n_note(n: int) -> str:
    """At 2 ≤ n ≤ 5 the exact sign-flip p cannot go below 2 / 2^n ≥ 0.0625: say so."""
    return f"n = {n} seeds: the permutation p cannot go below {2 / 2**n:g}" if 2 <= n <= 5 else ""


def row_of(name: str, values: Values, treatment: str, baseline: str, metric: str, direction: int,
           floor: str | None, margin: float | None = None, **extra) -> Row:
    """A :class:`Row` of ``treatment − baseline`` on ``metric``, paired by seed."""
    t, b = values(treatment, metric), values(baseline, metric)
    return Row(experiment=name, treatment=treatment, baseline=baseline, metric=metric, direction=direction,
               stats=sig.paired(t, b), floor=floor, margin=margin,
               tost=sig.tost_p(sig.paired_differences(t, b)[1], margin) if margin else None, **extra)


def comparison_rows(experiment: specs.Spec, store: harness.RecordStore,
                    floors: dict[str, sig.Floor] | None = None) -> list[Row]:  # fmt: skip
    """Every comparison the spec declares, at every grid point, in its order."""
    floors = sig.load_floors() if floors is None else floors
    values = run.values_reader(experiment, store)
    rows = []
    for declared, stats, t, b in comparisons(experiment, store):
        note = "; ".join(part for part in (declared.note, small_n_note(stats.n)) if part)
        rows.append(row_of(experiment.name, values, t, b, declared.metric, declared.direction,
                           floor_of(values, floor_checks(declared), floors), declared.margin or None,
                           two_level=two_level(values, declared), note=note))
    return rows


# ------------------------------------------------------------------------------------------- primaries


def primary_rows(results_dir: Path, path: Path = sig.FLOORS) -> list[tuple[dict, Row, float, str]]:
    """Each primary with its row, its Holm-adjusted p (over all seven; an untestable one counts as p = 1) and
    its verdict."""
    floors, primaries = load_primaries(path)
    found = []
    for primary in primaries:
        name = primary["experiment"]
        store = harness.RecordStore(name, results_dir)
        values = run.values_reader(specs.load_spec(name), store)
        checks = [(arm, c["metric"], c["task"], "f1" if "f1" in c["metric"] else "accuracy")
                  for c in primary["floors"] for arm in (primary["treatment"], primary["baseline"])]
        note = ""
        if primary.get("unit"):
            units = min(sum(r["setting"] == s for r in store.records) for s in primary["unit"].values())
            if units < 2:
                note = (f"{units} independent unit per arm ({', '.join(primary['unit'].values())}): the "
                        "seeds measure fine-tuning noise only, no test")
        found.append((primary, row_of(name, values, primary["treatment"], primary["baseline"], primary["metric"],
                                      primary["direction"], floor_of(values, checks, floors),
                                      primary.get("margin") if primary["test"] == "tost" else None, note=note)))
    family = [math.nan if row.note else row.tost if row.tost is not None else row.stats.p for _, row in found]
    adjusted = sig.holm([1.0 if math.isnan(p) else p for p in family])
    return [(primary, row, p, sig.verdict(p, row.stats.delta, row.direction, row.floor is not None,
                                          primary["test"] == "tost"))
            for (primary, row), p in zip(found, adjusted, strict=True)]


def primary_of(experiment: specs.Spec, results_dir: Path) -> tuple[dict, float, str, str] | None:
    """The experiment's declared primary, its Holm p over the seven, its verdict and its caveat (a floor, or too
    few independent units; "" when none); None when it declares none."""
    for primary, row, p, word in primary_rows(results_dir):
        if primary["experiment"] == experiment.name:
            return primary, p, word, "; ".join(part for part in (row.floor, row.note) if part)
    return None


# --------------------------------------------------------------------------------------------- markdown


def _direction(direction: int) -> str:
    return "Δ > 0" if direction > 0 else "Δ < 0"


def comparison_table(experiment: specs.Spec, store: harness.RecordStore, labels: dict[str, str] | None = None) -> str:
    """A section's table of every declared comparison: n, Δ, 95 % t-interval, the two-level bootstrap, t p,
    sign-flip permutation p, TOST p where a margin is declared, the floor check; the primary's row carries its
    Holm p and verdict, the others are exploratory (no verdict word; a caveat beside the label)."""
    found = primary_of(experiment, store.results_dir)
    cells = []
    for row in comparison_rows(experiment, store):
        label, floor = sig.EXPLORATORY + (f" ({row.note})" if row.note else ""), row.floor
        if found and (row.treatment, row.baseline, row.metric) == (found[0]["treatment"], found[0]["baseline"],
                                                                    found[0]["metric"]):
            label, floor = f"**primary: {found[2]}** (Holm p {sig.pvalue(found[1])})", found[3] or None
        tost = f"{sig.pvalue(row.tost)} (±{row.margin:g})" if row.margin else "–"
        cells.append([f"`{row.treatment}` − `{row.baseline}`", (labels or {}).get(row.metric, row.metric),
                      _direction(row.direction), row.stats.n, sig.signed(row.stats.delta), sig.interval(row.stats),
                      row.two_level, sig.pvalue(row.stats.t_p), sig.pvalue(row.stats.permutation_p), tost,
                      floor or "off the floor", label])
    headers = ["comparison", "metric", "paper's direction", "n", "Δ", "95 % t-interval",
               "two-level bootstrap (seeds × items)", "t p", "permutation p", "TOST p (margin)", "floor check", "label"]
    return harness.markdown_table(headers, cells)


def primary_table(found: list[tuple[dict, Row, float, str]]) -> str:
    headers = ["paper (experiment)", "comparison", "metric", "paper's direction", "n", "Δ", "95 % t-interval", "t p",
               "permutation p", "Holm p", "floor check", "verdict"]
    rows = []
    for primary, row, p, word in found:
        floor = "; ".join(part for part in (row.floor or "off the floor", row.note) if part)
        rows.append([primary["experiment"], f"`{row.label}`", row.metric, _direction(row.direction), row.stats.n,
                     sig.signed(row.stats.delta), sig.interval(row.stats), sig.pvalue(row.stats.t_p),
                     sig.pvalue(row.stats.permutation_p), sig.pvalue(p), floor, f"**{word}**"])
    return harness.markdown_table(headers, rows)


def section(results_dir: Path, path: Path = sig.FLOORS) -> str:
    """The head of RESULTS.md: experiments/pages/verdicts.md over the primaries' table and the floors."""
    found = primary_rows(results_dir, path)
    return specs.render(PAGE.read_text(encoding="utf-8"), {
        "floors": sig.load_floors(path), "found": found, "primary_table": primary_table(found)})


if __name__ == "__main__":
    print(section(harness.RESULTS_DIR))
