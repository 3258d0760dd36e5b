"""The ``Method`` contract: what the trainer needs from SimCSE, SCL, RECLAIM, CAPT, multi-task...

A method is an ``nn.Module`` that owns the encoder and every head, critic, queue and bank (as submodules
or registered buffers, so ``state_dict()`` holds all its training state). The trainer knows nothing else:

- ``collate(examples) -> dict``: views + tokenisation of a list of :class:`Example`; deterministic given
  the generator passed to :meth:`Method.set_generator` (the trainer passes one per batch);
- ``forward(batch) -> dict[str, Tensor]``: named, unweighted, scalar loss parts;
- ``loss_weights``: weight per part (missing names weigh 1.0); the total is ``Σ wᵢ · partᵢ``
  (:func:`total_loss`);
- ``on_train_start(total_steps)``: called once before the first step (and on resume) with the number of
  optimiser steps of the run, so schedules such as CAPT's temperature learn T from the trainer;
- ``after_step()``: momentum encoders, memory banks and queues update here, after each optimiser step;
- ``encoder``: the module that is evaluated and exported, a :class:`MethodEncoder` (a
  :class:`~contrastext.models.encoder.TextEncoder`, or anything with the same ``save``, ``unpad`` and ``backbone``).

What a method MAY provide is declared here too, each with a default, so neither the trainer nor the stages of
:mod:`contrastext.runs` ever ask a method what it has:

- ``enable_gradient_checkpointing()`` (``train.gradient_checkpointing``): default, Hugging Face's gradient
  checkpointing on ``encoder.backbone`` (a ConfigError when that model has none);
- ``export_classifier(folder, card=None)``: a fine-tuned classifier written as one Hugging Face sequence-classification
  folder (after training the stage writes ``<output_dir>/classifier``), or ``export_classifiers(folder, card=None) ->
  (exported {task: folder}, not exported {task: why})`` for one folder per task (``classifiers/<task>``). Default:
  neither; :attr:`Method.classifier_export` says which one a method implements (``"one"``, ``"per_task"`` or None);
- cached gradients, below.

Optional, for cached-gradient training (``train.cache_chunk``, :mod:`contrastext.training.grad_cache`): a method
whose loss is a function of per-example embeddings sets ``supports_cached_gradients = True`` and splits its
``forward`` in two:

- ``split_batch(batch, chunk_size) -> list[dict]``: consecutive chunks of at most ``chunk_size`` EXAMPLES (every
  view of an example stays in its chunk), each a batch that ``embed`` takes;
- ``embed(batch) -> list[Tensor]``: the expensive part, one ``(n, d)`` tensor per view (rows in example order);
- ``loss_from_embeddings(views, batch) -> dict[str, Tensor]``: the loss parts from the WHOLE batch's views
  (each view the concatenation of the chunks' ``embed`` outputs) and the whole batch (labels, ...).

so that ``forward(batch) == loss_from_embeddings(embed(batch), batch)``, and ``embed`` of the chunks, concatenated
per view, equals ``embed(batch)`` row for row (up to float rounding and the dropout draws, which depend on how
the rows are split into forward calls). Every module with parameters the loss needs after the embeddings
(learnable temperature, critic, head) runs in ``loss_from_embeddings``; randomness inside ``embed`` must come from
torch's global generators (dropout does), which the cached step saves and replays.

Example::

    >>> class Twins(Method):
    ...     def __init__(self, encoder):
    ...         super().__init__()
    ...         self.encoder = encoder
    ...     def collate(self, examples):
    ...         return self.encoder.tokenize([e.texts[0] for e in examples])
    ...     def forward(self, batch):
    ...         z1 = self.encoder(**batch).embedding
    ...         z2 = self.encoder(**batch).embedding  # another dropout mask
    ...         scores = torch.nn.functional.cosine_similarity(z1[:, None], z2[None], dim=-1) / 0.05
    ...         return {"infonce": torch.nn.functional.cross_entropy(scores, torch.arange(len(z1)))}
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, Literal, Protocol

import numpy as np
import torch
from torch import Tensor, nn

from contrastext.data.examples import Example
from contrastext.errors import ConfigError
from contrastext.objectives.base import Objective

ClassifierExport = Literal["one", "per_task"]


class MethodEncoder(Protocol):
    """What the trainer needs of a method's encoder (an ``nn.Module``; a
    :class:`~contrastext.models.encoder.TextEncoder` has it all).

    - ``save(path)``: written to a folder (checkpoints' ``best/encoder``, ``final/encoder``);
    - ``unpad``: the switch of a packed forward over the real tokens only (``train.unpad`` sets it); an encoder
      without one just keeps the value;
    - ``backbone``: the Hugging Face model inside, whose gradient checkpointing
      :meth:`Method.enable_gradient_checkpointing` turns on.
    """

    unpad: bool
    backbone: nn.Module

    def save(self, path) -> None: ...


class Method(nn.Module, ABC):
    """Base class of every training method (see the module docstring for the contract)."""

    encoder: MethodEncoder
    #: True when :meth:`split_batch`, :meth:`embed` and :meth:`loss_from_embeddings` are implemented, so the
    #: trainer may run a cached-gradient step (``train.cache_chunk``); False: such a config is refused.
    supports_cached_gradients: ClassVar[bool] = False

    def __init__(self) -> None:
        super().__init__()
        self.loss_weights: dict[str, float] = {}
        self._generator: torch.Generator | None = None

    def set_generator(self, generator: torch.Generator | None) -> None:
        """The generator that views and other random choices in :meth:`collate` must draw from."""
        self._generator = generator

    @property
    def generator(self) -> torch.Generator | None:
        """The generator set by :meth:`set_generator` (None: draw from torch's global generator)."""
        return self._generator

    @abstractmethod
    def collate(self, examples: list[Example]) -> dict:
        """Turn examples into a batch of tensors (views, tokenisation, labels)."""

    @abstractmethod
    def forward(self, batch: dict) -> dict[str, Tensor]:
        """Named, unweighted, scalar loss parts of one batch."""

    def split_batch(self, batch: dict, chunk_size: int) -> list[dict]:
        """Consecutive chunks of at most ``chunk_size`` examples of ``batch``, each one a batch for :meth:`embed`
        (only with ``supports_cached_gradients``)."""
        raise NotImplementedError(f"{type(self).__name__} does not support cached gradients (split_batch)")

    def embed(self, batch: dict) -> list[Tensor]:
        """One ``(n, d)`` embedding tensor per view of the batch's ``n`` examples (only with
        ``supports_cached_gradients``)."""
        raise NotImplementedError(f"{type(self).__name__} does not support cached gradients (embed)")

    def loss_from_embeddings(self, views: Sequence[Tensor], batch: dict) -> dict[str, Tensor]:
        """The loss parts of the whole ``batch`` from its views' embeddings, as :meth:`embed` of the whole batch
        returns them (only with ``supports_cached_gradients``)."""
        raise NotImplementedError(f"{type(self).__name__} does not support cached gradients (loss_from_embeddings)")

    def on_train_start(self, total_steps: int) -> None:
        """Called by the trainer before the first step (fresh or resumed) with the run's optimiser steps.

        The base switches off the NaN / ±inf input check of the method's objectives
        (:func:`trainer_checks_nonfinite`): the trainer checks each step's loss itself (``train.on_nonfinite``:
        stop with a DivergenceError, or skip the step), which a ValueError from inside the loss would bypass.
        A method that overrides this calls ``super().on_train_start(total_steps)``.
        """
        trainer_checks_nonfinite(self)

    def after_step(self) -> None:
        """Called after every optimiser step (momentum updates, queues, banks). Default: nothing."""

    @torch.no_grad()
    def predict_in_batches(
        self, examples: Sequence[Example], batch_size: int, predict_batch: Callable[[Sequence[Example]], Tensor]
    ) -> np.ndarray:
        """``predict_batch`` over ``examples`` in slices of ``batch_size``, in eval mode and without gradients
        (the training mode is restored after), concatenated in input order as a NumPy array.

        ``predict_batch`` gets a slice of examples and returns one row (or value) per example; it is where a
        classifier tokenises, moves the batch to :attr:`device` and applies its head."""
        was_training = self.training
        self.eval()
        outputs = []
        try:
            for start in range(0, len(examples), batch_size):
                outputs.append(predict_batch(examples[start : start + batch_size]))
        finally:
            self.train(was_training)
        return torch.cat(outputs).cpu().numpy()

    @property
    def device(self) -> torch.device:
        """The device of the method's parameters."""
        return next(self.parameters()).device

    def enable_gradient_checkpointing(self) -> None:
        """``train.gradient_checkpointing``: recompute activations in the backward pass instead of keeping them.

        Default: Hugging Face's gradient checkpointing on ``encoder.backbone``
        (:func:`enable_backbone_checkpointing`); a ConfigError naming ``train.gradient_checkpointing`` when that
        model has none. A method with more to checkpoint overrides this."""
        enable_backbone_checkpointing(self.encoder.backbone)

    def export_classifier(self, folder: str | Path, card: dict | None = None) -> Path:
        """Write the fine-tuned classifier (encoder + head) as a Hugging Face sequence-classification ``folder``;
        returns it. ConfigError, nothing written, when it has no exact Hugging Face equivalent. Only for a method
        whose :attr:`classifier_export` is ``"one"`` (it overrides this)."""
        raise NotImplementedError(f"{type(self).__name__} has no classifier to export")

    def export_classifiers(self, folder: str | Path, card: dict | None = None) -> tuple[dict[str, Any], dict[str, str]]:
        """One Hugging Face sequence-classification folder per task, ``folder/<task>``; returns ``(exported {task:
        folder}, not exported {task: why})``. Only for a method whose :attr:`classifier_export` is ``"per_task"``
        (it overrides this)."""
        raise NotImplementedError(f"{type(self).__name__} has no classifiers to export")

    @property
    def classifier_export(self) -> ClassifierExport | None:
        """What the stage exports after training: ``"one"`` for a method that implements :meth:`export_classifier`,
        ``"per_task"`` for one that implements :meth:`export_classifiers`, None (no classifier) for the others."""
        if type(self).export_classifier is not Method.export_classifier:
            return "one"
        if type(self).export_classifiers is not Method.export_classifiers:
            return "per_task"
        return None


def enable_backbone_checkpointing(backbone: nn.Module) -> None:
    """Hugging Face's gradient checkpointing on ``backbone``, non-reentrant as Hugging Face's Trainer now defaults; a
    ConfigError naming ``train.gradient_checkpointing`` when ``backbone`` is not a transformers model that supports
    it."""
    from transformers import PreTrainedModel

    if not (isinstance(backbone, PreTrainedModel) and backbone.supports_gradient_checkpointing):
        raise ConfigError(
            f"train.gradient_checkpointing: {type(backbone).__name__} does not support gradient checkpointing; "
            "leave it false for this model"
        )
    if hasattr(PreTrainedModel, "activation_checkpointing_enable"):  # transformers >= 5.x's name
        backbone.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
    else:
        backbone.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})


