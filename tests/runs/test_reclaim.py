"""RECLAIM end to end on a small slice of SST-2: banks move, ans is finite, negatives come from the banks."""

from __future__ import annotations

import math

import pytest
import torch

from contrastext.errors import ConfigError
from contrastext.methods.reclaim import ReclaimArgs
from contrastext.models.pooling import mean_pool
from contrastext.runs.reclaim import build
from contrastext.runs.registry import get_run_spec
from contrastext.runs.stages import run_training
from tests.runs.recipe_runs import read_log, recipe_config, train_overrides

FAST = [
    *train_overrides(max_steps=3, batch_size=8, lr="1e-4", warmup_ratio=0, eval_every=None),
    "data.max_length=32",
    "data.limit=64",
    "eval.limit=16",
    "method_args.k=4",
]


def config_and_args(tmp_path, model_path, *overrides: str):
    config = recipe_config("reclaim", tmp_path, model_path, *FAST, *overrides)
    return config, config.method_args_as(get_run_spec("reclaim").args_model)


def test_topk_run_moves_the_banks_of_seen_examples(tmp_path, tiny_bert_path, data_root):
    config, args = config_and_args(
        tmp_path, tiny_bert_path, "data.limit=200", "data.few_shot=16", "data.label_noise=0.125"
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
    for record in log:
        assert math.isfinite(record["loss/task"]) and math.isfinite(record["loss/ans"])
        assert record["loss/ans"] > 0  # an NCE loss: −log of probabilities
    assert bundle.method.loss_weights == {"task": 1.0, "ans": 0.1}
    assert "score" in summary["metrics"] and summary["report"]["labels_flipped"] == 4


def test_ans_part_uses_cls_u_input_embedding_v_and_bank_negatives(tmp_path, tiny_bert_path, data_root):
    config, args = config_and_args(tmp_path, tiny_bert_path, "data.limit=32")
    bundle = build(config, args, data_root)
    method, examples = bundle.method.eval(), bundle.train_examples[:8]
    batch = method.collate(examples)
    with torch.no_grad():
        parts = method(batch)
        output = method.encode_batch(batch)
        u, v = output.pooled, mean_pool(output.input_embeddings, batch["attention_mask"])
        near_u, near_v = method.ans.nearest_negatives(u, v, batch["indices"])
        expected = method.ans.nce(u, v, method.ans.bank_u.get(near_u), method.ans.bank_v.get(near_v))
    assert near_u.shape == (8, 4)
    assert not (near_u == batch["indices"][:, None]).any()  # an example is never its own negative
    assert torch.allclose(parts["ans"], expected, atol=1e-6)

    method.train()
    before = method.ans.bank_u.bank.clone()
    method(batch)
    indices, fresh_u, _ = method._pending[-1]
    method.after_step()
    rho = args.momentum
    assert torch.allclose(method.ans.bank_u.bank[indices], (1 - rho) * fresh_u + rho * before[indices])
    assert not method._pending


@pytest.mark.parametrize("mode", ["in_batch", "random"])
def test_ablation_modes_run(tmp_path, tiny_bert_path, data_root, mode):
    config, args = config_and_args(tmp_path, tiny_bert_path, "train.max_steps=2", f"method_args.negatives={mode}")
    bundle = build(config, args, data_root)
    assert bundle.method.ans.mode == mode
    run_training(config, bundle)
    for record in read_log(tmp_path):
        assert math.isfinite(record["loss/ans"]) and math.isfinite(record["loss/task"])


def test_k_larger_than_the_training_set_is_a_clear_error(tmp_path, tiny_bert_path, data_root):
    config, _ = config_and_args(tmp_path, tiny_bert_path, "data.limit=10")
    with pytest.raises(ConfigError, match=r"method_args\.k"):
        build(config, ReclaimArgs(k=10), data_root)
