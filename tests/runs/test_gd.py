"""The gradient-dissipation recipe: the authors' defaults, several objectives for 3 steps, geometry and
gradient diagnostics logged.

References are written from the authors' released code (BDBC-KG-NLP/ICLR2023_Gradient-Dissipation):
``run_unsup_example.sh`` for the protocol, ``loss.py`` / ``simcse/models.py`` ``cal_loss`` for the losses
(through tests/objectives/naive_objectives.py, which cites the lines), ``simcse/trainers.py``
``cal_test_align_uniform`` for the geometry: align = mean ‖a − b‖² over the pairs with ``label > 4.0``,
uniform = log mean exp(−2‖·‖²) over ``pdist`` of every embedding of both sides (repeats included).
"""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from contrastext.data.examples import Example
from contrastext.data.tasks import load_task
from contrastext.errors import ConfigError
from contrastext.evaluation.gradients import gradient_decomposition
from contrastext.models.encoder import TextEncoder
from contrastext.objectives import (
    DCL,
    AlignUniform,
    HingedDCL,
    InfoNCE,
    MarginAngle,
    MarginEuclidean,
    MarginProduct,
    Objective,
)
from contrastext.objectives.checks import check_pair
from contrastext.objectives.registry import OBJECTIVES
from contrastext.runs.gd import DIAGNOSTIC_SEED, GDArgs, build, geometry_metrics, gradient_metrics
from contrastext.runs.gd import make_gd_objective as build_loss
from contrastext.runs.registry import run_recipe
from contrastext.training.config import load_config
from tests.objectives import naive_objectives as naive
from tests.runs.recipe_runs import RECIPES, read_log, recipe_config, train_overrides

DIAGNOSTICS = ("align", "uniform", "grad_alignment", "grad_uniformity")
FAST = [
    *train_overrides(max_steps=3, epochs=None, batch_size=8, lr="1e-3", eval_every=3),
    "data.limit=48",
    "eval.limit=60",
    "method_args.diagnostic_batch_size=8",
]


def config_for(tmp_path: Path, model: str, *overrides: str):
    return recipe_config("gd", tmp_path, model, *FAST, *overrides)


def test_recipe_defaults_are_the_authors_protocol():
    """run_unsup_example.sh: 1 epoch, batch 128, lr 1e-5, length 32, eval_steps 125 on stsb_spearman, pooler
    cls (MLP in training, cls_before_pooler at test), temp 0.05, loss_lambda 0.5, seed 42, no --fp16."""
    config = load_config(RECIPES / "gd.yaml")
    train = config.train
    assert (train.epochs, train.max_steps, train.batch_size, train.lr) == (1, None, 128, 1e-5)
    assert (train.weight_decay, train.warmup_ratio, train.schedule, train.grad_clip) == (0.0, 0.0, "linear", 1.0)
    assert (train.eval_every, train.metric_for_best, train.greater_is_better) == (125, "stsb_dev_spearman", True)
    assert (train.mixed_precision, train.drop_last, config.seed) == ("no", False, 42)
    assert (config.data.task, config.data.max_length) == ("wiki1m", 32)
    args = config.method_args_as(GDArgs)
    assert (args.pooling, args.mlp, args.temperature, args.lam) == ("cls", "train", 0.05, 0.5)
    assert (args.align_uniform_form, args.margin, args.margin_diagonal) == ("nie", None, "fill")


def test_recipe_objectives_have_the_authors_hyper_parameters():
    """Each loss built from the recipe's method_args has loss.py's / train.py's values."""
    args = load_config(RECIPES / "gd.yaml").method_args_as(GDArgs)
    built = {name: build_loss(args.model_copy(update={"loss": name})) for name in LOSSES}
    assert built["align_uniform"].form == "nie" and built["align_uniform"].lam == 0.5
    assert (built["align_uniform"].alpha, built["align_uniform"].t) == (2.0, 2.0)
    for name in ("infonce", "dcl", "hinged_dcl"):
        assert built[name].temperature == 0.05, name
    margins = {"margin_euclidean": 0.45, "margin_angle": 0.15, "margin_product": 0.09}
    for name, margin in margins.items():
        assert (built[name].margin, built[name].diagonal) == (margin, "fill"), name
    options = args.model_copy(update={"loss": "margin_angle", "margin": 0.2, "margin_diagonal": "exclude"})
    assert (build_loss(options).margin, build_loss(options).diagonal) == (0.2, "exclude")
    # one source per knob (issue 20): a knob in loss_args is refused, naming the method_args key to set
    for knob, argument in (("margin", "margin"), ("margin_diagonal", "diagonal"), ("lam", "lam"),
                           ("align_uniform_form", "form"), ("temperature", "temperature")):  # fmt: skip
        with pytest.raises(ConfigError, match=rf"method_args.loss_args.*set method_args.{knob}\b"):
            load_config(RECIPES / "gd.yaml", [f"method_args.loss_args.{argument}=0.3"]).method_args_as(GDArgs)
    wang_isola = build_loss(args.model_copy(update={"loss": "align_uniform", "align_uniform_form": "wang_isola"}))
    assert wang_isola.form == "wang_isola"


