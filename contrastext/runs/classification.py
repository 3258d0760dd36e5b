"""The pieces every fine-tuning recipe shares (SCL, RECLAIM, CAPT's fine-tuning): its encoder, its evaluator.

Example::

    >>> data = load_classification_data(config, args, data_root, seed=config.seed)
    >>> evaluate = head_evaluator(config, data)
    >>> evaluate(method)["sst2_dev_accuracy"]
"""

from __future__ import annotations

from contrastext.evaluation.evaluators import Evaluator, make_evaluator
from contrastext.methods.classification import ClassificationArgs
from contrastext.runs.data import ClassificationData
from contrastext.runs.encoders import build_encoder
from contrastext.training.config import TrainConfig


def classifier_encoder(config: TrainConfig, args: ClassificationArgs):
    """``config.model`` with the pooling the head reads and ``data.max_length``."""
    return build_encoder(config, pooling=args.pooling)


def head_evaluator(config: TrainConfig, data: ClassificationData) -> Evaluator:
    """The task's metrics of the method's head on the evaluation rows (``<task>_<split>_<metric>``, ``score``)."""
    return make_evaluator([data.eval_set], "head", batch_size=config.eval.batch_size)
