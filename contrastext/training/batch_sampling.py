"""The batch sampler a run's config asks for: ``data.batch_sampler`` (sentence-transformers' names) and
``train.group_by_length``.

- ``batch_sampler`` (default): :class:`~contrastext.data.sampling.RandomBatchSampler` (a seeded permutation per
  epoch), or :class:`~contrastext.data.sampling.LengthGroupedBatchSampler` with ``train.group_by_length``;
- ``no_duplicates``: :class:`~contrastext.data.batch_samplers.NoDuplicatesBatchSampler` (no text twice in a
  batch, across the row's columns). Both orders are their own: ``no_duplicates`` cannot also group by length, and
  the two together are a ConfigError naming both keys.

Over a column store (``data.storage: columns``, :class:`~contrastext.data.column_store.ColumnExamples`) the same
three orders come from its compact columns (:func:`~contrastext.data.column_sampling.column_batch_sampler`: the
row count, the int32 lengths, the 64-bit text hashes), batch for batch the in-memory samplers' on the same rows.

Every sampler here is a pure function of (seed, epoch), which resuming and multi-process training rely on.
"""

from __future__ import annotations

from collections.abc import Sequence

from contrastext.data.batch_samplers import NoDuplicatesBatchSampler
from contrastext.data.column_sampling import column_batch_sampler
from contrastext.data.column_store import ColumnExamples
from contrastext.data.examples import Example
from contrastext.data.sampling import LengthGroupedBatchSampler, RandomBatchSampler
from contrastext.errors import ConfigError
from contrastext.training.config import TrainConfig

NO_DUPLICATES = "no_duplicates"


def key_origin(config: TrainConfig, key: str) -> str:
    """Where a dotted key came from: ``--set KEY (over FILE)`` or the config file."""
    file = config.source or "<config>"
    given = any(key == other or key.startswith(other + ".") for other in config.overridden_keys)
    return f"--set {key} (over {file})" if given else file


def check_batch_sampler(config: TrainConfig) -> None:
    """``data.batch_sampler: no_duplicates`` with ``train.group_by_length`` is a ConfigError (two batch orders)."""
    if config.data.batch_sampler == NO_DUPLICATES and config.train.group_by_length:
        raise ConfigError(
            f"{key_origin(config, 'data.batch_sampler')}: data.batch_sampler=no_duplicates forms its own batches and "
            "cannot also group them by length: drop train.group_by_length or data.batch_sampler"
        )


def make_batch_sampler(config: TrainConfig, examples: Sequence[Example], seed: int):
    """The sampler of ``config`` over ``examples`` (``batches(epoch) -> list[list[int]]``)."""
    check_batch_sampler(config)
    train = config.train
    if isinstance(examples, ColumnExamples):  # data.storage: columns: the same batches from compact columns
        return column_batch_sampler(examples, config.data.batch_sampler, train.group_by_length, train.batch_size,
                                    seed, train.drop_last)  # fmt: skip
    if config.data.batch_sampler == NO_DUPLICATES:
        return NoDuplicatesBatchSampler([example.texts for example in examples], train.batch_size, seed,
                                        train.drop_last)
    if train.group_by_length:
        lengths = [sum(len(text) for text in example.texts) for example in examples]
        return LengthGroupedBatchSampler(lengths, train.batch_size, seed, train.drop_last)
    return RandomBatchSampler(len(examples), train.batch_size, seed, train.drop_last)
