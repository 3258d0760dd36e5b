"""Data fingerprints (issue 21, item 3): what a resume compares with the data the checkpoint was trained on."""

from __future__ import annotations

import hashlib
import os

from contrastext.runtime.fingerprint import (
    MIB,
    allow_data_change,
    data_change_allowed,
    data_changes,
    data_fingerprints,
    fingerprint,
)


def test_a_small_file_is_hashed_whole_and_a_large_one_by_its_first_and_last_mib(tmp_path):
    small = tmp_path / "small.txt"
    small.write_bytes(b"x" * (2 * MIB))
    record = fingerprint(small)
    assert record["size"] == 2 * MIB and record["sha256"] == hashlib.sha256(small.read_bytes()).hexdigest()
    large = tmp_path / "large.bin"
    body = os.urandom(2 * MIB + 10)
    large.write_bytes(body)
    record = fingerprint(large)
    assert "sha256" not in record
    assert record["sha256_head"] == hashlib.sha256(body[:MIB]).hexdigest()
    assert record["sha256_tail"] == hashlib.sha256(body[-MIB:]).hexdigest()


def test_a_new_mtime_alone_is_no_change_but_new_bytes_are(tmp_path):
    data = tmp_path / "pairs.csv"
    data.write_text("a,b\n", encoding="utf-8")
    before = data_fingerprints([("data.path", data), ("data.eval_path", None), ("data.dataset", "hub/name")])
    assert set(before) == {"data.path"}  # None and a hub name are not local data
    os.utime(data, (data.stat().st_mtime + 60,) * 2)
    assert data_changes(before, data_fingerprints([("data.path", data)])) == []
    data.write_text("a,c\n", encoding="utf-8")
    assert data_changes(before, data_fingerprints([("data.path", data)])) == [
        f"data.path: {data} changed (same size, other content)"
    ]
    data.write_text("a,longer\n", encoding="utf-8")
    assert data_changes(before, data_fingerprints([("data.path", data)])) == [
        f"data.path: {data} changed (4 -> 9 bytes)"
    ]
    assert data_changes(before, {}) == [f"data.path {data} is no longer read (or no longer exists)"]


def test_a_dataset_folder_is_compared_file_by_file_leaving_caches_and_hidden_files_out(tmp_path):
    folder = tmp_path / "dataset"
    (folder / "train").mkdir(parents=True)
    (folder / "train" / "data-00000-of-00001.arrow").write_bytes(b"rows")
    (folder / "dataset_dict.json").write_text("{}", encoding="utf-8")
    before = data_fingerprints([("data.dataset", folder)])
    (folder / "train" / "cache-0123.arrow").write_bytes(b"a map's cache")
    (folder / ".lock").write_text("", encoding="utf-8")
    assert data_changes(before, data_fingerprints([("data.dataset", folder)])) == []
    (folder / "train" / "data-00000-of-00001.arrow").write_bytes(b"other rows")
    (folder / "train" / "extra.arrow").write_bytes(b"x")
    changes = data_changes(before, data_fingerprints([("data.dataset", folder)]))
    assert changes == [f"data.dataset: {folder}/train/data-00000-of-00001.arrow changed (4 -> 10 bytes)",
                       f"data.dataset: {folder}/train/extra.arrow was added"]


def test_allow_data_change_holds_for_its_block_only():
    assert not data_change_allowed()
    with allow_data_change():
        assert data_change_allowed()
        with allow_data_change(False):
            assert not data_change_allowed()
    assert not data_change_allowed()
