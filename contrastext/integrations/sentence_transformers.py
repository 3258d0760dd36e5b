"""Any contrastext objective as a sentence-transformers loss, for ``SentenceTransformerTrainer`` (or ``fit``).

A sentence-transformers loss is an ``nn.Module`` that holds the model and is called with the tokenised
columns of a batch and its labels, ``loss(sentence_features, labels) -> Tensor`` (the interface of
``MultipleNegativesRankingLoss``, sentence-transformers 3 to 6). :class:`ContrastextLoss` embeds every column
with the model (``model(features)["sentence_embedding"]``) and calls the objective on them; the dataset's
columns say what each embedding is, as sentence-transformers' own losses do:

========================================  ==========================================  ==========================
objective                                 dataset columns (in order)                  call
========================================  ==========================================  ==========================
pair objectives (infonce, dcl,            anchor, positive                            ``loss(a, p)``
hinged_dcl, align_uniform, alignment,
margin_*, capt)
… that take negatives (infonce, capt)     anchor, positive, negative_1, …, negative_m ``loss(a, p, [n_1; …; n_m])``
triplet                                   anchor, positive, negative                  ``loss(a, p, n)``
supcon                                    text(s), ``label``                          ``loss(e, labels)`` (every
                                                                                      column's rows, same label)
uniformity                                text(s)                                     ``loss(e)``
========================================  ==========================================  ==========================

The negatives are stacked as sentence-transformers' ``MultipleNegativesRankingLoss`` stacks them, so
``ContrastextLoss(model, make_objective("infonce", temperature=0.05))`` equals
``MultipleNegativesRankingLoss(model, scale=20)``. The module imports nothing from sentence-transformers.

Example::

    from datasets import Dataset
    from sentence_transformers import SentenceTransformer, SentenceTransformerTrainer
    from contrastext.integrations import ContrastextLoss
    from contrastext.objectives import make_objective

    model = SentenceTransformer("sentence-transformers/all-MiniLM-L6-v2")
    data = Dataset.from_dict({"anchor": ["A man is eating."], "positive": ["Someone eats."]})
    loss = ContrastextLoss(model, make_objective("dcl", temperature=0.05))
    SentenceTransformerTrainer(model=model, train_dataset=data, loss=loss).train()
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable
from typing import Any

import torch
from torch import Tensor, nn

from contrastext.errors import ConfigError
from contrastext.objectives.alignment import Uniformity
from contrastext.objectives.base import Objective
from contrastext.objectives.supcon import CEPlusSupCon, SupCon
from contrastext.objectives.temperature import Temperature

EMBEDDING_KEY = "sentence_embedding"


def objective_settings(objective: Objective) -> dict[str, Any]:
    """``{"objective": <registry name>, <argument>: <value>, ...}``: the name ``make_objective`` knows it by and
    the value of each of its constructor arguments (a temperature schedule as its class and current value)."""
    from contrastext.objectives.registry import OBJECTIVES

    cls = type(objective)
    name = next((key for key, value in OBJECTIVES.items() if value is cls), cls.__name__)
    settings: dict[str, Any] = {"objective": name}
    for argument in inspect.signature(cls).parameters:
        if hasattr(objective, argument):
            settings[argument] = _plain(getattr(objective, argument))
    return settings


def _plain(value: Any) -> Any:
    """A JSON value for a model card: numbers, text, lists; a tensor's number; a module as ``Class(settings)``."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, Tensor):
        return value.item() if value.dim() == 0 else value.tolist()
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    if isinstance(value, Temperature):
        current = float(torch.as_tensor(value.value()).detach())
        return f"{type(value).__name__}({value.extra_repr()}), at {current:.4g} when saved"
    if isinstance(value, nn.Module):
        return f"{type(value).__name__}({value.extra_repr()})"
    return repr(value)


