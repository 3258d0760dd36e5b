"""RECLAIM end to end on a small slice of SST-2: banks move, ans is Eq. 6, the recipe is the paper's protocol."""

from __future__ import annotations

import logging
import math

import pytest
import torch
import torch.nn.functional as F

from contrastext.data.sampling import RandomBatchSampler
from contrastext.data.tasks import load_task
from contrastext.errors import ConfigError
from contrastext.negatives.search import IVFSearch
from contrastext.runs.data import load_classification_data
from contrastext.runs.reclaim import (
    ReclaimArgs,
    build,
    labelled_subset,
    say_semi_supervised_k,
    search_arguments,
)
from contrastext.runs.registry import get_recipe
from contrastext.runs.stages import run_training
from contrastext.training.config import validate_method_args
from tests.objectives.naive_objectives import reclaim_ans
from tests.runs.recipe_runs import read_log, recipe_config, train_overrides
from tests.runs.test_own_data import write_reviews

FAST = [
    *train_overrides(max_steps=3, batch_size=8, lr="1e-4", warmup_ratio=0, eval_every=None),
    "data.max_length=32",
    "data.limit=64",
    "eval.limit=16",
    "method_args.k=4",
]


def config_and_args(tmp_path, model_path, *overrides: str):
    config = recipe_config("reclaim", tmp_path, model_path, *FAST, *overrides)
    return config, config.method_args_as(get_recipe("reclaim").args_model)


def test_recipe_defaults_are_the_papers(tmp_path):
    """λ = 0.1 (§5), K = 100 (§5.1), batch 32, lr 2e-5, 3 epochs (appendix C), critic width 64 (appendix),
    Eq. 6's halved sums, N(0, I) banks (§3.4), all labelled rows (the supervised setting)."""
    config = recipe_config("reclaim", tmp_path, "bundled:all-MiniLM-L6-v2")
    args = config.method_args_as(ReclaimArgs)
    assert (config.train.epochs, config.train.max_steps) == (3, None)
    assert (config.train.batch_size, config.train.lr) == (32, 2e-5)
    assert config.train.metric_for_best is None  # the final weights are reported, as the paper's dev numbers
    assert (args.lam, args.k, args.critic_hidden) == (0.1, 100, 64)
    assert (args.negative_reduction, args.bank_init, args.negatives) == ("half_sum", "gaussian", "topk")
    assert args.labelled_fraction is None
    assert ReclaimArgs().model_dump() == args.model_dump()  # the recipe and the model agree


def test_a_default_run_refreshes_every_bank_row_more_than_once(tmp_path, data_root):
    """The default run's batches (the trainer's sampler, its step count) visit every SST-2 training row ≥ 2 times."""
    config = recipe_config("reclaim", tmp_path, "bundled:all-MiniLM-L6-v2")
    train = config.train
    size = len(load_task("sst2", data_root, split="train").examples)
    sampler = RandomBatchSampler(size, train.batch_size, config.train_seed, train.drop_last)
    steps = int(train.epochs * len(sampler.batches(0)))  # Trainer.total_steps without max_steps
    assert steps == 3 * math.ceil(67349 / 32)
    visits = torch.zeros(size, dtype=torch.long)
    done, epoch = 0, 0
    while done < steps:
        for rows in sampler.batches(epoch)[: steps - done]:
            visits[rows] += 1
            done += 1
        epoch += 1
    assert int(visits.min()) >= 2 and int(visits.max()) == 3


def test_topk_run_moves_the_banks_of_seen_examples(tmp_path, tiny_bert_path, data_root):
    config, args = config_and_args(
        tmp_path, tiny_bert_path, "data.limit=200", "data.few_shot=16", "data.label_noise=0.125",
        "train.drop_last=true",
    )
    bundle = build(config, args, data_root)
    ans = bundle.method.ans
    before_u, before_v = ans.bank_u.bank.clone(), ans.bank_v.bank.clone()
    assert len(ans.bank_u) == len(bundle.train_examples) == 32  # one bank row per few-shot example
    summary = run_training(config, bundle)

    changed_u = (ans.bank_u.bank != before_u).any(dim=1)
    changed_v = (ans.bank_v.bank != before_v).any(dim=1)
    assert int(changed_u.sum()) == int(changed_v.sum()) == 3 * 8  # 3 steps of 8 distinct examples
    assert torch.equal(changed_u, changed_v)
    log = read_log(tmp_path)
    assert [record["step"] for record in log] == [1, 2, 3]
    for record in log:  # the trainer's total is task + λ·ans with λ = 0.1
        assert record["loss"] == pytest.approx(record["loss/task"] + 0.1 * record["loss/ans"], rel=1e-5)
    assert bundle.method.loss_weights == {"task": 1.0, "ans": 0.1}
    assert "score" in summary["metrics"] and summary["report"]["labels_flipped"] == 4


