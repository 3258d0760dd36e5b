"""Recipe ``gd``: unsupervised SimCSE with one of seven objectives, plus geometry and gradient diagnostics.

The arguments and the objectives' formulas are in :mod:`contrastext.methods.gd`; the method is
:class:`~contrastext.methods.simcse.SimCSE`. At every evaluation the evaluator adds, beside the STS metrics,
``align`` / ``uniform`` on STS-B dev (Wang & Isola's measures) and ``grad_alignment`` / ``grad_uniformity``
/ ``grad_total`` on a FIXED batch of dropout twins (:func:`gradient_metrics`).

Example::

    >>> config = load_config(recipe_path("gd"), ["method_args.loss=margin_euclidean", "train.max_steps=3"])
    >>> summary = run_recipe(config, data_root)
    >>> summary["metrics"]["grad_alignment"], summary["metrics"]["align"]
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

import numpy as np
import torch
from torch import nn

from contrastext.data.examples import Example
from contrastext.data.tasks import load_task
from contrastext.methods.gd import GDArgs
from contrastext.methods.simcse import SimCSE
from contrastext.objectives.registry import make_objective
from contrastext.runs.protocol import PaperSetting, Protocol
from contrastext.runs.registry import RunSpec
from contrastext.runs.simcse import build_simcse
from contrastext.runs.stages import MethodBundle
from contrastext.training.config import TrainConfig

DIAGNOSTIC_SEED = 1234


def make_gd_objective(args: GDArgs) -> nn.Module:
    """The objective named by ``args.loss``: τ for infonce / dcl / hinged_dcl, λ and the form for align_uniform,
    m (their own default when ``margin`` is None) and the diagonal for the margin losses; ``args.loss_args``
    win."""
    if args.loss in ("infonce", "dcl", "hinged_dcl"):
        options: dict = {"temperature": args.temperature}
    elif args.loss == "align_uniform":
        options = {"lam": args.lam, "form": args.align_uniform_form}
    else:
        options = {"diagonal": args.margin_diagonal}
        if args.margin is not None:
            options["margin"] = args.margin
    return make_objective(args.loss, **{**options, **args.loss_args})


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


def gradient_metrics(method: SimCSE, examples: list[Example]) -> dict[str, float]:
    """Alignment / uniformity parts of the objective's gradient on a fixed batch of dropout twins.

    The twins are encoded in train mode (dropout on, without gradients) under a fixed seed inside
    ``torch.random.fork_rng``, so the numbers are comparable across evaluations and the training's random
    state is untouched.
    """
    from contrastext.evaluation.gradients import gradient_decomposition

    device = method.device
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


def diagnostics(args: GDArgs, data_root: Path | None, limit: int | None, batch_size: int, train_examples):
    """The evaluator extras of ``args``: geometry on STS-B dev and gradient norms on the first training rows."""
    extras = []
    if args.geometry:
        pairs = load_task("stsb:dev", data_root).examples
        pairs = pairs[:limit] if limit is not None else pairs
        extras.append(partial(geometry_metrics, pairs=pairs, batch_size=batch_size))
    if args.gradients:
        extras.append(partial(gradient_metrics, examples=train_examples[: args.diagnostic_batch_size]))
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

SPEC = RunSpec(name="gd", args_model=GDArgs, build=build, protocol=PROTOCOL)
