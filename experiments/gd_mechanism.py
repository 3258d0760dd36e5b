"""Gradient dissipation measured directly: per-anchor gradient norm against the anchor's margin, no training.

Nie, Zhang & Mao (ICLR 2023) say InfoNCE's gradient "quickly drops and vanishes as soon as the negative example
is adequately further away from the anchor than the positive example", and that the decoupled losses
(alignment + uniformity, DCL) lack this. experiments/gd_losses.py tests it through training curves; this script
tests the mechanism itself (issue 25, item 7), on embeddings computed once:

- the encoder is the ``gd`` recipe's model as its runs see it at step 0 (all-MiniLM-L6-v2, ``bundled:all-MiniLM-L6-v2``;
  [CLS] pooling + the recipe's fresh SimCSE MLP, built under the recipe's seed), in TRAIN mode: each of the first
  ``--pairs`` (default 2,048) wiki1m training sentences is encoded twice with dropout on (SimCSE's twins x_k, y_k;
  max length 32, the recipe's), under a fixed seed and without gradients;
- the losses are EVERY registered pair objective the ``gd`` recipe builds (``objectives_taking("pairs")``, each
  made by the recipe's own ``make_gd_objective`` with the recipe's temperature, margins, λ and form);
- the anchors are cut into batches of ``--batch`` (default 256) pairs; in each batch the other anchors' twins are
  the negatives, as in training. For anchor k: its gradient norm is ‖(I − x_k x_kᵀ) ∇_{x_k} (B · L)‖ with x the
  L2-normalised anchors in float64 (B · L: a mean-reduced loss gives per-anchor gradients; the tangent projection,
  as ``contrastext.evaluation.gradients``, is the part that moves a unit vector), and its margin is
  s_pos − max s_neg = cos(x_k, y_k) − max_{j≠k} cos(x_k, y_j) (the same for every loss);
- the anchors are binned by margin into ``--bins`` (default 10) equal-count bins (quantiles of all margins; the
  same bins for every loss); each bin reports its anchor count, margin range, the median gradient norm per loss
  and the share of exact zeros (the margin losses' hinges).

The rule (declared here before the first run, one absolute rule for every loss): a loss **fades** when the median
per-anchor gradient norm in the TOP margin bin is below 10 % of the median in the BOTTOM margin bin
(``FADE_RATIO`` = 0.10; zeros count as zeros); otherwise it "does not fade". A bottom-bin median of 0 is reported
as "no gradient" (no ratio). The verdict is a property of these embeddings' margin range (reported beside it):
it says how much each loss's gradient falls between the hardest and the easiest tenth of the anchors here.

Outputs in ``--results`` (default docs/results): ``gd_mechanism.png`` (one panel per loss: every anchor's gradient
norm against its margin, the bin medians on top; log y where the norms span more than a decade, zeros drawn
at the bottom edge), ``gd_mechanism.md`` (the table of bin medians and the verdicts) and ``gd_mechanism.json``
(the per-bin numbers, the settings and the provenance: git commit, library versions, thread count, CPU,
data sha256, wall / CPU time, load average). Cost: about 70 s of CPU time (model load, 4,096 forward passes of
≤ 32 tokens, the gradients), measured 121 s and 136 s of wall time on 2 cores shared at load 5.5–6.7; on 2 quiet
cores it should stay well under the 2-minute limit it is held to.

Example::

    .venv/bin/python experiments/gd_mechanism.py --data-root ../shared/data
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import statistics
import sys
import time
from pathlib import Path

import torch
from torch import Tensor
from torch.nn import functional as F

from contrastext.runtime.provenance import provenance

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402

NAME = "gd_mechanism"
RECIPE = "gd"
PAIRS = 2048
BATCH = 256
BINS = 10
ENCODE_BATCH = 128  # sentences per forward pass (each encoded twice)
SEED = 1234
FADE_RATIO = 0.10  # the declared rule: top-bin median < 10 % of bottom-bin median -> "fades"
REPO = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------------------------------------- the measure


def unit(x: Tensor) -> Tensor:
    """Rows L2-normalised, in float64, detached."""
    return F.normalize(x.detach().double(), dim=1)


def per_anchor_gradient_norms(objective, x: Tensor, y: Tensor) -> Tensor:
    """‖(I − x_k x_kᵀ) ∇_{x_k} (B · objective(x, y))‖ for every anchor k of one batch (B,), float64."""
    anchors = unit(x).requires_grad_(True)
    positives = unit(y)
    loss = anchors.shape[0] * objective(anchors, positives)
    (gradient,) = torch.autograd.grad(loss, [anchors])
    gradient = gradient.double()
    base = anchors.detach()
    tangent = gradient - (gradient * base).sum(dim=1, keepdim=True) * base
    return tangent.norm(dim=1)


def margins(x: Tensor, y: Tensor) -> Tensor:
    """s_pos − max s_neg per anchor: cos(x_k, y_k) − max_{j≠k} cos(x_k, y_j), over one batch (B ≥ 2)."""
    if x.shape[0] < 2:
        raise ValueError("a margin needs at least one negative: batches of at least 2 pairs")
    similarity = unit(x) @ unit(y).T
    diagonal = torch.eye(len(similarity), dtype=torch.bool)
    negatives = similarity.masked_fill(diagonal, float("-inf")).max(dim=1).values
    return similarity.diagonal() - negatives


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
    edges = [values[order[-(-b * len(values) // bins)]] for b in range(bins)] + [values[order[-1]]]
    return index, edges


def binned(norms: list[float], index: list[int], bins: int) -> list[dict]:
    """Per bin: anchor count, median gradient norm and the share of exact zeros."""
    members: list[list[float]] = [[] for _ in range(bins)]
    for norm, b in zip(norms, index, strict=True):
        members[b].append(norm)
    return [
        {
            "n": len(values),
            "median": statistics.median(values) if values else None,
            "zero_share": sum(v == 0.0 for v in values) / len(values) if values else None,
        }
        for values in members
    ]


def fade_verdict(bins: list[dict]) -> tuple[float | None, str]:
    """(top-bin median / bottom-bin median, the declared rule's word)."""
    bottom, top = bins[0]["median"], bins[-1]["median"]
    if not bottom:
        return None, "no gradient"
    ratio = top / bottom
    return ratio, "fades" if ratio < FADE_RATIO else "does not fade"


def analyse(objectives: dict, x: Tensor, y: Tensor, batch: int, bins: int) -> dict:
    """Margins and per-anchor gradient norms of every objective on the twins (x, y), binned by margin."""
    slices = batches(len(x), batch)
    margin_values = [float(m) for part in slices for m in margins(x[part], y[part])]
    norms = {
        name: [float(g) for part in slices for g in per_anchor_gradient_norms(objective, x[part], y[part])]
        for name, objective in objectives.items()
    }
    index, edges = equal_count_bins(margin_values, bins)
    losses = {}
    for name, values in norms.items():
        per_bin = binned(values, index, bins)
        ratio, word = fade_verdict(per_bin)
        losses[name] = {"bins": per_bin, "top_over_bottom": ratio, "verdict": word}
    return {"edges": edges, "margins": margin_values, "bin_of": index, "norms": norms, "losses": losses}


# ------------------------------------------------------------------------------------- objectives, twins


def gd_objectives(overrides: list[str]) -> tuple[dict, dict]:
    """Every registered pair objective the ``gd`` recipe builds (name -> objective) and its resolved settings."""
    from contrastext import load_config, recipe_path
    from contrastext.objectives.registry import objectives_taking
    from contrastext.runs.gd import GDArgs, make_gd_objective
    from contrastext.runs.simcse import objective_options

    objectives, settings = {}, {}
    for name in objectives_taking("pairs"):
        config = load_config(recipe_path(RECIPE), [*overrides, f"method_args.loss={name}"])
        args = config.method_args_as(GDArgs)
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
    spec = get_recipe(config.method)
    bundle = seeded_build(spec.build, config, parse_method_args(spec, config), data_root)
    examples = bundle.train_examples[:pairs]
    if len(examples) < pairs:
        raise ValueError(f"--pairs {pairs}: the training data has {len(examples)} sentences")
    method = bundle.method
    method.train()
    anchors, positives = [], []
    with torch.random.fork_rng(), torch.no_grad():
        torch.manual_seed(SEED)
        for start in range(0, pairs, ENCODE_BATCH):
            batch = method.collate(examples[start:start + ENCODE_BATCH])
            views = method.embed_views(batch)
            anchors.append(views[0].float())
            positives.append(views[1].float())
    files = sorted({example.source.rsplit(":", 1)[0] for example in examples if example.source})
    encoder = {
        "model": config.model,
        "pooling": config.method_args.get("pooling"),
        "mlp": config.method_args.get("mlp"),
        "max_length": config.data.max_length,
        "build_seed": config.train_seed,
        "dropout_seed": SEED,
        "sentences": f"the first {pairs} training sentences of data.task={config.data.task}",
        "data_files": {path: sha256(Path(path)) for path in files},
        "overrides": sets,
    }
    return torch.cat(anchors), torch.cat(positives), encoder


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


# ---------------------------------------------------------------------------------------------- report


def _g(value: float | None) -> str:
    return "–" if value is None else f"{value:.3g}"


def markdown(record: dict) -> str:
    """The results section: the rule, the table of bin medians, the verdicts, provenance."""
    edges = record["edges"]
    ranges = [f"{edges[i]:+.3f}…{edges[i + 1]:+.3f}" for i in range(len(edges) - 1)]
    counts = next(iter(record["losses"].values()))["bins"]
    headers = ["loss", *[f"bin {i + 1}" for i in range(len(ranges))], "top / bottom", "verdict"]
    rows = [["margin", *ranges, "", ""], ["anchors", *[str(b["n"]) for b in counts], "", ""]]
    for name, loss in record["losses"].items():
        cells = []
        for b in loss["bins"]:
            zero = f" ({b['zero_share']:.0%} = 0)" if b["zero_share"] else ""
            cells.append(_g(b["median"]) + zero)
        rows.append([name, *cells, _g(loss["top_over_bottom"]), loss["verdict"]])
    s = record["settings"]
    p = record["provenance"]
    versions = p.get("versions", p)  # records before contrastext.runtime.provenance held them flat
    run = record["run"]
    fading = [name for name, loss in record["losses"].items() if loss["verdict"] == "fades"]
    steady = [name for name, loss in record["losses"].items() if loss["verdict"] != "fades"]
    hinges = ", ".join(
        f"{name} {loss['bins'][-1]['zero_share']:.0%}" for name, loss in record["losses"].items()
        if loss["bins"][-1]["zero_share"]
    ) or "none"
    return f"""## Gradient dissipation, measured directly (no training)

Per-anchor gradient norm of every pair objective the `gd` recipe trains, against the anchor's margin
s_pos − max s_neg, on {s['pairs']:,} dropout-twin pairs of {s['encoder']['model']} as a `gd` run sees them at
step 0 ([CLS] + the recipe's fresh MLP, train mode; max length {s['encoder']['max_length']}), in batches of
{s['batch']} anchors (the other anchors' twins are the negatives; the recipe's temperature, margins and λ).
Norm: ‖(I − x xᵀ) ∇ₓ (B · L)‖ on the unit anchor, float64. Bins: {s['bins']} equal-count bins of the margin.
Plot: `docs/results/gd_mechanism.png`; numbers: `docs/results/gd_mechanism.json`.

**Rule (declared in the script before it was run, the same for every loss):** a loss *fades* when the median
gradient norm in the top margin bin is below {FADE_RATIO:.0%} of the median in the bottom margin bin.

Median per-anchor gradient norm per margin bin (the share of exact zeros in brackets where there are any):

{harness.markdown_table(headers, rows)}

By this rule, on these margins ({edges[0]:+.3f} to {edges[-1]:+.3f}): fades: {', '.join(fading) or 'none'};
does not fade: {', '.join(steady) or 'none'}. Exact zeros (a hinge met) in the top bin:
{hinges}. The ratio is a property of the margin range these embeddings cover (the recipe's step 0: a fresh MLP
on a sentence-tuned encoder); it says nothing about margins outside it, and a loss whose hinge lies beyond every
anchor here shows no zeros.

Provenance: git {p['git_commit'][:12]}{' (tree dirty)' if p['git_dirty'] else ''}{'' if p.get('script_committed', True) else ', this script modified'}, Python {p['python']},
torch {versions['torch']}, transformers {versions['transformers']}, {p['torch_threads']} torch threads, {p['cpu_count']} CPUs
({p['cpu_model']}); wall {run['wall_s']:.1f} s, CPU {run['cpu_s']:.1f} s, load average before
{run['load_before']} / after {run['load_after']}. Command: `{record['command']}`.
"""


def plot(record: dict, path: Path) -> Path:
    """One panel per loss: every anchor's gradient norm against its margin, the bin medians on top."""
    plt = harness.pyplot()
    names = list(record["losses"])
    columns = 3
    rows = math.ceil(len(names) / columns)
    plt.rcParams.update({"font.size": 11})
    figure, axes = plt.subplots(rows, columns, figsize=(15, 4.2 * rows), dpi=100, squeeze=False)
    edges = record["edges"]
    centres = []
    margin_values = record["margins"]
    for i in range(len(edges) - 1):
        inside = [m for m, b in zip(margin_values, record["bin_of"], strict=True) if b == i]
        centres.append(statistics.median(inside) if inside else (edges[i] + edges[i + 1]) / 2)
    for axis, name in zip(axes.flat, names, strict=False):
        norms = record["norms"][name]
        loss = record["losses"][name]
        positive = [v for v in norms if v > 0]
        log = bool(positive) and (len(positive) < len(norms) or max(positive) / min(positive) > 10)
        floor = min(positive) / 2 if positive else 0.0
        shown = [v if v > 0 or not log else floor for v in norms]
        zero_x = [m for m, v in zip(margin_values, norms, strict=True) if v == 0]
        kept = [(m, v) for m, v, raw in zip(margin_values, shown, norms, strict=True) if raw > 0 or not log]
        axis.scatter([m for m, _ in kept], [v for _, v in kept], s=5, alpha=0.25, color="tab:blue", label="anchor")
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
    figure.suptitle(
        f"Per-anchor gradient norm vs margin: {record['settings']['pairs']:,} dropout twins, batches of "
        f"{record['settings']['batch']} (no training)", fontsize=13,
    )
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path)
    plt.close(figure)
    return path


