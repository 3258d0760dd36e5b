"""gd_losses' hook (experiments/specs/gd_losses.yaml): the gradient curves of a run's log and their ratios, the
final encoder re-scored on the full dev sets, the untrained encoder's scores, and the ratio / zero-baseline
readers of the page."""

from __future__ import annotations

import math
from pathlib import Path

from run import finite

GRAD_FLOOR = 1e-8  # a gradient norm of exactly 0 (every margin met) counts as this in the log ratios
PARTS = ("alignment", "uniformity", "total")
FINAL_TASKS = ("stsb:dev", "sickr:dev")
CHECK_TOLERANCE = 0.05  # Spearman ×100: the reloaded final encoder must reproduce the run's last score
NO_CHANGE, START, SHIPPED = "1×", "start", "start/mean"
# The one absolute rule (issue 25 item 7): a part fades when its ratio end / start lies below this (t-interval).
FADE_BELOW, HALF = 0.5, "½×"


def final_scores(encoder, data_root: Path, limit: int | None) -> dict:
    """Spearman / Pearson (×100) and n of ``encoder`` on STS-B dev and SICK-R dev (the first ``limit`` pairs)."""
    from contrastext import evaluate_tasks

    result = evaluate_tasks(encoder, list(FINAL_TASKS), data_root, batch_size=128, limit=limit)
    metrics = {}
    for name, task in result["tasks"].items():
        metrics.update({f"{name}_dev_spearman": finite(task.get("spearman")),
                        f"{name}_dev_pearson": finite(task.get("pearson")), f"{name}_dev_n": int(task["n"])})
    return metrics


def measure_start(run, args) -> tuple[dict, dict]:
    """No training: the gd method's encoder as built ([CLS], MLP in training only), as the runs score theirs, and
    the model with its own mean pooling (``shipped_*``), on the full dev sets."""
    from contrastext import TextEncoder, get_recipe, load_config, recipe_path
    from contrastext.models.names import locate_model
    from contrastext.runs.registry import parse_method_args
    from contrastext.runs.stages import seeded_build

    config = load_config(recipe_path(run.recipe), run.overrides)
    recipe = get_recipe(config.method)
    bundle = seeded_build(recipe.build, config, parse_method_args(recipe, config), Path(args.data_root))
    bundle.method.eval()
    metrics = final_scores(bundle.method.encoder, Path(args.data_root), run.sizes["final_limit"])
    shipped = final_scores(TextEncoder.from_pretrained(locate_model(config.model)), Path(args.data_root),
                           run.sizes["final_limit"])
    metrics.update({f"shipped_{key}": value for key, value in shipped.items()})
    return metrics, {"resolved_config": config.model_dump(mode="json")}


def log_ratio(end: float | None, start: float | None) -> float | None:
    """ln(end / start) with an end of 0 counted as GRAD_FLOOR; None when start is 0 or missing."""
    if end is None or start is None or start <= 0:
        return None
    return math.log(max(end, GRAD_FLOOR) / start)


def curves(log_path: Path) -> dict:
    """Step → gradient norms / STS-B subset score (every evaluation) and step → training loss."""
    from contrastext import read_log

    records = read_log(log_path)
    evals = [r for r in records if "eval/grad_alignment" in r]
    if not evals:
        raise RuntimeError(f"{log_path}: no evaluation logged eval/grad_alignment (gradient diagnostics off?)")
    losses = [r for r in records if "loss" in r]
    found = {"steps": [int(r["step"]) for r in evals]}
    found.update({f"grad_{part}": [float(r[f"eval/grad_{part}"]) for r in evals] for part in PARTS})
    found.update(stsb_subset_spearman=[finite(r.get("eval/stsb_dev_spearman")) for r in evals],
                 loss_steps=[int(r["step"]) for r in losses], train_loss=[finite(r["loss"]) for r in losses])
    return found


def gradient_summary(found: dict) -> dict:
    """Start (step 0), first evaluation after it and end values of each part, and the log ratios."""
    steps, metrics = found["steps"], {}
    if steps[0] != 0:
        raise RuntimeError(f"the first evaluation is at step {steps[0]}, not 0 (train.eval_at_start off?)")
    for part in PARTS:
        values = found[f"grad_{part}"]
        metrics.update({f"grad_{part}_start": values[0], f"grad_{part}_first": values[1] if len(values) > 1 else None,
                        f"grad_{part}_end": values[-1], f"log_ratio_{part}": log_ratio(values[-1], values[0]),
                        f"log_ratio_{part}_vs_first": log_ratio(values[-1], values[1]) if len(values) > 2 else None})
    metrics["first_eval_step"] = steps[1] if len(steps) > 1 else None
    return metrics


