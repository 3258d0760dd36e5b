"""The library API on hostile inputs (issue 21, item 7): objectives refuse NaN / ±inf inputs naming the argument
(on by default, switchable off), the trainer's own non-finite handling still decides under ``train.on_nonfinite``,
and a FIFO or a device given as an input file is named as what it is, never as missing.
"""

from __future__ import annotations

import inspect
import math
import os
from pathlib import Path

import pytest
import torch

from contrastext.data.readers.lines import check_regular_file, iter_lines, require_file, special_file_kind
from contrastext.data.sources import open_file
from contrastext.errors import MissingDataError, NotRegularFileError
from contrastext.objectives import InfoNCE, finite_checks, make_objective, objective_names, set_finite_checks
from contrastext.objectives import checks as objective_checks
from contrastext.objectives.critic import CriticNCE, WassersteinCritic
from contrastext.runtime.run_log import read_log
from contrastext.training.divergence import DivergenceError
from contrastext.training.method import trainer_checks_nonfinite
from contrastext.training.trainer import Trainer
from tests.cli.cli_runs import run
from tests.training._tiny_training import TinyMethod, make_config, sentences

pytestmark = pytest.mark.usefixtures("single_torch_thread")

BATCH, WIDTH, CLASSES = 6, 8, 3


def arguments(objective) -> dict[str, torch.Tensor]:
    """Valid inputs for every argument of ``objective`` (optional extra candidates included)."""
    torch.manual_seed(0)
    built = {}
    for name, parameter in inspect.signature(objective.validate).parameters.items():
        if name == "labels":
            built[name] = torch.arange(BATCH) % CLASSES
        elif name == "logits":
            built[name] = torch.randn(BATCH, CLASSES)
        elif parameter.default is inspect.Parameter.empty or name in ("negatives", "queue"):
            built[name] = torch.randn(BATCH, WIDTH)
    return built


def float_arguments(name: str) -> list[tuple[str, str]]:
    objective = make_objective(name)
    return [(name, argument) for argument, value in arguments(objective).items() if value.is_floating_point()]


CASES = [case for name in objective_names() for case in float_arguments(name)]


@pytest.mark.parametrize(("objective_name", "argument"), CASES, ids=[f"{o}-{a}" for o, a in CASES])
@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_a_non_finite_input_is_a_value_error_naming_the_argument(objective_name, argument, bad):
    objective = make_objective(objective_name)
    inputs = arguments(objective)
    assert torch.isfinite(objective(**inputs)).all()
    inputs[argument][2, 1] = bad
    with pytest.raises(ValueError, match=rf"^{type(objective).__name__}: `{argument}` holds non-finite values"):
        objective(**inputs)


def test_the_critic_objective_checks_its_inputs_too():
    objective = CriticNCE(WassersteinCritic(WIDTH, 4))
    u, v = torch.randn(BATCH, WIDTH), torch.randn(BATCH, 4)
    v[0, 0] = math.nan
    with pytest.raises(ValueError, match="CriticNCE: `v` holds non-finite values"):
        objective(u, v)


def test_the_message_counts_what_is_wrong():
    anchors = torch.randn(BATCH, WIDTH)
    anchors[0, :3] = math.nan
    anchors[1, 0] = math.inf
    with pytest.raises(ValueError, match=r"`anchors` holds non-finite values \(3 NaN, 1 ±inf of 48\)"):
        InfoNCE()(anchors, torch.randn(BATCH, WIDTH))


def test_large_finite_inputs_whose_sum_overflows_are_accepted():
    anchors = torch.full((BATCH, WIDTH), 3e37)  # the sum overflows float32; every value is finite
    assert torch.isfinite(InfoNCE()(anchors, torch.randn(BATCH, WIDTH)))


def test_the_check_is_on_by_default_and_can_be_switched_off(monkeypatch):
    assert objective_checks.CHECK_FINITE is True
    anchors, positives = torch.randn(BATCH, WIDTH), torch.randn(BATCH, WIDTH)
    anchors[0, 0] = math.nan
    with finite_checks(False):
        assert torch.isnan(InfoNCE()(anchors, positives))
    assert objective_checks.CHECK_FINITE is True  # restored after the block
    previous = set_finite_checks(False)
    try:
        assert previous is True and torch.isnan(InfoNCE()(anchors, positives))
    finally:
        set_finite_checks(previous)
    one = InfoNCE()
    one.check_finite = False  # one instance only
    assert torch.isnan(one(anchors, positives))
    with pytest.raises(ValueError, match="`anchors`"):
        InfoNCE()(anchors, positives)
    with finite_checks(False):
        forced = InfoNCE()
        forced.check_finite = True  # the instance's own setting wins over the module default
        with pytest.raises(ValueError, match="`anchors`"):
            forced(anchors, positives)


# ------------------------------------------------------------------------------- the trainer's non-finite path


class NanEmbeddingsAt(TinyMethod):
    """The tiny method with a real InfoNCE objective, whose embeddings are NaN from optimiser step ``bad_step``
    on (a diverged encoder): the objective would refuse them, but under the trainer ``train.on_nonfinite``
    decides."""

    def __init__(self, *args, bad_step: int, **kwargs):
        super().__init__(*args, **kwargs)
        self.infonce = InfoNCE(temperature=0.05)
        self.bad_step, self.calls = bad_step, 0

    def forward(self, batch):
        parts = super().forward(batch)
        self.calls += 1
        z1 = self.encoder(batch["ids"], batch["mask"])
        z2 = self.encoder(batch["noisy"], batch["mask"])
        if self.training and (self.calls + 1) // 2 >= self.bad_step:
            z1 = z1 * float("nan")
        parts["infonce"] = self.infonce(z1, z2)
        return parts