LOSSES = {
    "infonce": InfoNCE,
    "align_uniform": AlignUniform,
    "dcl": DCL,
    "hinged_dcl": HingedDCL,
    "margin_euclidean": MarginEuclidean,
    "margin_angle": MarginAngle,
    "margin_product": MarginProduct,
}


def authors_loss(name: str, anchors: torch.Tensor, positives: torch.Tensor) -> float:
    """The authors' loss at their defaults, from the loop references of naive_objectives.py."""
    references = {
        "infonce": lambda: naive.infonce(anchors, positives, tau=0.05),
        "align_uniform": lambda: naive.align_uniform(anchors, positives, 0.5, 2.0, 2.0, form="nie"),
        "dcl": lambda: naive.dcl(anchors, positives, tau=0.05),
        "hinged_dcl": lambda: naive.dcl(anchors, positives, tau=0.05, hinged=True),
        "margin_euclidean": lambda: naive.margin(anchors, positives, "euclidean", 0.45, "fill"),
        "margin_angle": lambda: naive.margin(anchors, positives, "angle", 0.15, "fill"),
        "margin_product": lambda: naive.margin(anchors, positives, "product", 0.09, "fill"),
    }
    return references[name]()


def test_every_loss_name_is_the_authors_loss_on_the_dropout_twins(tmp_path, tiny_bert_path, data_root):
    """The part each ``loss`` logs equals the authors' loss on the same dropout twins (same seed)."""
    config = config_for(tmp_path, tiny_bert_path, "eval.tasks=[]", "method_args.geometry=false")
    bundle = build(config, GDArgs(), data_root)
    batch = bundle.method.collate(bundle.train_examples[:8])
    bundle.method.train()
    for name, cls in LOSSES.items():
        objective = build_loss(GDArgs(loss=name))
        assert isinstance(objective, cls)
        bundle.method.loss = objective
        bundle.method.part_name = name
        torch.manual_seed(0)
        part = bundle.method(batch)[name]
        torch.manual_seed(0)
        with torch.no_grad():
            anchors, positives = bundle.method.embed_views(batch)
        assert part.dim() == 0
        assert part.item() == pytest.approx(authors_loss(name, anchors, positives), rel=1e-4, abs=1e-5), name


def expected_geometry(left: np.ndarray, right: np.ndarray, labels: list[float]) -> dict[str, float]:
    """cal_test_align_uniform on already-encoded pairs (rows normalised here)."""
    left = left / np.linalg.norm(left, axis=1, keepdims=True)
    right = right / np.linalg.norm(right, axis=1, keepdims=True)
    positive = [i for i, label in enumerate(labels) if label > 4.0]
    align = float(np.mean([np.sum((left[i] - right[i]) ** 2) for i in positive]))
    everything = np.concatenate([left, right])
    potentials = [
        math.exp(-2 * float(np.sum((everything[i] - everything[j]) ** 2)))
        for i in range(len(everything))
        for j in range(i + 1, len(everything))
    ]
    return {"align": align, "uniform": math.log(sum(potentials) / len(potentials))}


def test_geometry_follows_the_authors_cal_test_align_uniform():
    """A pair scored exactly 4.0 is not a positive (``label > 4.0``); a sentence repeated across pairs
    counts once per occurrence in the uniformity (``pdist`` over every embedding)."""
    vectors = {
        "a": [1.0, 0.0, 0.0], "b": [0.8, 0.6, 0.0], "c": [0.0, 1.0, 0.0],
        "d": [0.0, 0.6, 0.8], "e": [-1.0, 0.2, 0.1], "f": [0.3, -0.4, 0.9],
    }  # fmt: skip

    def encode(texts, batch_size=64):
        return np.array([vectors[text] for text in texts])

    pairs = [
        Example(("a", "b"), label=4.6),
        Example(("c", "d"), label=4.0),
        Example(("a", "e"), label=1.2),
        Example(("f", "c"), label=4.2),
    ]
    method = SimpleNamespace(encoder=SimpleNamespace(encode=encode))
    left = np.array([vectors[pair.texts[0]] for pair in pairs])
    right = np.array([vectors[pair.texts[1]] for pair in pairs])
    expected = expected_geometry(left, right, [pair.label for pair in pairs])
    assert geometry_metrics(method, pairs, batch_size=4) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("loss", ["margin_euclidean", "dcl"])
