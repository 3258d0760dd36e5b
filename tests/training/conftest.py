"""The engine tests import the tiny method's helper module from this folder (one_thread: tests/conftest.py), and
the 2-process tests share a dropout-free all-MiniLM-L6-v2 and the one-process run they compare with."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(scope="session")
def dropout_free_bert(tmp_path_factory, minilm_path) -> str:
    """all-MiniLM-L6-v2 with dropout off (masks are drawn per process: only without dropout are one and two
    processes the same computation). A real model, not a random one: on a random BERT every embedding is nearly
    the same, the loss sits at log B and its gradient is a difference of nearly equal terms, so the float
    rounding of two different batch splits would show in the weights."""
    folder = tmp_path_factory.mktemp("minilm-no-dropout")
    shutil.copytree(minilm_path, folder, dirs_exist_ok=True)
    config = json.loads((folder / "config.json").read_text())
    config.update(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    (folder / "config.json").write_text(json.dumps(config))
    return str(folder)


@pytest.fixture(scope="session")
def one_process_simcse_run(tmp_path_factory, dropout_free_bert, data_root) -> Path:
    """The folder of :func:`tests.training.two_processes.simcse_argv`'s run on one process (the plain path), trained
    once a session in this process on one thread, as each process under torchrun (OMP_NUM_THREADS=1)."""
    import contrastext.cli.train_command  # noqa: F401  (registers the command)
    from contrastext.cli import main
    from tests.training.two_processes import simcse_argv

    output = tmp_path_factory.mktemp("one-process") / "one"
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with pytest.raises(SystemExit) as exit_info:
            main(simcse_argv(output, dropout_free_bert, data_root))
    finally:
        torch.set_num_threads(threads)
    assert exit_info.value.code in (0, None)
    return output
