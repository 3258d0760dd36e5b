"""The ``Method`` contract: what a method may provide is declared with a default, so the trainer and the stages
probe nothing (issue 20, item 8)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import torch
from torch import nn

from contrastext.errors import ConfigError
from contrastext.training.method import Method, enable_backbone_checkpointing, total_loss

ROOT = Path(__file__).resolve().parents[2] / "contrastext"


class Bare(Method):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Linear(2, 2)

    def collate(self, examples):
        return {}

    def forward(self, batch):
        return {"loss": self.encoder.weight.sum()}


class OneClassifier(Bare):
    def export_classifier(self, folder, label_names=None, card=None):
        return Path(folder)


class ClassifierPerTask(Bare):
    def export_classifiers(self, folder, card=None):
        return {}, {}


def test_the_defaults_of_what_a_method_may_provide():
    method = Bare()
    assert method.loss_weights == {} and method.supports_cached_gradients is False
    assert method.classifier_export is None
    with pytest.raises(NotImplementedError, match="Bare has no classifier"):
        method.export_classifier("out")
    with pytest.raises(NotImplementedError, match="Bare has no classifiers"):
        method.export_classifiers("out")
    with pytest.raises(NotImplementedError, match="cached gradients"):
        method.embed({})
    assert not hasattr(Method, "total")  # total_loss is the one weighted total
    assert total_loss(method({}), method.loss_weights) == method.encoder.weight.sum()


def test_a_method_that_implements_an_export_declares_it():
    assert OneClassifier().classifier_export == "one"
    assert ClassifierPerTask().classifier_export == "per_task"


def test_gradient_checkpointing_of_a_backbone_without_it_is_a_config_error():
    method = Bare()
    method.encoder.backbone = nn.Identity()
    with pytest.raises(ConfigError, match="train.gradient_checkpointing: Identity does not support"):
        method.enable_gradient_checkpointing()
    with pytest.raises(ConfigError, match="Linear does not support"):
        enable_backbone_checkpointing(torch.nn.Linear(1, 1))


def _probes(path: Path) -> list[str]:
    """``getattr`` / ``hasattr`` calls in ``path`` whose object is a method, an encoder or a backbone."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr"):
            target = ast.unparse(node.args[0]) if node.args else ""
            if any(word in target for word in ("method", "encoder", "backbone", "model")):
                found.append(f"{path.name}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_the_trainer_and_the_stages_probe_no_method():
    files = [ROOT / "training" / "trainer.py", ROOT / "training" / "grad_cache.py", ROOT / "runs" / "stages.py"]
    assert [probe for path in files for probe in _probes(path)] == []
