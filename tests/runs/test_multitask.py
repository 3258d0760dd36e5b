"""Multi-task BERT on small slices of the minBERT SST-5 / Quora / STS files: samplers, PCGrad, SimCSE pre-step."""

from __future__ import annotations

import math

import pytest
import torch

from contrastext.data.sampling import JointTaskBatchSampler
from contrastext.errors import ConfigError
from contrastext.methods.multitask import MultitaskArgs
from contrastext.methods.pcgrad import pcgrad
from contrastext.runs.data import load_multitask_data
from contrastext.runs.multitask import build
from contrastext.runs.registry import run_recipe
from tests.runs.recipe_runs import read_log, recipe_config, train_overrides

TASKS = ("minbert-sst", "minbert-quora", "minbert-sts")
FAST = [
    *train_overrides(epochs=None, max_steps=3, batch_size=4, lr="1e-4", warmup_ratio=0, eval_every=None),
    "data.max_length=24",
    "data.limit=4",  # one batch per task: sequential and round-robin visit all three in 3 steps
    "eval.limit=12",
]


@pytest.fixture(scope="module")
def tiny_bert(make_tiny_bert) -> str:
    """A randomly initialised 2-layer, 64-wide BERT with all-MiniLM-L6-v2's vocabulary (tests/conftest.py).

    The tests check the mechanics (samplers, parts, PCGrad, pre-step), not scores; a tiny backbone keeps
    them within budget on 2 shared CPU cores. The recipe's default model is all-MiniLM-L6-v2.
    """
    return make_tiny_bert(hidden_size=64)


def fast_config(tmp_path, model_path, *overrides: str):
    return recipe_config("multitask", tmp_path, model_path, *FAST, *overrides)


@pytest.mark.parametrize("sampling", ["sequential", "round_robin", "proportional"])
def test_three_steps_with_each_sampler(tmp_path, tiny_bert, data_root, sampling):
    config = fast_config(tmp_path, tiny_bert, f"data.task_sampling={sampling}")
    summary = run_recipe(config, data_root=data_root)
    log = read_log(tmp_path)
    assert [record["step"] for record in log] == [1, 2, 3]
    seen = [name for record in log for name in TASKS if f"loss/{name}" in record]
    for record in log:
        parts = [record[f"loss/{name}"] for name in TASKS if f"loss/{name}" in record]
        assert len(parts) == 1 and math.isfinite(parts[0])  # one task per batch
    if sampling in ("sequential", "round_robin"):
        assert seen == list(TASKS)
    metrics = summary["metrics"]
    assert {"minbert-sst_dev_accuracy", "minbert-quora_dev_accuracy", "minbert-sts_dev_pearson", "mean",
            "score"} <= set(metrics)
    assert all(name == "mean" or name == "score" or name.split("_")[0] in TASKS for name in metrics)
    expected_mean = (metrics["minbert-sst_dev_accuracy"] + metrics["minbert-quora_dev_accuracy"]
                     + (metrics["minbert-sts_dev_pearson"] + 100) / 2) / 3  # scores are x100
    assert metrics["mean"] == pytest.approx(expected_mean)
    assert "holdout" in summary["report"]["tasks"]["minbert-quora"]["eval"]


def test_quora_holdout_is_fixed_and_disjoint(tmp_path, tiny_bert, data_root):
    config = fast_config(tmp_path, tiny_bert, "data.limit=null", "eval.limit=null", "data.tasks=[minbert-quora]")
    data = load_multitask_data(config, MultitaskArgs(), data_root)
    again = load_multitask_data(config, MultitaskArgs(), data_root)
    train_texts = {example.texts for example in data.train}
    eval_texts = [example.texts for example in data.eval["minbert-quora"]]
    assert eval_texts == [example.texts for example in again.eval["minbert-quora"]]
    assert len(eval_texts) == pytest.approx(0.2 * (len(train_texts) + len(eval_texts)), abs=50)
    assert not any(texts in train_texts for texts in eval_texts[:500])


