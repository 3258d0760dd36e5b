"""Few-shot SST-2: cross-entropy alone vs cross-entropy + supervised contrastive loss (SCL).

Gunel, Du, Conneau, Stoyanov, "Supervised Contrastive Learning for Pre-trained Language Model
Fine-tuning", ICLR 2021, claim that L = (1 − λ)·L_CE + λ·L_SCL (λ = 0.9, τ = 0.3) helps most when labelled
data is scarce (N = 20 on SST-2) and when training data is noisy. This runs the ``scl`` recipe
(all-MiniLM-L6-v2, [CLS] + linear head) in two settings, ``ce`` (``method_args.lam=0``) and ``ce+scl``
(λ 0.9, τ 0.3), each over the same seeds (each seed is its own few-shot draw of ``--per-class`` examples
per class, its own label flips and training randomness), evaluated on the first ``--eval-limit`` rows of
SST-2 dev. ``--label-noise 0.2`` adds the same two settings with 20 % of the training labels flipped.

Two numbers per run: ``last`` (the weights after the final step) and ``best`` (the recipe's choice: the
evaluation with the highest dev accuracy, selected on the very rows it is scored on, hence optimistic).

Outputs: one run folder per setting under ``--runs`` (seed-<s>/ and summary.json by the recipe), and in
``--results``: ``scl_few_shot.md`` (mean ± std table) and ``scl_few_shot.json`` (per-seed values).

Example::

    .venv/bin/python experiments/scl_few_shot.py --data-root ../shared/data --seeds 1 2 3 --steps 100
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from contrastext.runs.registry import run_recipe
from contrastext.runtime.run_log import read_log
from contrastext.training.config import load_config

REPO = Path(__file__).resolve().parents[1]
SETTINGS = {"ce": ["method_args.lam=0"], "ce+scl": ["method_args.lam=0.9", "method_args.temperature=0.3"]}


def settings(label_noise: float) -> dict[str, list[str]]:
    """Setting name -> its own overrides (clean labels, plus the noisy copies when ``label_noise`` > 0)."""
    chosen = {name: [*sets, "data.label_noise=0"] for name, sets in SETTINGS.items()}
    if label_noise > 0:
        for name, sets in SETTINGS.items():
            chosen[f"{name}, noise {label_noise}"] = [*sets, f"data.label_noise={label_noise}"]
    return chosen


def overrides(args: argparse.Namespace, name: str, own: list[str]) -> list[str]:
    """The shared overrides of every run plus the setting's own."""
    folder = name.replace(", noise ", "-noise").replace("+", "-")
    seeds = ",".join(str(s) for s in args.seeds)
    return [
        f"output_dir={Path(args.runs) / folder}",
        f"method_args.seeds=[{seeds}]",
        f"data.few_shot={args.per_class}",
        f"train.max_steps={args.steps}",
        f"train.eval_every={args.eval_every}",
        f"train.save_every={args.steps}",
        "train.keep_last=1",
        "train.overwrite=true",
        "train.tensorboard=false",
        "train.progress_bar=false",
        f"eval.limit={args.eval_limit}",
        *own,
    ]


def last_accuracy(seed_dir: Path) -> float:
    """Dev accuracy of the last evaluation logged in a seed's ``train_log.jsonl``."""
    evals = [r for r in read_log(seed_dir / "train_log.jsonl") if "eval/sst2_dev_accuracy" in r]
    return float(evals[-1]["eval/sst2_dev_accuracy"])


def mean_std(values: list[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (ddof = 1; 0 for a single value)."""
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def run_setting(args: argparse.Namespace, name: str, own: list[str]) -> dict:
    """Run one setting over the seeds; per-seed ``best`` and ``last`` dev accuracy and the wall time."""
    config = load_config(REPO / "recipes" / "scl.yaml", overrides(args, name, own))
    start = time.perf_counter()
    summary = run_recipe(config, data_root=Path(args.data_root))
    seconds = time.perf_counter() - start
    best = {int(s): float(run["metrics"]["sst2_dev_accuracy"]) for s, run in summary["runs"].items()}
    last = {s: last_accuracy(Path(config.output_dir) / f"seed-{s}") for s in best}
    flipped = {int(s): run["report"].get("labels_flipped") for s, run in summary["runs"].items()}
    print(f"{name}: last {last}, best {best} ({seconds:.0f} s)", flush=True)
    return {"best": best, "last": last, "labels_flipped": flipped, "seconds": seconds}


def table(results: dict[str, dict]) -> str:
    """Markdown: mean ± std of last and best dev accuracy per setting, with the per-seed values."""
    lines = [
        "| setting | dev accuracy, last step (mean ± std) | per seed | best-on-dev (mean ± std) | per seed | time |",
        "|---|---|---|---|---|---|",
    ]
    for name, result in results.items():
        cells = []
        for kind in ("last", "best"):
            values = list(result[kind].values())
            mean, std = mean_std(values)
            cells.append(f"{mean:.2f} ± {std:.2f}")
            cells.append(", ".join(f"{v:.2f}" for v in values))
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {result['seconds']:.0f} s |")
    return "\n".join(lines) + "\n"


def command_line(args: argparse.Namespace) -> str:
    seeds = " ".join(str(s) for s in args.seeds)
    text = (
        f".venv/bin/python experiments/scl_few_shot.py --data-root {args.data_root} --seeds {seeds} "
        f"--per-class {args.per_class} --steps {args.steps} --eval-every {args.eval_every} "
        f"--eval-limit {args.eval_limit}"
    )
    return text + (f" --label-noise {args.label_noise}" if args.label_noise > 0 else "")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-root", default=str(REPO.parent / "shared" / "data"))
    parser.add_argument("--runs", default=str(REPO / "runs" / "experiments" / "scl"))
    parser.add_argument("--results", default=str(REPO / "docs" / "results"))
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--per-class", type=int, default=10, help="few-shot examples per class")
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--eval-every", type=int, default=25)
    parser.add_argument("--eval-limit", type=int, default=400, help="first N rows of SST-2 dev")
    parser.add_argument("--label-noise", type=float, default=0.0, help="also run both settings with this noise")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    start = time.perf_counter()
    results = {name: run_setting(args, name, own) for name, own in settings(args.label_noise).items()}
    total = time.perf_counter() - start
    text = f"Command: `{command_line(args)}`\n\n" + table(results)
    text += f"\nAll runs: {total / 60:.1f} min wall time.\n"
    out = Path(args.results)
    out.mkdir(parents=True, exist_ok=True)
    (out / "scl_few_shot.md").write_text(text, encoding="utf-8")
    (out / "scl_few_shot.json").write_text(json.dumps({"total_s": total, "settings": results}, indent=1))
    print(text)


if __name__ == "__main__":
    main()
