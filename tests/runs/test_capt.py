"""CAPT on a tiny random BERT (hidden 64, 2 layers) and real wiki1m / STS-B / SST-2 slices."""

from __future__ import annotations

import json
import math

import pytest
import torch

from contrastext.data.examples import Example
from contrastext.errors import ConfigError
from contrastext.methods.capt import CAPTArgs, CAPTMethod
from contrastext.objectives.capt import CAPT
from contrastext.objectives.temperature import InvertedTriangleTemperature
from contrastext.runs.capt import build
from contrastext.runs.capt import capt_encoder as build_capt_encoder
from contrastext.runs.registry import run_recipe
from contrastext.runs.stages import run_training
from tests.runs.recipe_runs import read_log, recipe_config, train_overrides

TINY = [
    "method_args.backbone.hidden_size=64",
    "method_args.backbone.num_hidden_layers=2",
    "method_args.backbone.num_attention_heads=2",
    "method_args.backbone.intermediate_size=128",
    "method_args.projection_dim=32",
    "method_args.queue_size=64",
]
FAST = [
    *train_overrides(max_steps=3, batch_size=8, lr="1e-3", warmup_ratio=0, eval_every=None),
    "data.max_length=32",
    "data.limit=64",
    "eval.limit=32",
    "method_args.finetune_steps=2",
    "method_args.finetune_batch_size=8",
    "method_args.finetune_limit=32",
    "method_args.finetune_eval_limit=32",
]


def tiny_config(tmp_path, minilm_path, *overrides: str, recipe: str = "capt"):
    return recipe_config(recipe, tmp_path, minilm_path, *FAST, *TINY, *overrides)


def args_of(config) -> CAPTArgs:
    return config.method_args_as(CAPTArgs)


def test_pretrain_fills_the_queue_follows_the_schedule_and_learns(tmp_path, minilm_path, data_root):
    config = tiny_config(tmp_path, minilm_path, "train.max_steps=4")
    bundle = build(config, args_of(config), data_root)
    method = bundle.method
    assert method.encoder.hidden_size == 64 and method.encoder.backbone.config.num_hidden_layers == 2
    assert isinstance(method.temperature, InvertedTriangleTemperature)
    before = {name: value.detach().clone() for name, value in method.named_parameters()}

    summary = run_training(config, bundle)

    assert method.temperature.total_steps == 4  # told by the trainer (on_train_start), not predicted

    assert len(method.queue) == min(4 * 2 * 8, 64)  # s and ŝ of every step, capacity 64
    assert int(method.temperature.step) == 4
    assert method.temperature.value() == pytest.approx(abs(4 - 4 / 2) / 4 + 0.05)
    log = read_log(tmp_path)
    assert [record["step"] for record in log] == [1, 2, 3, 4]
    for record in log:
        assert math.isfinite(record["loss/mlm"]) and math.isfinite(record["loss/capt"])
    changed = [n for n, p in method.named_parameters() if not torch.equal(before[n], p.detach())]
    assert any(n.startswith("encoder.backbone.") for n in changed)
    assert any(n.startswith("encoder.projection.") for n in changed)
    assert any(n.startswith("mlm_head.") for n in changed)
    assert "stsb_dev_spearman" in summary["metrics"]

    # The capt part is the CAPT objective at the schedule's current τ, with the queue as negatives.
    method.eval()
    batch = method.collate(bundle.train_examples[:8])
    with torch.no_grad():
        parts = method(batch)
        s = method.encoder(**batch["original"]).projected
        s_hat = method.encoder(**batch["corrupted"]).projected
        expected = CAPT(temperature=method.temperature.value())(s, s_hat, queue=method.queue.contents())
    assert torch.allclose(parts["capt"], expected, atol=1e-5)


