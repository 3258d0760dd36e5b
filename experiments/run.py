"""The one runner of every experiment spec (``experiments/specs/<name>.yaml``; issue 25, item 1).

    python experiments/run.py simcse --data-root ../shared/data --budget-minutes 90   # run, or go on with, it
    python experiments/run.py simcse --report-only                                     # the page and plots only

It plans every setting × grid point × seed (fixed-seed settings first, then seed by seed, so that a sitting cut
by its budget leaves the seeds balanced), runs what is missing (a recipe run or a hook function), records each run
with its provenance, resolved config and data hashes, and renders ``specs/<name>.md`` over :func:`page_context`
(plus the hook's ``context(page)``) and the plots (experiments/README.md says the rest).
"""

from __future__ import annotations

import argparse
import contextlib
import fnmatch
import math
import os
import shutil
import statistics
import sys
from collections.abc import Callable
from functools import cache, partial
from pathlib import Path
from types import ModuleType

import numpy as np
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

import cost  # noqa: E402
import harness  # noqa: E402
import plots  # noqa: E402
import significance as sig  # noqa: E402
import spec as specs  # noqa: E402
import verdicts  # noqa: E402

HOOKS_DIR = Path(__file__).resolve().parent / "hooks"
VERDICT = Path(__file__).resolve().parent / "pages" / "summary_verdict.md"  # a summary row's verdict cell
TYPES = {"int": int, "float": float, "str": str, "ints": int, "floats": float}


class Run:
    """One planned run: a setting's grid point and seed, its rendered name, recipe and overrides."""

    def __init__(self, experiment: specs.Spec, setting: specs.Setting, point: dict, seed: int, sizes: dict,
                 runs_dir: Path):  # fmt: skip
        self.spec, self.setting, self.point, self.seed, self.sizes = experiment, setting, point, seed, sizes
        context = self.context()
        self.name = specs.render(setting.name, context)
        self.recipe = specs.render(setting.recipe, context)
        folder = runs_dir / experiment.name / self.name.replace("/", "-") / f"seed-{seed}"
        rendered = [specs.render(item, context) for item in [*setting.set, *setting.implied]]
        self.overrides = [f"output_dir={folder}", *[item for item in rendered if item.strip()]]
        self.implied = [specs.render(item, context) for item in setting.implied]

    def context(self) -> dict:
        return {**vars(cost), **self.sizes, **self.point, "seed": self.seed}

    @property
    def output_dir(self) -> Path:
        return Path(self.overrides[0].removeprefix("output_dir="))

    def reference_seconds(self) -> float:
        return float(specs.evaluate(self.setting.cost, self.context()))

    def comparable(self) -> list[str]:
        return comparable(self.overrides)

    def matches(self, recorded: list[str]) -> bool:
        """Whether a record's overrides are this run's, or this run's without the setting's ``implied`` ones."""
        found, mine = comparable(recorded), self.comparable()
        return found == mine or found == [item for item in mine if item not in comparable(self.implied)]


def comparable(overrides: list[str]) -> list[str]:
    """Overrides without the run folder (which follows --runs, not the experiment), in today's key names; a path
    in the experiment's runs folder (the run folder's grandparent: CAPT's pre-trained weights) as ``<runs>/…``."""
    renamed = harness.renamed_keys(overrides)
    folder = next((s.removeprefix("output_dir=") for s in renamed if s.startswith("output_dir=")), None)
    root = f"={Path(folder).parents[1]}/" if folder and len(Path(folder).parents) > 1 else None
    return [s.replace(root, "=<runs>/", 1) if root and root in s else s for s in renamed
            if not s.startswith("output_dir=")]


@cache
def load_hook(name: str | None) -> ModuleType | None:
    """``experiments/hooks/<name>.py`` (None when the spec names no hook)."""
    if name is None:
        return None
    return harness.load_module(HOOKS_DIR / f"{name}.py", f"{name}_hook")


# ---------------------------------------------------------------------------------------------- plan


def sizes_of(experiment: specs.Spec, args: argparse.Namespace) -> dict:
    return {key: getattr(args, key) for key in experiment.sizes}