def nearest_rows(queries, bank, own, k):
    """Top-k bank rows by cosine, each query's own row excluded (§3.3), written out here."""
    scores = F.normalize(queries, dim=1) @ F.normalize(bank, dim=1).T
    scores[torch.arange(len(queries)), own] = float("-inf")
    return scores.topk(k, dim=1).indices


def test_ans_part_is_eq6_on_cls_u_input_embedding_v_and_nearest_bank_rows(tmp_path, tiny_bert_path, data_root):
    """u = last-layer [CLS], v = mean word embedding (§5.1), negatives = the K nearest bank rows, loss = −Eq. 6.

    Everything expected is computed from the backbone and the bank tensors, not with the method's helpers.
    """
    config, args = config_and_args(tmp_path, tiny_bert_path, "data.limit=32", "method_args.momentum=0.3")
    bundle = build(config, args, data_root)
    method, examples = bundle.method.eval(), bundle.train_examples[:8]
    batch = method.collate(examples)
    indices = batch["indices"]
    assert indices.tolist() == list(range(8))
    bank_u, bank_v, critic = method.ans.bank_u.bank, method.ans.bank_v.bank, method.ans.critic
    assert abs(bank_u.var().item() - 1.0) < 0.2  # N(0, I) rows (32 × 32 draws), §3.4
    backbone = method.encoder.backbone
    inputs = {key: batch[key] for key in ("input_ids", "attention_mask", "token_type_ids")}
    mask = batch["attention_mask"].unsqueeze(-1).float()
    with torch.no_grad():
        parts = method(batch)
        u = backbone(**inputs).last_hidden_state[:, 0]
        v = (backbone.get_input_embeddings()(batch["input_ids"]) * mask).sum(1) / mask.sum(1)
        near_u, near_v = nearest_rows(u, bank_u, indices, 4), nearest_rows(v, bank_v, indices, 4)
        positive = torch.stack([critic.score(u[i], v[i]) for i in range(8)])
        against_v = torch.stack([torch.stack([critic.score(u[i], bank_v[j]) for j in near_v[i]]) for i in range(8)])
        against_u = torch.stack([torch.stack([critic.score(bank_u[j], v[i]) for j in near_u[i]]) for i in range(8)])
    assert parts["ans"].item() == pytest.approx(reclaim_ans(positive, against_v, against_u), abs=1e-5)

    # Training forward + after_step: ũ ← (1 − ρ)·u + ρ·ũ with ρ = 0.3 (Eq. 7), u recomputed under the same dropout.
    method.train()
    before_u, before_v = bank_u.clone(), bank_v.clone()
    torch.manual_seed(123)
    method(batch)
    method.after_step()
    with torch.no_grad():
        torch.manual_seed(123)
        u_train = backbone(**inputs).last_hidden_state[:, 0]
    assert torch.allclose(method.ans.bank_u.bank[:8], 0.7 * u_train + 0.3 * before_u[:8], atol=1e-5)
    assert torch.allclose(method.ans.bank_v.bank[:8], 0.7 * v + 0.3 * before_v[:8], atol=1e-5)
    assert torch.equal(method.ans.bank_u.bank[8:], before_u[8:])


@pytest.mark.parametrize("mode", ["in_batch", "random"])
def test_ablation_modes_run(tmp_path, tiny_bert_path, data_root, mode):
    config, args = config_and_args(
        tmp_path, tiny_bert_path, "train.max_steps=2", "train.drop_last=true", f"method_args.negatives={mode}"
    )
    bundle = build(config, args, data_root)
    ans = bundle.method.ans
    assert ans.mode == mode
    before = ans.bank_v.bank.clone()
    run_training(config, bundle)
    assert int((ans.bank_v.bank != before).any(dim=1).sum()) == 2 * 8  # the banks are still updated
    for record in read_log(tmp_path):
        assert record["loss"] == pytest.approx(record["loss/task"] + 0.1 * record["loss/ans"], rel=1e-5)


