"""CAPT on a tiny random BERT (hidden 64, 2 layers) and real wiki1m / STS-B / SST-2 slices.

Expectations come from the paper (Luo et al.): Eq. 2–4 through ``naive.capt`` (written from the equations),
Eq. 6's temperatures as hard-coded numbers, §3.1 / Table 4's settings as hard-coded numbers.
"""

from __future__ import annotations

import json
import math

import pytest
import torch

from contrastext.data.examples import Example
from contrastext.data.views import VIEWS, View
from contrastext.errors import ConfigError
from contrastext.methods.capt import CAPTMethod
from contrastext.objectives.temperature import InvertedTriangleTemperature
from contrastext.runs.capt import CAPTArgs, build, seed_statistics
from contrastext.runs.capt import capt_encoder as build_capt_encoder
from contrastext.runs.registry import run_recipe
from contrastext.runs.stages import run_training
from tests.objectives import naive_objectives as naive
from tests.runs.recipe_runs import read_log, recipe_config, train_overrides

TINY = [
    "method_args.backbone.hidden_size=64",
    "method_args.backbone.num_hidden_layers=2",
    "method_args.backbone.num_attention_heads=2",
    "method_args.backbone.intermediate_size=128",
    "method_args.queue_size=64",
]
FAST = [
    *train_overrides(max_steps=3, batch_size=8, lr="1e-3", warmup_steps=0, eval_every=None),
    "data.max_length=32",
    "data.limit=64",
    "eval.limit=32",
    "method_args.finetune_steps=2",
    "method_args.finetune_batch_size=8",
    "method_args.finetune_limit=32",
    "method_args.finetune_eval_limit=32",
]
NO_DROPOUT = ["method_args.backbone.hidden_dropout_prob=0", "method_args.backbone.attention_probs_dropout_prob=0"]
LN_VOCAB = math.log(30522)  # a fresh tied MLM head on a random encoder predicts all-MiniLM's 30,522 ids uniformly


def tiny_config(tmp_path, minilm_path, *overrides: str, recipe: str = "capt"):
    return recipe_config(recipe, tmp_path, minilm_path, *FAST, *TINY, *overrides)


def args_of(config) -> CAPTArgs:
    return config.method_args_as(CAPTArgs)


def layer_shapes(encoder) -> list[tuple[int, int, str]]:
    return [(layer.linear.in_features, layer.linear.out_features, layer.activation_name)
            for layer in encoder.projection.layers]


def expected_capt(method, batch, tau: float, queue=None, reduction: str = "sum") -> float:
    """Eq. 2–4 on the batch's aggregated representations (the method must be deterministic: eval or no dropout)."""
    with torch.no_grad():
        s = method.encoder(**batch["original"]).projected
        s_hat = method.encoder(**batch["corrupted"]).projected
    return naive.capt(s, s_hat, queue, tau=tau, reduction=reduction)


def test_recipe_defaults_are_the_papers(tmp_path, minilm_path, data_root):
    """§3.1 and Table 4 (CAPT-Small), Eq. 4 and Eq. 6, as hard-coded numbers; shrunk only through --set."""
    config = recipe_config("capt", tmp_path, minilm_path)
    train, args = config.train, args_of(config)
    assert (train.batch_size, train.max_steps, train.warmup_steps) == (2048, 200_000, 10_000)
    assert (train.lr, train.weight_decay, train.schedule) == (5e-4, 0.01, "linear")
    assert (train.adam_betas, train.adam_epsilon) == ((0.9, 0.98), 1e-6)  # Table 4
    assert train.metric_for_best is None  # the pre-trained model is fine-tuned as trained
    assert (args.pooling, args.corruption, args.mask_probability) == ("cls", "token_mask", 0.15)
    assert (args.temperature, args.temperature_floor) == ("inverted_triangle", 0.05)
    assert (args.queue_size, args.capt_reduction, args.mlm_weight, args.capt_weight) == (8192, "sum", 1.0, 1.0)
    assert args.shuffle_window == 3  # §5.2
    assert (args.finetune_seeds, args.finetune_aggregate) == (5, "median")  # §3.3

    method = build(config.model_copy(update={"data": config.data.model_copy(update={"limit": 16})}), args,
                   data_root).method
    backbone = method.encoder.backbone.config
    assert (backbone.num_hidden_layers, backbone.hidden_size, backbone.num_attention_heads) == (6, 256, 4)
    assert (backbone.intermediate_size, backbone.hidden_dropout_prob) == (1024, 0.1)
    assert layer_shapes(method.encoder) == [(256, 1024, "relu"), (1024, 256, "identity")]  # A: FFN → hidden
    assert method.queue.capacity == 8192 and method.queue.dim == 256
    assert method.objective.reduction == "sum" and method.loss_weights == {"mlm": 1.0, "capt": 1.0}
    assert method.temperature.floor == 0.05


