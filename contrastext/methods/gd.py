"""Gradient dissipation: unsupervised SimCSE with a choice of objective, plus geometry and gradient logs.

Nie, Zhang & Mao, "On the inadequacy of optimizing alignment and uniformity in contrastive learning of
sentence representations", ICLR 2023. Their setting is unsupervised SimCSE (dropout twins x_k, y_k on
wiki1m sentences); they compare InfoNCE with its decoupled forms and show that InfoNCE's gradient w.r.t.
an anchor shrinks as the positive pair gets closer than the negatives ("gradient dissipation"), which
the joint alignment + uniformity objective lacks (and overfits). Margin losses that simulate the
dissipation match or beat InfoNCE. ``loss`` picks the objective on L2-normalised embeddings x, y (B × d),
each as the authors' released code computes it (BDBC-KG-NLP/ICLR2023_Gradient-Dissipation, ``loss.py`` and
``simcse/models.py`` ``cal_loss``; the formulas and the code's lines are in docs/methods/gd.md):

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

At every evaluation the evaluator adds, beside STS-B dev Spearman:

- ``align`` / ``uniform``: alignment (pairs scored ≥ 4) and uniformity (all sentences) of STS-B dev
  (Wang & Isola's measures, :mod:`contrastext.evaluation.geometry`), on the ``eval.limit`` first pairs;
- ``grad_alignment`` / ``grad_uniformity`` / ``grad_total``: mean per-anchor norms of the two parts of the
  training objective's gradient (:mod:`contrastext.evaluation.gradients`) on a FIXED batch, the first
  ``diagnostic_batch_size`` training sentences encoded twice with dropout under a fixed seed (the RNG state
  of the training is saved and restored around it, so diagnostics never change the training).

``pooling`` / ``mlp`` are unsupervised SimCSE's (:class:`~contrastext.methods.simcse.SimCSEUnsupArgs`): unset,
they keep the model's own; the recipe writes the authors' ``cls`` + ``train`` explicitly.

``contrastext plot RUN_DIR`` draws these curves. The method is :class:`~contrastext.methods.simcse.SimCSE`
with the chosen objective; this module holds the recipe's arguments, and :mod:`contrastext.runs.gd` builds
the run and its diagnostics.

Example::

    >>> config = load_config("recipes/gd.yaml", ["method_args.loss=margin_euclidean", "train.max_steps=3"])
    >>> summary = run_recipe(config, data_root)
    >>> summary["metrics"]["grad_alignment"], summary["metrics"]["align"]
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from contrastext.methods.simcse import SimCSEUnsupArgs

LossName = Literal[
    "infonce", "align_uniform", "dcl", "hinged_dcl", "margin_euclidean", "margin_angle", "margin_product"
]


class GDArgs(SimCSEUnsupArgs):
    """``method_args`` of ``gd``: unsupervised SimCSE's, one of seven objectives, and the diagnostics."""

    loss: LossName = Field(default="infonce", description="the training objective")
    margin: float | None = Field(
        default=None,
        ge=0,
        description="m of the margin losses; None: the authors' 0.45 / 0.15 / 0.09 (euclidean / angle / product)",
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