def nan_method(tokenizer_path, bad_step: int) -> NanEmbeddingsAt:
    from transformers import AutoTokenizer

    torch.manual_seed(0)
    return NanEmbeddingsAt(AutoTokenizer.from_pretrained(tokenizer_path), bad_step=bad_step)


def test_nan_embeddings_under_the_trainer_stop_with_a_divergence_error(tmp_path, minilm_path):
    method = nan_method(minilm_path, bad_step=3)
    with pytest.raises(DivergenceError, match="step 3"):
        Trainer(method, sentences(), make_config(tmp_path, max_steps=4, save_every=None)).train()
    assert method.infonce.check_finite is False  # switched off by Method.on_train_start


def test_nan_embeddings_under_on_nonfinite_skip_are_skipped(tmp_path, minilm_path):
    method = nan_method(minilm_path, bad_step=3)
    config = make_config(tmp_path, max_steps=4, save_every=None, on_nonfinite="skip")
    Trainer(method, sentences(), config).train()
    records = read_log(tmp_path / "train_log.jsonl")
    assert [r.get("skipped_nonfinite", 0) for r in records] == [0, 0, 1, 2]
    assert all(bool(torch.isfinite(p).all()) for p in method.parameters())


def test_trainer_checks_nonfinite_reaches_nested_objectives():
    holder = torch.nn.ModuleDict({"outer": torch.nn.ModuleList([InfoNCE(), make_objective("supcon")])})
    trainer_checks_nonfinite(holder)
    assert [module.check_finite for module in holder["outer"]] == [False, False]
    assert InfoNCE().check_finite is None  # other instances keep the module default


# ------------------------------------------------------------------------------------ FIFOs and devices as input


@pytest.fixture
def fifo(tmp_path) -> Path:
    if not hasattr(os, "mkfifo"):
        pytest.skip("no named pipes on this platform")
    path = tmp_path / "texts.txt"
    os.mkfifo(path)
    return path


@pytest.mark.parametrize("how", ["require_file", "iter_lines", "check_regular_file"])
def test_a_fifo_is_named_as_a_fifo(fifo, how):
    call = {"require_file": require_file, "iter_lines": lambda p: list(iter_lines(p)), "check_regular_file": check_regular_file}
    with pytest.raises(NotRegularFileError, match=r"is a FIFO \(named pipe\), not a regular file") as caught:
        call[how](fifo)
    assert str(fifo) in str(caught.value) and "does not exist" not in str(caught.value)


def test_a_character_device_is_named_as_a_device():
    assert special_file_kind("/dev/null") == "a character device"
    with pytest.raises(NotRegularFileError, match="/dev/zero is a character device"):
        require_file("/dev/zero")


def test_a_missing_file_and_a_broken_link_are_still_missing(tmp_path):
    with pytest.raises(MissingDataError, match="not found"):
        require_file(tmp_path / "absent.txt")
    link = tmp_path / "link.txt"
    link.symlink_to(tmp_path / "absent.txt")
    with pytest.raises(MissingDataError, match="does not exist .a broken symbolic link."):
        check_regular_file(link)
    assert special_file_kind(tmp_path / "absent.txt") is None


def test_a_link_to_a_fifo_is_named_as_a_fifo(fifo, tmp_path):
    link = tmp_path / "link.txt"
    link.symlink_to(fifo)
    with pytest.raises(NotRegularFileError, match="FIFO"):
        require_file(link)


def test_a_training_data_file_that_is_a_fifo_is_named(tmp_path):
    path = tmp_path / "pairs.csv"
    os.mkfifo(path)
    with pytest.raises(NotRegularFileError, match=r"pairs.csv is a FIFO"):
        open_file(str(path))


@pytest.mark.parametrize("special", ["fifo", "/dev/zero", "/dev/null"])
def test_encode_names_a_fifo_or_a_device_input_in_one_line(special, tmp_path, tiny_bert_path, capsys):
    if special == "fifo":
        source = tmp_path / "texts.txt"
        os.mkfifo(source)
        kind = "a FIFO (named pipe)"
    else:
        source, kind = Path(special), "a character device"
    output = tmp_path / "e.npy"
    code, _, stderr = run(["encode", "-m", tiny_bert_path, "-i", str(source), "-o", str(output), "--no-progress"],
                          capsys)  # fmt: skip
    assert code == 2
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert lines == [f"error: input file {source} is {kind}, not a regular file: give a regular file (contrastext "
                     "does not read pipes or devices: reading one could block or never end)"]  # fmt: skip
    assert not output.exists()


def test_train_names_a_fifo_data_file_in_one_line(tmp_path, tiny_bert_path, capsys):
    data = tmp_path / "sentences.txt"
    os.mkfifo(data)
    output = tmp_path / "run"
    code, _, stderr = run([
        "train", "simcse-unsup", "--set", f"model={tiny_bert_path}", f"data.path={data}", "data.task=null",
        "eval.tasks=[]", "train.max_steps=1", "--output", str(output),
    ], capsys)  # fmt: skip
    assert code == 2, stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "is a FIFO (named pipe)" in lines[0], stderr
    assert str(data) in lines[0]
    assert not (output / "train_log.jsonl").exists()