def test_pretrain_fills_the_queue_follows_the_schedule_and_learns(tmp_path, minilm_path, data_root):
    config = tiny_config(tmp_path, minilm_path, "train.max_steps=4")
    bundle = build(config, args_of(config), data_root)
    method = bundle.method
    assert method.encoder.hidden_size == 64 and method.encoder.backbone.config.num_hidden_layers == 2
    assert layer_shapes(method.encoder) == [(64, 128, "relu"), (128, 64, "identity")]  # follows the backbone
    assert isinstance(method.temperature, InvertedTriangleTemperature)
    before = {name: value.detach().clone() for name, value in method.named_parameters()}

    summary = run_training(config, bundle)

    assert method.temperature.total_steps == 4  # told by the trainer (on_train_start), not predicted
    assert len(method.queue) == 64  # s and ŝ of every step (4 × 2 × 8 = 64), capacity 64
    assert int(method.temperature.step) == 4
    assert method.temperature.value() == pytest.approx(0.55)  # Eq. 6 at t = T = 4
    log = read_log(tmp_path)
    assert [record["step"] for record in log] == [1, 2, 3, 4]
    assert log[0]["loss/mlm"] == pytest.approx(LN_VOCAB, abs=0.15)
    changed = [n for n, p in method.named_parameters() if not torch.equal(before[n], p.detach())]
    assert any(n.startswith("encoder.backbone.") for n in changed)
    assert any(n.startswith("encoder.projection.") for n in changed)
    assert any(n.startswith("mlm_head.") for n in changed)
    assert "stsb_dev_spearman" in summary["metrics"]
    assert summary["best_step"] is None  # no checkpoint selection: the method holds the last weights

    # The capt part is Eq. 4 (a sum over the batch) at the schedule's current τ, with the queue as negatives.
    method.eval()
    batch = method.collate(bundle.train_examples[:8])
    with torch.no_grad():
        parts = method(batch)
    expected = expected_capt(method, batch, tau=0.55, queue=method.queue.contents())
    assert parts["capt"].item() == pytest.approx(expected, rel=1e-4)


@pytest.mark.parametrize("reduction", ["sum", "mean"])
def test_each_step_uses_eq6_and_enqueues_both_s_and_s_hat(tmp_path, minilm_path, data_root, reduction):
    """Step by step as the trainer drives it: τ(t) of Eq. 6 for T = 4 (by hand: 0.55, 0.30, 0.05, 0.30), the
    queue's negatives in the denominators, and after each step both s and ŝ of the batch in the queue (§2.2)."""
    config = tiny_config(tmp_path, minilm_path, *NO_DROPOUT, "method_args.queue_size=40",
                         f"method_args.capt_reduction={reduction}")
    bundle = build(config, args_of(config), data_root)
    method = bundle.method
    method.train()
    method.on_train_start(total_steps=4)
    stored: list[torch.Tensor] = []
    for step, tau in enumerate([0.55, 0.30, 0.05, 0.30]):
        method.set_generator(torch.Generator().manual_seed(step))
        batch = method.collate(bundle.train_examples[8 * step: 8 * step + 8])
        queue = torch.cat(stored)[-40:] if stored else None
        parts = method(batch)
        assert parts["capt"].item() == pytest.approx(expected_capt(method, batch, tau, queue, reduction), rel=1e-4)
        with torch.no_grad():
            stored.append(torch.cat([method.encoder(**batch["original"]).projected,
                                     method.encoder(**batch["corrupted"]).projected]))
        method.after_step()
        torch.testing.assert_close(method.queue.contents(), torch.cat(stored)[-40:], rtol=1e-5, atol=1e-6)
    assert int(method.temperature.step) == 4


@pytest.mark.parametrize("corruption", [name for name in VIEWS.names() if name != "identity"])  # every corrupting view
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
    method.eval()
    with torch.no_grad():
        parts = method(batch)
    assert set(parts) == {"mlm", "capt"}
    assert parts["mlm"].item() == pytest.approx(LN_VOCAB, abs=0.15)
    # Before on_train_start the schedule has T = 1: τ(0) = |0 − 1/2| / 1 + 0.05 = 0.55; the queue is empty.
    assert parts["capt"].item() == pytest.approx(expected_capt(method, batch, tau=0.55), rel=1e-4)


