"""Gradient dissipation measured directly (experiments/specs/gd_mechanism.yaml; issue 25, item 7): per-anchor
gradient norm against the anchor's margin s_pos − max s_neg for every pair objective of the ``gd`` recipe, on
dropout twins of the first ``pairs`` wiki1m sentences encoded once by the recipe's step-0 model (train mode, fixed
seed), in batches of ``batch`` anchors, binned into ``bins`` equal-count margin bins (the page, gd_mechanism.md,
says the method in full). The rule, declared before the first run: a loss **fades** when the median norm in the
top margin bin is below ``FADE_RATIO`` (10 %) of the bottom bin's (zeros count); a bottom median of 0 is "no
gradient". The per-anchor plot needs values the record leaves out: the run draws it (:func:`plot`).
"""

from __future__ import annotations

import math
import statistics
import time
from pathlib import Path

import harness
import torch
from torch import Tensor
from torch.nn import functional as F

RECIPE = "gd"
ENCODE_BATCH = 128  # sentences per forward pass (each encoded twice)
SEED = 1234  # the dropout masks of the twins
FADE_RATIO = 0.10  # the declared rule: top-bin median < 10 % of bottom-bin median -> "fades"


def unit(x: Tensor) -> Tensor:
    """Rows L2-normalised, in float64, detached."""
    return F.normalize(x.detach().double(), dim=1)


def per_anchor_gradient_norms(objective, x: Tensor, y: Tensor) -> Tensor:
    """‖(I − x_k x_kᵀ) ∇_{x_k} (B · objective(x, y))‖ for every anchor k of one batch (B,), float64."""
    anchors = unit(x).requires_grad_(True)
    loss = anchors.shape[0] * objective(anchors, unit(y))
    (gradient,) = torch.autograd.grad(loss, [anchors])
    gradient, base = gradient.double(), anchors.detach()
    return (gradient - (gradient * base).sum(dim=1, keepdim=True) * base).norm(dim=1)


def margins(x: Tensor, y: Tensor) -> Tensor:
    """s_pos − max s_neg per anchor: cos(x_k, y_k) − max_{j≠k} cos(x_k, y_j), over one batch (B ≥ 2)."""
    if x.shape[0] < 2:
        raise ValueError("a margin needs at least one negative: batches of at least 2 pairs")
    similarity = unit(x) @ unit(y).T
    diagonal = torch.eye(len(similarity), dtype=torch.bool)
    return similarity.diagonal() - similarity.masked_fill(diagonal, float("-inf")).max(dim=1).values


def batches(count: int, batch: int) -> list[slice]:
    """Consecutive slices of ``batch`` rows; a last partial batch of at least 2 rows is kept."""
    return [slice(start, min(start + batch, count)) for start in range(0, count, batch) if count - start >= 2]


