"""Per-item outputs of the evaluations made while a :func:`recording` is active.

A corpus-level metric (accuracy, Spearman) hides how much of a difference between two models comes from a few
test items: a two-level bootstrap over seeds × test items needs each item's prediction (issue 25: test sets under
1,000 rows). Inside ``with recording() as found:``, every evaluation of a classification head (its predicted
class or score) and of an encoder on scored pairs (the cosine of each pair) records its set's predictions and
gold labels under the set's key prefix (``sst2_test``, ``sickr_dev``); a later evaluation of the same set
replaces the earlier one, so after a run ``found`` holds each set's last evaluation. Outside a recording nothing
is kept and nothing extra is computed.

Example::

    >>> with recording() as found:
    ...     summary = run_recipe(config, data_root=root)
    >>> found["sst2_test"]["prediction"][:3], found["sst2_test"]["label"][:3]
    ([1.0, 0.0, 1.0], [1.0, 0.0, 0.0])
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

_RECORDINGS: list[dict[str, dict[str, list[float]]]] = []


def active() -> bool:
    """Whether a :func:`recording` is open (the evaluators compute per-item outputs only then)."""
    return bool(_RECORDINGS)


@contextlib.contextmanager
def recording() -> Iterator[dict[str, dict[str, list[float]]]]:
    """``{prefix: {"prediction": [...], "label": [...]}}`` of the evaluations made inside the block."""
    found: dict[str, dict[str, list[float]]] = {}
    _RECORDINGS.append(found)
    try:
        yield found
    finally:
        _RECORDINGS.remove(found)


def record(prefix: str, predictions: Sequence, labels: Sequence) -> None:
    """Keep one evaluated set's predictions and gold labels in every open recording (nothing when none is). A set
    whose predictions or labels are not one number each (a multi-label head) is not kept: a recording never fails
    the evaluation it watches."""
    if not _RECORDINGS:
        return
    if len(predictions) != len(labels):
        raise ValueError(f"{prefix}: {len(predictions)} predictions for {len(labels)} labels")
    try:
        kept = {"prediction": [float(value) for value in predictions], "label": [float(value) for value in labels]}
    except (TypeError, ValueError):
        return
    for found in _RECORDINGS:
        found[prefix] = kept