def test_run_pretrains_then_finetunes_on_glue_over_seeds(tmp_path, minilm_path, data_root):
    """§3.3: the pre-trained model (as trained: no checkpoint selection) is fine-tuned with several seeds and
    the median of their dev results is reported."""
    config = tiny_config(tmp_path, minilm_path, "train.max_steps=2", "method_args.temperature=fixed",
                         "method_args.finetune_seeds=3")
    summary = run_recipe(config, data_root=data_root)
    metrics = summary["metrics"]
    saved = json.loads((tmp_path / "metrics.json").read_text())
    assert saved["metrics"] == pytest.approx(metrics)
    assert (tmp_path / "pretrain" / "metrics.json").is_file()
    assert summary["pretrain"]["best_step"] is None and summary["pretrain"]["last_step"] == 2
    accuracies = []
    for seed in (42, 43, 44):
        folder = tmp_path / "finetune-sst2" / f"seed-{seed}"
        accuracies.append(json.loads((folder / "metrics.json").read_text())["metrics"]["sst2_dev_accuracy"])
        ft_log = read_log(folder)
        assert [record["step"] for record in ft_log] == [1, 2]
        assert ft_log[0]["loss/ce"] == pytest.approx(math.log(2), abs=0.35)  # a fresh 2-class head: near chance
    assert metrics["finetune_sst2_dev_accuracy"] == pytest.approx(sorted(accuracies)[1])  # the median of 3
    assert summary["finetune"]["mean"]["sst2_dev_accuracy"] == pytest.approx(sum(accuracies) / 3)
    first_losses = {read_log(tmp_path / "finetune-sst2" / f"seed-{seed}")[0]["loss/ce"] for seed in (42, 43, 44)}
    assert len(first_losses) == 3  # each seed its own head, order and dropout
    assert "stsb_dev_spearman" in metrics


def test_seed_statistics_are_the_median_and_the_mean():
    per_seed = {42: {"sst2_dev_accuracy": 50.0, "sst2_dev_score": 50.0}, 43: {"sst2_dev_accuracy": 90.0},
                44: {"sst2_dev_accuracy": 60.0}}
    statistics = seed_statistics(per_seed)
    assert statistics["median"] == {"sst2_dev_accuracy": 60.0, "sst2_dev_score": 50.0}
    assert statistics["mean"]["sst2_dev_accuracy"] == pytest.approx(200.0 / 3)


def test_continued_pretraining_loads_minilm_weights_with_a_fresh_mlm_head(tmp_path, minilm_path, data_root):
    config = recipe_config("capt-continued", tmp_path, minilm_path, *FAST, "method_args.queue_size=16")
    args = args_of(config)
    assert (args.queue_size, args.capt_reduction, args.pooling) == (16, "sum", "mean")
    encoder = build_capt_encoder(config, args)
    from transformers import AutoModel

    reference = AutoModel.from_pretrained(minilm_path)
    assert torch.equal(encoder.backbone.embeddings.word_embeddings.weight, reference.embeddings.word_embeddings.weight)
    assert layer_shapes(encoder) == [(384, 1536, "relu"), (1536, 384, "identity")]  # MiniLM: FFN 1536, hidden 384
    method = CAPTMethod(encoder, queue_size=16)
    assert torch.equal(method.mlm_head.bias, torch.zeros_like(method.mlm_head.bias))
    method.set_generator(torch.Generator().manual_seed(0))
    batch = method.collate([Example((f"sentence number {i} about cats",)) for i in range(4)])
    method.eval()
    with torch.no_grad():
        parts = method(batch)
    # CAPTMethod's default temperature is a fixed 0.1 and its default reduction Eq. 4's sum.
    assert parts["capt"].item() == pytest.approx(expected_capt(method, batch, tau=0.1), rel=1e-4)


def test_unknown_method_arg_is_named(tmp_path, minilm_path, data_root):
    config = tiny_config(tmp_path, minilm_path, "method_args.queue=5")
    with pytest.raises(ConfigError, match=r"method_args\.queue"):
        run_recipe(config, data_root=data_root)


class ToyCopy(View):
    """A view no recipe names: the tokens as they are; its arguments come from CAPT (vocab_size) and from
    ``corruption_args`` (p)."""

    name = "toy_copy"

    def __init__(self, vocab_size: int, p: float = 0.0):
        self.vocab_size, self.p = vocab_size, p

    def apply(self, batch, generator):
        return batch


def test_the_corruption_is_any_registered_view(tmp_path, minilm_path, data_root):
    """One class and one registry line: CAPT builds a view added at run time with the arguments its constructor
    takes (issue 20); an unregistered name is refused with the registered ones listed."""
    with VIEWS.registered("toy_copy", ToyCopy):
        config = tiny_config(tmp_path, minilm_path, "method_args.corruption=toy_copy",
                             "method_args.corruption_args.p=0.5")  # fmt: skip
        method = build(config, args_of(config), data_root).method
        assert isinstance(method.view, ToyCopy) and (method.view.vocab_size, method.view.p) == (30522, 0.5)
        batch = method.collate([Example(("a short one",)), Example(("the cat sat on the mat",))])
        assert "masked" in batch  # not a masking view: the MLM reads a separately masked copy
    with pytest.raises(ConfigError, match=r"method_args\.corruption: .*unknown view 'toy_copy'; known views: delete"):
        args_of(config)
    for argument, key in (("probability", "mask_probability"), ("k", "shuffle_window"), ("vocab_size", "tokenizer")):
        with pytest.raises(ConfigError, match=rf"method_args\.corruption_args: .*{argument}'? comes from .*{key}"):
            args_of(tiny_config(tmp_path, minilm_path, f"method_args.corruption_args.{argument}=3"))
