"""The pieces every fine-tuning recipe shares (SCL, RECLAIM, CAPT's fine-tuning): its ``method_args`` keys
(:class:`ClassificationArgs`), its encoder, its evaluators.

The plan's evaluation text is :func:`classifier_evaluation_text`. The evaluator of the evaluation split (what checkpoints are selected on) is :func:`head_evaluator`; a run
with a separate test split (SCL's protocol) scores the selected checkpoint once with :func:`evaluator_on_test`.

Example::

    >>> data = load_classification_data(config, args, data_root, seed=config.seed)
    >>> evaluate = head_evaluator(config, data)
    >>> evaluate(method)["sst2_dev_accuracy"]
    >>> evaluator_on_test(config, split_validation_test(data, 500, 0.5, seed=0))(method)["sst2_test_accuracy"]
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from contrastext.evaluation.evaluators import Evaluator, make_evaluator
from contrastext.runs.data import ClassificationData
from contrastext.runs.encoders import build_encoder
from contrastext.runs.plan import evaluation_text
from contrastext.training.config import TrainConfig


class ClassificationArgs(BaseModel):
    """``method_args`` keys shared by the fine-tuning recipes (each recipe adds its own)."""

    model_config = ConfigDict(extra="forbid")

    pooling: str = Field(default="cls", description="encoder pooling the head reads; [CLS] as in BERT/Gunel")
    head_dropout: float = Field(default=0.1, ge=0, lt=1, description="dropout before the head's linear layer")
    holdout: float | None = Field(
        default=None,
        gt=0,
        lt=1,
        description="tasks with one labelled split: this share of the evaluation split is held out (seeded) "
        "for evaluation and the rest is the training set",
    )
    holdout_seed: int = Field(default=0, ge=0, description="seed of the holdout split (fixed across runs)")


def classifier_encoder(config: TrainConfig, args: ClassificationArgs):
    """``config.model`` with the pooling the head reads and ``data.max_length``."""
    return build_encoder(config, pooling=args.pooling)


def classifier_evaluation_text(config: TrainConfig, args: ClassificationArgs) -> str:
    """The plan's evaluation of a classifier: ``eval.tasks`` on the recipe's task; on a user's data the rows it
    is really evaluated on (``data.eval_path``, ``data.eval_split`` or the seeded holdout), since the recipe's
    ``eval.tasks`` go with the ``data.task`` that ``--set data.path`` replaces (:func:`classification_spec`)."""
    from contrastext.data.sources import DEFAULT_HOLDOUT
    from contrastext.runs.protocol import is_user_data

    if is_user_data(config) is None:
        return evaluation_text(config)
    data = config.data
    if data.eval_path is not None:
        rows = f"eval {data.eval_path}"
    elif data.eval_split is not None:
        rows = f"eval {data.dataset}[{data.eval_split}]"
    else:
        share = DEFAULT_HOLDOUT if args.holdout is None else args.holdout
        rows = f"eval a {share:.0%} holdout of the training rows (seed {args.holdout_seed})"
    return rows + (f" (first {config.eval.limit})" if config.eval.limit is not None else "")


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