def plan(experiment: specs.Spec, args: argparse.Namespace) -> list[Run]:
    sizes, runs_dir = sizes_of(experiment, args), Path(args.runs)
    fixed = [Run(experiment, s, p, seed, sizes, runs_dir) for s in experiment.settings if isinstance(s.seeds, list)
             for p in s.points() for seed in s.seeds]
    seeded = [s for s in experiment.settings if not isinstance(s.seeds, list)]
    order = list(dict.fromkeys(seed for s in seeded for seed in seeds_of(s, args)))
    return fixed + [Run(experiment, s, p, seed, sizes, runs_dir) for seed in order for s in seeded
                     if seed in seeds_of(s, args) for p in s.points()]


def seeds_of(setting: specs.Setting, args: argparse.Namespace) -> list[int]:
    """A setting's seeds: its own list, a size's (``seeds: primary_seeds``), or the experiment's ``--seeds``."""
    if isinstance(setting.seeds, list):
        return setting.seeds
    return list(getattr(args, setting.seeds) if setting.seeds else args.seeds)


def selected(runs: list[Run], patterns: list[str] | None) -> list[Run]:
    """The runs whose setting names match one of the shell ``patterns`` (``--only``; all when none)."""
    return [r for r in runs if not patterns or any(fnmatch.fnmatchcase(r.name, p) for p in patterns)]


def mismatched(store: harness.RecordStore, runs: list[Run]) -> list[str]:
    """Runs recorded with other overrides than the plan gives them (they would be skipped and mixed in)."""
    wrong = []
    for run in runs:
        record = store.get(run.name, run.seed)
        if record is not None and not run.matches(record.get("config", {}).get("overrides", [])):
            wrong.append(f"{run.name} seed {run.seed}")
    return wrong


# ----------------------------------------------------------------------------------------------- runs


def finite(value) -> float | None:
    """``value`` as a float, None where it is None, NaN or infinite (JSON keeps no NaN)."""
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def remove(folder: Path) -> None:
    """Delete a run folder (checkpoints and weights: the metrics are what is kept), then its setting's folder
    once its last seed is gone."""
    shutil.rmtree(folder, ignore_errors=True)
    with contextlib.suppress(OSError):
        folder.parent.rmdir()


def keep_metrics(experiment: specs.Spec, evaluated: dict) -> dict:
    """The spec's metrics of an evaluation (None where not finite) and its derived means."""
    missing = [key for key in experiment.metrics if key not in evaluated]
    if missing:
        raise KeyError(f"the evaluation lacks {', '.join(missing)}; it gave {', '.join(sorted(evaluated))}")
    metrics = {key: finite(evaluated[key]) for key in experiment.metrics}
    for key, parts in experiment.derived.items():
        values = [metrics[part] for part in parts]
        metrics[key] = statistics.fmean(values) if None not in values else None
    return metrics


@cache
def _sha256(path: Path, size: int, mtime: float) -> str:
    """The whole file's SHA-256 (remembered by path, size and modification time: one hash a sitting)."""
    from contrastext.training.checkpoint import file_sha256

    return file_sha256(path)


def whole_hashes(data: dict | None, data_root: Path) -> dict | None:
    """``data`` (the run's fingerprints) with the SHA-256 of every whole file: the trainer hashes files above
    2 MiB by their first and last MiB only, an experiment record keeps the whole file's."""
    def complete(fingerprint: dict, path: Path) -> dict:
        if "files" in fingerprint:
            return {"files": {name: complete(found, path / name) for name, found in fingerprint["files"].items()}}
        if "sha256" in fingerprint or not path.is_file():
            return fingerprint
        stat = path.stat()
        return {**fingerprint, "sha256": _sha256(path.resolve(), stat.st_size, stat.st_mtime)}

    if not data:
        return data
    found = {}
    for key, entry in data.items():
        path = Path(entry["path"]).expanduser()
        path = path if path.exists() else data_root / path
        found[key] = {**entry, "fingerprint": complete(entry["fingerprint"], path)}
    return found


