"""The pieces every fine-tuning recipe shares (SCL, RECLAIM, CAPT's fine-tuning): its encoder, its evaluators.

The evaluator of the evaluation split (what checkpoints are selected on) is :func:`head_evaluator`; a run
with a separate test split (SCL's protocol) scores the selected checkpoint once with :func:`evaluator_on_test`.

Example::

    >>> data = load_classification_data(config, args, data_root, seed=config.seed)
    >>> evaluate = head_evaluator(config, data)
    >>> evaluate(method)["sst2_dev_accuracy"]
    >>> evaluator_on_test(config, split_validation_test(data, 500, 0.5, seed=0))(method)["sst2_test_accuracy"]
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


def evaluator_on_test(config: TrainConfig, data: ClassificationData) -> Evaluator:
    """The task's metrics of the method's head on the test rows: ``<task>_test_<metric>`` and
    ``<task>_test_score``, without the bare ``score`` (that one stays the selection split's)."""
    if data.test_set is None:
        raise ValueError("evaluator_on_test: the data has no test split (see runs.data.split_validation_test)")
    evaluate = make_evaluator([data.test_set], "head", batch_size=config.eval.batch_size)

    def scores(method) -> dict[str, float]:
        return {name: value for name, value in evaluate(method).items() if name != "score"}

    return scores
