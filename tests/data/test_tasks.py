"""The task registry: names, specs, splits, loading from the data root, missing-data errors, holdout."""

from __future__ import annotations

from pathlib import Path

import pytest

from contrastext.data.tasks import get_task, holdout_split, load_task, parse_task_spec, task_names
from contrastext.errors import ContrastextError, MissingDataError, UnknownNameError

REQUIRED_NAMES = [
    "stsb", "sts12", "sts13", "sts14", "sts15", "sts16", "sickr", "sst2", "sst5", "mrpc", "cola", "rte",
    "qnli", "qqp", "snli", "nli-triplets", "wiki1m", "minbert-sst", "minbert-sts", "minbert-quora",
]  # fmt: skip


def test_registry_has_the_required_tasks_with_valid_fields() -> None:
    assert set(REQUIRED_NAMES) <= set(task_names())
    for name in task_names():
        task = get_task(name)
        assert task.name == name
        assert task.default_split in task.splits
        assert task.kind in {"sts", "single", "pair", "regression", "sentences", "triplets"}
        assert task.metric in {"spearman", "accuracy", "f1", "mcc", "pearson", None}
        if task.label_names is not None:
            assert len(task.label_names) == task.num_labels


def test_bare_names_mean_the_split_the_literature_reports() -> None:
    defaults = {name: parse_task_spec(name)[1] for name in ("stsb", "sickr", "sts12", "sst2", "mrpc", "qqp", "cola")}
    assert defaults == {
        "stsb": "test", "sickr": "test", "sts12": "test",
        "sst2": "dev", "mrpc": "dev", "qqp": "dev", "cola": "dev",
    }  # fmt: skip


def test_parse_task_spec() -> None:
    task, split = parse_task_spec("stsb:dev")
    assert (task.name, split) == ("stsb", "dev")
    assert parse_task_spec("STSB:train")[1] == "train"
    with pytest.raises(UnknownNameError, match=r"no split 'validation'; its splits: train, dev, test"):
        parse_task_spec("stsb:validation")


def test_unknown_task_lists_the_names() -> None:
    with pytest.raises(UnknownNameError, match=r"unknown task 'stsbb'; known tasks: .*sickr.*stsb"):
        get_task("stsbb")


@pytest.mark.parametrize(
    ("spec", "rows"),
    [
        ("stsb:train", 5749),
        ("stsb:dev", 1500),
        ("sickr:train", 4500),
        ("sickr:dev", 500),
        ("sst2", 872),
        ("sst5:dev", 1101),
        ("mrpc", 408),
        ("cola", 1043),
        ("rte", 277),
        ("qnli", 5463),
        ("qqp", 23497),
        ("snli:dev", 9842),
        ("nli-triplets", 5883),
        ("wiki1m", 11914),
        ("minbert-sst:train", 8544),
        ("minbert-sts", 863),
    ],
)
def test_load_task_row_counts(data_root: Path, spec: str, rows: int) -> None:
    data = load_task(spec, data_root=data_root)
    assert len(data.examples) == rows
    assert data.skipped == 0
    assert data.subsets is None
    assert data.path is not None and data.path.is_relative_to(data_root)


def test_sts12_has_subsets(data_root: Path) -> None:
    data = load_task("sts12", data_root=data_root)
    assert data.split == "test"
    assert len(data.examples) == 3108
    assert sorted(data.subsets) == ["MSRpar", "MSRvid", "SMTeuroparl", "surprise.OnWN", "surprise.SMTnews"]
    assert sum(len(subset) for subset in data.subsets.values()) == 3108


def test_minbert_quora_counts_its_skipped_rows(data_root: Path) -> None:
    data = load_task("minbert-quora", data_root=data_root)
    assert (len(data.examples), data.skipped) == (20212, 2)


def test_data_root_from_environment(data_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONTRASTEXT_DATA", str(data_root))
    assert len(load_task("sickr", split="dev").examples) == 500
    assert len(load_task(get_task("stsb"), split="dev").examples) == 1500


def test_conflicting_splits_are_an_error(data_root: Path) -> None:
    with pytest.raises(ContrastextError, match="names split 'dev' but split='train'"):
        load_task("stsb:dev", data_root=data_root, split="train")


def test_missing_split_names_the_path_and_the_data_root(data_root: Path) -> None:
    with pytest.raises(MissingDataError) as caught:
        load_task("stsb", data_root=data_root)  # the test split is not in the shared copy
    message = str(caught.value)
    assert str(data_root / "stsb/original/sts-test.csv") in message
    assert "--data-root" in message and "$CONTRASTEXT_DATA" in message


def test_missing_qqp_names_both_candidates(tmp_path: Path) -> None:
    with pytest.raises(MissingDataError) as caught:
        load_task("qqp:dev", data_root=tmp_path)
    message = str(caught.value)
    assert str(tmp_path / "glue/QQP/dev.tsv") in message
    assert str(tmp_path / "glue/QQP/subset_dev_23497.tsv") in message


def test_full_file_wins_over_the_reduced_copy(tmp_path: Path) -> None:
    folder = tmp_path / "wiki1m"
    folder.mkdir()
    (folder / "wiki1m_for_simcse.txt").write_text("full one\nfull two\n")
    (folder / "wiki1m_for_simcse.head11914.txt").write_text("head\n")
    assert [example.texts for example in load_task("wiki1m", data_root=tmp_path).examples] == [
        ("full one",),
        ("full two",),
    ]


def test_no_data_root_at_all(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CONTRASTEXT_DATA", raising=False)
    with pytest.raises(MissingDataError, match="--data-root"):
        load_task("stsb:dev")


def test_holdout_split_is_fixed_seeded_and_complete() -> None:
    items = list(range(100))
    kept, held_out = holdout_split(items, 0.2, seed=13)
    assert len(held_out) == 20 and len(kept) == 80
    assert sorted(kept + held_out) == items
    assert kept == sorted(kept) and held_out == sorted(held_out)
    assert holdout_split(items, 0.2, seed=13) == (kept, held_out)
    assert holdout_split(items, 0.2, seed=14)[1] != held_out
    with pytest.raises(ValueError, match="fraction"):
        holdout_split(items, 1.0, seed=0)