def trainer_checks_nonfinite(module: nn.Module) -> None:
    """Switch off the finiteness check (``Objective.check_finite``) of every objective inside ``module``: under
    the trainer a diverged step reaches ``train.on_nonfinite`` as a non-finite loss, and the check's host
    synchronisation per loss is saved."""
    for child in module.modules():
        if isinstance(child, Objective):
            child.check_finite = False


def total_loss(parts: Mapping[str, Tensor], weights: Mapping[str, float] | None = None) -> Tensor:
    """``Σ wᵢ · partᵢ`` over the loss parts; a part without a weight weighs 1.0.

    Example::

        >>> total_loss({"ce": torch.tensor(1.0), "supcon": torch.tensor(2.0)}, {"supcon": 0.5})
        tensor(2.)
    """
    if not parts:
        raise ValueError("a method returned no loss parts: forward(batch) must return {name: scalar tensor}")
    weights = weights or {}
    total = None
    for name, value in parts.items():
        if not isinstance(value, Tensor) or value.dim() != 0:
            shape = tuple(value.shape) if isinstance(value, Tensor) else type(value).__name__
            raise ValueError(f"loss part {name!r} must be a scalar tensor, got {shape}")
        term = value * float(weights.get(name, 1.0))
        total = term if total is None else total + term
    return total