@pytest.mark.parametrize("corruption", ["token_mask", "span_mask", "shuffle", "delete", "substitute"])
def test_special_tokens_are_never_corrupted(tmp_path, minilm_path, data_root, corruption):
    config = tiny_config(tmp_path, minilm_path, f"method_args.corruption={corruption}",
                         "method_args.corruption_probability=0.5", "method_args.mask_probability=0.5")
    method = build(config, args_of(config), data_root).method
    tokenizer = method.encoder.tokenizer
    special = {tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id}
    examples = [Example((text,)) for text in ["a short one", "a somewhat longer sentence with more words in it",
                                              "the cat sat on the mat and looked at the dog"]]
    method.set_generator(torch.Generator().manual_seed(0))
    batch = method.collate(examples)
    original, corrupted = batch["original"]["input_ids"], batch["corrupted"]["input_ids"]
    for row in range(len(examples)):
        boundaries = {tokenizer.cls_token_id, tokenizer.sep_token_id}  # padding may shrink (delete)
        kept = [int(t) for t in original[row] if int(t) in boundaries]
        now = [int(t) for t in corrupted[row] if int(t) in boundaries]
        assert kept == now, f"{corruption}: special tokens changed in row {row}"
        if corruption != "delete":  # same length: special tokens stay at their positions
            positions = torch.tensor([int(t) in special for t in original[row]])
            assert torch.equal(original[row][positions], corrupted[row][positions])
    assert not torch.equal(original, corrupted[:, : original.shape[1]]) or corruption == "delete"
    masked_input = batch.get("masked", batch["corrupted"])["input_ids"]
    labels = batch["mlm_labels"]
    is_special = torch.isin(batch["original"]["input_ids"], torch.tensor(sorted(special)))
    assert (labels[is_special] == -100).all() and (labels != -100).any()
    assert masked_input.shape == labels.shape
    parts = method(batch)
    assert set(parts) == {"mlm", "capt"} and all(torch.isfinite(v) for v in parts.values())


def test_run_pretrains_then_finetunes_on_glue(tmp_path, minilm_path, data_root):
    config = tiny_config(tmp_path, minilm_path, "train.max_steps=2", "method_args.temperature=fixed")
    summary = run_recipe(config, data_root=data_root)
    metrics = summary["metrics"]
    assert "stsb_dev_spearman" in metrics and "finetune_sst2_dev_accuracy" in metrics
    assert 0.0 <= metrics["finetune_sst2_dev_accuracy"] <= 100.0
    saved = json.loads((tmp_path / "metrics.json").read_text())
    assert saved["metrics"] == pytest.approx(metrics)
    assert (tmp_path / "pretrain" / "metrics.json").is_file()
    assert (tmp_path / "finetune-sst2" / "metrics.json").is_file()
    ft_log = read_log(tmp_path / "finetune-sst2")
    assert all(math.isfinite(record["loss/ce"]) for record in ft_log)


def test_continued_pretraining_loads_minilm_weights_with_a_fresh_mlm_head(tmp_path, minilm_path, data_root):
    config = recipe_config("capt-continued", tmp_path, minilm_path, *FAST, "method_args.queue_size=16")
    args = args_of(config)
    encoder = build_capt_encoder(config, args)
    from transformers import AutoModel

    reference = AutoModel.from_pretrained(minilm_path)
    assert torch.equal(encoder.backbone.embeddings.word_embeddings.weight, reference.embeddings.word_embeddings.weight)
    method = CAPTMethod(encoder, queue_size=16)
    assert torch.equal(method.mlm_head.bias, torch.zeros_like(method.mlm_head.bias))
    method.set_generator(torch.Generator().manual_seed(0))
    batch = method.collate([Example((f"sentence number {i} about cats",)) for i in range(4)])
    parts = method(batch)
    assert all(torch.isfinite(value) for value in parts.values())


def test_unknown_method_arg_is_named(tmp_path, minilm_path, data_root):
    config = tiny_config(tmp_path, minilm_path, "method_args.queue=5")
    with pytest.raises(ConfigError, match=r"method_args\.queue"):
        run_recipe(config, data_root=data_root)
