"""The objectives registry: every registered name builds, errors name what is wrong, made == constructed.

The tests loop over ``OBJECTIVES.names()``: a new loss needs no edit here (one whose call is neither a pair nor a
triplet adds its inputs to ``OTHER_CALLS``)."""

from __future__ import annotations

import pytest
import torch

from contrastext.errors import ConfigError, UnknownNameError
from contrastext.objectives import (
    CAPT,
    DCL,
    OBJECTIVES,
    Alignment,
    AlignUniform,
    CEPlusSupCon,
    HingedDCL,
    InfoNCE,
    MarginAngle,
    MarginEuclidean,
    MarginProduct,
    Objective,
    SupCon,
    TripletMargin,
    Uniformity,
    make_objective,
    objective_names,
)
from contrastext.objectives.registry import objective_arguments, objectives_taking, takes_shape

pytestmark = pytest.mark.usefixtures("single_torch_thread")  # tiny tensors: one intra-op thread

NAMES = OBJECTIVES.names()

# name -> (non-default arguments, the same objective built directly), for the objectives of the five works
BUILT = {
    "infonce": ({"temperature": 0.1, "symmetric": True, "hard_negative_weight": 0.5},
                lambda: InfoNCE(temperature=0.1, symmetric=True, hard_negative_weight=0.5)),
    "supcon": ({"temperature": 0.2}, lambda: SupCon(temperature=0.2)),
    "ce_supcon": ({"lam": 0.7, "temperature": 0.4}, lambda: CEPlusSupCon(lam=0.7, temperature=0.4)),
    "capt": ({"temperature": 0.3}, lambda: CAPT(temperature=0.3)),
    "align_uniform": ({"lam": 1.0, "alpha": 1.5, "t": 3.0}, lambda: AlignUniform(lam=1.0, alpha=1.5, t=3.0)),
    "alignment": ({"alpha": 1.0}, lambda: Alignment(alpha=1.0)),
    "uniformity": ({"t": 1.0}, lambda: Uniformity(t=1.0)),
    "dcl": ({"temperature": 0.2}, lambda: DCL(temperature=0.2)),
    "hinged_dcl": ({"temperature": 0.2}, lambda: HingedDCL(temperature=0.2)),
    "margin_euclidean": ({"margin": 0.3}, lambda: MarginEuclidean(margin=0.3)),
    "margin_angle": ({"margin": 0.1}, lambda: MarginAngle(margin=0.1)),
    "margin_product": ({"margin": 0.2}, lambda: MarginProduct(margin=0.2)),
    "triplet": ({"margin": 0.3, "distance": "cosine"}, lambda: TripletMargin(margin=0.3, distance="cosine")),
}  # fmt: skip


# The calls of the objectives that take neither pairs nor triplets (labels, logits, one view).
OTHER_CALLS = {
    "supcon": lambda x, y, z, labels, logits: (x, labels),
    "ce_supcon": lambda x, y, z, labels, logits: (logits, x, labels),
    "uniformity": lambda x, y, z, labels, logits: (x,),
}


def random_inputs(name: str, seed: int = 0) -> tuple[torch.Tensor, ...]:
    """Arguments of one call of the objective ``name`` on a batch of 6 rows: with hard negatives when it takes
    them, a pair when it takes pairs, else its entry of ``OTHER_CALLS``."""
    generator = torch.Generator().manual_seed(seed)
    x, y, z = (torch.randn(6, 8, generator=generator) for _ in range(3))
    labels = torch.tensor([0, 0, 1, 1, 2, 0])
    if name in OTHER_CALLS:
        return OTHER_CALLS[name](x, y, z, labels, torch.randn(6, 3, generator=generator))
    cls = OBJECTIVES.get(name)
    assert cls.pair or cls.takes_negatives, f"{name}: takes neither pairs nor triplets; add its call to OTHER_CALLS"
    return (x, y, z) if cls.takes_negatives else (x, y)


def test_names_are_the_registered_ones():
    assert objective_names() == OBJECTIVES.names() == sorted(OBJECTIVES) == NAMES
    assert set(BUILT) <= set(NAMES)
    assert all(issubclass(cls, Objective) for cls in OBJECTIVES.values())


