"""What the runner (experiments/run.py) and the hooks share: resumable run records (``docs/results/<name>.json``,
one record per ``(setting, seed)``, rewritten atomically after every run), the time budget with its calibrated
estimate, the load average, seed statistics, markdown tables and the common command-line options. The record's fields and the budget's rule: experiments/README.md.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import importlib.util
import json
import math
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from types import ModuleType

from contrastext.runtime.provenance import provenance, provenance_line

REPO = Path(__file__).resolve().parents[1]
RESULTS_DIR = REPO / "docs" / "results"
RUNS_DIR = REPO / "runs" / "experiments"
DEFAULT_BUDGET_MINUTES = 90.0


def load_module(path: Path, module_name: str) -> ModuleType:
    """A fresh module object for the file ``path``, registered as ``module_name`` (its ``main`` is not run)."""
    if not path.exists():
        raise FileNotFoundError(f"no experiment module {path}")
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def quiet_progress_bars() -> None:
    """No tqdm bars from transformers / huggingface_hub while weights are loaded and saved (logs stay readable)."""
    with contextlib.suppress(Exception):
        from transformers.utils import logging as transformers_logging

        transformers_logging.disable_progress_bar()
    with contextlib.suppress(Exception):
        from huggingface_hub.utils import disable_progress_bars

        disable_progress_bars()


RENAMED_KEYS = {
    "train.tensorboard=false": "train.report_to=none",  # the legacy flag is gone (issue 20)
    "method_args.few_shot_sampling=": "data.few_shot_sampling=",  # the draw's keys are data.* (issue 20)
}
"""Overrides recorded before a key was renamed -> today's spelling (a whole override, or a ``key=`` prefix)."""


def renamed_keys(overrides: Iterable[str]) -> list[str]:
    """``overrides`` as written today (:data:`RENAMED_KEYS`), so a record made before a rename still matches the
    overrides its setting gives now."""
    renamed = []
    for item in overrides:
        item = str(item)
        for old, new in RENAMED_KEYS.items():
            if item == old or (old.endswith("=") and item.startswith(old)):
                item = new + item[len(old):]
                break
        renamed.append(item)
    return renamed


def load_average() -> list[float]:
    """The 1, 5 and 15 minute load averages (``os.getloadavg``), rounded to 2 decimals."""
    return [round(value, 2) for value in os.getloadavg()]


# ---------------------------------------------------------------------------------------------- records


ITEMS = "items:"  # RecordStore.values: a record's per-item predictions and labels, not a metric