# ------------------------------------------------------------------------------------------ command line


def measure(args: argparse.Namespace, overrides: list[str] | None = None) -> dict:
    """Encode the twins, analyse every gd objective, return the record (with settings and provenance)."""
    overrides = list(overrides or [])
    load_before = harness.load_average()
    wall, cpu = time.perf_counter(), time.process_time()
    x, y, encoder = encode_twins(overrides, Path(args.data_root), args.pairs)
    objectives, objective_settings = gd_objectives(overrides)
    result = analyse(objectives, x, y, args.batch, args.bins)
    run = {
        "wall_s": time.perf_counter() - wall,
        "cpu_s": time.process_time() - cpu,
        "load_before": load_before,
        "load_after": harness.load_average(),
    }
    settings = {"pairs": args.pairs, "batch": args.batch, "bins": args.bins, "fade_ratio": FADE_RATIO,
                "encoder": encoder, "objectives": objective_settings}
    command = f"python experiments/{NAME}.py --data-root {args.data_root} --pairs {args.pairs} " \
              f"--batch {args.batch} --bins {args.bins}" + "".join(f" --set {item}" for item in overrides)
    return {"settings": settings, "provenance": provenance(), "run": run, "command": command, **result}


def write(record: dict, results: Path) -> dict[str, Path]:
    """``gd_mechanism.json`` (per-bin numbers; the per-anchor values are left out), ``.md`` and ``.png``."""
    results.mkdir(parents=True, exist_ok=True)
    kept = {key: value for key, value in record.items() if key not in ("margins", "bin_of", "norms")}
    paths = {"json": results / f"{NAME}.json", "md": results / f"{NAME}.md", "png": results / f"{NAME}.png"}
    paths["json"].write_text(json.dumps(kept, indent=2) + "\n", encoding="utf-8")
    paths["md"].write_text(markdown(record), encoding="utf-8")
    plot(record, paths["png"])
    return paths


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--data-root", default=str(REPO.parent / "shared" / "data"), help="benchmark data root")
    p.add_argument("--results", default=str(harness.RESULTS_DIR), help="where gd_mechanism.json/.md/.png go")
    p.add_argument("--pairs", type=int, default=PAIRS, help="dropout-twin pairs (default %(default)s)")
    p.add_argument("--batch", type=int, default=BATCH, help="anchors per loss batch (default %(default)s)")
    p.add_argument("--bins", type=int, default=BINS, help="equal-count margin bins (default %(default)s)")
    p.add_argument("--set", action="append", default=[], dest="overrides", metavar="KEY=VALUE",
                   help="a config override of the gd recipe (e.g. model=...), repeatable")
    args = p.parse_args(argv)
    record = measure(args, args.overrides)
    paths = write(record, Path(args.results))
    for name, loss in record["losses"].items():
        print(f"{name:18s} top/bottom {_g(loss['top_over_bottom']):>8s}  {loss['verdict']}")
    print(f"wall {record['run']['wall_s']:.1f} s, load {record['run']['load_before']} -> {record['run']['load_after']}")
    print("wrote " + ", ".join(str(path) for path in paths.values()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