def test_k_larger_than_the_training_set_is_a_clear_error(tmp_path, tiny_bert_path, data_root):
    config, _ = config_and_args(tmp_path, tiny_bert_path, "data.limit=10")
    with pytest.raises(ConfigError, match=r"method_args\.k"):
        build(config, ReclaimArgs(k=10), data_root)


# --- the semi-supervised setting (§5.1): a seeded random share of the labelled training set ---------------


def test_labelled_subset_is_a_seeded_random_share_reindexed(tmp_path, tiny_bert_path, data_root):
    config, args = config_and_args(tmp_path, tiny_bert_path, "data.limit=400")
    full = load_classification_data(config, args, data_root, seed=config.seed).train
    drawn = labelled_subset(full, 0.05, seed=42)
    assert len(drawn) == 20  # round(0.05 · 400)
    assert [row.index for row in drawn] == list(range(20))  # bank rows 0..m−1
    positions = [next(i for i, row in enumerate(full) if row.source == kept.source) for kept in drawn]
    assert positions == sorted(positions) and len(set(positions)) == 20
    assert positions != list(range(20))  # not the first rows
    assert max(positions) >= 200  # drawn from the whole set (P(all in the first half) ≈ 1e-6)
    assert all((full[p].texts, full[p].label) == (kept.texts, kept.label) for p, kept in zip(positions, drawn, strict=True))
    same = labelled_subset(full, 0.05, seed=42)
    assert [row.source for row in same] == [row.source for row in drawn]
    assert [row.source for row in labelled_subset(full, 0.05, seed=7)] != [row.source for row in drawn]
    assert len(labelled_subset(full, 0.001, seed=0)) == 1  # at least one row


def test_labelled_fraction_option_builds_banks_for_the_drawn_rows(tmp_path, tiny_bert_path, data_root):
    config, args = config_and_args(
        tmp_path, tiny_bert_path, "data.limit=400", "method_args.labelled_fraction=0.1", "method_args.labelled_seed=3"
    )
    bundle = build(config, args, data_root)
    assert len(bundle.train_examples) == len(bundle.method.ans.bank_u) == 40
    report = bundle.final_report(bundle.method)
    assert report["labelled_fraction"] == 0.1 and report["labelled_seed"] == 3
    assert (report["n_train_full"], report["n_train"]) == (400, 40)
    full = load_classification_data(config, args, data_root, seed=config.seed).train
    expected = [row.source for row in labelled_subset(full, 0.1, seed=3)]
    assert [row.source for row in bundle.train_examples] == expected
    # Without labelled_seed the draw follows the run's seed.
    config, args = config_and_args(tmp_path, tiny_bert_path, "data.limit=400", "method_args.labelled_fraction=0.1")
    assert build(config, args, data_root).final_report(None)["labelled_seed"] == config.seed
    config, args = config_and_args(
        tmp_path, tiny_bert_path, "data.few_shot=8", "method_args.labelled_fraction=0.1"
    )
    with pytest.raises(ConfigError, match=r"method_args\.labelled_fraction"):
        build(config, args, data_root)


def test_labelled_fraction_sets_the_papers_k_of_10_unless_k_is_given(tmp_path, caplog):
    """§5.1: K = 10 in the semi-supervised setting; a k from the config or --set wins, and a warning says so."""
    def args_of(*overrides: str) -> tuple:
        config = recipe_config("reclaim", tmp_path, "bundled:all-MiniLM-L6-v2", *overrides)
        return config, config.method_args_as(ReclaimArgs)

    assert args_of()[1].k == 100  # supervised: the paper's K = 100
    config, args = args_of("method_args.labelled_fraction=0.05")
    assert args.k == 10
    with caplog.at_level(logging.INFO, logger="contrastext.runs"):
        say_semi_supervised_k(config, args)
    assert "k=10, the paper's semi-supervised K" in caplog.text
    caplog.clear()
    config, args = args_of("method_args.labelled_fraction=0.05", "method_args.k=50")
    assert args.k == 50
    with caplog.at_level(logging.WARNING, logger="contrastext.runs"):
        say_semi_supervised_k(config, args)
    assert "method_args.k=50 given: it wins over the K = 10" in caplog.text
    assert ReclaimArgs(labelled_fraction=0.1).k == 10 and ReclaimArgs(labelled_fraction=0.1, k=100).k == 100


