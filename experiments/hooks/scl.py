"""SCL's hook (experiments/specs/scl_few_shot.yaml and scl_noise.yaml): one draw of the ``scl`` recipe, λ tuned
per draw on validation or picked by the paper's rule (a values hook), and the page's chance level, top-3 figures and
λ picks.

**The paper's rule** (§4.1, issue 25 item 5). ``<prefix>/<family>@rule`` (e.g. ``n20-rule/ce@rule``) is the one
setting ``<prefix>/<family>@<value>`` of the spec whose top 3 draws by validation accuracy have the best mean
validation accuracy (ties → the first in the spec's grid), over the draws every candidate has; every key of it is
that setting's, for every draw.

**λ is tuned, not run.** ``<prefix>/ce+scl@tuned`` (prefix ``n20``, ``p40``, ...) is, per draw, the run of the
λ in the spec's grid with the best VALIDATION accuracy (ties → the smaller λ); every key of it (test accuracy,
selected step, ``lam``) is that run's. Only draws with every λ recorded count. ``gap@<prefix>`` is the per-draw
difference tuned CE + SCL − CE on the same key, ``gap@<prefix>/<loss>`` that of one fixed λ (scl_noise's "does
the gap grow with noise").
"""

from __future__ import annotations

import collections
import functools
import math
import statistics
from pathlib import Path

CE, TUNED, RULE = "ce", "ce+scl@tuned", "rule"
VALIDATION_KEY, TEST_KEY = "validation_accuracy", "test_accuracy"
CHANCE_MARGIN = 3.0  # points above the majority-class share still counted "at chance" (the floor rule of experiments/floors.yaml)


def scl_loss(lam: float) -> str:
    return f"ce+scl@{lam:g}"


def loss_label(loss: str) -> str:
    """``"CE"``, ``"CE + SCL (λ 0.5)"``, ``"CE + SCL (λ tuned)"``."""
    return "CE" if loss == CE else f"CE + SCL (λ {loss.partition('@')[2]})"


def lam_grid(spec) -> list[float]:
    """The λ > 0 of the spec's settings (the grid tuned CE + SCL picks from), ascending."""
    return sorted({float(lam) for s in spec.settings for lam in s.grid.get("lam", []) if float(lam) > 0})


# ------------------------------------------------------------------------------------------------- runs


def run_draw(run, args) -> tuple[dict, dict]:
    """One draw of the ``scl`` recipe with the setting's overrides: the metrics of the checkpoint selected on
    validation, its test accuracy and the validation curve; the run folder's inputs, then the folder is deleted."""
    import run as runner  # experiments/run.py

    from contrastext import load_config, recipe_path, run_recipe

    config = load_config(recipe_path(run.recipe), run.overrides)
    metrics = draw_metrics(run_recipe(config, data_root=Path(args.data_root)), run.seed)
    noise, subset = float(run.point.get("noise", 0)) / 100, int(run.sizes.get("subset") or 0)
    flipped = metrics.get("labels_flipped") or 0
    if noise and abs(flipped - round(noise * subset)) > max(2, 0.01 * subset):
        raise RuntimeError(f"{run.name} seed {run.seed}: {flipped} labels flipped, expected {round(noise * subset)}")
    inputs = runner.run_folder_record(run.output_dir, Path(args.data_root))
    runner.remove(run.output_dir)
    return metrics, inputs


def draw_metrics(summary: dict, seed: int, task: str = "sst2") -> dict:
    """The metrics of one draw from the recipe's summary (``runs[<seed>]``) and its log."""
    from contrastext import read_log

    found = summary["runs"][str(seed)]
    report = found.get("report") or {}
    test = report.get("test_metrics") or {}
    validation_key, test_key = f"{task}_validation_accuracy", f"{task}_test_accuracy"
    if validation_key not in found["metrics"] or test_key not in test:
        raise RuntimeError(f"draw {seed}: {validation_key} or {test_key} missing (keys: {sorted(found['metrics'])}, "
                           f"test: {sorted(test)}); was the protocol validation_test?")
    log = read_log(found["log_path"])
    curve = [[r["step"], r[f"eval/{validation_key}"]] for r in log if f"eval/{validation_key}" in r]
    last = next((r for r in reversed(log) if "loss" in r), {})
    metrics = {
        VALIDATION_KEY: found["metrics"][validation_key], TEST_KEY: test[test_key], "test_f1": test.get(f"{task}_test_f1"),
        "best_step": found.get("best_step"), "last_step": found.get("last_step"),
        "last_validation_accuracy": curve[-1][1] if curve else None, "validation_curve": curve,
        "last_loss_ce": last.get("loss/ce"), "last_loss_supcon": last.get("loss/supcon"),
        **{key: report.get(key) for key in ("n_train", "train_label_counts", "labels_flipped", "n_validation", "n_test")},
    }
    return _clean(metrics)


