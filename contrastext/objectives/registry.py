"""The objectives by name: ``make_objective("dcl", temperature=0.05)``.

``OBJECTIVES`` (a :class:`~contrastext.runtime.registry.Registry`, the shape of every registry of the library)
maps each name to its :class:`~contrastext.objectives.base.Objective` class; the keyword arguments of
:func:`make_objective` are the class's constructor arguments (see each module's docstring). An unknown name
raises :class:`~contrastext.errors.UnknownNameError` listing the known ones; an unknown keyword or an invalid
value raises :class:`~contrastext.errors.ConfigError` naming the objective and the key. A config value naming
an objective is validated with ``OBJECTIVES.check(name, key)`` (a ConfigError naming the key).

Which batches an objective takes (:func:`takes_shape`, :func:`objectives_taking`), from the class attributes
``pair`` and ``takes_negatives`` of :class:`~contrastext.objectives.base.Objective`: a batch of ``pairs``
(anchor, positive) is the call ``loss(anchors, positives)``, a batch of ``triplets`` (anchor, positive, hard
negative) the call ``loss(anchors, positives, negatives)``. A recipe checks its objective against its data's
shape before it loads a model (:func:`contrastext.runs.simcse.check_objective_fits`).

A new loss is one new module under ``contrastext/objectives/`` (a subclass of ``Objective``) and its entry
below; a user's loss can also be added at run time with ``OBJECTIVES.register(name, cls)``. The RECLAIM
critic objectives (``CriticNCE``, ``ANS``) are built around a critic network and memory banks by their method,
so they are not registered here.

Example::

    >>> loss = make_objective("infonce", temperature=0.05)
    >>> loss.pair, objective_names()[:3]
    (True, ['align_uniform', 'alignment', 'capt'])
    >>> takes_shape(make_objective("dcl"), "triplets"), objectives_taking("triplets")
    (False, ['capt', 'infonce', 'triplet'])
"""

from __future__ import annotations

from typing import Any, Literal

from contrastext.runtime.registry import Registry

from . import alignment, capt, decoupled, infonce, margin, supcon, triplet
from .base import Objective

OBJECTIVES: Registry[type[Objective]] = Registry(
    "objective",
    {
        "infonce": infonce.InfoNCE,
        "supcon": supcon.SupCon,
        "ce_supcon": supcon.CEPlusSupCon,
        "capt": capt.CAPT,
        "align_uniform": alignment.AlignUniform,
        "alignment": alignment.Alignment,
        "uniformity": alignment.Uniformity,
        "dcl": decoupled.DCL,
        "hinged_dcl": decoupled.HingedDCL,
        "margin_euclidean": margin.MarginEuclidean,
        "margin_angle": margin.MarginAngle,
        "margin_product": margin.MarginProduct,
        "triplet": triplet.TripletMargin,
    },
)


BatchShape = Literal["pairs", "triplets"]
# The attribute of an Objective that says it takes the call a batch of that shape makes.
SHAPE_ATTRIBUTES: dict[str, str] = {"pairs": "pair", "triplets": "takes_negatives"}


def takes_shape(objective: Objective | type[Objective], shape: BatchShape) -> bool:
    """Whether ``objective`` takes a batch of ``shape``: ``pairs`` -> ``loss(anchors, positives)`` (its
    ``pair``), ``triplets`` -> ``loss(anchors, positives, negatives)`` (its ``takes_negatives``)."""
    if shape not in SHAPE_ATTRIBUTES:
        raise ValueError(f"shape must be one of {', '.join(SHAPE_ATTRIBUTES)}, not {shape!r}")
    return bool(getattr(objective, SHAPE_ATTRIBUTES[shape], False))


def objectives_taking(shape: BatchShape) -> list[str]:
    """The registered objective names that take a batch of ``shape`` (see :func:`takes_shape`), sorted."""
    return [name for name, cls in OBJECTIVES.items() if takes_shape(cls, shape)]


def objective_names() -> list[str]:
    """The registered objective names, sorted."""
    return OBJECTIVES.names()


def objective_arguments(name: str) -> list[str]:
    """The keyword arguments ``make_objective(name, ...)`` accepts (the class's constructor parameters)."""
    return OBJECTIVES.accepted_arguments(name)


def make_objective(name: str, **args: Any) -> Objective:
    """Build the objective called ``name`` with constructor arguments ``args`` (:meth:`Registry.make
    <contrastext.runtime.registry.Registry.make>`: every error names the objective and the key)."""
    return OBJECTIVES.make(name, **args)