def equal_count_bins(values: list[float], bins: int) -> tuple[list[int], list[float]]:
    """Each value's bin (by rank: the i-th smallest of n goes to bin ⌊i · bins / n⌋, so the counts differ by at
    most one) and the ``bins + 1`` edges (each bin's smallest value, then the largest value)."""
    if len(values) < bins:
        raise ValueError(f"{len(values)} anchors cannot fill {bins} bins")
    order = sorted(range(len(values)), key=lambda i: values[i])
    index = [0] * len(values)
    for rank, i in enumerate(order):
        index[i] = rank * bins // len(values)
    return index, [values[order[-(-b * len(values) // bins)]] for b in range(bins)] + [values[order[-1]]]


def binned(norms: list[float], index: list[int], bins: int) -> list[dict]:
    """Per bin: anchor count, median gradient norm and the share of exact zeros."""
    members: list[list[float]] = [[] for _ in range(bins)]
    for norm, b in zip(norms, index, strict=True):
        members[b].append(norm)
    return [{"n": len(found), "median": statistics.median(found) if found else None,
             "zero_share": sum(v == 0.0 for v in found) / len(found) if found else None} for found in members]


def fade_verdict(bins: list[dict]) -> tuple[float | None, str]:
    """(top-bin median / bottom-bin median, the declared rule's word)."""
    bottom, top = bins[0]["median"], bins[-1]["median"]
    if not bottom:
        return None, "no gradient"
    return top / bottom, "fades" if top / bottom < FADE_RATIO else "does not fade"


def analyse(objectives: dict, x: Tensor, y: Tensor, batch: int, bins: int) -> dict:
    """Margins and per-anchor gradient norms of every objective on the twins (x, y), binned by margin."""
    slices = batches(len(x), batch)
    margin_values = [float(m) for part in slices for m in margins(x[part], y[part])]
    norms = {name: [float(g) for part in slices for g in per_anchor_gradient_norms(objective, x[part], y[part])]
             for name, objective in objectives.items()}
    index, edges = equal_count_bins(margin_values, bins)
    losses = {}
    for name, values in norms.items():
        per_bin = binned(values, index, bins)
        ratio, word = fade_verdict(per_bin)
        losses[name] = {"bins": per_bin, "top_over_bottom": ratio, "verdict": word}
    return {"edges": edges, "margins": margin_values, "bin_of": index, "norms": norms, "losses": losses}


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
    """One panel per loss: every anchor's gradient norm against its margin, the bin medians on top (log y where
    the norms span more than a decade, zeros drawn at the bottom edge). A kind plots.py lacks: a scatter of
    per-item values (kept only during the run) against a binned x, with the bin medians."""
    plt = harness.pyplot()
    names, edges, margin_values = list(record["losses"]), record["edges"], record["margins"]
    columns, rows = 3, math.ceil(len(record["losses"]) / 3)
    plt.rcParams.update({"font.size": 11})
    figure, axes = plt.subplots(rows, columns, figsize=(15, 4.2 * rows), dpi=100, squeeze=False)
    centres = []
    for i in range(len(edges) - 1):
        inside = [m for m, b in zip(margin_values, record["bin_of"], strict=True) if b == i]
        centres.append(statistics.median(inside) if inside else (edges[i] + edges[i + 1]) / 2)
    for axis, name in zip(axes.flat, names, strict=False):
        norms, loss = record["norms"][name], record["losses"][name]
        positive = [v for v in norms if v > 0]
        log = bool(positive) and (len(positive) < len(norms) or max(positive) / min(positive) > 10)
        floor = min(positive) / 2 if positive else 0.0
        kept = [(m, v) for m, v in zip(margin_values, norms, strict=True) if v > 0 or not log]
        axis.scatter([m for m, _ in kept], [v for _, v in kept], s=5, alpha=0.25, color="tab:blue", label="anchor")
        zero_x = [m for m, v in zip(margin_values, norms, strict=True) if v == 0]
        if log and zero_x:
            axis.scatter(zero_x, [floor] * len(zero_x), s=10, marker="|", color="tab:gray",
                         label=f"= 0 ({len(zero_x)}), drawn at the bottom")
        medians = [b["median"] for b in loss["bins"]]
        axis.plot(centres, [m if m > 0 or not log else floor for m in medians], "o-", color="tab:red",
                  label="bin median")
        if log:
            axis.set_yscale("log")
        ratio = "" if loss["top_over_bottom"] is None else f", top/bottom {loss['top_over_bottom']:.3g}"
        axis.set_title(f"{name}: {loss['verdict']}{ratio}", fontsize=12)
        axis.set_xlabel("margin s_pos − max s_neg (cosine)")
        axis.set_ylabel("‖∇ anchor‖ of B·L" + (" (log)" if log else ""))
        axis.grid(alpha=0.3)
        axis.legend(fontsize=10, loc="best", framealpha=0.9)
    for axis in list(axes.flat)[len(names):]:
        axis.set_visible(False)
    figure.suptitle(f"Per-anchor gradient norm vs margin: {record['settings']['pairs']:,} dropout twins, batches "
                    f"of {record['settings']['batch']} (no training)", fontsize=13)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path)
    plt.close(figure)
    return path
