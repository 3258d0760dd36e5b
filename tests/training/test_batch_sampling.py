"""training/batch_sampling.py: ``data.batch_sampler`` chooses the trainer's batches; ``no_duplicates`` batches reach
the method without a repeated text, and a resumed run ends with the weights of an uninterrupted one."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from contrastext.data.batch_samplers import NoDuplicatesBatchSampler
from contrastext.data.examples import Example
from contrastext.data.sampling import LengthGroupedBatchSampler, RandomBatchSampler
from contrastext.errors import ConfigError
from contrastext.training.batch_sampling import check_batch_sampler, make_batch_sampler
from contrastext.training.config import TrainConfig, load_config
from contrastext.training.trainer import Trainer, check_resume_matches
from tests.training._tiny_training import TinyMethod, build, sentences

RECIPES = Path(__file__).resolve().parents[2] / "recipes"


def with_duplicates() -> list[Example]:
    """60 rows, the first 20 sentences twice: a random batch of 8 often holds a pair."""
    return sentences(40) + sentences(20)


def config(output_dir, sampler: str = "no_duplicates", **train) -> TrainConfig:
    settings = {"max_steps": 12, "batch_size": 8, "lr": 1e-3, "log_every": 1, "save_every": 2, "grad_accumulation": 2,
                "schedule": "constant", "progress_bar": False, "mixed_precision": "no", **train}
    return TrainConfig(method="tiny", model="tiny", output_dir=str(output_dir), seed=3, train=settings,
                       data={"batch_sampler": sampler})


class Recording(TinyMethod):
    """The tiny method, keeping the texts of every batch it collates."""

    seen: list[list[str]]

    def collate(self, examples):
        self.seen = getattr(self, "seen", [])
        self.seen.append([example.texts[0] for example in examples])
        return super().collate(examples)


def test_the_key_names_the_sampler_and_a_wrong_value_is_named(tmp_path):
    assert config(tmp_path, "batch_sampler").data.batch_sampler == "batch_sampler"
    assert TrainConfig(method="tiny", model="tiny", output_dir="x", train={"max_steps": 1}).data.batch_sampler == (
        "batch_sampler"
    )
    with pytest.raises(ConfigError, match=r"--set data\.batch_sampler .*data\.batch_sampler: .*no_duplicates"):
        load_config(RECIPES / "mnrl.yaml", ["data.batch_sampler=no_duplicate"])
    # sentence-transformers' training argument, written in the train section: pointed to the data section
    with pytest.raises(ConfigError, match=r"train\.batch_sampler: unknown key; did you mean data\.batch_sampler\?"):
        load_config(RECIPES / "mnrl.yaml", ["train.batch_sampler=no_duplicates"])


def test_the_sampler_follows_the_config(tmp_path):
    examples = with_duplicates()
    assert isinstance(make_batch_sampler(config(tmp_path, "batch_sampler"), examples, 3), RandomBatchSampler)
    grouped = config(tmp_path, "batch_sampler", group_by_length=True)
    assert isinstance(make_batch_sampler(grouped, examples, 3), LengthGroupedBatchSampler)
    sampler = make_batch_sampler(config(tmp_path), examples, 3)
    assert isinstance(sampler, NoDuplicatesBatchSampler) and sampler.drop_last and sampler.batch_size == 8
    assert sampler.batches(0) == NoDuplicatesBatchSampler([e.texts for e in examples], 8, 3).batches(0)


def test_no_duplicates_with_group_by_length_is_refused_naming_both(tmp_path):
    with pytest.raises(ConfigError, match=r"no_duplicates .*cannot also group them by length.*train\.group_by_length"):
        check_batch_sampler(config(tmp_path, group_by_length=True))
    loaded = load_config(RECIPES / "mnrl.yaml", ["data.batch_sampler=no_duplicates", "train.group_by_length=true"])
    with pytest.raises(ConfigError, match=r"^--set data\.batch_sampler \(over .*mnrl\.yaml\): "):
        check_batch_sampler(loaded)


def test_the_trainer_s_batches_hold_no_text_twice(tmp_path, minilm_path, one_thread):
    method = build(minilm_path)
    method.__class__ = Recording
    Trainer(method, with_duplicates(), config(tmp_path, max_steps=6, save_every=None)).train()
    assert len(method.seen) == 12  # 6 steps of 2 micro-batches
    for texts in method.seen:
        assert len(texts) == 8 and len(set(texts)) == 8, texts
    random_order = build(minilm_path)
    random_order.__class__ = Recording
    Trainer(random_order, with_duplicates(), config(tmp_path / "random", "batch_sampler", max_steps=6,
                                                   save_every=None)).train()
    assert any(len(set(texts)) < len(texts) for texts in random_order.seen)  # the data does repeat texts


def test_a_resumed_run_ends_with_the_weights_of_an_uninterrupted_one(tmp_path, minilm_path, one_thread):
    """7 batches an epoch, 2 a step: the run stops at step 5, mid-epoch (epoch 1, batch 3), and skips ahead there."""
    straight = build(minilm_path)
    Trainer(straight, with_duplicates(), config(tmp_path / "straight")).train()
    first = build(minilm_path)
    Trainer(first, with_duplicates(), config(tmp_path / "resumed", max_steps=5)).train()
    resumed = build(minilm_path, init_seed=7)
    Trainer(resumed, with_duplicates(), config(tmp_path / "resumed")).train(resume=True)
    expected = straight.state_dict()
    for name, value in resumed.state_dict().items():
        assert torch.equal(value, expected[name]), name


def test_a_resume_with_another_batch_sampler_is_refused_naming_it(tmp_path, minilm_path, one_thread):
    """The batches so far came from one sampler: continuing with the other would be half one run, half another."""
    Trainer(build(minilm_path), with_duplicates(), config(tmp_path, max_steps=2)).train()
    check_resume_matches(config(tmp_path, max_steps=4))  # the same sampler: accepted
    with pytest.raises(ConfigError, match=r"data\.batch_sampler"):
        check_resume_matches(config(tmp_path, "batch_sampler", max_steps=4))