class RecordStore:
    """The run records of one experiment in ``<results_dir>/<name>.json`` (read back on creation)."""

    def __init__(self, name: str, results_dir: str | Path = RESULTS_DIR):
        self.name = name
        self.results_dir = Path(results_dir)
        self.path = self.results_dir / f"{name}.json"
        self.records: list[dict] = []
        if self.path.exists():
            payload = json.loads(self.path.read_text(encoding="utf-8"))
            if not isinstance(payload, list):
                raise ValueError(
                    f"{self.path}: expected a list of run records, found {type(payload).__name__} "
                    "(an older format: move it away to start the experiment afresh)"
                )
            self.records = payload

    def has(self, setting: str, seed: int) -> bool:
        return any(r["setting"] == setting and r["seed"] == seed for r in self.records)

    def get(self, setting: str, seed: int) -> dict | None:
        for record in self.records:
            if record["setting"] == setting and record["seed"] == seed:
                return record
        return None

    def add(self, setting: str, seed: int, config: dict, metrics: dict, run: RunTiming, inputs: dict | None = None,
            **extra) -> dict:
        """Append one finished run and rewrite the file atomically. ``inputs``: what the run's folder said of its
        inputs (``resolved_config``, ``data``: the data files' fingerprints with SHA-256, ``method_args``), kept
        in the provenance (issue 25, item 9)."""
        inputs = dict(inputs or {})
        items = inputs.pop("items", None)  # per-item predictions of small test sets (experiments/run.py)
        record = {
            "setting": setting,
            "seed": int(seed),
            "config": config,
            "metrics": metrics,
            "wall_s": round(run.wall_s, 2),
            "load_before": run.load_before,
            "load_after": run.load_after,
            "finished_at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
            # commit, dirty flag, versions, threads, CPU, CPU vs wall time; the resolved config and data hashes
            "provenance": {**provenance(data=inputs.pop("data", None), config=inputs.pop("resolved_config", None),
                                        outputs=self.outputs()), **inputs},
            **({"items": items} if items else {}),
            **extra,
        }
        self.records = [r for r in self.records if not (r["setting"] == setting and r["seed"] == seed)]
        self.records.append(record)
        self.save()
        return record

    def outputs(self) -> tuple[str, ...]:
        """This experiment's files under docs/results (the records, page and plots it writes), relative to the
        checkout: they do not make the provenance's tree dirty."""
        try:
            relative = self.results_dir.resolve().relative_to(REPO)
        except ValueError:  # results outside the checkout
            return ()
        return (f"{relative.as_posix()}/{self.name}.*", f"{relative.as_posix()}/{self.name}-*")

    def save(self) -> None:
        self.results_dir.mkdir(parents=True, exist_ok=True)
        text = json.dumps(self.records, indent=1, sort_keys=False) + "\n"
        handle, temporary = tempfile.mkstemp(dir=self.results_dir, prefix=f".{self.name}.", suffix=".json")
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
        os.chmod(temporary, 0o644)  # mkstemp makes it 0600
        os.replace(temporary, self.path)

    def values(self, setting: str, key: str) -> dict[int, float]:
        """``seed -> metrics[key]`` of one setting (runs that lack the key are left out); ``items:<set>``: the
        record's ``items[<set>]`` (``{"prediction": [...], "label": [...]}``) instead of a number."""
        if key.startswith(ITEMS):
            found = {r["seed"]: r.get("items", {}).get(key.removeprefix(ITEMS)) for r in self.records if r["setting"] == setting}
            return {seed: items for seed, items in found.items() if items}
        return {
            r["seed"]: float(r["metrics"][key])
            for r in self.records
            if r["setting"] == setting and r["metrics"].get(key) is not None
        }

    def settings(self) -> list[str]:
        seen: list[str] = []
        for record in self.records:
            if record["setting"] not in seen:
                seen.append(record["setting"])
        return seen

    def load_range(self) -> tuple[float, float] | None:
        """The lowest and highest 1-minute load average recorded before or after any run."""
        loads = [r[key][0] for r in self.records for key in ("load_before", "load_after") if r.get(key)]
        return (min(loads), max(loads)) if loads else None

    def total_wall_s(self) -> float:
        return sum(float(r.get("wall_s", 0.0)) for r in self.records)


# ----------------------------------------------------------------------------------------------- budget


class RunTiming:
    """Wall time and load averages of one run (filled by :meth:`Budget.timed_run`)."""

    def __init__(self, load_before: list[float] | None = None, load_after: list[float] | None = None,
                 wall_s: float = 0.0):
        self.load_before = list(load_before or [])
        self.load_after = list(load_after or [])
        self.wall_s = wall_s


class Budget:
    """Stop starting runs once the next one would end past ``minutes`` after the start of this sitting."""

    def __init__(self, minutes: float):
        self.seconds = float(minutes) * 60.0
        self.start = time.perf_counter()

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def allows_another(self, estimate_s: float) -> bool:
        return self.elapsed() + estimate_s <= self.seconds

    @contextlib.contextmanager
    def timed_run(self) -> Iterator[RunTiming]:
        timing = RunTiming(load_before=load_average())
        start = time.perf_counter()
        yield timing
        timing.wall_s = time.perf_counter() - start
        timing.load_after = load_average()


class Calibration:
    """The one calibrated estimator: a run's reference seconds (``experiments/cost.py``, a quiet machine)
    times the median wall / reference ratio of the runs finished in this sitting (1 before the first).

    A run whose reference is 0 s (a cached result reused) neither needs time nor says anything about the
    machine's speed, so it adds no ratio."""

    def __init__(self):
        self.ratios: list[float] = []

    def scale(self) -> float:
        return statistics.median(self.ratios) if self.ratios else 1.0

    def estimate(self, reference_s: float) -> float:
        return reference_s * self.scale()

    def observe(self, reference_s: float, wall_s: float) -> None:
        if reference_s > 0:
            self.ratios.append(wall_s / reference_s)


