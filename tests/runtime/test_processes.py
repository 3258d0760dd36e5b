"""Which process prints: the launcher's RANK before the process group exists; the world-size line; and
docs/DISTRIBUTED.md's account of what each method gathers across processes."""

from __future__ import annotations

import re
from pathlib import Path

from contrastext.runs.gd import GDArgs
from contrastext.runs.mnrl import MNRLArgs
from contrastext.runs.simcse import SimCSEUnsupArgs
from contrastext.runtime.processes import is_main_process

DOC = Path(__file__).resolve().parents[2] / "docs" / "DISTRIBUTED.md"


def test_before_the_process_group_the_launchers_rank_says_which_process_prints(monkeypatch):
    monkeypatch.delenv("RANK", raising=False)
    assert is_main_process()
    monkeypatch.setenv("RANK", "0")
    assert is_main_process()
    monkeypatch.setenv("RANK", "1")  # torchrun / accelerate launch's second process
    assert not is_main_process()


def test_the_world_size_line():
    from contrastext.runtime.processes import describe_world

    assert describe_world(2, "gloo", "cpu") == "world size 2 (gloo, cpu)"
    assert describe_world(1, None, "cpu") == "world size 1 (single process, cpu)"


def test_the_distributed_doc_states_each_methods_gather_default():
    """Issue 22: the table said mnrl gathers candidates across processes; its gather defaults to false."""
    rows = re.findall(r"^\| ([\w /]+) in-batch candidates \(`method_args\.gather`, default \**`(true|false)`",
                      DOC.read_text(encoding="utf-8"), flags=re.MULTILINE)
    documented = {name.strip().lower(): value == "true" for names, value in rows for name in names.split("/")}
    defaults = {name: args.model_fields["gather"].default
                for name, args in (("simcse", SimCSEUnsupArgs), ("gd", GDArgs), ("mnrl", MNRLArgs))}
    assert documented == defaults
