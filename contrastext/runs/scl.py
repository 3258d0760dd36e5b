"""Recipe ``scl``: CE + SupCon fine-tuning (Gunel et al., ICLR 2021), one training per seed.

The paper's protocol is several draws: ``method_args.seeds: [1, 2, ...]`` runs one training per seed (each
with its own few-shot draw ``data.few_shot``, label flips ``data.label_noise`` and training randomness)
under ``<output_dir>/seed-<s>/`` and writes ``<output_dir>/summary.json`` with every evaluation metric's
per-seed values, mean and standard deviation (sample std, ddof = 1; 0 for one seed).

Example::

    >>> config = load_config(recipe_path("scl"), ["train.max_steps=3", "data.few_shot=10"])
    >>> summary = run_recipe(config, data_root=Path("../shared/data"))
    >>> summary["summary"]["score"]["mean"], summary["summary"]["score"]["std"]
"""

from __future__ import annotations

import statistics
from pathlib import Path

from contrastext.errors import ConfigError
from contrastext.methods.scl import SCLArgs, SCLMethod
from contrastext.runs.classification import classifier_encoder, head_evaluator
from contrastext.runs.data import load_classification_data
from contrastext.runs.registry import RunSpec
from contrastext.runs.stages import (
    MethodBundle,
    finished_summary,
    run_training,
    seeded_build,
    stage_config,
    write_summary,
)
from contrastext.training.config import TrainConfig

SUMMARY_FILE = "summary.json"


def build(config: TrainConfig, args: SCLArgs, data_root: Path | None) -> MethodBundle:
    """One SCL run with ``config.seed`` as the seed of the few-shot draw and the label noise."""
    data = load_classification_data(config, args, data_root, seed=config.seed)
    method = SCLMethod(
        classifier_encoder(config, args),
        data.task,
        lam=args.lam,
        temperature=args.temperature,
        head_dropout=args.head_dropout,
    )
    description = dict(data.description)
    return MethodBundle(method, list(data.train), head_evaluator(config, data), final_report=lambda _m: description)


def seed_config(config: TrainConfig, seed: int) -> TrainConfig:
    """A copy of ``config`` for one seed: top-level and training seed ``seed``, output in ``seed-<seed>/``."""
    return stage_config(config, f"seed-{seed}", train={"seed": seed}, seed=seed)


def summarize(per_seed: dict[int, dict[str, float]]) -> dict[str, dict]:
    """``{metric: {"mean", "std", "values": {seed: value}, "text": "m ± s"}}`` over the seeds' metrics."""
    names = sorted({name for metrics in per_seed.values() for name in metrics})
    summary = {}
    for name in names:
        values = {seed: float(metrics[name]) for seed, metrics in per_seed.items() if name in metrics}
        numbers = list(values.values())
        mean = statistics.fmean(numbers)
        std = statistics.stdev(numbers) if len(numbers) > 1 else 0.0
        summary[name] = {"mean": mean, "std": std, "values": values, "text": f"{mean:.2f} ± {std:.2f}"}
    return summary


def run(config: TrainConfig, args: SCLArgs, data_root: Path | None, resume: bool = False) -> dict:
    """Train once per seed of ``method_args.seeds`` and write ``summary.json`` (mean ± std per metric).

    With ``resume``, a seed whose ``metrics.json`` exists is not trained again; the others resume from
    their last checkpoint.
    """
    seeds = args.seeds or [config.seed]
    if len(set(seeds)) != len(seeds):
        raise ConfigError(f"{config.source or '<config>'}: method_args.seeds: repeated seeds in {seeds}")
    runs: dict[int, dict] = {}
    for seed in seeds:
        run_config = seed_config(config, seed)
        finished = finished_summary(run_config.output_dir) if resume else None
        if finished is not None:
            runs[seed] = finished
            continue
        runs[seed] = run_training(run_config, seeded_build(build, run_config, args, data_root), resume=resume)
    summary = summarize({seed: result["metrics"] for seed, result in runs.items()})
    payload = {
        "method": config.method,
        "task": config.data.task,
        "seeds": seeds,
        "output_dir": str(config.output_dir),
        "metrics": {name: entry["mean"] for name, entry in summary.items()},
        "metrics_std": {name: entry["std"] for name, entry in summary.items()},
        "summary": summary,
        "runs": {str(seed): result for seed, result in runs.items()},
    }
    payload["summary_file"] = str(write_summary(config.output_dir, payload, SUMMARY_FILE))
    return payload


SPEC = RunSpec(name="scl", args_model=SCLArgs, build=build, run=run)
