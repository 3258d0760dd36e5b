"""The existing records (docs/results/*.json) under the statistics of issue 25 (experiments/significance.py).

Reads each of the seven specs' declared primary and comparisons (experiments/specs/<name>.yaml) and the tasks'
floors (experiments/floors.yaml), and recomputes each from the paired values in the records: n, Δ, 95 % t-interval, t-test p,
sign-flip permutation p; for the primaries also the Holm-adjusted p over the seven, the floor check and the
verdict; for the others (exploratory) no verdict word. No run is made: the runner's reader of the arms (with each
spec's values hook: SCL's λ tuned per draw, SimCSE's "before", CAPT's task average) gives the pairs the pages
report. ``section(results_dir)`` is the markdown that experiments/results_page.py puts into RESULTS.md.

    python experiments/rereport.py            # print the section
"""

from __future__ import annotations

import math
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402
import run  # noqa: E402
import significance as sig  # noqa: E402
import spec as specs  # noqa: E402

FLOORS = sig.FLOORS
EXPERIMENTS = ("scl_few_shot", "scl_noise", "reclaim", "capt", "gd_losses", "multitask", "simcse")
"""The seven papers' experiments: each spec declares its ``primary:`` (experiments/spec.py ``Primary``)."""

Values = Callable[[str, str], dict[int, float]]
FloorCheck = tuple[str, str, str, str]  # (setting, metrics key, task, "accuracy" | "f1")


class ConfigError(ValueError):
    """A floors file or a primary that does not declare what the re-report needs."""


@dataclass
class Row:
    """One recomputed comparison."""

    experiment: str
    label: str
    metric: str
    direction: int
    stats: sig.Paired
    floor: str | None
    old: str
    margin: float | None = None
    tost: float | None = None
    note: str = ""

    @property
    def carried(self) -> bool:
        """Whether the t-interval excludes 0 in the paper's direction, off the floor (what "reproduced" needed)."""
        if math.isnan(self.stats.low) or self.floor:
            return False
        return self.stats.low > 0 if self.direction > 0 else self.stats.high < 0


