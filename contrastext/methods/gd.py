"""Gradient dissipation: unsupervised SimCSE with a choice of objective, plus geometry and gradient logs.

Nie, Zhang & Mao, "On the inadequacy of optimizing alignment and uniformity in contrastive learning of
sentence representations", ICLR 2023. Their setting is unsupervised SimCSE (dropout twins x_k, y_k on
wiki1m sentences); they compare InfoNCE with its decoupled forms and show that InfoNCE's gradient w.r.t.
an anchor shrinks as the positive pair gets closer than the negatives ("gradient dissipation"), which
the joint alignment + uniformity objective lacks (and overfits). Margin losses that simulate the
dissipation match or beat InfoNCE. ``loss`` picks the objective on L2-normalised embeddings x, y (B × d):

- ``infonce``:          −log exp(s_kk/τ) / Σ_j exp(s_kj/τ)                        (SimCSE, Eq. 1)
- ``align_uniform``:    E‖x_k − y_k‖² + λ·(U(x) + U(y))/2, U = log E exp(−2‖·−·‖²)    (Wang & Isola 2020)
- ``dcl``:              −s_kk/τ + log Σ_{j≠k} exp(s_kj/τ)                         (Yeh et al. 2022)
- ``hinged_dcl``:       relu of the per-sample DCL term
- ``margin_euclidean``: relu(m + ‖x_k − y_k‖ − min_{i≠k} ‖x_i − y_k‖)
- ``margin_angle``:     relu(m·π + θ_kk − min_{i≠k} θ_ik)
- ``margin_product``:   relu(m − s_kk + max_{i≠k} s_ik)

At every evaluation the evaluator adds, beside STS-B dev Spearman:

- ``align`` / ``uniform``: alignment (pairs scored ≥ 4) and uniformity (all sentences) of STS-B dev
  (Wang & Isola's measures, :mod:`contrastext.evaluation.geometry`), on the ``eval.limit`` first pairs;
- ``grad_alignment`` / ``grad_uniformity`` / ``grad_total``: mean per-anchor norms of the two parts of the
  training objective's gradient (:mod:`contrastext.evaluation.gradients`) on a FIXED batch, the first
  ``diagnostic_batch_size`` training sentences encoded twice with dropout under a fixed seed (the RNG state
  of the training is saved and restored around it, so diagnostics never change the training).

``contrastext plot RUN_DIR`` draws these curves.

Example::

    >>> config = load_config("recipes/gd.yaml", ["method_args.loss=margin_euclidean", "train.max_steps=3"])
    >>> summary = run_recipe(config, data_root)
    >>> summary["metrics"]["grad_alignment"], summary["metrics"]["align"]
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Literal

import numpy as np
import torch
from pydantic import BaseModel, ConfigDict, Field

from contrastext.data.examples import Example
from contrastext.methods.registry import MethodBundle, MethodSpec
from contrastext.methods.simcse import (
    MlpUse,
    SimCSE,
    build_encoder,
    build_sts_evaluator,
    load_training_examples,
)
from contrastext.objectives import (
    DCL,
    AlignUniform,
    HingedDCL,
    InfoNCE,
    MarginAngle,
    MarginEuclidean,
    MarginProduct,
)

LossName = Literal[
    "infonce", "align_uniform", "dcl", "hinged_dcl", "margin_euclidean", "margin_angle", "margin_product"
]
DIAGNOSTIC_SEED = 1234


class GDArgs(BaseModel):
    """``method_args`` of ``gd``."""

    model_config = ConfigDict(extra="forbid")

    loss: LossName = Field(default="infonce", description="the training objective")
    temperature: float = Field(default=0.05, gt=0, description="τ of infonce, dcl, hinged_dcl")
    margin: float | None = Field(
        default=None, ge=0, description="m of the margin losses; None: 0.45 / 0.15 / 0.09 (euclidean/angle/product)"
    )
    lam: float = Field(default=0.5, ge=0, description="λ of align_uniform (weight of the uniformity terms)")
    pooling: str = Field(default="cls", description="pooling of the encoder")
    mlp: MlpUse = Field(default="train", description="SimCSE's MLP: training only, always, or none")
    gather: bool = Field(default=True, description="gather embeddings across processes (world size > 1)")
    geometry: bool = Field(default=True, description="log align/uniform on STS-B dev at each evaluation")
    gradients: bool = Field(default=True, description="log gradient-norm diagnostics at each evaluation")
    diagnostic_batch_size: int = Field(
        default=32, ge=2, description="rows of the fixed diagnostic batch (keep 2B - 1 < embedding width)"
    )


def build_loss(args: GDArgs) -> torch.nn.Module:
    """The objective named by ``args.loss``, from :mod:`contrastext.objectives`."""
    margin = {} if args.margin is None else {"margin": args.margin}
    builders: dict[str, Callable[[], torch.nn.Module]] = {
        "infonce": lambda: InfoNCE(temperature=args.temperature),
        "align_uniform": lambda: AlignUniform(lam=args.lam),
        "dcl": lambda: DCL(temperature=args.temperature),
        "hinged_dcl": lambda: HingedDCL(temperature=args.temperature),
        "margin_euclidean": lambda: MarginEuclidean(**margin),
        "margin_angle": lambda: MarginAngle(**margin),
        "margin_product": lambda: MarginProduct(**margin),
    }
    return builders[args.loss]()


def _stsb_pairs(data_root: Path | None, limit: int | None) -> list[Example]:
    from contrastext.data.tasks import load_task

    pairs = load_task("stsb:dev", data_root).examples
    return pairs[:limit] if limit is not None else pairs


def geometry_metrics(method: SimCSE, pairs: list[Example], batch_size: int) -> dict[str, float]:
    """``align`` (pairs scored ≥ 4) and ``uniform`` (all distinct sentences) of the encoder on ``pairs``."""
    from contrastext.evaluation.geometry import POSITIVE_THRESHOLD, alignment, uniformity
    from contrastext.evaluation.sts import embed_unique

    embeddings = embed_unique(method.encoder.encode, [t for pair in pairs for t in pair.texts], batch_size)
    positives = [pair for pair in pairs if float(pair.label) >= POSITIVE_THRESHOLD]
    metrics = {"uniform": uniformity(np.stack(list(embeddings.values())))}
    if positives:
        left = np.stack([embeddings[pair.texts[0]] for pair in positives])
        right = np.stack([embeddings[pair.texts[1]] for pair in positives])
        metrics["align"] = alignment(left, right)
    return metrics


def gradient_metrics(method: SimCSE, examples: list[Example]) -> dict[str, float]:
    """Alignment / uniformity parts of the objective's gradient on a fixed batch of dropout twins.

    The twins are encoded in train mode (dropout on, without gradients) under a fixed seed inside
    ``torch.random.fork_rng``, so the numbers are comparable across evaluations and the training's random
    state is untouched.
    """
    from contrastext.evaluation.gradients import gradient_decomposition

    device = next(method.parameters()).device
    devices = [device] if device.type == "cuda" else []
    was_training = method.encoder.training
    with torch.random.fork_rng(devices=devices), torch.no_grad():
        torch.manual_seed(DIAGNOSTIC_SEED)
        method.encoder.train()
        batch = method.collate(examples)
        batch = {name: value.to(device) if torch.is_tensor(value) else value for name, value in batch.items()}
        anchors, positives = method.embed_views(batch)[:2]
    method.encoder.train(was_training)
    parts = gradient_decomposition(method.loss, anchors.float(), positives.float())
    return {f"grad_{name}": float(value) for name, value in parts.items()}


def build_gd_evaluator(config, args: GDArgs, data_root: Path | None, train_examples: list[Example]):
    """STS evaluator of ``config.eval`` plus the geometry and gradient diagnostics of ``args``."""
    sts = build_sts_evaluator(config, data_root)
    pairs = _stsb_pairs(data_root, config.eval.limit) if args.geometry else []
    fixed = train_examples[: args.diagnostic_batch_size]
    batch_size = config.eval.batch_size

    def evaluate(method: SimCSE) -> dict[str, float]:
        metrics = dict(sts(method)) if sts is not None else {}
        if args.geometry:
            metrics.update(geometry_metrics(method, pairs, batch_size))
        if args.gradients:
            metrics.update(gradient_metrics(method, fixed))
        return metrics

    return evaluate


def build(config, args: GDArgs, data_root: Path | None) -> MethodBundle:
    """``gd``: unsupervised SimCSE (dropout twins, ``data.task`` default wiki1m) with ``args.loss``."""
    examples = load_training_examples(config, data_root, default_task="wiki1m")
    evaluator = build_gd_evaluator(config, args, data_root, examples)
    encoder = build_encoder(config, args.pooling, args.mlp)
    method = SimCSE(
        encoder, build_loss(args), config.data.max_length, supervised=False, gather=args.gather, part_name=args.loss
    )
    return MethodBundle(method, examples, evaluator)


SPEC = MethodSpec(name="gd", args_model=GDArgs, build=build)