def test_three_steps_log_the_loss_and_the_diagnostics(loss, tmp_path, tiny_bert_path, data_root):
    config = config_for(tmp_path, tiny_bert_path, f"method_args.loss={loss}")
    summary = run_recipe(config, data_root)

    records = read_log(tmp_path)
    assert [record["step"] for record in records] == [1, 2, 3]
    assert all(math.isfinite(record[f"loss/{loss}"]) for record in records)
    for key in (*DIAGNOSTICS, "stsb_dev_spearman"):
        assert summary["metrics"][key] == records[-1][f"eval/{key}"]
    # The step-3 geometry is that of the final encoder on the first 60 STS-B dev pairs.
    encoder = TextEncoder.from_pretrained(tmp_path / "final" / "encoder")
    pairs = load_task("stsb:dev", data_root).examples[:60]
    left = encoder.encode([pair.texts[0] for pair in pairs])
    right = encoder.encode([pair.texts[1] for pair in pairs])
    expected = expected_geometry(left, right, [float(pair.label) for pair in pairs])
    assert summary["metrics"]["align"] == pytest.approx(expected["align"], rel=1e-4)
    assert summary["metrics"]["uniform"] == pytest.approx(expected["uniform"], rel=1e-4)
    parts = summary["metrics"]
    assert parts["grad_total"] > 0 and math.isfinite(parts["grad_alignment"] + parts["grad_uniformity"])


def test_gradient_diagnostics_are_the_split_on_seeded_dropout_twins(tmp_path, tiny_bert_path, data_root):
    """The first rows encoded twice in train mode under DIAGNOSTIC_SEED, split by gradient_decomposition;
    repeatable, the training's RNG and the encoder's mode untouched."""
    config = config_for(tmp_path, tiny_bert_path, "eval.tasks=[]", "method_args.loss=margin_product")
    bundle = build(config, config.method_args_as(GDArgs), data_root)
    bundle.method.eval()
    state = torch.get_rng_state()
    first = gradient_metrics(bundle.method, bundle.train_examples[:8])
    second = gradient_metrics(bundle.method, bundle.train_examples[:8])
    assert torch.equal(state, torch.get_rng_state())
    assert first == second and set(first) == {"grad_alignment", "grad_uniformity", "grad_total"}
    assert not bundle.method.encoder.training  # the evaluation mode is restored

    torch.manual_seed(DIAGNOSTIC_SEED)
    bundle.method.encoder.train()
    with torch.no_grad():
        anchors, positives = bundle.method.embed_views(bundle.method.collate(bundle.train_examples[:8]))
    bundle.method.encoder.eval()
    expected = gradient_decomposition(MarginProduct(), anchors.double(), positives.double())
    assert first == pytest.approx({f"grad_{key}": value for key, value in expected.items()}, rel=1e-6)

    # diagnostic_batches: the rows in loss batches of batch_size, encoded in turn after one seeding, the norms
    # averaged over every anchor (batches of 4 and 2: weighted by their rows)
    torch.manual_seed(DIAGNOSTIC_SEED)
    bundle.method.encoder.train()
    with torch.no_grad():
        views = [bundle.method.embed_views(bundle.method.collate(bundle.train_examples[i:j]))[:2] for i, j in ((0, 4), (4, 6))]
    bundle.method.encoder.eval()
    split = [gradient_decomposition(MarginProduct(), a.double(), p.double()) for a, p in views]
    averaged = {f"grad_{key}": (4 * split[0][key] + 2 * split[1][key]) / 6 for key in split[0]}
    assert gradient_metrics(bundle.method, bundle.train_examples[:6], batch_size=4) == pytest.approx(averaged, rel=1e-6)
    torch.set_rng_state(state)


# --- every registered objective is reachable from gd (issue 20): a loss added at run time trains a step -------


class ToyDistance(Objective):
    """A loss no recipe names: the mean distance of each normalised pair over τ, times ``scale``."""

    pair = True

    def __init__(self, temperature: float = 1.0, scale: float = 1.0):
        super().__init__()
        self.temperature, self.scale = temperature, scale

    def validate(self, x, y):
        x, y = check_pair(self.owner, "x", x, "y", y)
        return {"x": x, "y": y}

    def compute(self, x, y):
        return self.scale * (F.normalize(x, dim=1) - F.normalize(y, dim=1)).norm(dim=1).mean() / self.temperature


def test_an_objective_registered_at_run_time_trains_gd_for_a_step(tmp_path, tiny_bert_path, data_root):
    """One class and one registry line: gd builds it by name, gives it the knobs its constructor takes (τ) and
    ``loss_args`` the rest, trains it, and its gradient diagnostics are logged."""
    sets = ["method_args.loss=toy_distance", "method_args.loss_args.scale=2.0", "train.max_steps=1",
            "train.eval_every=1", "method_args.geometry=false"]  # fmt: skip
    with OBJECTIVES.registered("toy_distance", ToyDistance):
        config = config_for(tmp_path, tiny_bert_path, *sets)
        objective = build_loss(config.method_args_as(GDArgs))
        assert isinstance(objective, ToyDistance) and (objective.temperature, objective.scale) == (0.05, 2.0)
        summary = run_recipe(config, data_root)
    records = read_log(tmp_path)
    assert summary["last_step"] == 1 and math.isfinite(records[0]["loss/toy_distance"])
    assert summary["metrics"]["grad_total"] > 0
    with pytest.raises(ConfigError, match=r"method_args\.loss: .*unknown objective 'toy_distance'; known objectives: "
                                          r"align_uniform, alignment"):  # fmt: skip
        config.method_args_as(GDArgs)  # unregistered again: refused, the registered names listed
