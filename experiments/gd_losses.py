"""Gradient dissipation on real data: the seven objectives of the ``gd`` recipe, side by side.

Nie, Zhang & Mao, "On the inadequacy of optimizing alignment and uniformity in contrastive learning of
sentence representations", ICLR 2023. For each loss (infonce, align_uniform, dcl, hinged_dcl,
margin_euclidean, margin_angle, margin_product) this runs the ``gd`` recipe (unsupervised SimCSE, [CLS]
pooling, MLP in training only) from all-MiniLM-L6-v2 on the wiki1m head with the same seed and the same
number of steps, evaluating at the start and every ``--eval-every`` steps: STS-B dev Spearman, alignment and
uniformity of STS-B dev, and the mean per-anchor norms of the alignment and uniformity parts of the
objective's gradient on a fixed batch (``grad_alignment``, ``grad_uniformity``).

For InfoNCE the alignment part is −(1 − p_kk)/τ · y_k: it vanishes once the positive dominates the softmax
(p_kk → 1), the "dissipation". The margin losses are exactly zero (so is their gradient) for every anchor
whose margin is met. all-MiniLM-L6-v2 is already sentence-tuned, so dropout twins start far closer than
any negative: that is the regime where the dissipation should show at step 0.

Outputs: one run folder per loss under ``--runs``, and in ``--results``: ``gd_losses.md`` (the table),
``gd_losses.json`` (every logged evaluation) and ``gd_losses.png`` (curves per loss).

Example::

    .venv/bin/python experiments/gd_losses.py --data-root ../shared/data --steps 60 --batch-size 32
    .venv/bin/python experiments/gd_losses.py --only-report        # redraw from the existing run folders
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from contrastext.runs.registry import run_recipe  # noqa: E402
from contrastext.runtime.run_log import read_log  # noqa: E402
from contrastext.training.config import load_config  # noqa: E402

LOSSES = ("infonce", "align_uniform", "dcl", "hinged_dcl", "margin_euclidean", "margin_angle", "margin_product")
REPO = Path(__file__).resolve().parents[1]
EVAL_KEYS = ("stsb_dev_spearman", "align", "uniform", "grad_alignment", "grad_uniformity", "grad_total")


def overrides(args: argparse.Namespace, loss: str) -> list[str]:
    """The ``--set`` overrides of one run (the same for every loss but ``method_args.loss``)."""
    sets = [
        f"method_args.loss={loss}",
        f"output_dir={Path(args.runs) / loss}",
        f"seed={args.seed}",
        f"train.max_steps={args.steps}",
        f"train.batch_size={args.batch_size}",
        f"train.eval_every={args.eval_every}",
        "train.eval_at_start=true",
        f"train.log_every={args.log_every}",
        f"train.save_every={args.steps}",
        "train.keep_last=1",
        "train.overwrite=true",
        "train.tensorboard=false",
        "train.progress_bar=false",
        f"data.max_length={args.max_length}",
    ]
    if args.eval_limit:
        sets.append(f"eval.limit={args.eval_limit}")
    return sets


def run_all(args: argparse.Namespace) -> dict[str, float]:
    """Train every loss in ``args.losses``; returns the wall time of each run in seconds."""
    times = {}
    for loss in args.losses:
        config = load_config(REPO / "recipes" / "gd.yaml", overrides(args, loss))
        start = time.perf_counter()
        run_recipe(config, data_root=Path(args.data_root))
        times[loss] = time.perf_counter() - start
        print(f"{loss}: {times[loss]:.0f} s", flush=True)
    return times


def collect(runs: Path, losses: list[str]) -> dict[str, dict]:
    """Per loss: the evaluation records (step + eval keys) and the training-loss records of its log."""
    curves = {}
    for loss in losses:
        records = read_log(runs / loss / "train_log.jsonl")
        evals = [
            {"step": r["step"], **{k: r[f"eval/{k}"] for k in EVAL_KEYS if f"eval/{k}" in r}}
            for r in records
            if "eval/stsb_dev_spearman" in r
        ]
        losses_logged = [{"step": r["step"], "loss": r["loss"]} for r in records if "loss" in r]
        curves[loss] = {"evals": evals, "train_loss": losses_logged}
    return curves


def _fmt(value: float | None, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return f"{value:.{digits}f}"


def table(curves: dict[str, dict], times: dict[str, float]) -> str:
    """Markdown table: start → end of every diagnostic per loss."""
    head = (
        "| loss | STS-B dev ρ start | end | best (step) | align start → end | uniform start → end "
        "| ‖g_align‖ start → end | ‖g_unif‖ start → end | g_unif/g_align end | train loss first → last | time |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|\n"
    )
    rows = []
    for loss, curve in curves.items():
        first, last = curve["evals"][0], curve["evals"][-1]
        best = max(curve["evals"], key=lambda e: e["stsb_dev_spearman"])
        train = curve["train_loss"]
        ratio = last["grad_uniformity"] / last["grad_alignment"] if last.get("grad_alignment") else float("nan")
        seconds = times.get(loss)
        rows.append(
            f"| {loss} | {first['stsb_dev_spearman']:.2f} | {last['stsb_dev_spearman']:.2f} "
            f"| {best['stsb_dev_spearman']:.2f} ({best['step']}) "
            f"| {_fmt(first.get('align'))} → {_fmt(last.get('align'))} "
            f"| {_fmt(first.get('uniform'))} → {_fmt(last.get('uniform'))} "
            f"| {_fmt(first.get('grad_alignment'))} → {_fmt(last.get('grad_alignment'))} "
            f"| {_fmt(first.get('grad_uniformity'))} → {_fmt(last.get('grad_uniformity'))} "
            f"| {_fmt(ratio, 2)} "
            f"| {_fmt(train[0]['loss'], 4)} → {_fmt(train[-1]['loss'], 4)} "
            f"| {'–' if seconds is None else f'{seconds:.0f} s'} |"
        )
    return head + "\n".join(rows) + "\n"


def plot(curves: dict[str, dict], path: Path) -> Path:
    """Four panels against the step: ‖g_align‖, ‖g_unif‖ (log scale), STS-B dev ρ, training loss."""
    figure, axes = plt.subplots(2, 2, figsize=(10, 6.4))
    panels = [
        (axes[0][0], "grad_alignment", "‖alignment part of ∇‖ (fixed batch)", True),
        (axes[0][1], "grad_uniformity", "‖uniformity part of ∇‖ (fixed batch)", True),
        (axes[1][0], "stsb_dev_spearman", "STS-B dev Spearman ×100", False),
    ]
    for loss, curve in curves.items():
        for ax, key, _, _ in panels:
            points = [(e["step"], e[key]) for e in curve["evals"] if key in e]
            if key.startswith("grad_"):
                points = [(s, max(v, 1e-6)) for s, v in points]  # zero gradients shown at the floor
            ax.plot([s for s, _ in points], [v for _, v in points], marker=".", label=loss)
        train = curve["train_loss"]
        axes[1][1].plot([r["step"] for r in train], [r["loss"] for r in train], label=loss)
    for ax, _, title, log in panels:
        ax.set_title(title, fontsize="medium")
        if log:
            ax.set_yscale("log")
    axes[1][1].set_title("training loss (each loss on its own scale)", fontsize="medium")
    axes[1][1].set_yscale("symlog", linthresh=1e-2)
    for ax in axes.flat:
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize="x-small")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=72)
    plt.close(figure)
    return path


def command_line(args: argparse.Namespace) -> str:
    parts = [
        ".venv/bin/python experiments/gd_losses.py",
        f"--data-root {args.data_root}",
        f"--steps {args.steps} --batch-size {args.batch_size} --max-length {args.max_length}",
        f"--eval-every {args.eval_every}",
    ]
    if args.eval_limit:
        parts.append(f"--eval-limit {args.eval_limit}")
    return " ".join(parts)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-root", default=str(REPO.parent / "shared" / "data"))
    parser.add_argument("--runs", default=str(REPO / "runs" / "experiments" / "gd"))
    parser.add_argument("--results", default=str(REPO / "docs" / "results"))
    parser.add_argument("--losses", nargs="+", default=list(LOSSES), choices=LOSSES)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--max-length", type=int, default=32)
    parser.add_argument("--eval-every", type=int, default=20)
    parser.add_argument("--eval-limit", type=int, default=None, help="first N STS-B dev pairs (default: all)")
    parser.add_argument("--log-every", type=int, default=5)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--only-report", action="store_true", help="no training: table + plot from --runs")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    results = Path(args.results)
    results.mkdir(parents=True, exist_ok=True)
    times_file = Path(args.runs) / "times.json"
    if args.only_report:
        times = json.loads(times_file.read_text()) if times_file.exists() else {}
    else:
        start = time.perf_counter()
        times = run_all(args)
        times["__all__"] = time.perf_counter() - start
        times_file.write_text(json.dumps(times, indent=2))
    curves = collect(Path(args.runs), args.losses)
    text = f"Command: `{command_line(args)}`\n\n" + table(curves, times)
    if "__all__" in times:
        text += f"\nAll {len(args.losses)} runs: {times['__all__'] / 60:.1f} min wall time.\n"
    (results / "gd_losses.md").write_text(text, encoding="utf-8")
    (results / "gd_losses.json").write_text(json.dumps({"times_s": times, "curves": curves}, indent=1))
    png = plot(curves, results / "gd_losses.png")
    print(text)
    print(f"wrote {results / 'gd_losses.md'}, {png} ({png.stat().st_size // 1024} KB)")


if __name__ == "__main__":
    main()
