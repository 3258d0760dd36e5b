"""Objectives on embeddings: every contrastive loss of the five works, as torch.nn.Modules.

Each objective takes embeddings (not a model) and returns a scalar tensor; see each module's docstring for
the formula, the paper and an example. Every objective subclasses :class:`Objective` (``base.py``: validate →
upcast → compute with autocast off); :func:`make_objective` builds one by name (``registry.py``).
"""

from .alignment import Alignment, AlignUniform, Uniformity
from .ans import ANS
from .base import Objective
from .capt import CAPT
from .checks import finite_checks, set_finite_checks
from .critic import CriticNCE, WassersteinCritic
from .decoupled import DCL, HingedDCL
from .infonce import InfoNCE
from .margin import MarginAngle, MarginEuclidean, MarginProduct
from .registry import OBJECTIVES, make_objective, objective_names
from .similarity import normalize, pairwise_similarity
from .supcon import CEPlusSupCon, SupCon
from .temperature import (
    FixedTemperature,
    InvertedTriangleTemperature,
    LearnableTemperature,
    Temperature,
    temperature_value,
)
from .triplet import TripletMargin

__all__ = [
    "ANS",
    "CriticNCE",
    "WassersteinCritic",
    "CAPT",
    "DCL",
    "AlignUniform",
    "Alignment",
    "CEPlusSupCon",
    "FixedTemperature",
    "HingedDCL",
    "InfoNCE",
    "InvertedTriangleTemperature",
    "LearnableTemperature",
    "MarginAngle",
    "MarginEuclidean",
    "MarginProduct",
    "OBJECTIVES",
    "Objective",
    "SupCon",
    "Temperature",
    "TripletMargin",
    "Uniformity",
    "finite_checks",
    "make_objective",
    "normalize",
    "objective_names",
    "pairwise_similarity",
    "set_finite_checks",
    "temperature_value",
]
