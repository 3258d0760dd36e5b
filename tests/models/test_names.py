"""Model names everywhere (issue 9, item 4): a local folder, ``bundled:all-MiniLM-L6-v2`` or a hub name, for
``eval``, ``encode`` and ``train``; offline, a hub name is one clear error line at once.

No test touches the network: offline is ``HF_HUB_OFFLINE=1`` or a monkeypatched reachability probe.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from contrastext.errors import MissingDataError, UnknownNameError
from contrastext.models import names
from contrastext.models.names import is_hub_name, locate_model
from tests.cli.cli_runs import run

HUB_NAME = "some-org/some-model-that-is-not-cached"


@pytest.fixture
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(names, "cached_hub_model", lambda name: None)


@pytest.fixture
def unreachable(monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", False)
    monkeypatch.setattr(names, "hub_reachable", lambda: False)
    monkeypatch.setattr(names, "cached_hub_model", lambda name: None)


def one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


@pytest.mark.parametrize(
    ("name", "hub"),
    [
        ("sentence-transformers/all-MiniLM-L6-v2", True),
        ("bert-base-uncased", True),
        ("/abs/path/model", False),
        ("./model", False),
        ("~/model", False),
        ("runs/x/best/encoder", False),
        ("bundled:all-MiniLM-L6-v2", False),
    ],
)
def test_what_can_be_a_hub_name(name, hub):
    assert is_hub_name(name) is hub


def test_bundled_and_local_folders_resolve_without_the_hub(minilm_path, tiny_bert_path, monkeypatch):
    monkeypatch.setattr(names, "hub_reachable", lambda: pytest.fail("a local model must not probe the hub"))
    assert locate_model("bundled:all-MiniLM-L6-v2") == minilm_path
    assert locate_model(tiny_bert_path) == tiny_bert_path
    with pytest.raises(UnknownNameError, match="bundled:all-MiniLM-L6-v2"):
        locate_model("bundled:bert-base-uncased")


def test_a_missing_path_is_named_as_such(tmp_path):
    with pytest.raises(MissingDataError, match=rf"model {tmp_path / 'nope'}: no such file or folder"):
        locate_model(str(tmp_path / "nope"))


def test_a_reachable_hub_name_is_passed_through(monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", False)
    monkeypatch.setattr(names, "hub_reachable", lambda: True)
    assert locate_model(HUB_NAME) == HUB_NAME


def test_offline_a_cached_hub_model_loads_from_the_cache(monkeypatch, tiny_bert_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(names, "cached_hub_model", lambda name: tiny_bert_path if name == HUB_NAME else None)
    assert locate_model(HUB_NAME) == tiny_bert_path


def test_offline_an_uncached_hub_name_is_one_clear_error(offline):
    with pytest.raises(MissingDataError) as error:
        locate_model(HUB_NAME)
    message = str(error.value)
    assert HUB_NAME in message and "HF_HUB_OFFLINE" in message and "cache" in message


def test_an_unreachable_hub_is_one_clear_error(unreachable):
    with pytest.raises(MissingDataError, match=r"hub .* cannot be reached"):
        locate_model(HUB_NAME)


def test_the_real_cache_lookup_answers_none_for_an_unknown_model(monkeypatch, tmp_path):
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path))
    assert names.cached_hub_model(HUB_NAME) is None


# ------------------------------------------------------------------------------------------------ commands


def texts(tmp_path: Path) -> Path:
    path = tmp_path / "texts.txt"
    path.write_text("a first text\nthe second text\n")
    return path


def test_encode_takes_the_bundled_name(tmp_path, capsys):
    code, _, err = run(
        ["encode", "-m", "bundled:all-MiniLM-L6-v2", "-i", str(texts(tmp_path)), "-o", str(tmp_path / "e.npy"),
         "--no-progress"],
        capsys,
    )  # fmt: skip
    assert code == 0, err
    assert np.load(tmp_path / "e.npy").shape == (2, 384)


def test_eval_takes_the_bundled_name(tmp_path, capsys):
    sts = tmp_path / "mini_sts.csv"
    sts.write_text("s1,s2,score\na cat sleeps,a cat is asleep,4.5\na man runs,stocks fell,0.2\nkids play,children play,4.8\n")
    code, out, err = run(["eval", "-m", "bundled:all-MiniLM-L6-v2", "--tasks", f"sts:{sts}", "--no-progress"], capsys)
    assert code == 0, err
    assert "mini_sts" in out


def test_encode_with_a_hub_name_offline_is_one_line_at_once(tmp_path, capsys, offline):
    start = time.monotonic()
    code, _, err = run(
        ["encode", "-m", HUB_NAME, "-i", str(texts(tmp_path)), "-o", str(tmp_path / "e.npy"), "--no-progress"], capsys
    )
    assert code == 2 and time.monotonic() - start < 10
    line = one_error_line(err)
    assert HUB_NAME in line and "HF_HUB_OFFLINE" in line
    assert not (tmp_path / "e.npy").exists()


def test_eval_with_a_hub_name_and_no_network_is_one_line(tmp_path, capsys, unreachable):
    sts = tmp_path / "s.csv"
    sts.write_text("s1,s2,score\na,b,1\nc,d,2\n")
    code, _, err = run(["eval", "-m", HUB_NAME, "--tasks", f"sts:{sts}", "--no-progress"], capsys)
    assert code == 2
    line = one_error_line(err)
    assert HUB_NAME in line and "cannot be reached" in line


def test_train_with_a_hub_name_offline_is_one_line(tmp_path, capsys, offline):
    pairs = tmp_path / "pairs.csv"
    pairs.write_text("anchor,positive\n" + "".join(f"q{i} about cats,a{i} on cats\n" for i in range(8)))
    code, _, err = run(
        ["train", "mnrl", "--set", f"model={HUB_NAME}", "--set", f"data.path={pairs}", "--set",
         f"output_dir={tmp_path / 'out'}", "--set", "eval.tasks=[]", "--set", "train.max_steps=1"],
        capsys,
    )  # fmt: skip
    assert code == 2
    line = one_error_line(err)
    assert HUB_NAME in line and "HF_HUB_OFFLINE" in line
