"""The base class of every objective: validate → upcast → compute in full precision.

In the style of pytorch-metric-learning's ``BaseMetricLossFunction`` (whose ``forward`` checks shapes and
calls ``compute_loss``), a loss here is written as two methods and never re-implements the checks:

- ``validate(*args, **kwargs) -> dict[str, Any]`` takes the call's arguments exactly as a user passes them,
  checks them with the helpers of :mod:`contrastext.objectives.checks` (a ``ValueError`` that names the
  objective, the argument and the expected shape) and returns the checked inputs keyed by the names of
  ``compute``'s parameters;
- ``compute(**inputs) -> Tensor`` is the loss itself on checked tensors. It is also the entry point for
  wrappers that already hold checked tensors (e.g. ``CEPlusSupCon`` calls ``SupCon.compute``).

``Objective.forward(*args, **kwargs)`` runs ``validate``, refuses NaN / ±inf in any floating-point input (a
``ValueError`` naming the argument; ``check_finite`` / :func:`~contrastext.objectives.checks.set_finite_checks`
switch it off), upcasts every half-precision tensor it returned
to float32 (:func:`~contrastext.objectives.checks.upcast`) and calls ``compute`` inside
:func:`~contrastext.objectives.checks.full_precision` (autocast off), so a temperature of 0.01 cannot
overflow half precision. :meth:`Objective.checked` does the same for another method than ``compute``
(``CEPlusSupCon.parts``).

Two class attributes say how a generic method may call an objective (a SimCSE-style method refuses one
that does not fit its batch):

- ``pair``: ``loss(anchors, positives)`` with two (B, d) tensors, row i of one pairing with row i of the
  other, is a valid call (InfoNCE, CAPT, Alignment, AlignUniform, DCL, HingedDCL, the margin losses, CriticNCE);
- ``takes_negatives``: ``loss(anchors, positives, negatives)`` is a valid call, the third argument being
  negatives of the anchors (InfoNCE: extra (N, d) candidates; CAPT: its queue; TripletMargin: one (B, d)
  negative per anchor, which it requires, so TripletMargin is not a ``pair`` objective).

A third, ``in_batch``, says that the objective contrasts each pair with the other rows of its batch (InfoNCE,
CAPT, DCL, HingedDCL, the margin losses, Uniformity and AlignUniform): on a batch of one pair and no hard
negative it has nothing to contrast (InfoNCE is identically 0, AlignUniform is alignment alone), so a recipe
refuses ``train.batch_size`` below 2 for it (:func:`contrastext.runs.simcse.check_batch_has_negatives`). With hard
negatives a batch of one still has one negative, and is accepted.

Recipes trust these attributes: before any model loads, a recipe refuses an objective that does not take
its data's batches (:func:`contrastext.objectives.registry.takes_shape`), e.g. a pair-only objective on data
with a negative column, with a ConfigError naming ``method_args.loss``. They must therefore tell the truth
(tests/objectives/test_registry.py calls each objective both ways).

Example (a new loss: one file, plus its line in :mod:`contrastext.objectives.registry`)::

    class MeanDistance(Objective):
        pair = True

        def validate(self, x, y):
            x, y = check_pair(self.owner, "x", x, "y", y)
            return {"x": x, "y": y}

        def compute(self, x, y):
            return (x - y).norm(dim=1).mean()
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any, ClassVar

from torch import Tensor, nn

from . import checks
from .checks import check_finite, check_pair, full_precision, upcast


class Objective(nn.Module):
    """A loss on embeddings: ``forward`` = ``validate`` → upcast half precision → ``compute`` with autocast off."""

    pair: ClassVar[bool] = False
    takes_negatives: ClassVar[bool] = False
    in_batch: ClassVar[bool] = False
    """The other rows of the batch are the negatives: a batch of one pair (no hard negative) trains nothing."""
    check_finite: bool | None = None
    """Check the floating-point inputs for NaN / ±inf (a ValueError naming the argument); None: the module-wide
    setting (:func:`~contrastext.objectives.checks.set_finite_checks`, on by default)."""

    @property
    def owner(self) -> str:
        """The name error messages start with: the class name (``HingedDCL``, not its base ``DCL``)."""
        return type(self).__name__

    def validate(self, *args: Any, **kwargs: Any) -> dict[str, Any]:  # pragma: no cover - abstract
        """Check the call's arguments; return the checked inputs keyed by ``compute``'s parameter names."""
        raise NotImplementedError(f"{self.owner} must implement validate()")

    def compute(self, *args: Any, **kwargs: Any) -> Tensor:  # pragma: no cover - abstract
        """The loss on checked inputs (no validation)."""
        raise NotImplementedError(f"{self.owner} must implement compute()")

    def forward(self, *args: Any, **kwargs: Any) -> Tensor:
        return self.checked(self.compute, *args, **kwargs)

    def checked(self, compute: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``compute(**inputs)`` on ``validate(*args, **kwargs)``'s inputs, upcast, with autocast off."""
        inputs = {
            name: upcast(value) if isinstance(value, Tensor) and value.is_floating_point() else value
            for name, value in self.validate(*args, **kwargs).items()
        }
        if checks.CHECK_FINITE if self.check_finite is None else self.check_finite:
            check_finite(self.owner, inputs)
        reference = next((value for value in inputs.values() if isinstance(value, Tensor)), None)
        with full_precision(reference) if reference is not None else contextlib.nullcontext():
            return compute(**inputs)


class PairObjective(Objective):
    """An objective on two aligned batches ``loss(x (B, d), y (B, d))``: row k of x and row k of y are a
    positive pair (alignment/uniformity, DCL, the margin losses). Subclasses write only ``compute(x, y)``.

    It takes no negatives (``takes_negatives`` False): a recipe refuses it on (anchor, positive, negative) data
    rather than drop the negatives."""

    pair = True

    def validate(self, x: Tensor, y: Tensor) -> dict[str, Tensor]:
        """``loss(x (B, d), y (B, d))``."""
        x, y = check_pair(self.owner, "x", x, "y", y)
        return {"x": x, "y": y}