# ------------------------------------------------------------------------------------------------ CUDA


@pytest.mark.cuda
@pytest.mark.parametrize("search", ["exact", "ivf", "ivf-kept-index"])
def test_cuda_training_steps_update_the_banks_on_the_device(cuda_device, tmp_path, tiny_bert_path, search):
    """Two steps of the recipe on the GPU, on a labelled CSV of the user's (no benchmark data), with each search:
    the banks live on the device and the rows of the 16 examples seen are updated, the losses are finite. With
    ``ivf`` on CUDA keys the search is the exact one (``on_cuda="exact"``, the default); ``ivf-kept-index`` puts
    ``IVFSearch(on_cuda="index")`` in, which keeps its faiss-cpu index and updates the changed rows of the bank."""
    train_path = write_reviews(tmp_path / "reviews.csv", rows=24)
    dev_path = write_reviews(tmp_path / "reviews-dev.csv", rows=6, offset=100)
    config = recipe_config(
        "reclaim", tmp_path / "run", tiny_bert_path,
        *train_overrides(max_steps=2, batch_size=8, lr="1e-4", warmup_ratio=0, eval_every=None, drop_last=True),
        f"data.path={train_path}", f"data.eval_path={dev_path}", "data.max_length=32", "method_args.k=4",
        f"method_args.search={search.removesuffix('-kept-index')}",
    )
    bundle = build(config, config.method_args_as(ReclaimArgs), None)
    ans = bundle.method.ans
    if search == "ivf-kept-index":
        ans.search_u = IVFSearch(nlist=2, nprobe=2, storage="float32", exact_below=0, on_cuda="index")
        ans.search_v = ans.search_u.fresh()
    before_u, before_v = ans.bank_u.bank.clone(), ans.bank_v.bank.clone()
    run_training(config, bundle)

    assert ans.bank_u.bank.device.type == ans.bank_v.bank.device.type == cuda_device.type
    changed_u = (ans.bank_u.bank.cpu() != before_u).any(dim=1)
    changed_v = (ans.bank_v.bank.cpu() != before_v).any(dim=1)
    assert int(changed_u.sum()) == 2 * 8 and torch.equal(changed_u, changed_v)  # 2 steps of 8 distinct examples
    assert torch.isfinite(ans.bank_u.bank).all() and torch.isfinite(ans.bank_v.bank).all()
    records = read_log(tmp_path / "run")
    assert [record["step"] for record in records] == [1, 2]
    for record in records:
        assert math.isfinite(record["loss/ans"]) and math.isfinite(record["loss/task"])
        assert record["loss"] == pytest.approx(record["loss/task"] + 0.1 * record["loss/ans"], rel=1e-5)
    if search == "ivf-kept-index":
        for kept in (ans.search_u, ans.search_v):
            assert kept.index is not None and kept.builds == 1  # built at step 1 (the bank moved to the GPU)
            assert kept.updated_rows == 8  # step 2: the 8 rows written after step 1, updated in place
    else:
        assert ans.search_u.index is None if search == "ivf" else not ans.search_u.stateful


def test_the_search_is_checked_against_the_registry_and_its_arguments():
    """``search`` is any registered search (issue 20): an unknown name lists them; ``search_nlist`` /
    ``search_nprobe`` go to a search that takes them (ivf) and are refused for one that does not."""
    with pytest.raises(ConfigError, match=r"method_args\.search: .*unknown search 'annoy'; known searches: exact, "):
        validate_method_args(ReclaimArgs, {"search": "annoy"}, "reclaim.yaml")
    assert search_arguments(ReclaimArgs(search="ivf", search_nlist=8)) == {"nlist": 8}
    assert search_arguments(ReclaimArgs(search="exact")) == {}
    with pytest.raises(ConfigError, match=r"method_args\.search_nlist: search 'exact' takes no nlist"):
        search_arguments(ReclaimArgs.model_construct(search="exact", search_nlist=8, search_nprobe=None))
    with pytest.raises(ConfigError, match=r"reclaim.yaml: method_args\.search_nlist: .*search 'exact' takes no nlist"):
        validate_method_args(ReclaimArgs, {"search_nlist": 8}, "reclaim.yaml")  # when the config is read
