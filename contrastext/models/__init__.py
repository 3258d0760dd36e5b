"""Models: the text encoder (backbone, pooling, projection), task heads and the sentence-transformers format."""

from contrastext.models.encoder import EncoderOutput, TextEncoder
from contrastext.models.heads import PAIR_PARTS, ClassificationHead, PairHead, RegressionHead, pair_features
from contrastext.models.pooling import (
    POOLING_NAMES,
    check_pooling_name,
    cls_pool,
    first_last_avg_pool,
    max_pool,
    mean_pool,
    needs_hidden_states,
    pool,
)
from contrastext.models.projection import PROJECTION_NAMES, DenseLayer, Projection, build_projection
from contrastext.models.st_format import StFolder, read_st_folder, write_st_folder

__all__ = [
    "POOLING_NAMES",
    "PAIR_PARTS",
    "PROJECTION_NAMES",
    "ClassificationHead",
    "DenseLayer",
    "EncoderOutput",
    "PairHead",
    "Projection",
    "RegressionHead",
    "StFolder",
    "TextEncoder",
    "build_projection",
    "check_pooling_name",
    "cls_pool",
    "first_last_avg_pool",
    "max_pool",
    "mean_pool",
    "needs_hidden_states",
    "pair_features",
    "pool",
    "read_st_folder",
    "write_st_folder",
]
