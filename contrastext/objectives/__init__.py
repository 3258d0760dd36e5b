"""Objectives on embeddings: every contrastive loss of the five works, as torch.nn.Modules.

Each objective takes embeddings (not a model) and returns a scalar tensor; see each module's docstring for
the formula, the paper and an example.
"""

from .alignment import Alignment, AlignUniform, Uniformity
from .ans import ANS
from .capt import CAPT
from .critic import CriticNCE, WassersteinCritic
from .decoupled import DCL, HingedDCL
from .infonce import InfoNCE
from .margin import MarginAngle, MarginEuclidean, MarginProduct
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
    "SupCon",
    "Temperature",
    "TripletMargin",
    "Uniformity",
    "normalize",
    "pairwise_similarity",
    "temperature_value",
]
