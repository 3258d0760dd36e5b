"""The kinds of task (``Task.kind``) and the groups of kinds that evaluators, methods and runs test against.

The one home of these names: every module asks ``task.kind in SCORED_PAIR_KINDS`` (or another group here) instead
of spelling the tuple again.

============== ============================================== ==========================
kind           examples                                       group
============== ============================================== ==========================
``sts``        scored pairs (STS12-16, STS-B, SICK-R)         :data:`SCORED_PAIR_KINDS`
``regression`` scored pairs read as regression (GLUE STS-B)   :data:`SCORED_PAIR_KINDS`
``single``     one text and a class (SST-2, CoLA)             :data:`CLASSIFICATION_KINDS`
``pair``       two texts and a class (MRPC, RTE, QQP)         :data:`CLASSIFICATION_KINDS`
``sentences``  unlabelled sentences (wiki1m)                  training data only
``triplets``   anchor, positive, hard negative (NLI)          training data only
============== ============================================== ==========================

A user's evaluation file (``KIND:PATH`` in ``contrastext eval --tasks`` and ``eval.tasks``,
:mod:`contrastext.evaluation.task_specs`) has one of :data:`EVAL_FILE_KINDS`; a ``pairs`` file is a task of kind
``pairs`` (scored by retrieval), an ``ir`` folder (queries, a corpus and qrels in the BEIR layout) a task of kind
``ir`` (scored by information-retrieval metrics, headline ``cosine_ndcg@10``), the others map onto the kinds above.

Example::

    >>> "regression" in SCORED_PAIR_KINDS, "pair" in CLASSIFICATION_KINDS
    (True, True)
    >>> LABELLED_KINDS
    ('single', 'pair', 'sts', 'regression')
"""

from __future__ import annotations

from typing import Literal, get_args

TaskKind = Literal["sts", "single", "pair", "regression", "sentences", "triplets"]

TASK_KINDS: tuple[str, ...] = get_args(TaskKind)
"""Every registry task kind."""
SCORED_PAIR_KINDS: tuple[str, ...] = ("sts", "regression")
"""Pairs with a similarity score: evaluated by Spearman / Pearson (of the cosine, or of a regression head)."""
CLASSIFICATION_KINDS: tuple[str, ...] = ("single", "pair")
"""One or two texts with a class label: evaluated by accuracy, F1 and MCC (a probe, or a classifier's head)."""
LABELLED_KINDS: tuple[str, ...] = CLASSIFICATION_KINDS + SCORED_PAIR_KINDS
"""What fine-tuning trains on and what a task evaluation scores (the other kinds are training data only)."""
EVAL_FILE_KINDS: tuple[str, ...] = ("sts", "classification", "pairs", "ir")
"""The kinds of a user's evaluation file (``KIND:PATH``; ``ir:FOLDER``)."""