def load_primaries(floors_path: Path = FLOORS, experiments: tuple[str, ...] = EXPERIMENTS
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


def old_verdict(differences: list[float], direction: int) -> str:
    """The issue-12 rule the pages used: the percentile-bootstrap interval of the mean difference excludes 0 in the
    paper's direction."""
    low, high = harness.bootstrap_interval(differences)
    if len(differences) < 2 or math.isnan(low):
        return "not enough seeds"
    if (low > 0) if direction > 0 else (high < 0):
        return "reproduced"
    if (high < 0) if direction > 0 else (low > 0):
        return "not reproduced (interval against the paper)"
    return "not reproduced"


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


def row_of(name: str, label: str, metric: str, direction: int, values: Values, treatment: str, baseline: str,
           floor: str | None, margin: float | None = None, note: str = "") -> Row:
    """A :class:`Row` of ``treatment − baseline`` on ``metric``, paired by seed (and the old rule's verdict)."""
    t, b = values(treatment, metric), values(baseline, metric)
    _, d = sig.paired_differences(t, b)
    return Row(experiment=name, label=label, metric=metric, direction=direction, stats=sig.paired(t, b),
               floor=floor, old=old_verdict(list(d), direction), margin=margin,
               tost=sig.tost_p(d, margin) if margin else None, note=note)


# ------------------------------------------------------------------------------------------- primaries


def primary_rows(results_dir: Path, path: Path = FLOORS) -> list[tuple[dict, Row, float, str]]:
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
        margin = primary.get("margin") if primary["test"] == "tost" else None
        note = ""
        if primary.get("unit"):
            units = min(sum(r["setting"] == s for r in store.records) for s in primary["unit"].values())
            if units < 2:
                note = (f"{units} independent unit per arm ({', '.join(primary['unit'].values())}): the "
                        "seeds measure fine-tuning noise only, no test")
        found.append((primary, row_of(name, f"{primary['treatment']} − {primary['baseline']}", primary["metric"],
                                      primary["direction"], values, primary["treatment"], primary["baseline"],
                                      floor_of(values, checks, floors), margin, note)))
    family = [_primary_p(row) for _, row in found]
    adjusted = sig.holm([1.0 if math.isnan(p) else p for p in family])
    results = []
    for (primary, row), p in zip(found, adjusted, strict=True):
        word = sig.verdict(p, row.stats.delta, row.direction, row.floor is not None, primary["test"] == "tost")
        results.append((primary, row, p, word))
    return results


def _primary_p(row: Row) -> float:
    if row.note:
        return math.nan
    return row.tost if row.tost is not None else row.stats.p


# ----------------------------------------------------------------------------------------- exploratory

def small_n_note(n: int) -> str:
    """At 2 ≤ n ≤ 5 the exact sign-flip p cannot go below 2 / 2^n ≥ 0.0625: say so."""
    return f"n = {n} seeds: the permutation p cannot go below {2 / 2**n:g}" if 2 <= n <= 5 else ""


def exploratory_rows(results_dir: Path, primaries: list[dict], floors: dict[str, sig.Floor] | None = None) -> list[Row]:
    """Every comparison the specs declare except the primaries, recomputed (no verdict word);
    ``floors``: the task floors (those of floors.yaml when None)."""
    floors = load_primaries()[0] if floors is None else floors
    taken = {(p["experiment"], p["treatment"], p["baseline"], p["metric"]) for p in primaries}
    rows = []
    for name in EXPERIMENTS:
        if not (results_dir / f"{name}.json").exists():
            continue
        experiment, store = specs.load_spec(name), harness.RecordStore(name, results_dir)
        values = run.values_reader(experiment, store)
        seen = set()
        for declared, _, t, b in run.comparisons(experiment, store):
            key = (name, t, b, declared.metric)
            if key in taken or key in seen:
                continue
            seen.add(key)
            row = row_of(name, f"{t} − {b}", declared.metric, declared.direction, values, t, b,
                         floor_of(values, run.floor_checks(declared), floors), declared.margin or None)
            row.note = "; ".join(part for part in (declared.note, small_n_note(row.stats.n)) if part)
            rows.append(row)
    return rows


# --------------------------------------------------------------------------------------------- markdown

PAGE = Path(__file__).resolve().parent / "pages" / "rereport.md"
_f, _p = sig.signed, sig.pvalue


def _direction(direction: int) -> str:
    return "Δ > 0" if direction > 0 else "Δ < 0"


def primary_table(found: list[tuple[dict, Row, float, str]]) -> str:
    headers = ["paper (experiment)", "comparison", "metric", "paper's direction", "n", "Δ", "95 % t-interval", "t p",
               "permutation p", "Holm p", "floor check", "verdict", "old rule (bootstrap CI)"]
    rows = []
    for primary, row, p, word in found:
        floor = row.floor or "off the floor"
        if row.note:
            floor += f"; {row.note}"
        rows.append([primary["experiment"], f"`{row.label}`", row.metric, _direction(row.direction), row.stats.n,
                     _f(row.stats.delta), sig.interval(row.stats), _p(row.stats.t_p), _p(row.stats.permutation_p),
                     _p(p), floor, f"**{word}**", row.old])
    return harness.markdown_table(headers, rows)


def exploratory_table(rows: list[Row]) -> str:
    headers = ["experiment", "comparison", "metric", "paper's direction", "n", "Δ", "95 % t-interval", "t p",
               "permutation p", "TOST p (margin)", "floor", "label", "old rule (bootstrap CI)"]
    cells = []
    for row in rows:
        tost = f"{_p(row.tost)} (±{row.margin:g})" if row.margin else "–"
        cells.append([row.experiment, f"`{row.label}`", row.metric, _direction(row.direction), row.stats.n,
                      _f(row.stats.delta), sig.interval(row.stats), _p(row.stats.t_p), _p(row.stats.permutation_p),
                      tost, row.floor or "–", sig.EXPLORATORY, row.old])
    return harness.markdown_table(headers, cells)


# The old rule's words and the new verdict that says the same thing.
SAME = {"reproduced": sig.REPRODUCED, "not reproduced": sig.INCONCLUSIVE,
        "not reproduced (interval against the paper)": sig.OPPOSITE}


def section(results_dir: Path, path: Path = FLOORS) -> str:
    """The markdown section for RESULTS.md: experiments/pages/rereport.md over the floors, the primaries and the
    exploratory rows (which old verdicts change, and how)."""
    floors, _ = load_primaries(path)
    found = primary_rows(results_dir, path)
    rows = exploratory_rows(results_dir, [primary for primary, *_ in found], floors)
    return specs.render(PAGE.read_text(encoding="utf-8"), {
        "floors": floors, "found": found, "rows": rows, "primary_table": primary_table(found),
        "exploratory_table": exploratory_table(rows), "interval": sig.interval,
        "same": lambda row, word: SAME.get(row.old) == word})


if __name__ == "__main__":
    print(section(harness.RESULTS_DIR))
