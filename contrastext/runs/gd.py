"""Recipe ``gd``: gradient dissipation, unsupervised SimCSE with a choice of objective, plus geometry and gradient logs.

Nie, Zhang & Mao, "On the inadequacy of optimizing alignment and uniformity in contrastive learning of
sentence representations", ICLR 2023. Their setting is unsupervised SimCSE (dropout twins x_k, y_k on
wiki1m sentences); they compare InfoNCE with its decoupled forms and show that InfoNCE's gradient w.r.t.
an anchor shrinks as the positive pair gets closer than the negatives ("gradient dissipation"), which
the joint alignment + uniformity objective lacks (and overfits). Margin losses that simulate the
dissipation match or beat InfoNCE. ``loss`` picks the objective on L2-normalised embeddings x, y (B × d):
the paper's seven below, each as the authors' released code computes it (BDBC-KG-NLP/ICLR2023_Gradient-Dissipation,
``loss.py`` and ``simcse/models.py`` ``cal_loss``; the formulas and the code's lines are in docs/methods/gd.md),
or any other registered objective that takes (anchor, positive) pairs (:mod:`contrastext.objectives.registry`):

- ``infonce``:          −log exp(s_kk/τ) / Σ_j exp(s_kj/τ)                         (SimCSE, their "infonce")
- ``align_uniform``:    (1−λ)·E‖x_k − y_k‖² + λ·(2t + (U(x) + U(y))/2)              ("a&u")
- ``dcl``:              −s_kk/τ + log Σ_{j≠k} exp(s_kj/τ)                          ("decouple")
- ``hinged_dcl``:       relu of the per-sample DCL term                            ("decouple_pos", DCL+)
- ``margin_euclidean``: relu(m + ‖x_k − y_k‖ − min_i D_ik), m = 0.45                ("met")
- ``margin_angle``:     relu(m·π + θ_kk − min_i Θ_ik), m = 0.15                     ("mat")
- ``margin_product``:   relu(m − s_kk + max_i S_ik), m = 0.09                       ("mpt")

(D, Θ, S: the distance / angle / cosine matrices, the positive's own entry filled as in the authors' code,
``margin_diagonal``; see :mod:`contrastext.objectives.margin`.) ``align_uniform_form: wang_isola`` gives Wang
& Isola's E‖x_k − y_k‖² + λ·(U(x) + U(y))/2 instead.

One source per knob: the paper's knobs are ``method_args`` keys (``temperature``, ``margin``, ``margin_diagonal``,
``lam``, ``align_uniform_form``: :data:`GDArgs.objective_knobs`), each given to every objective whose constructor
takes it (τ, m, the diagonal, λ, the form; :func:`contrastext.runs.simcse.objective_options`); ``loss_args`` holds
the objective's other arguments (``alpha``, ``t``, ...), and a knob given there is a ConfigError naming its key.

At every evaluation the evaluator adds, beside STS-B dev Spearman:

- ``align`` / ``uniform``: alignment (pairs scored ≥ 4) and uniformity (all sentences) of STS-B dev
  (Wang & Isola's measures, :mod:`contrastext.evaluation.geometry`), on the ``eval.limit`` first pairs;
- ``grad_alignment`` / ``grad_uniformity`` / ``grad_total``: mean per-anchor norms of the two parts of the
  training objective's gradient (:func:`gradient_metrics`, :mod:`contrastext.evaluation.gradients`) on a FIXED
  batch, the first ``diagnostic_batch_size`` training sentences encoded twice with dropout under a fixed seed
  (``diagnostic_batches`` > 1: that many such batches of the next rows, averaged over all their anchors)
  (the RNG state of the training is saved and restored around it, so diagnostics never change the training).

``pooling`` / ``mlp`` are unsupervised SimCSE's (:class:`~contrastext.runs.simcse.SimCSEUnsupArgs`): unset,
they keep the model's own; the recipe writes the authors' ``cls`` + ``train`` explicitly. The method is
:class:`~contrastext.methods.simcse.SimCSE` with the chosen objective. ``contrastext plot RUN_DIR`` draws the curves.

Example::

    >>> config = load_config(recipe_path("gd"), ["method_args.loss=margin_euclidean", "train.max_steps=3"])
    >>> summary = run_recipe(config, data_root)
    >>> summary["metrics"]["grad_alignment"], summary["metrics"]["align"]
"""