def _clean(value):
    """JSON-safe: NaN / inf become None, numpy scalars Python numbers, dict keys strings."""
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    value = value.item() if hasattr(value, "item") and not isinstance(value, int | float | str) else value
    return None if isinstance(value, float) and not math.isfinite(value) else value


# ------------------------------------------------------------------------------------------------- values


def tuned_draws(values, prefix: str, lams) -> dict[int, float]:
    """``draw -> λ`` of tuned CE + SCL: the best validation accuracy among ``lams`` (ties → the smaller λ);
    draws without every λ's validation and test accuracy are left out."""
    runs = {lam: (values(f"{prefix}/{scl_loss(lam)}", VALIDATION_KEY), values(f"{prefix}/{scl_loss(lam)}", TEST_KEY))
            for lam in sorted(lams)}
    if not runs:
        return {}
    complete = set.intersection(*(set(v) & set(t) for v, t in runs.values()))
    return {draw: min(runs, key=lambda lam: (-runs[lam][0][draw], lam)) for draw in sorted(complete)}


def rule_candidates(spec, prefix: str, family: str) -> list[str]:
    """The spec's setting names ``<prefix>/<family>@<value>`` (not ``@rule`` or ``@tuned``), in grid order."""
    from spec import render  # experiments/spec.py

    names = [render(s.name, {**point, "seed": 0}) for s in spec.settings for point in s.points()]
    return [n for n in names if n.startswith(f"{prefix}/{family}@") and n.rpartition("@")[2] not in (RULE, "tuned")]


def rule_pick(values, candidates: list[str]) -> str | None:
    """The candidate the paper's rule picks, on the draws every candidate has; None while one has none."""
    from contrastext.runs.scl import top_k_by_validation

    found = {c: (values(c, VALIDATION_KEY), values(c, TEST_KEY)) for c in candidates}
    draws = sorted(set.intersection(*(set(v) & set(t) for v, t in found.values()))) if found else []
    if not draws:
        return None
    scores = {c: top_k_by_validation({d: {VALIDATION_KEY: v[d], TEST_KEY: t[d]} for d in draws},
                                     VALIDATION_KEY, TEST_KEY, 3)["validation_mean"] for c, (v, t) in found.items()}
    return max(candidates, key=lambda c: scores[c])


def tuned_values(spec, store, values):
    """The spec's ``values_hook``: ``values`` plus ``<prefix>/ce+scl@tuned`` and ``gap@<prefix>[/<loss>]``."""
    lams = lam_grid(spec)

    def read(setting: str, key: str) -> dict[int, float]:
        if setting.startswith("gap@"):
            prefix, _, loss = setting.removeprefix("gap@").partition("/")
            arm, ce = read(f"{prefix}/{loss or TUNED}", key), read(f"{prefix}/{CE}", key)
            return {d: arm[d] - ce[d] for d in sorted(set(arm) & set(ce))}
        prefix, _, loss = setting.partition("/")
        family, _, choice = loss.partition("@")
        if choice == RULE:
            picked = rule_pick(values, rule_candidates(spec, prefix, family))
            return {} if picked is None else values(picked, key)
        if loss != TUNED:
            return values(setting, key)
        picked = tuned_draws(values, prefix, lams)
        if key == "lam":
            return picked
        return {d: found[d] for d, lam in picked.items()
                if d in (found := values(f"{prefix}/{scl_loss(lam)}", key))}

    return read


# ------------------------------------------------------------------------------------------- chance level


