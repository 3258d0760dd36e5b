"""The task kinds and their groups have one home, and the registry's tasks use only those kinds."""

from typing import get_args

from contrastext.data.task_kinds import (
    CLASSIFICATION_KINDS,
    EVAL_FILE_KINDS,
    LABELLED_KINDS,
    SCORED_PAIR_KINDS,
    TASK_KINDS,
    TaskKind,
)
from contrastext.data.tasks import Task, get_task, task_names


def test_the_groups_are_disjoint_parts_of_the_task_kinds():
    assert get_args(TaskKind) == TASK_KINDS
    assert set(SCORED_PAIR_KINDS) | set(CLASSIFICATION_KINDS) == set(LABELLED_KINDS) <= set(TASK_KINDS)
    assert not set(SCORED_PAIR_KINDS) & set(CLASSIFICATION_KINDS)
    assert EVAL_FILE_KINDS == ("sts", "classification", "pairs", "ir")


def test_the_registry_uses_these_kinds():
    assert Task.__dataclass_fields__["kind"].type in ("TaskKind", TaskKind)
    assert {get_task(name).kind for name in task_names()} <= set(TASK_KINDS)