def gradient_metrics(run, summary, args) -> dict:
    """A loss run's curves and ratios; its final encoder, reloaded (it must give the run's own last STS-B subset
    score), scored on the full STS-B and SICK-R dev sets."""
    from contrastext import TextEncoder, evaluate_tasks

    sizes, where = run.sizes, f"{run.name} seed {run.seed}"
    if summary["last_step"] != sizes["steps"]:
        raise RuntimeError(f"{where}: stopped at step {summary['last_step']}, not {sizes['steps']}")
    data_root, found = Path(args.data_root), curves(Path(summary["log_path"]))
    encoder = TextEncoder.load(Path(summary["final_model_dir"]))
    run_score = summary["metrics"]["stsb_dev_spearman"]
    check = evaluate_tasks(encoder, ["stsb:dev"], data_root, batch_size=128, limit=sizes["eval_limit"])
    reloaded = check["tasks"]["stsb"]["spearman"]
    if abs(reloaded - run_score) > CHECK_TOLERANCE:
        raise RuntimeError(f"{where}: the reloaded final encoder scores {reloaded:.3f} on the first "
                           f"{sizes['eval_limit']} STS-B dev pairs, the run logged {run_score:.3f}")
    return {**final_scores(encoder, data_root, sizes["final_limit"]), "stsb_subset_spearman_end": finite(run_score),
            "stsb_subset_spearman_start": finite(summary["start_metrics"].get("stsb_dev_spearman")),
            **gradient_summary(found), "curves": found}


def values(spec, store, read):
    """``1×``: ln(end/start) = 0 at every seed (no change), the baseline of the old absolute fade tests; ``½×``:
    ln(:data:`FADE_BELOW`) at every seed, the one absolute rule's; ``start/mean``: the untrained model with its own
    mean pooling (the start record's ``shipped_*``)."""
    seeds = sorted({r["seed"] for r in store.records if r["setting"] != START})

    def reader(setting: str, key: str) -> dict[int, float]:
        if setting in (NO_CHANGE, HALF):
            return dict.fromkeys(seeds, 0.0 if setting == NO_CHANGE else math.log(FADE_BELOW))
        if setting == SHIPPED:
            return store.values(START, f"shipped_{key}")
        return read(setting, key)

    return reader


def context(page: dict) -> dict:
    """``ratio(t, b, key)``: the geometric-mean ratio exp(Δ) with its 95 % t-interval, from the paired log ratios;
    ``delta(t, b, key)``: Δ with its t-interval; ``run_minutes``: one training's reference minutes."""

    def ratio(treatment: str, baseline: str, key: str) -> str:
        stats = page["paired"](treatment, baseline, key)
        if stats.n == 0:
            return "–"
        if stats.n < 2:
            return f"×{math.exp(stats.delta):.3g} (n = 1)"
        return f"×{math.exp(stats.delta):.3g} [{math.exp(stats.low):.3g}, {math.exp(stats.high):.3g}] (n = {stats.n})"

    def delta(treatment: str, baseline: str, key: str) -> str:
        stats = page["paired"](treatment, baseline, key)
        if stats.n < 2:
            return "–" if not stats.n else f"{stats.delta:+.2f} (n = 1)"
        return f"{stats.delta:+.2f} [{stats.low:+.2f}, {stats.high:+.2f}] (n = {stats.n})"

    def fade(setting: str, key: str) -> str:
        """The one absolute rule on ``key`` (a log ratio): fades, does not fade or unclear; – below 2 seeds."""
        stats = page["paired"](setting, NO_CHANGE, key)
        if stats.n < 2:
            return "–"
        limit = math.log(FADE_BELOW)
        return "fades" if stats.high < limit else "does not fade" if stats.low > limit else "unclear"

    import run as runner  # experiments/run.py

    trainings = [r for r in runner.plan(page["spec"], page["args"]) if r.name != START]
    return {"ratio": ratio, "delta": delta, "fade": fade, "FADE_BELOW": FADE_BELOW, "GRAD_FLOOR": GRAD_FLOOR,
            "run_minutes": trainings[0].reference_seconds() / 60 if trainings else math.nan}