def run_folder_record(output_dir: Path, data_root: Path) -> dict:
    """What a recipe run wrote of its inputs: the resolved config (config.yaml) and the data files' fingerprints
    (provenance.json's first session), each with its whole file's SHA-256."""
    from contrastext.training.run_record import CONFIG_NAME, read_record

    found: dict = {}
    with contextlib.suppress(OSError, yaml.YAMLError):
        found["resolved_config"] = yaml.safe_load((output_dir / CONFIG_NAME).read_text(encoding="utf-8"))
    record = read_record(output_dir) or {}
    sessions = record.get("sessions") or [{}]
    found["data"] = whole_hashes((sessions[0].get("provenance") or {}).get("data"), data_root)
    found["method_args"] = record.get("method_args")
    return found


def train(run: Run, args: argparse.Namespace) -> tuple[dict, dict]:
    """One recipe run: the final evaluation's metrics, the steps and the last training loss; the run folder's
    resolved config and data hashes; then the folder is deleted."""
    from contrastext import load_config, read_log, recipe_path, run_recipe

    config = load_config(recipe_path(run.recipe), run.overrides)
    summary = run_recipe(config, data_root=Path(args.data_root))
    if run.setting.check == "last_selected" and summary["best_step"] != summary["last_step"]:
        raise RuntimeError(f"{run.name} seed {run.seed}: the reported weights are of step {summary['best_step']}, "
                           f"not the last step {summary['last_step']}: the run evaluated more than once")
    metrics = keep_metrics(run.spec, summary["metrics"])
    losses = [r["loss"] for r in read_log(summary["log_path"]) if r.get("loss") is not None]
    selected = summary["best_step"] if summary["best_step"] is not None else summary["last_step"]  # none: the last
    metrics.update(last_step=int(summary["last_step"]), selected_step=int(selected),
                   final_train_loss=finite(losses[-1]) if losses else None)
    if run.setting.metrics_hook:
        metrics.update(getattr(load_hook(run.spec.hook), run.setting.metrics_hook)(run, summary, args))
    inputs = run_folder_record(run.output_dir, Path(args.data_root))
    remove(run.output_dir)
    return metrics, inputs


@cache
def declared_data(items: tuple[str, ...], data_root: Path) -> dict:
    """The fingerprints, with whole-file SHA-256, of the data-root files and folders the spec's ``data`` names
    (what its recipes read by task name, which a run's own fingerprints leave out): once a sitting."""
    from contrastext.runtime.fingerprint import data_fingerprints

    return whole_hashes(data_fingerprints((f"data_root/{item}", data_root / item) for item in items),
                        data_root) or {}


ITEM_LIMIT = 1000
"""Sets with fewer rows keep each item's prediction in the record (issue 25: a two-level bootstrap, seeds × items)."""


def kept_items(found: dict, metrics: dict) -> dict:
    """The per-item outputs of the run's evaluated sets under :data:`ITEM_LIMIT` rows (each set's last evaluation,
    contrastext.evaluation.item_outputs), each with ``checked``: True when its accuracy or Spearman recomputed from
    the items equals the run's metric of that set, False when they differ (an earlier evaluation was reported),
    None when the run reports no such metric."""
    from scipy.stats import spearmanr

    kept = {}
    for prefix, items in found.items():
        if len(items["label"]) >= ITEM_LIMIT:
            continue
        prediction, label = np.asarray(items["prediction"]), np.asarray(items["label"])
        checked = None
        if metrics.get(f"{prefix}_accuracy") is not None:
            checked = bool(abs(100 * np.mean(prediction == label) - metrics[f"{prefix}_accuracy"]) < 1e-6)
        elif metrics.get(f"{prefix}_spearman") is not None:
            checked = bool(abs(100 * spearmanr(prediction, label).statistic - metrics[f"{prefix}_spearman"]) < 1e-6)
        kept[prefix] = {"prediction": [round(value, 6) for value in items["prediction"]], "label": items["label"],
                        "checked": checked}
    return kept


def run_one(runs: dict[tuple[str, int], Run], args: argparse.Namespace, name: str, seed: int):
    from contrastext.evaluation.item_outputs import recording

    run = runs[(name, seed)]
    with recording() as found:
        if run.setting.run == "train":
            metrics, inputs = train(run, args)
        else:
            metrics, inputs = getattr(load_hook(run.spec.hook), run.setting.run)(run, args)
    inputs["items"] = kept_items(found, metrics)
    inputs["data"] = {**declared_data(tuple(run.spec.data), Path(args.data_root)), **(inputs.get("data") or {})}
    config = {"recipe": run.recipe, "overrides": run.overrides, "sizes": run.sizes, "data_root": str(args.data_root)}
    return config, metrics, inputs