def test_pcgrad_steps_use_every_task_and_project_the_shared_gradient(tmp_path, tiny_bert, data_root):
    config = fast_config(tmp_path, tiny_bert, "method_args.pcgrad=true")
    args = config.method_args_as(MultitaskArgs)
    bundle = build(config, args, data_root)
    method = bundle.method
    sampler = JointTaskBatchSampler([4, 4, 4], batch_size=4, seed=0)
    batch_indices = sampler.batches(0)[0]
    assert sorted(bundle.train_examples[i].task for i in batch_indices) == [0] * 4 + [1] * 4 + [2] * 4

    batch = method.collate([bundle.train_examples[i] for i in batch_indices])
    # forward takes the PCGrad path when the method is training; dropout stays off in its submodules.
    method.eval()
    method.training = True
    method.set_generator(torch.Generator().manual_seed(0))  # the random order of the projections
    parts = method(batch)
    assert set(parts) == {*TASKS, "pcgrad"} and float(parts["pcgrad"].detach()) == 0.0
    assert all(not parts[name].requires_grad for name in TASKS)
    method.total(parts).backward()
    weight = method.encoder.backbone.embeddings.word_embeddings.weight
    applied = weight.grad.clone()

    # By hand: per-task gradients of the same weight, projected with pcgrad() on the full shared vector.
    shared = [p for p in [*method.encoder.parameters(), *method.shared.parameters()] if p.requires_grad]
    flat = []
    for name in TASKS:
        loss = method.task_loss(name, batch[name])
        grads = torch.autograd.grad(loss, shared, allow_unused=True)
        flat.append(torch.cat([(torch.zeros_like(p) if g is None else g).reshape(-1) for g, p in zip(grads, shared, strict=True)]))
    combined = pcgrad(flat, generator=torch.Generator().manual_seed(0))
    offset = sum(p.numel() for p in shared[: next(i for i, p in enumerate(shared) if p is weight)])
    expected = combined[offset : offset + weight.numel()].view_as(weight)
    assert torch.allclose(applied, expected, atol=1e-6)
    conflicts = any(torch.dot(flat[i], flat[j]) < 0 for i in range(3) for j in range(i + 1, 3))
    assert conflicts == (not torch.allclose(combined, sum(flat), atol=1e-7))


def test_pcgrad_and_simcse_prestep_end_to_end(tmp_path, tiny_bert, data_root):
    config = fast_config(tmp_path, tiny_bert, "method_args.pcgrad=true", "method_args.simcse_steps=2",
                         "method_args.simcse_batch_size=8", "train.max_steps=2")
    summary = run_recipe(config, data_root=data_root)
    prestep = read_log(tmp_path / "simcse-prestep")
    assert [record["step"] for record in prestep] == [1, 2]
    assert all(math.isfinite(record["loss/infonce"]) for record in prestep)
    log = read_log(tmp_path)
    for record in log:
        assert all(math.isfinite(record[f"loss/{name}"]) for name in TASKS)
        assert record["loss/pcgrad"] == 0.0
    assert 0.0 <= summary["metrics"]["mean"] <= 100.0


def test_bad_settings_are_named(tmp_path, tiny_bert, data_root):
    with pytest.raises(ConfigError, match=r"method_args\.pcgrd"):
        run_recipe(fast_config(tmp_path, tiny_bert, "method_args.pcgrd=true"), data_root=data_root)
    with pytest.raises(ConfigError, match="eval.tasks"):
        run_recipe(fast_config(tmp_path, tiny_bert, "eval.tasks=[stsb:dev]"), data_root=data_root)
    with pytest.raises(ConfigError, match="loss_weights"):
        run_recipe(fast_config(tmp_path, tiny_bert, "method_args.loss_weights={sst: 2.0}"), data_root=data_root)
