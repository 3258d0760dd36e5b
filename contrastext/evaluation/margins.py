"""Per-anchor gradient norm against the anchor's margin: the gradient-dissipation mechanism, measured directly.

"On the inadequacy of optimizing alignment and uniformity in contrastive learning of sentence representations"
(ICLR 2023, §1) observes "gradient dissipation" in the contrastive loss: "the gradient signal quickly drops and
vanishes as soon as the negative example is adequately further away from the anchor than the positive example".
This module measures that relation directly, with no training: for L2-normalised anchors x_k and positives y_k of
one batch,

    margin_k = s_kk − max_{j≠k} s_kj,        s_kj = cos(x_k, y_j)
    norm_k   = ‖(I − x_k x_kᵀ) ∇_{x_k} (B · L)‖

(B · L: a mean-reduced loss gives per-anchor gradients independent of the batch size; the tangent projection keeps
the part that moves a normalised embedding, as :mod:`contrastext.evaluation.gradients`). For InfoNCE at temperature
τ, ∇_{x_k}(B · L) = (Σ_j p_kj y_j − y_k)/τ with p_kj = softmax_j(s_kj/τ), which falls towards 0 as margin_k grows.
:func:`margin_profile` sorts the anchors into equal-count margin bins and gives each bin's median norm;
:func:`plot_margin_profile` draws every anchor and the bin medians, one panel per loss. The construction (margin,
bins, B · L, tangent) is ours: the paper tracks gradient norms during training and gives no such profile.

Example::

    profile = margin_profile({"infonce": InfoNCE(0.05), "dcl": DCL(0.05)}, x, y, batch=256, bins=10)
    profile["losses"]["infonce"]["bins"][-1]["median"]  # the median norm of the anchors with the largest margins
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from pathlib import Path

import torch
from torch import Tensor
from torch.nn import functional as F

EmbeddingLoss = Callable[[Tensor, Tensor], Tensor]


def _unit(x: Tensor) -> Tensor:
    return F.normalize(x.detach().double(), dim=1)


def anchor_gradient_norms(objective: EmbeddingLoss, x: Tensor, y: Tensor) -> Tensor:
    """‖(I − x_k x_kᵀ) ∇_{x_k} (B · objective(x, y))‖ for every anchor k of one batch (B,), float64."""
    anchors = _unit(x).requires_grad_(True)
    loss = anchors.shape[0] * objective(anchors, _unit(y))
    (gradient,) = torch.autograd.grad(loss, [anchors])
    gradient, base = gradient.double(), anchors.detach()
    return (gradient - (gradient * base).sum(dim=1, keepdim=True) * base).norm(dim=1)


def margins(x: Tensor, y: Tensor) -> Tensor:
    """s_pos − max s_neg per anchor: cos(x_k, y_k) − max_{j≠k} cos(x_k, y_j), over one batch (B ≥ 2)."""
    if x.shape[0] < 2:
        raise ValueError("a margin needs at least one negative: batches of at least 2 pairs")
    similarity = _unit(x) @ _unit(y).T
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
    """Per bin: anchor count, median gradient norm and the share of exact zeros (a hinge loss's inactive anchors)."""
    members: list[list[float]] = [[] for _ in range(bins)]
    for norm, b in zip(norms, index, strict=True):
        members[b].append(norm)
    return [{"n": len(found), "median": statistics.median(found) if found else None,
             "zero_share": sum(v == 0.0 for v in found) / len(found) if found else None} for found in members]


def margin_profile(objectives: dict[str, EmbeddingLoss], x: Tensor, y: Tensor, batch: int, bins: int) -> dict:
    """Margins and per-anchor gradient norms of every objective on the pairs (x, y), in consecutive batches of
    ``batch`` pairs, binned by margin: ``{"edges", "margins", "bin_of", "norms": {name: [...]}, "losses": {name:
    {"bins": [...], "top_over_bottom": top-bin median / bottom-bin median (None when the bottom's is 0)}}}``."""
    slices = batches(len(x), batch)
    margin_values = [float(m) for part in slices for m in margins(x[part], y[part])]
    norms = {name: [float(g) for part in slices for g in anchor_gradient_norms(objective, x[part], y[part])]
             for name, objective in objectives.items()}
    index, edges = equal_count_bins(margin_values, bins)
    losses = {}
    for name, values in norms.items():
        per_bin = binned(values, index, bins)
        bottom, top = per_bin[0]["median"], per_bin[-1]["median"]
        losses[name] = {"bins": per_bin, "top_over_bottom": top / bottom if bottom else None}
    return {"edges": edges, "margins": margin_values, "bin_of": index, "norms": norms, "losses": losses}


def plot_margin_profile(profile: dict, path: str | Path, title: str = "", titles: dict[str, str] | None = None) -> Path:
    """One panel per loss: every anchor's gradient norm against its margin and the bin medians (log y where the
    norms span more than a decade; zeros drawn at the bottom edge); ``titles``: a panel title per loss."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names, edges, margin_values = list(profile["losses"]), profile["edges"], profile["margins"]
    rows = math.ceil(len(names) / 3)
    plt.rcParams.update({"font.size": 11})
    figure, axes = plt.subplots(rows, 3, figsize=(15, 4.2 * rows), dpi=100, squeeze=False)
    centres = []
    for i in range(len(edges) - 1):
        inside = [m for m, b in zip(margin_values, profile["bin_of"], strict=True) if b == i]
        centres.append(statistics.median(inside) if inside else (edges[i] + edges[i + 1]) / 2)
    for axis, name in zip(axes.flat, names, strict=False):
        norms, loss = profile["norms"][name], profile["losses"][name]
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
        ratio = "" if loss["top_over_bottom"] is None else f"top/bottom {loss['top_over_bottom']:.3g}"
        axis.set_title((titles or {}).get(name, f"{name}: {ratio}"), fontsize=12)
        axis.set_xlabel("margin s_pos − max s_neg (cosine)")
        axis.set_ylabel("‖∇ anchor‖ of B·L" + (" (log)" if log else ""))
        axis.grid(alpha=0.3)
        axis.legend(fontsize=10, loc="best", framealpha=0.9)
    for axis in list(axes.flat)[len(names):]:
        axis.set_visible(False)
    figure.suptitle(title or "Per-anchor gradient norm vs margin", fontsize=13)
    figure.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path)
    plt.close(figure)
    return path
