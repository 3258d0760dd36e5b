"""SimCSE's hook (experiments/specs/simcse.yaml): the starting encoder's evaluation, with no training."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace


def evaluate_before(run, args) -> tuple[dict, dict]:
    """The recipe's encoder with the setting's pooling and no MLP, scored by the recipe's own evaluator."""
    import run as runner  # experiments/run.py

    from contrastext import load_config, recipe_path
    from contrastext.runs.evaluation import sentence_evaluator
    from contrastext.runs.simcse import SimCSEUnsupArgs, sentence_encoder

    config = load_config(recipe_path(run.recipe), run.overrides)
    encoder = sentence_encoder(config, config.method_args_as(SimCSEUnsupArgs))
    metrics = runner.keep_metrics(run.spec, sentence_evaluator(config, Path(args.data_root))(SimpleNamespace(encoder=encoder)))
    return metrics, {"resolved_config": config.model_dump(mode="json")}