from __future__ import annotations

import statistics
from functools import partial
from pathlib import Path
from typing import ClassVar, Literal

import numpy as np
import torch
from pydantic import Field
from torch import nn

from contrastext.data.examples import Example
from contrastext.data.tasks import load_task
from contrastext.methods.simcse import SimCSE
from contrastext.runs.protocol import PaperSetting, Protocol
from contrastext.runs.registry import RunSpec
from contrastext.runs.simcse import SimCSEUnsupArgs, build_simcse, make_pair_objective
from contrastext.runs.stages import MethodBundle
from contrastext.training.config import TrainConfig


class GDArgs(SimCSEUnsupArgs):
    """``method_args`` of ``gd``: unsupervised SimCSE's, the objective's knobs, and the diagnostics."""

    objective_knobs: ClassVar[dict[str, str]] = {
        **SimCSEUnsupArgs.objective_knobs,
        "margin": "margin",
        "margin_diagonal": "diagonal",
        "lam": "lam",
        "align_uniform_form": "form",
    }

    loss: str = Field(
        default="infonce",
        description="the training objective, by its registry name: the paper's infonce, align_uniform, dcl, "
        "hinged_dcl, margin_euclidean, margin_angle, margin_product, or any registered pair objective",
    )
    temperature: float = Field(
        default=0.05, gt=0, description="τ of every objective that takes a temperature (infonce, dcl, hinged_dcl)"
    )
    margin: float | None = Field(
        default=None,
        ge=0,
        description="m of the objectives that take a margin; None: each one's own (the authors' 0.45 / 0.15 / 0.09 "
        "for margin_euclidean / margin_angle / margin_product)",
    )
    margin_diagonal: Literal["fill", "exclude"] = Field(
        default="fill",
        description="margin losses, the positive's own entry in the hardest-negative search: fill (the "
        "authors' constant, cos 0 / distance 2) or exclude",
    )
    lam: float = Field(
        default=0.5, ge=0, description="λ of align_uniform (the authors' loss_lambda; in [0, 1] for form nie)"
    )
    align_uniform_form: Literal["nie", "wang_isola"] = Field(
        default="nie",
        description="align_uniform: nie, (1−λ)·align + λ·(2t + unif) as the authors' code; wang_isola, "
        "align + λ·unif",
    )
    geometry: bool = Field(default=True, description="log align/uniform on STS-B dev at each evaluation")
    gradients: bool = Field(default=True, description="log gradient-norm diagnostics at each evaluation")
    diagnostic_batch_size: int = Field(
        default=32, ge=2, description="rows of the fixed diagnostic batch (keep 2B - 1 < embedding width)"
    )
    diagnostic_batches: int = Field(
        default=1, ge=1, description="fixed diagnostic batches (the next rows each): the norms average all their anchors"
    )


DIAGNOSTIC_SEED = 1234


def make_gd_objective(args: GDArgs) -> nn.Module:
    """The objective named by ``args.loss``, with each of gd's knobs it takes (τ for infonce / dcl / hinged_dcl, λ
    and the form for align_uniform, m (its own default when ``margin`` is None) and the diagonal for the margin
    losses) and ``args.loss_args``: :func:`contrastext.runs.simcse.make_pair_objective`."""
    return make_pair_objective(args)


def geometry_metrics(method: SimCSE, pairs: list[Example], batch_size: int) -> dict[str, float]:
    """``align`` over the pairs scored above 4 and ``uniform`` over both sentences of every pair, as the
    authors' ``cal_test_align_uniform`` (simcse/trainers.py: ``if label > 4.0``; ``pdist`` of all the
    embeddings, repeats included, t = 2)."""
    from contrastext.evaluation.geometry import POSITIVE_THRESHOLD, alignment, uniformity
    from contrastext.evaluation.sts import embed_unique

    embeddings = embed_unique(method.encoder.encode, [t for pair in pairs for t in pair.texts], batch_size)
    positives = [pair for pair in pairs if float(pair.label) > POSITIVE_THRESHOLD]
    metrics = {"uniform": uniformity(np.stack([embeddings[t] for pair in pairs for t in pair.texts]))}
    if positives:
        left = np.stack([embeddings[pair.texts[0]] for pair in positives])
        right = np.stack([embeddings[pair.texts[1]] for pair in positives])
        metrics["align"] = alignment(left, right)
    return metrics


