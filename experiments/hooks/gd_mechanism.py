"""Gradient dissipation measured directly (experiments/specs/gd_mechanism.yaml; issue 25, item 7): per-anchor
gradient norm against the anchor's margin s_pos − max s_neg for every pair objective of the ``gd`` recipe, on
dropout twins of the first ``pairs`` wiki1m sentences encoded once by the recipe's step-0 model (train mode, fixed
seed), in batches of ``batch`` anchors, binned into ``bins`` equal-count margin bins
(:mod:`contrastext.evaluation.margins`; the page, gd_mechanism.md, says the method in full). The rule, declared
before the first run: a loss **fades** when the median norm in the top margin bin is below ``FADE_RATIO`` (10 %) of
the bottom bin's (zeros count); a bottom median of 0 is "no gradient". The per-anchor plot needs values the record leaves out: the run draws it (:func:`plot`).
"""

from __future__ import annotations

import time
from pathlib import Path

import torch
from torch import Tensor

from contrastext.evaluation.margins import margin_profile, plot_margin_profile

RECIPE = "gd"
ENCODE_BATCH = 128  # sentences per forward pass (each encoded twice)
SEED = 1234  # the dropout masks of the twins
FADE_RATIO = 0.10  # the declared rule: top-bin median < 10 % of bottom-bin median -> "fades"


def fade_verdict(bins: list[dict]) -> tuple[float | None, str]:
    """(top-bin median / bottom-bin median, the declared rule's word)."""
    bottom, top = bins[0]["median"], bins[-1]["median"]
    if not bottom:
        return None, "no gradient"
    return top / bottom, "fades" if top / bottom < FADE_RATIO else "does not fade"


def analyse(objectives: dict, x: Tensor, y: Tensor, batch: int, bins: int) -> dict:
    """contrastext.evaluation.margins' profile of every objective, each loss with the declared rule's verdict."""
    profile = margin_profile(objectives, x, y, batch, bins)
    for loss in profile["losses"].values():
        loss["verdict"] = fade_verdict(loss["bins"])[1]
    return profile


def gd_objectives(overrides: list[str]) -> tuple[dict, dict]:
    """Every registered pair objective the ``gd`` recipe builds (name -> objective) and its resolved settings."""
    from contrastext import load_config, recipe_path
    from contrastext.objectives.registry import objectives_taking
    from contrastext.runs.gd import GDArgs, make_gd_objective
    from contrastext.runs.simcse import objective_options

    objectives, settings = {}, {}
    for name in objectives_taking("pairs"):
        args = load_config(recipe_path(RECIPE), [*overrides, f"method_args.loss={name}"]).method_args_as(GDArgs)
        objectives[name] = make_gd_objective(args)
        settings[name] = {"options": objective_options(args), "objective": repr(objectives[name])}
    return objectives, settings


def encode_twins(overrides: list[str], data_root: Path, pairs: int) -> tuple[Tensor, Tensor, dict]:
    """The recipe's method at step 0, twins of the first ``pairs`` training sentences (train mode, no grad)."""
    from contrastext import get_recipe, load_config, recipe_path
    from contrastext.runs.registry import parse_method_args
    from contrastext.runs.stages import seeded_build

    sets = [*overrides, "method_args.geometry=false", "method_args.gradients=false"]
    config = load_config(recipe_path(RECIPE), sets)
    recipe = get_recipe(config.method)
    bundle = seeded_build(recipe.build, config, parse_method_args(recipe, config), data_root)
    examples = bundle.train_examples[:pairs]
    if len(examples) < pairs:
        raise ValueError(f"error: pairs: {pairs} asked for, the training data has {len(examples)} sentences")
    method, anchors, positives = bundle.method, [], []
    method.train()
    with torch.random.fork_rng(), torch.no_grad():
        torch.manual_seed(SEED)
        for start in range(0, pairs, ENCODE_BATCH):
            views = method.embed_views(method.collate(examples[start:start + ENCODE_BATCH]))
            anchors.append(views[0].float())
            positives.append(views[1].float())
    encoder = {"model": config.model, "pooling": config.method_args.get("pooling"),
               "mlp": config.method_args.get("mlp"), "max_length": config.data.max_length,
               "build_seed": config.train_seed, "dropout_seed": SEED, "overrides": sets,
               "sentences": f"the first {pairs} training sentences of data.task={config.data.task}"}
    return torch.cat(anchors), torch.cat(positives), encoder


def measure(run, args) -> tuple[dict, dict]:
    """The runner's run of the setting: encode the twins, analyse every objective, draw the plot; the metrics are
    the settings, the margin edges, the per-bin numbers per loss and the CPU seconds."""
    cpu = time.process_time()
    overrides = [item for item in run.overrides if not item.startswith("output_dir=")]
    sizes = run.sizes
    x, y, encoder = encode_twins(overrides, Path(args.data_root), sizes["pairs"])
    objectives, described = gd_objectives(overrides)
    result = analyse(objectives, x, y, sizes["batch"], sizes["bins"])
    settings = {"pairs": sizes["pairs"], "batch": sizes["batch"], "bins": sizes["bins"], "fade_ratio": FADE_RATIO,
                "encoder": encoder, "objectives": described}
    plot({**result, "settings": settings}, Path(args.results) / "gd_mechanism.png")
    metrics = {"settings": settings, "edges": result["edges"], "losses": result["losses"]}
    return {**metrics, "cpu_s": time.process_time() - cpu}, {}


def context(page: dict) -> dict:
    """The page's pieces from the one record (its bin table is the page's): the verdict lists and the provenance."""
    record = next(iter(page["store"].records), None)
    if record is None:
        return {"found": None}
    losses, provenance = record["metrics"]["losses"], record.get("provenance") or {}
    return {"found": {
        "record": record, "settings": record["metrics"]["settings"], "provenance": provenance, "losses": losses,
        "versions": provenance.get("versions") or provenance, "edges": record["metrics"]["edges"],
        "rule": f"{FADE_RATIO:.0%}", "fading": [name for name, loss in losses.items() if loss["verdict"] == "fades"],
        "steady": [name for name, loss in losses.items() if loss["verdict"] != "fades"],
        "hinges": ", ".join(f"{name} {loss['bins'][-1]['zero_share']:.0%}" for name, loss in losses.items()
                            if loss["bins"][-1]["zero_share"]) or "none"}}


def plot(record: dict, path: Path) -> Path:
    """One panel per loss (contrastext.evaluation.margins): every anchor and the bin medians, titled by the verdict."""
    titles = {name: f"{name}: {loss['verdict']}" + ("" if loss["top_over_bottom"] is None else
                                                     f", top/bottom {loss['top_over_bottom']:.3g}")
              for name, loss in record["losses"].items()}
    return plot_margin_profile(record, path, titles=titles, title=(
        f"Per-anchor gradient norm vs margin: {record['settings']['pairs']:,} dropout twins, batches of "
        f"{record['settings']['batch']} (no training)"))
