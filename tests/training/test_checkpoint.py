"""Checkpoints: atomic writes, tied tensors, RNG states, the latest pointer and pruning."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
import torch
from torch import nn

from contrastext.errors import CorruptFileError, MissingDataError
from contrastext.training.checkpoint import (
    FINGERPRINT_FILE,
    STATE_FILE,
    TrainerState,
    atomic_write_text,
    latest_checkpoint,
    load_checkpoint,
    prune_checkpoints,
    read_data_fingerprint,
    read_manifest,
    read_trainer_state,
    save_checkpoint,
    write_manifest,
)
from contrastext.training.schedules import build_optimizer, build_scheduler


class Tied(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(10, 4)
        self.out = nn.Linear(4, 10, bias=False)
        self.out.weight = self.embed.weight
        self.norm = nn.LayerNorm(4)
        self.register_buffer("queue", torch.zeros(3, 4))


def _parts():
    model = Tied()
    optimizer = build_optimizer(model, lr=0.1, weight_decay=0.01)
    scheduler = build_scheduler(optimizer, "linear", total_steps=10, warmup_steps=2)
    return model, optimizer, scheduler


def test_roundtrip_restores_weights_tied_tensors_optimizer_and_rng(tmp_path):
    model, optimizer, scheduler = _parts()
    loss = model.out(model.embed(torch.tensor([1, 2]))).sum()
    loss.backward()
    optimizer.step()
    scheduler.step()
    model.queue.fill_(3.0)
    state = TrainerState(step=1, epoch=0, batch_index=1, best_metric=0.5, best_step=1)
    folder = save_checkpoint(tmp_path, model, optimizer, scheduler, state, "seed: 1\n")
    expected_random = (random.random(), np.random.rand(), torch.rand(2))

    other, other_optimizer, other_scheduler = _parts()
    restored = load_checkpoint(folder, other, other_optimizer, other_scheduler)
    assert restored == state
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, other.state_dict()[name]), name
    assert other.out.weight.data_ptr() == other.embed.weight.data_ptr()  # still tied
    assert other_scheduler.get_last_lr() == scheduler.get_last_lr()
    assert other_optimizer.state_dict()["state"].keys() == optimizer.state_dict()["state"].keys()
    assert (random.random(), np.random.rand()) == expected_random[:2]
    assert torch.equal(torch.rand(2), expected_random[2])


def test_latest_pointer_and_pruning(tmp_path):
    model, optimizer, scheduler = _parts()
    for step in (2, 4, 6):
        save_checkpoint(tmp_path, model, optimizer, scheduler, TrainerState(step=step), "")
        prune_checkpoints(tmp_path, keep_last=2)
    assert latest_checkpoint(tmp_path).name == "step-000006"
    assert sorted(p.name for p in (tmp_path / "checkpoints").glob("step-*")) == ["step-000004", "step-000006"]
    assert not list((tmp_path / "checkpoints").glob(".*"))  # no temporary leftovers
    # A half-written newest folder (no state file) is never picked.
    (tmp_path / "checkpoints" / "step-000008").mkdir()
    (tmp_path / "checkpoints" / "latest").write_text("step-000008\n")
    assert latest_checkpoint(tmp_path).name == "step-000006"


def test_incomplete_checkpoint_is_a_clear_error(tmp_path):
    model, optimizer, scheduler = _parts()
    with pytest.raises(MissingDataError, match="not a complete checkpoint"):
        load_checkpoint(tmp_path, model, optimizer, scheduler)


def test_atomic_write_replaces_whole_file(tmp_path):
    path = tmp_path / "latest"
    atomic_write_text(path, "a\n")
    atomic_write_text(path, "b\n")
    assert path.read_text() == "b\n"
    assert [p.name for p in tmp_path.iterdir()] == ["latest"]


# ------------------------------------------------------------------ issue 10: manifest, fallback, temporaries


def test_each_checkpoint_records_a_manifest_of_sizes_and_checksums(tmp_path):
    import json

    from contrastext.training.checkpoint import MANIFEST_FILE, file_sha256, verify_checkpoint

    model, optimizer, scheduler = _parts()
    folder = save_checkpoint(tmp_path, model, optimizer, scheduler, TrainerState(step=3), "seed: 1\n")
    files = json.loads((folder / MANIFEST_FILE).read_text())["files"]
    assert set(files) == {p.name for p in folder.iterdir()} - {MANIFEST_FILE}
    for name, entry in files.items():
        assert entry == {"size": (folder / name).stat().st_size, "sha256": file_sha256(folder / name)}
    assert verify_checkpoint(folder) == folder


def test_is_complete_sees_a_truncated_file_without_reading_it(tmp_path):
    from contrastext.training.checkpoint import is_complete

    model, optimizer, scheduler = _parts()
    folder = save_checkpoint(tmp_path, model, optimizer, scheduler, TrainerState(step=2), "")
    assert is_complete(folder)
    data = (folder / "optimizer.pt").read_bytes()
    (folder / "optimizer.pt").write_bytes(data[:-10])
    assert not is_complete(folder)
    assert latest_checkpoint(tmp_path) is None  # the only checkpoint is damaged


def test_a_damaged_checkpoint_is_a_one_line_error_naming_the_file(tmp_path):
    from contrastext.errors import CorruptFileError

    model, optimizer, scheduler = _parts()
    folder = save_checkpoint(tmp_path, model, optimizer, scheduler, TrainerState(step=2), "")
    path = folder / "method.safetensors"
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF  # same size, different bytes
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptFileError, match=r"method\.safetensors: its SHA-256 differs") as caught:
        load_checkpoint(folder, *_parts())
    assert "\n" not in str(caught.value)


def test_latest_intact_checkpoint_ignores_folders_newer_than_the_pointer(tmp_path, caplog):
    import logging

    from contrastext.training.checkpoint import latest_intact_checkpoint

    model, optimizer, scheduler = _parts()
    for step in (2, 4, 6):
        save_checkpoint(tmp_path, model, optimizer, scheduler, TrainerState(step=step), "")
    (tmp_path / "checkpoints" / "latest").write_text("step-000004\n")  # resumed from 4: 6 is another branch
    assert latest_intact_checkpoint(tmp_path).name == "step-000004"
    data = (tmp_path / "checkpoints" / "step-000004" / "rng.pt").read_bytes()
    (tmp_path / "checkpoints" / "step-000004" / "rng.pt").write_bytes(data[:20])
    with caplog.at_level(logging.WARNING, logger="contrastext.training"):
        assert latest_intact_checkpoint(tmp_path).name == "step-000002"
    assert "rng.pt" in caplog.text
    (tmp_path / "checkpoints" / "latest").unlink()  # no pointer: the newest intact one
    assert latest_intact_checkpoint(tmp_path).name == "step-000006"
    assert latest_intact_checkpoint(tmp_path / "nothing-here") is None


def test_clean_stale_temporaries_removes_leftovers_and_restores_a_moved_folder(tmp_path):
    from contrastext.training.checkpoint import (
        TEMPORARY_PREFIX,
        clean_stale_temporaries,
        write_folder_atomically,
    )

    model, optimizer, scheduler = _parts()
    save_checkpoint(tmp_path, model, optimizer, scheduler, TrainerState(step=2), "")
    P = TEMPORARY_PREFIX
    hexes = [f"{index:032x}" for index in range(5)]
    checkpoints = tmp_path / "checkpoints"
    leftovers = [
        checkpoints / f"{P}step-000004.{hexes[0]}.tmp",  # a checkpoint being written when killed
        tmp_path / f"{P}best.{hexes[1]}.tmp",  # a best export being written
        checkpoints / f"{P}latest.{hexes[2]}.tmp",  # the pointer being rewritten (a file)
        tmp_path / f"{P}train_log.jsonl.{hexes[0]}.tmp",  # a log rewrite
    ]
    for path in leftovers[:2]:
        (path / "sub").mkdir(parents=True)
        (path / "sub" / "weights").write_bytes(b"x" * 100)
    leftovers[2].write_text("step-000004\n")
    leftovers[3].write_text("{}\n")
    # A folder moved aside for a replacement: put back when its name is free, deleted when not.
    (tmp_path / "final").mkdir()
    (tmp_path / f"{P}final.{hexes[3]}.old").mkdir()
    moved_best = tmp_path / f"{P}best.{hexes[4]}.old"
    moved_best.mkdir()
    (moved_best / "kept").write_text("the previous best\n")
    # A user's files, some looking like another tool's temporaries (issue 21, item 2): never touched.
    user_files = [tmp_path / "notes.tmp", tmp_path / ".hidden", checkpoints / "step-000002",
                  tmp_path / f".X.{hexes[0]}.tmp", tmp_path / f".best.{hexes[1]}.old", tmp_path / "train_log.jsonl.tmp"]
    for path in user_files[:2] + user_files[3:]:
        path.write_text("mine")

    touched = clean_stale_temporaries(tmp_path)

    assert all(not path.exists() for path in leftovers)
    assert not (tmp_path / f"{P}final.{hexes[3]}.old").exists() and (tmp_path / "final").is_dir()
    assert (tmp_path / "best" / "kept").read_text() == "the previous best\n"
    assert all(path.exists() for path in user_files)
    assert len(touched) == 6
    assert latest_checkpoint(tmp_path).name == "step-000002"
    write_folder_atomically(tmp_path / "best", lambda folder: (folder / "x").write_text("new"))
    assert clean_stale_temporaries(tmp_path) == []
    assert clean_stale_temporaries(tmp_path / "missing") == []


# ------------------------------------------------------------------ issue 21, item 3: what a resume reads


def _saved(tmp_path, step: int = 1, **extra):
    model, optimizer, scheduler = _parts()
    for _ in range(step):
        optimizer.step()  # no gradients: nothing moves, but the scheduler is stepped in the right order
        scheduler.step()
    return save_checkpoint(tmp_path, model, optimizer, scheduler, TrainerState(step=step), "seed: 1\n", **extra)


def _rewrite(folder, name: str, write) -> None:
    write(folder / name)
    write_manifest(folder)  # re-hashed: the manifest alone cannot tell a forged file


@pytest.mark.parametrize(
    ("state", "key"),
    [({"step": "three"}, "'step'"), ({"step": -2}, "'step'"), ({"step": 1.0}, "'step'"),
     ({"step": 1, "epoch": None}, "'epoch'"), ({"step": 1, "best_metric": float("nan"), "best_step": 1}, "best_metric"),
     ({"step": 1, "best_step": 1}, "best_metric and best_step"), ({"step": 1, "stopped_early": 1}, "'stopped_early'")],
)
def test_read_trainer_state_refuses_off_schema_values_naming_the_key(tmp_path, state, key):
    path = tmp_path / "trainer_state.json"
    path.write_text(json.dumps(state), encoding="utf-8")
    with pytest.raises(CorruptFileError, match="invalid trainer state") as refused:
        read_trainer_state(path)
    assert str(path) in str(refused.value) and key in str(refused.value)


def test_read_trainer_state_keeps_unknown_keys_out_and_checks_the_plan(tmp_path):
    path = tmp_path / "trainer_state.json"
    path.write_text(json.dumps({"step": 5, "epoch": 1, "a_future_key": [1]}), encoding="utf-8")
    assert read_trainer_state(path, total_steps=5) == TrainerState(step=5, epoch=1)
    with pytest.raises(CorruptFileError, match=r"key 'step' is 5, beyond the run's 4 planned steps"):
        read_trainer_state(path, total_steps=4)


def test_load_checkpoint_refuses_a_forged_step_before_restoring_anything(tmp_path):
    folder = _saved(tmp_path, step=2)
    model, optimizer, scheduler = _parts()
    before = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    with pytest.raises(CorruptFileError, match="beyond the run's 1 planned steps"):
        load_checkpoint(folder, model, optimizer, scheduler, total_steps=1)
    _rewrite(folder, STATE_FILE, lambda path: path.write_text(json.dumps({"step": 1}), encoding="utf-8"))
    with pytest.raises(CorruptFileError, match="key 'step' is 1 but the checkpoint is step-000002"):
        load_checkpoint(folder, model, optimizer, scheduler)
    assert all(torch.equal(before[name], tensor) for name, tensor in model.state_dict().items())


def test_a_step_below_the_scheduler_s_count_is_refused(tmp_path):
    folder = _saved(tmp_path, step=3)
    renamed = folder.with_name("step-000001")
    folder.rename(renamed)
    _rewrite(renamed, STATE_FILE, lambda path: path.write_text(json.dumps({"step": 1}), encoding="utf-8"))
    with pytest.raises(CorruptFileError, match="key 'step' is 1 but scheduler.pt has taken 3 steps"):
        load_checkpoint(renamed, *_parts())


@pytest.mark.parametrize("damage", ["cpu state shortened", "cpu state float", "numpy key shortened", "no python"])
def test_an_rng_state_of_the_wrong_shape_is_refused_naming_the_key(tmp_path, damage):
    folder = _saved(tmp_path)

    def write(path):
        state = torch.load(path, weights_only=True)
        if damage == "cpu state shortened":
            state["torch"] = state["torch"][:100]
        elif damage == "cpu state float":
            state["torch"] = state["torch"].float()
        elif damage == "numpy key shortened":
            state["numpy"]["key"] = state["numpy"]["key"][:10]
        else:
            del state["python"]
        torch.save(state, path)

    _rewrite(folder, "rng.pt", write)
    key = {"cpu state shortened": "'torch'", "cpu state float": "'torch'", "numpy key shortened": "'numpy.key'",
           "no python": "'python'"}[damage]
    with pytest.raises(CorruptFileError, match="invalid RNG state") as refused:
        load_checkpoint(folder, *_parts())
    assert key in str(refused.value) and "rng.pt" in str(refused.value)


def test_an_optimizer_state_of_another_model_is_one_error_naming_the_file(tmp_path):
    folder = _saved(tmp_path)
    small = nn.Linear(2, 2)
    _rewrite(folder, "optimizer.pt",
             lambda path: torch.save(build_optimizer(small, lr=0.1, weight_decay=0.0).state_dict(), path))
    with pytest.raises(CorruptFileError, match="does not fit this run") as refused:
        load_checkpoint(folder, *_parts())
    assert "optimizer.pt" in str(refused.value)


def test_the_data_fingerprint_is_saved_in_the_checkpoint_and_its_manifest(tmp_path):
    recorded = {"data.path": {"path": "x.txt", "fingerprint": {"size": 3, "mtime": 1.0, "sha256": "ab"}}}
    folder = _saved(tmp_path, data_fingerprint=recorded)
    assert read_data_fingerprint(folder) == recorded
    assert FINGERPRINT_FILE in read_manifest(folder)
    assert read_data_fingerprint(_saved(tmp_path / "old")) is None  # no fingerprint given: none written
    (folder / FINGERPRINT_FILE).write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(CorruptFileError, match="unreadable data fingerprint"):
        read_data_fingerprint(folder)