def _kind(objective: Objective) -> str:
    """How the objective is called: ``labels``, ``single``, ``pair`` or ``triplet``."""
    if isinstance(objective, CEPlusSupCon):
        raise ConfigError(
            "ce_supcon needs a classifier's logits, which a sentence-transformers model has not: use supcon "
            "(or contrastext's scl recipe for the classifier)"
        )
    if isinstance(objective, SupCon):
        return "labels"
    if isinstance(objective, Uniformity):
        return "single"
    if objective.pair:
        return "pair"
    if objective.takes_negatives:
        return "triplet"
    raise ConfigError(f"{type(objective).__name__}: not an objective on embeddings columns; see ContrastextLoss")


class ContrastextLoss(nn.Module):
    """``ContrastextLoss(model, objective)``: the sentence-transformers loss of a contrastext objective.

    ``model`` is a ``SentenceTransformer`` (any module mapping a tokenised column to a dict holding
    ``"sentence_embedding"``); ``objective`` an :class:`~contrastext.objectives.base.Objective`, e.g.
    ``make_objective("dcl", temperature=0.05)``. See the module docstring for which columns each needs.
    """

    def __init__(self, model: nn.Module, objective: Objective) -> None:
        super().__init__()
        if not isinstance(objective, Objective):
            raise ConfigError(
                f"ContrastextLoss: objective must be a contrastext Objective (make_objective(name, ...)), "
                f"got {type(objective).__name__}"
            )
        self.kind = _kind(objective)
        self.model = model
        self.objective = objective

    def embed(self, sentence_features: Iterable[dict[str, Tensor]]) -> list[Tensor]:
        """The model's embedding of every column of the batch."""
        return [self.model(features)[EMBEDDING_KEY] for features in sentence_features]

    def forward(self, sentence_features: Iterable[dict[str, Tensor]], labels: Tensor | None = None) -> Tensor:
        return self.compute_loss_from_embeddings(self.embed(sentence_features), labels)

    def compute_loss_from_embeddings(self, embeddings: list[Tensor], labels: Tensor | None = None) -> Tensor:
        """The objective on the columns' embeddings (what :meth:`forward` computes after embedding)."""
        name = type(self.objective).__name__
        if not embeddings:
            raise ValueError(f"ContrastextLoss({name}): the batch has no text column")
        if self.kind == "labels":
            if labels is None:
                raise ValueError(f"ContrastextLoss({name}): needs a 'label' column (class of each row)")
            return self.objective(torch.cat(embeddings), labels.repeat(len(embeddings)))
        if self.kind == "single":
            return self.objective(torch.cat(embeddings))
        columns = len(embeddings)
        if self.kind == "triplet" and columns != 3:
            raise ValueError(f"ContrastextLoss({name}): needs 3 columns (anchor, positive, negative); got {columns}")
        if columns < 2:
            raise ValueError(f"ContrastextLoss({name}): needs 2 columns (anchor, positive); got {columns}")
        if columns == 2:
            return self.objective(embeddings[0], embeddings[1])
        if not self.objective.takes_negatives:
            raise ValueError(
                f"ContrastextLoss({name}): takes 2 columns (anchor, positive), got {columns}; "
                "infonce and capt take extra negative columns"
            )
        return self.objective(embeddings[0], embeddings[1], torch.cat(embeddings[2:]))

    def get_config_dict(self) -> dict[str, Any]:
        """What sentence-transformers writes in the model card about this loss (as its own losses do, e.g.
        ``MultipleNegativesRankingLoss``'s ``{"scale": 20.0, ...}``): the objective's registry name and its
        constructor settings, e.g. ``{"objective": "dcl", "temperature": 0.05}``."""
        return objective_settings(self.objective)

    @property
    def citation(self) -> str:
        return (
            "@software{contrastext,\n  title = {contrastext: contrastive learning of text representations},\n"
            "  note = {objective used through contrastext.integrations.sentence_transformers.ContrastextLoss}\n}"
        )