def gradient_metrics(method: SimCSE, examples: list[Example], batch_size: int | None = None) -> dict[str, float]:
    """Alignment / uniformity parts of the objective's gradient on fixed batches of dropout twins.

    ``examples`` in batches of ``batch_size`` (default: one batch), each its own loss batch (its other rows are
    the negatives); the norms are the mean over every anchor of every batch. The twins are encoded in train mode
    (dropout on, without gradients) under a fixed seed inside ``torch.random.fork_rng``, so the numbers are
    comparable across evaluations and the training's random state is untouched.
    """
    from contrastext.evaluation.gradients import gradient_decomposition

    device = method.device
    devices = [device] if device.type == "cuda" else []
    was_training = method.encoder.training
    size = batch_size or len(examples)
    views = []
    with torch.random.fork_rng(devices=devices), torch.no_grad():
        torch.manual_seed(DIAGNOSTIC_SEED)
        method.encoder.train()
        for start in range(0, len(examples), size):
            batch = method.collate(examples[start : start + size])
            batch = {name: value.to(device) if torch.is_tensor(value) else value for name, value in batch.items()}
            views.append(method.embed_views(batch)[:2])
    method.encoder.train(was_training)
    parts = [gradient_decomposition(method.loss, anchors.float(), positives.float()) for anchors, positives in views]
    weights = [len(anchors) for anchors, _ in views]
    return {f"grad_{name}": float(statistics.fmean([found[name] for found in parts], weights) if len(parts) > 1
                                  else parts[0][name]) for name in parts[0]}


def diagnostics(args: GDArgs, data_root: Path | None, limit: int | None, batch_size: int, train_examples):
    """The evaluator extras of ``args``: geometry on STS-B dev and gradient norms on the first training rows."""
    extras = []
    if args.geometry:
        pairs = load_task("stsb:dev", data_root).examples
        pairs = pairs[:limit] if limit is not None else pairs
        extras.append(partial(geometry_metrics, pairs=pairs, batch_size=batch_size))
    if args.gradients:
        rows = args.diagnostic_batch_size * args.diagnostic_batches
        extras.append(partial(gradient_metrics, examples=train_examples[:rows], batch_size=args.diagnostic_batch_size))
    return extras


def build(config: TrainConfig, args: GDArgs, data_root: Path | None) -> MethodBundle:
    """``gd``: unsupervised SimCSE (dropout twins, ``data.task`` default wiki1m) with ``args.loss``."""
    extras = partial(diagnostics, args, data_root, config.eval.limit, config.eval.batch_size)
    return build_simcse(
        config, args, data_root, supervised=False, default_task="wiki1m", objective=make_gd_objective(args),
        extras=extras,
    )


# The paper states none of these (docs/methods/gd.md, "paper value (section/equation)"): the authors' code does.
CODE = "not given by the paper: the authors' "
PROTOCOL = Protocol(
    paper="Nie, Zhang & Mao, ICLR 2023",
    settings=(
        PaperSetting("train.epochs", CODE + "run_unsup_example.sh"),
        PaperSetting("train.batch_size", CODE + "run_unsup_example.sh"),
        PaperSetting("train.lr", CODE + "run_unsup_example.sh"),
        PaperSetting("data.max_length", CODE + "run_unsup_example.sh"),
        PaperSetting("method_args.temperature", CODE + "train.py --temp"),
        PaperSetting("method_args.lam", CODE + "train.py loss_lambda (align_uniform)"),
        PaperSetting("method_args.pooling", CODE + "--pooler_type cls, MLP in training"),
    ),
    presets={},
    docs="docs/methods/gd.md",
)

SPEC = RunSpec(name="gd", args_model=GDArgs, build=build, protocol=PROTOCOL, in_batch_negatives=True, takes_prompts=True)