def test_a_loss_registered_at_run_time_is_made_by_name():
    class Toy(InfoNCE):
        pass

    with OBJECTIVES.registered("toy", Toy):
        assert "toy" in objective_names() and type(make_objective("toy", temperature=0.1)) is Toy
        assert "toy" in objectives_taking("pairs")
    assert "toy" not in OBJECTIVES


@pytest.mark.parametrize("name", NAMES)
def test_every_name_builds_an_objective_with_defaults(name):
    objective = make_objective(name)
    assert isinstance(objective, Objective)
    assert type(objective) is OBJECTIVES[name]
    assert torch.isfinite(objective(*random_inputs(name)))


@pytest.mark.parametrize("name", sorted(BUILT))
def test_made_objective_equals_the_constructed_one(name):
    args, build = BUILT[name]
    made, direct = make_objective(name, **args), build()
    assert type(made) is type(direct)
    for seed in range(3):
        inputs = random_inputs(name, seed)
        assert torch.equal(made(*inputs), direct(*inputs))


def test_unknown_name_lists_the_known_ones():
    with pytest.raises(UnknownNameError) as error:
        make_objective("nt_xent")
    message = str(error.value)
    assert "'nt_xent'" in message
    assert all(name in message for name in NAMES)


def test_unknown_key_names_the_objective_the_key_and_the_accepted_ones():
    with pytest.raises(ConfigError) as error:
        make_objective("dcl", temperature=0.1, tau=0.1)
    message = str(error.value)
    assert "'dcl'" in message and "tau" in message and "accepted: temperature" in message
    with pytest.raises(ConfigError, match=r"'infonce'.*lam.*accepted: temperature, similarity, symmetric"):
        make_objective("infonce", lam=0.5)


@pytest.mark.parametrize(
    ("name", "args", "key"),
    [
        ("infonce", {"temperature": -1.0}, "temperature"),
        ("ce_supcon", {"lam": 1.5}, "lam"),
        ("triplet", {"distance": "manhattan"}, "distance"),
        ("margin_angle", {"margin": -0.1}, "margin"),
        ("margin_product", {"diagonal": "zero"}, "diagonal"),
        ("align_uniform", {"form": "wang"}, "form"),
        ("align_uniform", {"lam": 1.5}, "lam"),  # form "nie" weighs align by 1 − λ
    ],
)
def test_invalid_value_is_a_config_error_naming_the_key(name, args, key):
    with pytest.raises(ConfigError) as error:
        make_objective(name, **args)
    assert f"objective {name!r}" in str(error.value) and key in str(error.value)


def test_accepted_arguments_are_the_constructor_parameters():
    assert objective_arguments("ce_supcon") == ["lam", "temperature"]
    assert objective_arguments("margin_euclidean") == ["margin", "diagonal"]


# --- pair / takes_negatives tell the truth -----------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_pair_and_takes_negatives_describe_the_valid_calls(name):
    objective = make_objective(name)
    generator = torch.Generator().manual_seed(0)
    anchors, positives, negatives = (torch.randn(4, 8, generator=generator) for _ in range(3))
    calls = {"pair": (anchors, positives), "takes_negatives": (anchors, positives, negatives)}
    for attribute, inputs in calls.items():
        if getattr(objective, attribute):
            assert torch.isfinite(objective(*inputs))
        else:
            with pytest.raises((TypeError, ValueError)):
                objective(*inputs)


def test_pair_objectives_are_the_expected_ones():
    pairs = sorted(name for name, cls in OBJECTIVES.items() if cls.pair)
    assert pairs == objectives_taking("pairs") == [name for name in NAMES if takes_shape(OBJECTIVES[name], "pairs")]
    assert {"infonce", "capt", "align_uniform", "alignment", "dcl", "hinged_dcl", "margin_euclidean",
            "margin_angle", "margin_product"} <= set(pairs)  # fmt: skip
    assert not {"supcon", "ce_supcon", "uniformity", "triplet"} & set(pairs)
    assert not OBJECTIVES["triplet"].pair and OBJECTIVES["triplet"].takes_negatives