def run_plan(store: RecordStore, plan: Iterable[tuple[str, int]], run_one: Callable[[str, int], tuple],
             budget: Budget, reference: Callable[[str], float] | float) -> int:
    """Run every ``(setting, seed)`` of ``plan`` not yet in ``store`` while the budget allows.

    ``run_one(setting, seed) -> (config, metrics)`` or ``(config, metrics, inputs)`` (see :meth:`RecordStore.add`).
    ``reference(setting)`` is a run's seconds on 2 quiet cores by the cost model (a number: the same for every
    run); the budget is asked for it scaled by :class:`Calibration`. Returns the number of runs still missing.
    """
    plan = list(plan)
    missing = [(s, seed) for s, seed in plan if not store.has(s, seed)]
    print(f"[{store.name}] {len(plan) - len(missing)}/{len(plan)} runs already recorded in {store.path}", flush=True)
    calibration = Calibration()
    for index, (setting, seed) in enumerate(missing):
        reference_s = reference(setting) if callable(reference) else float(reference)
        if not budget.allows_another(calibration.estimate(reference_s)):
            left = len(missing) - index
            print(f"[{store.name}] budget reached after {budget.elapsed() / 60:.1f} min: {left} run(s) left for the "
                  "next sitting (run the same command again)", flush=True)
            return left
        with budget.timed_run() as timing:
            config, metrics, *inputs = run_one(setting, seed)
        calibration.observe(reference_s, timing.wall_s)
        store.add(setting, seed, config, metrics, timing, *inputs)
        print(f"[{store.name}] {setting} seed {seed}: {timing.wall_s:.0f} s (reference {reference_s:.0f} s), load "
              f"{timing.load_before[0]} -> {timing.load_after[0]} ({index + 1}/{len(missing)} this sitting)", flush=True)
    return 0


# ------------------------------------------------------------------------------------------- statistics


def mean_std(values: Sequence[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (ddof 1; 0 for one value; nan for none)."""
    values = [float(v) for v in values]
    if not values:
        return math.nan, math.nan
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


# ------------------------------------------------------------------------------------------- reporting


def markdown_table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """A GitHub markdown table; floats are written as given (format them before)."""
    lines = ["| " + " | ".join(str(h) for h in headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def fmt_mean_std(values: Sequence[float], scale: float = 1.0, digits: int = 2) -> str:
    """``mean ± std (n)`` or ``–`` for no values."""
    if not values:
        return "–"
    mean, std = mean_std(values)
    return f"{mean * scale:.{digits}f} ± {std * scale:.{digits}f} ({len(values)})"


def machine_line(store: RecordStore) -> str:
    """One line on the machine and the load averages the records saw."""
    loads = store.load_range()
    load = f"1-min load average {loads[0]:.2f}–{loads[1]:.2f} over the runs" if loads else "no runs yet"
    return (
        f"Machine: {os.cpu_count()} CPU cores, no GPU; {load}; {len(store.records)} runs, "
        f"{store.total_wall_s() / 60:.1f} min of run time in all."
    )


def provenance_note(store: RecordStore) -> str:
    """The line "Latest run: git ..., versions, threads, CPU." from the newest record with a provenance of
    :mod:`contrastext.runtime.provenance` ("" when none has one: records made before it)."""
    latest = next((r["provenance"] for r in reversed(store.records)
                   if isinstance(r.get("provenance"), dict) and "git_commit" in r["provenance"]), None)
    return "" if latest is None else f"Latest run: {provenance_line(latest)}.\n"


def write_report(store: RecordStore, markdown: str) -> Path:
    """Write ``<name>.md`` beside the JSON (the latest run's provenance and the machine line appended)."""
    path = store.results_dir / f"{store.name}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(markdown.rstrip() + "\n\n" + provenance_note(store) + machine_line(store) + "\n", encoding="utf-8")
    return path


def pyplot():
    """matplotlib's pyplot on the Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


# ---------------------------------------------------------------------------------------- command line


def parser(description: str) -> argparse.ArgumentParser:
    """The options every experiment takes: --data-root, --budget-minutes, --results, --runs, --report-only, --only."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--data-root", default=str(REPO.parent / "shared" / "data"), help="benchmark data root")
    p.add_argument("--budget-minutes", type=float, default=DEFAULT_BUDGET_MINUTES,
                   help="start no run that would end later than this after the start; finished runs are kept and "
                   "skipped next time (default %(default)s)")
    p.add_argument("--results", default=str(RESULTS_DIR), help="where <name>.json/.md/.png go")
    p.add_argument("--runs", default=str(RUNS_DIR), help="where the run folders go (not committed)")
    p.add_argument("--report-only", action="store_true", help="no training: rewrite the table and plot")
    p.add_argument("--only", nargs="+", metavar="PATTERN",
                   help="run only the settings whose names match one of these shell patterns (e.g. 'scratch/*')")
    return p