# -------------------------------------------------------------------------------------------- values


def values_reader(experiment: specs.Spec, store: harness.RecordStore,
                  stand_in: bool = True) -> Callable[[str, str], dict[int, float]]:  # fmt: skip
    """``values(setting, key) -> {seed: value}`` through the spec's values hook: a setting that
    ``stands_for_every_seed`` gives its one value for every seed the other settings were run with (its own seed
    only without ``stand_in``: the page's cells)."""
    standing = {r["setting"] for r in store.records for s in experiment.settings if s.stands_for_every_seed
                and isinstance(s.seeds, list) and r["seed"] in s.seeds and _matches(s, r["setting"])} if stand_in else set()
    seeds = sorted({r["seed"] for r in store.records if r["setting"] not in standing})

    def values(setting: str, key: str) -> dict[int, float]:
        found = store.values(setting, key)
        if setting in standing:
            return {seed: next(iter(found.values())) for seed in seeds} if found else {}
        return found

    if experiment.values_hook:
        return getattr(load_hook(experiment.hook), experiment.values_hook)(experiment, store, values)
    return values


def _matches(setting: specs.Setting, name: str) -> bool:
    return any(specs.render(setting.name, {**point, "seed": 0}) == name for point in setting.points())


# --------------------------------------------------------------------------------------------- report


def page_context(experiment: specs.Spec, store: harness.RecordStore, args: argparse.Namespace) -> dict:
    """What the page template sees: the sizes, the run counts, the estimate, the command and the functions
    ``cell(setting, key)``, ``values(setting, key)``, ``paired(treatment, baseline, key)``, ``floor_reason(settings,
    task, key, kind)`` (:func:`significance.floor_reason` of the arms' means, None off the floor), ..."""
    runs = plan(experiment, args)
    values, own = values_reader(experiment, store), values_reader(experiment, store, stand_in=False)
    extra, floors = extra_flags(experiment, args), sig.load_floors()
    context = {
        **sizes_of(experiment, args), "spec": experiment, "args": args, "store": store, "seeds": args.seeds,
        "done": sum(store.has(r.name, r.seed) for r in runs), "total": len(runs),
        "estimate_minutes": sum(r.reference_seconds() for r in runs) / 60.0,
        "command": f"python experiments/run.py {experiment.name} --data-root {_shown(args.data_root)} "
                   f"--budget-minutes {args.budget_minutes:g}" + (f" {extra}" if extra else ""),
        "values": values, "cell": lambda setting, key, digits=2: harness.fmt_mean_std(list(own(setting, key).values()), digits=digits),
        "paired": lambda t, b, key: sig.paired(values(t, key), values(b, key)),
        "mean": lambda setting, key: _mean(values(setting, key)), "table": harness.markdown_table,
        "comparison_table": partial(verdicts.comparison_table, experiment, store),
        "fmt": lambda value, spec=".2f": "–" if value is None or math.isnan(value) else format(value, spec),
        "floors": floors, "floor_points": sig.FLOOR_POINTS,  # experiments/floors.yaml; the reason of the arms' means:
        "floor_reason": lambda settings, task, key, kind="accuracy": sig.floor_reason(
            {s: _mean(values(s, key)) for s in settings if values(s, key)}, floors[task], kind),
    }
    hook = load_hook(experiment.hook)
    if hook is not None and hasattr(hook, "context"):
        context.update(hook.context(context))
    return context


def _shown(path: str) -> str:
    """``path`` relative to the repository when it lies beside it (no machine's absolute path in a page)."""
    return os.path.relpath(path, harness.REPO) if Path(path).is_absolute() else path


def _mean(found: dict[int, float]) -> float:
    return statistics.fmean(found.values()) if found else math.nan


def report(experiment: specs.Spec, store: harness.RecordStore, args: argparse.Namespace) -> str:
    template = specs.template_path(experiment).read_text(encoding="utf-8")
    return specs.render(template, page_context(experiment, store, args))


