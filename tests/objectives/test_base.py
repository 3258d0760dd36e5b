"""The Objective base: every objective class subclasses it, its template checks/upcasts, and the imports
of objectives/ stay inside their layer. CriticNCE and ANS validate through checks.py like the others."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from pathlib import Path

import pytest
import torch
from torch import nn

import contrastext.objectives as objectives_package
from contrastext.objectives import Objective
from contrastext.objectives.ans import ANS
from contrastext.objectives.base import PairObjective
from contrastext.objectives.checks import check_pair
from contrastext.objectives.critic import CriticNCE, WassersteinCritic
from contrastext.objectives.temperature import Temperature

pytestmark = pytest.mark.usefixtures("single_torch_thread")  # tiny tensors: one intra-op thread

PACKAGE_DIR = Path(objectives_package.__file__).parent
NOT_OBJECTIVES = (Temperature, WassersteinCritic)  # modules of the package that are not losses


def package_modules() -> list[str]:
    return [f"contrastext.objectives.{info.name}" for info in pkgutil.iter_modules([str(PACKAGE_DIR)])]


def module_classes() -> list[type[nn.Module]]:
    """Every nn.Module class defined in a module of contrastext/objectives/."""
    found = []
    for module_name in package_modules():
        module = importlib.import_module(module_name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ == module_name and issubclass(cls, nn.Module):
                found.append(cls)
    return found


def test_every_objective_class_subclasses_the_base():
    classes = module_classes()
    objectives = [cls for cls in classes if not issubclass(cls, NOT_OBJECTIVES)]
    names = {cls.__name__ for cls in objectives}
    assert {"InfoNCE", "SupCon", "CEPlusSupCon", "CAPT", "CriticNCE", "ANS", "TripletMargin"} <= names
    offenders = [cls.__name__ for cls in objectives if not issubclass(cls, Objective)]
    assert not offenders, f"objective classes not built on Objective: {offenders}"
    for cls in objectives:
        if cls is Objective or cls is PairObjective:
            continue
        # The template is the base's: no objective writes its own forward.
        assert "forward" not in vars(cls), f"{cls.__name__} overrides forward; implement validate/compute"
        assert cls.validate is not Objective.validate and cls.compute is not Objective.compute, cls.__name__
        assert cls.compute is not PairObjective.compute, cls.__name__


def test_no_objective_hand_writes_the_precision_rule():
    """full_precision is the base's job: no objective module calls it (checks.py defines it)."""
    for path in PACKAGE_DIR.glob("*.py"):
        if path.name in ("checks.py", "base.py"):
            continue
        assert "full_precision(" not in path.read_text(), path.name


def test_objectives_import_nothing_from_training_methods_or_evaluation():
    allowed = ("contrastext.errors", "contrastext.negatives", "contrastext.objectives", "contrastext.runtime.registry")
    for path in PACKAGE_DIR.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            for name in names:
                if name.startswith("contrastext"):
                    assert name.startswith(allowed), f"{path.name} imports {name}"


# --- the template -------------------------------------------------------------------------------------------


class MeanDistance(Objective):
    """The base's docstring example."""

    pair = True

    def validate(self, x, y):
        x, y = check_pair(self.owner, "x", x, "y", y)
        return {"x": x, "y": y}

    def compute(self, x, y):
        self.seen = (x.dtype, torch.is_autocast_enabled("cpu"))
        return (x - y).norm(dim=1).mean()


def test_template_validates_upcasts_and_turns_autocast_off():
    loss = MeanDistance()
    x, y = torch.randn(4, 3, dtype=torch.bfloat16), torch.randn(4, 3, dtype=torch.bfloat16)
    with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
        value = loss(x, y)
    assert value.dtype == torch.float32 and loss.seen == (torch.float32, False)
    with pytest.raises(ValueError, match=r"MeanDistance: `y` must have shape \(4, 3\)"):
        loss(x, torch.randn(5, 3))


# --- CriticNCE and ANS go through checks.py -----------------------------------------------------------------


def make_critic() -> WassersteinCritic:
    torch.manual_seed(0)
    return WassersteinCritic(5, 7, hidden=8).eval()


@pytest.mark.parametrize(
    ("call", "fragment"),
    [
        (lambda nce: nce(torch.randn(4, 5), torch.randn(4, 6)), "CriticNCE: `v` must have shape (B, 7)"),
        (lambda nce: nce(torch.randint(0, 3, (4, 5)), torch.randn(4, 7)), "floating-point"),
        (lambda nce: nce(torch.randn(5), torch.randn(4, 7)), "(B, 5)"),
        (lambda nce: nce(torch.randn(4, 5), "v"), "got str"),
        (lambda nce: nce(torch.randn(4, 5), torch.randn(4, 7), torch.randn(4, 2, 4), torch.randn(3, 7)), "d = 5"),
        (lambda nce: nce(torch.randn(4, 5), torch.randn(4, 7), negatives_v=torch.randn(4, 0, 7)), "K >= 1"),
    ],
)
def test_critic_nce_bad_inputs_name_the_expected_shape(call, fragment):
    with pytest.raises(ValueError) as error:
        call(CriticNCE(make_critic()))
    assert fragment in str(error.value)


def test_critic_nce_upcasts_and_ignores_autocast():
    nce = CriticNCE(make_critic())
    u, v = torch.randn(4, 5), torch.randn(4, 7)
    reference = nce(u, v)
    with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
        assert torch.equal(nce(u, v), reference)
    half = nce(u.to(torch.bfloat16), v.to(torch.bfloat16))
    assert half.dtype == torch.float32
    torch.testing.assert_close(half, nce(u.to(torch.bfloat16).float(), v.to(torch.bfloat16).float()))


def test_ans_checks_indices_and_widths():
    torch.manual_seed(0)
    ans = ANS(WassersteinCritic(5, 7, hidden=8), bank_size=20, dim_u=5, dim_v=7, k=3).eval()
    u, v = torch.randn(4, 5), torch.randn(4, 7)
    with pytest.raises(ValueError, match=r"ANS: indices \(B,\).*got dtype torch.float32"):
        ans(u, v, torch.tensor([0.0, 1.0, 2.0, 3.0]))
    with pytest.raises(ValueError, match=r"ANS: `u` must have shape \(B, 5\)"):
        ans(torch.randn(4, 6), v, torch.arange(4))
    with pytest.raises(ValueError, match="same B"):
        ans.update(torch.arange(4), u, torch.randn(3, 7))
    assert torch.isfinite(ans(u.to(torch.float16), v.to(torch.float16), torch.arange(4)))