@functools.cache
def test_label_counts(data_root: str) -> tuple[tuple[str, int], ...]:
    """``((label, count), ...)`` of the test rows, split as the recipe splits SST-2 dev (clean, the same rows
    for every run)."""
    from contrastext import load_config, recipe_path
    from contrastext.runs.scl import SCLArgs, load_data

    config = load_config(recipe_path("scl"), [])
    data = load_data(config, config.method_args_as(SCLArgs), Path(data_root))
    return tuple(sorted(collections.Counter(str(example.label) for example in data.test or []).items()))


def chance(data_root: str) -> tuple[float | None, str]:
    """``(majority share of the test rows, the page's sentence)``; ``(None, why)`` when SST-2 cannot be read."""
    from contrastext import ContrastextError

    try:
        counts = dict(test_label_counts(str(data_root)))
    except (ContrastextError, OSError) as error:
        return None, (f"Chance level unknown: the test rows' labels could not be read under `{data_root}` "
                      f"({type(error).__name__}); no setting is flagged at chance.")
    total = sum(counts.values())
    share = 100.0 * max(counts.values()) / total
    held = ", ".join(f"{count} of label {label}" for label, count in counts.items())
    return share, (f"Chance level: the {total} test rows hold {held}, so always answering the majority class scores "
                   f"{share:.1f} %. A setting whose mean test accuracy is within {CHANCE_MARGIN:g} points of that, or "
                   "below, is flagged **at chance**.")


def at_chance(found, share: float | None) -> bool:
    """Mean within :data:`CHANCE_MARGIN` points of the majority-class share, or below it."""
    return bool(found) and share is not None and statistics.fmean(found) <= share + CHANCE_MARGIN


# --------------------------------------------------------------------------------------------------- page


def context(page: dict) -> dict:
    """The template's SCL functions: ``top3(setting)``, ``picks(prefix)``, ``at_chance(setting)``,
    ``median_step(setting)``, ``task_lam(prefix)`` (the paper's rule: one λ by the mean validation accuracy of
    the top 3 draws), ``share``/``chance_text``, ``loss_label``, ``lams``."""
    from contrastext.runs.scl import top_k_by_validation

    values, spec = page["values"], page["spec"]
    lams = lam_grid(spec)
    share, text = chance(page["args"].data_root)

    def top3(setting: str) -> dict | None:
        validation, test = values(setting, VALIDATION_KEY), values(setting, TEST_KEY)
        draws = {d: {VALIDATION_KEY: validation[d], TEST_KEY: test[d]} for d in sorted(set(validation) & set(test))}
        return top_k_by_validation(draws, VALIDATION_KEY, TEST_KEY, 3) if draws else None

    def fmt_top(setting: str, digits: int = 1) -> str:
        found = top3(setting)
        return "–" if found is None else f"{found['mean']:.{digits}f} ± {found['std']:.{digits}f} (top {found['top_k']})"

    def picks(prefix: str) -> str:
        counts = collections.Counter(values(f"{prefix}/{TUNED}", "lam").values())
        return "λ " + ", ".join(f"{lam:g} ×{counts[lam]}" for lam in sorted(counts)) if counts else ""

    def rule_choice(prefix: str, family: str = "ce+scl") -> str | None:
        """The setting the paper's rule picks among ``<prefix>/<family>@<value>``."""
        return rule_pick(values, rule_candidates(spec, prefix, family))

    def task_lam(prefix: str) -> float | None:
        picked = rule_choice(prefix)
        return None if picked is None else float(picked.rpartition("@")[2])

    def median_step(setting: str) -> str:
        steps = list(values(setting, "best_step").values())
        return f"{statistics.median(steps):g}" if steps else "–"

    def not_last(prefix: str = "") -> str:
        """``"k of n"`` runs (setting names starting with ``prefix``) whose selected step is not the last."""
        found = [r["metrics"] for r in page["store"].records if r["setting"].startswith(prefix)]
        return f"{sum(m.get('best_step') != m.get('last_step') for m in found)} of {len(found)}"

    return {"top3": top3, "rule_choice": rule_choice, "not_last": not_last, "fmt_top": fmt_top, "picks": picks, "task_lam": task_lam, "median_step": median_step,
            "at_chance": lambda setting: at_chance(list(values(setting, TEST_KEY).values()), share),
            "share": share, "chance_text": text, "loss_label": loss_label, "lams": lams, "CE": CE, "TUNED": TUNED,
            "ceil": math.ceil, "complete": lambda prefix: len(tuned_draws(values, prefix, lams))}