def summary(experiment: specs.Spec, store: harness.RecordStore, args: argparse.Namespace | None = None) -> dict:
    """The README / RESULTS summary row: the paper, the claim, the primary's verdict with its n, Δ, t-interval and
    Holm p (issue 25's rule), and the spec's numbers."""
    args = args or build_parser(experiment).parse_args([])
    context = page_context(experiment, store, args)
    numbers = specs.render(experiment.summary_numbers, context).strip()
    verdict = specs.render(VERDICT.read_text(encoding="utf-8"), {
        **context, "found": verdicts.primary_of(experiment, store.results_dir), "signed": sig.signed,
        "interval": sig.interval, "pvalue": sig.pvalue}).strip()
    return {"paper": experiment.paper, "claim": experiment.claim, "numbers": numbers, "verdict": verdict}


# ------------------------------------------------------------------------------------------- command line


def build_parser(experiment: specs.Spec) -> argparse.ArgumentParser:
    p = harness.parser(experiment.description)
    p.add_argument("--seeds", type=int, nargs="+", default=experiment.seeds, help="seeds of the seeded settings")
    for key, size in experiment.sizes.items():
        kind = size.kind()
        p.add_argument("--" + key.replace("_", "-"), dest=key, type=TYPES[kind], default=size.default,
                       nargs="+" if kind in ("ints", "floats") else None,
                       help=size.help.replace("%", "%%") if size.help else None)
    return p


def extra_flags(experiment: specs.Spec, args: argparse.Namespace) -> str:
    """The flags of ``args`` that differ from the spec's defaults (for the page's command line)."""
    parts = [] if list(args.seeds) == experiment.seeds else ["--seeds " + " ".join(map(str, args.seeds))]
    for key, size in experiment.sizes.items():
        value = getattr(args, key)
        if value != size.default:
            shown = " ".join(map(str, value)) if isinstance(value, list) else value
            parts.append(f"--{key.replace('_', '-')} {shown}")
    return " ".join(parts)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0].startswith("-"):
        known = ", ".join(sorted(p.stem for p in specs.SPECS_DIR.glob("*.yaml")))
        print(f"usage: python experiments/run.py <experiment> [options]  (experiments: {known})", file=sys.stderr)
        return 2
    try:
        experiment = specs.load_spec(argv[0])
    except specs.SpecError as error:
        print(error, file=sys.stderr)
        return 2
    args = build_parser(experiment).parse_args(argv[1:])
    harness.quiet_progress_bars()
    store = harness.RecordStore(experiment.name, args.results)
    runs = plan(experiment, args)
    wrong = mismatched(store, runs)
    if wrong:
        message = (f"{store.path}: {len(wrong)} record(s) were made with other sizes or options than this command "
                   f"({', '.join(wrong[:4])}{'…' if len(wrong) > 4 else ''}): give the same options, or another --results")
        if not args.report_only:
            print("error: " + message, file=sys.stderr)
            return 2
        print("warning: " + message, flush=True)
    left = 0
    if not args.report_only:
        prepared = args  # what the runs read (a prepare hook may derive a data root); the page keeps args
        if experiment.prepare:
            prepared = getattr(load_hook(experiment.hook), experiment.prepare)(argparse.Namespace(**vars(args)))
        runs = selected(runs, args.only)
        by_key = {(r.name, r.seed): r for r in runs}
        minutes = sum(r.reference_seconds() for r in runs) / 60.0
        print(f"[{experiment.name}] plan: {len(runs)} runs, estimated {minutes:.1f} min on 2 quiet cores", flush=True)
        left = harness.run_plan(store, [(r.name, r.seed) for r in runs], partial(run_one, by_key, prepared),
                                harness.Budget(args.budget_minutes), lambda name: _reference(by_key, name))
    path = harness.write_report(store, report(experiment, store, args))
    compared = [(t, b, declared.metric) for declared, _, t, b in verdicts.comparisons(experiment, store)]
    for figure in experiment.plots:
        plots.draw(figure, store, values_reader(experiment, store), Path(args.results) / figure.file, compared)
    print(f"[{experiment.name}] wrote {path}" + (f"; {left} run(s) left" if left else ""), flush=True)
    return 0


def _reference(by_key: dict, name: str) -> float:
    return next(run.reference_seconds() for (setting, _), run in by_key.items() if setting == name)


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["Run", "build_parser", "main", "plan", "report", "summary", "values_reader"]
