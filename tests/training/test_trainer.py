"""The training loop with a tiny self-contained method: determinism, logging, evaluation, best model, early stop."""

from __future__ import annotations

import json
import math

import pytest
import torch
from accelerate.state import AcceleratorState

from contrastext.errors import ConfigError
from contrastext.runtime.run_log import read_log
from contrastext.training import trainer as trainer_module
from contrastext.training.checkpoint import latest_checkpoint, load_method_state
from contrastext.training.trainer import Trainer, resolve_mixed_precision
from tests.training._tiny_training import build, make_config, sentences


def _losses(output_dir):
    return [record["loss"] for record in read_log(output_dir / "train_log.jsonl")]


def test_same_seed_same_losses_other_seed_other_losses(tmp_path, minilm_path, one_thread):
    for name, seed in (("a", 3), ("b", 3), ("c", 4)):
        config = make_config(tmp_path / name, max_steps=5, save_every=None)
        config.train.seed = seed
        Trainer(build(minilm_path), sentences(), config).train()
    assert _losses(tmp_path / "a") == _losses(tmp_path / "b")
    assert _losses(tmp_path / "a") != _losses(tmp_path / "c")


def test_log_lines_hold_every_part_the_total_lr_and_throughput(tmp_path, minilm_path, one_thread):
    method = build(minilm_path)
    Trainer(method, sentences(), make_config(tmp_path, max_steps=4, log_every=2)).train()
    records = read_log(tmp_path / "train_log.jsonl")
    assert [record["step"] for record in records] == [2, 4]
    for record in records:
        assert {
            "epoch",
            "loss",
            "loss/infonce",
            "loss/center",
            "loss/tied",
            "lr",
            "samples_per_s",
            "grad_norm",
        } <= set(record)
        weighted = record["loss/infonce"] + 0.1 * record["loss/center"] + record["loss/tied"]
        assert record["loss"] == pytest.approx(weighted, rel=1e-5)
        assert record["samples_per_s"] > 0
    assert records[-1]["lr"] < records[0]["lr"]  # linear decay after 2 warmup steps


def test_part_grad_norms_are_each_weighted_parts_gradient_alone_on_the_logged_steps(tmp_path, minilm_path, one_thread):
    method = build(minilm_path)
    method.loss_weights = {"center": 0.0, "tied": 0.0}  # only infonce moves the weights: its norm is the total's
    config = make_config(tmp_path, max_steps=3, log_every=2, grad_accumulation=1, grad_clip=1e9, part_grad_norms=True)
    Trainer(method, sentences(), config).train()
    records = read_log(tmp_path / "train_log.jsonl")
    assert [r["step"] for r in records] == [2, 3]  # every log_every steps and the last
    for record in records:
        assert record["grad_norm/infonce"] == pytest.approx(record["grad_norm"], rel=1e-4)
        assert record["grad_norm/center"] == record["grad_norm/tied"] == 0.0
    with pytest.raises(ValueError, match="part_grad_norms"):
        make_config(tmp_path, part_grad_norms=True)  # grad_accumulation 2


def test_evaluation_keeps_the_best_weights_and_stops_early(tmp_path, minilm_path, one_thread):
    scores = iter([0.1, 0.5, 0.4, 0.3, 0.2, 0.9])
    snapshots = {}

    def evaluator(method):
        assert not method.training
        value = next(scores)
        snapshots[value] = {name: tensor.clone() for name, tensor in method.state_dict().items()}
        return {"stsb/spearman": value, "other": 1.0}

    config = make_config(
        tmp_path, max_steps=12, eval_every=2, metric_for_best="stsb/spearman", early_stopping_patience=2
    )
    method = build(minilm_path)
    result = Trainer(method, sentences(), config, evaluator=evaluator).train()

    assert result.stopped_early and result.last_step == 8  # evals at 2 (0.1) 4 (0.5) 6 (0.4) 8 (0.3)
    assert result.best_metric == 0.5 and result.best_step == 4
    assert (result.best_model_dir / "config.json").is_file()  # exported by the encoder's own save()
    restored = build(minilm_path, init_seed=9)
    load_method_state(restored, result.best_checkpoint)
    for name, tensor in restored.state_dict().items():
        assert torch.equal(tensor, snapshots[0.5][name]), name
    evaluated = [r for r in read_log(tmp_path / "train_log.jsonl") if "eval/stsb/spearman" in r]
    assert [r["step"] for r in evaluated] == [2, 4, 6, 8]
    assert json.loads((result.best_checkpoint / "trainer_state.json").read_text())["best_step"] == 4


def test_unknown_metric_for_best_names_the_key(tmp_path, minilm_path):
    config = make_config(tmp_path, max_steps=2, eval_every=1, metric_for_best="nope")
    with pytest.raises(ConfigError, match="train.metric_for_best='nope'.*spearman"):
        Trainer(build(minilm_path), sentences(), config, evaluator=lambda m: {"spearman": 0.0}).train()


def test_epochs_set_the_number_of_steps(tmp_path, minilm_path):
    config = make_config(tmp_path, max_steps=None, epochs=2, grad_accumulation=1, save_every=None)
    trainer = Trainer(build(minilm_path), sentences(), config)
    assert trainer.total_steps() == 10  # 40 examples / 8 per batch * 2 epochs
    config = make_config(tmp_path, max_steps=None, epochs=0.1, grad_accumulation=2)
    with pytest.raises(ConfigError, match="gives no optimiser step"):
        Trainer(build(minilm_path), sentences(), config).total_steps()


def test_no_examples_is_a_config_error(tmp_path, minilm_path):
    with pytest.raises(ConfigError, match="no training examples"):
        Trainer(build(minilm_path), [], make_config(tmp_path))


def test_mixed_precision_auto_is_off_without_cuda():
    if not torch.cuda.is_available():
        assert resolve_mixed_precision("auto") == "no"
        with pytest.raises(ConfigError, match="fp16 needs a CUDA GPU"):
            resolve_mixed_precision("fp16")
    assert resolve_mixed_precision("no") == "no"


def test_runs_of_one_process_may_use_different_mixed_precisions(tmp_path, minilm_path, one_thread):
    """Accelerate keeps one state per process; a run after one with another train.mixed_precision used to fail
    ("AcceleratorState has already been initialized and cannot be changed")."""
    for name, precision in (("first", "no"), ("second", "bf16"), ("third", "no")):
        config = make_config(tmp_path / name, max_steps=1, grad_accumulation=1, save_every=None,
                             mixed_precision=precision)
        Trainer(build(minilm_path), sentences(), config).train()
        assert AcceleratorState().mixed_precision == precision
    assert [record["step"] for record in read_log(tmp_path / "third" / "train_log.jsonl")] == [1]


def test_eval_at_start_logs_step_zero_and_is_never_the_best(tmp_path, minilm_path, one_thread):
    scores = iter([0.9, 0.2, 0.3])  # the start scores best, but it is not a candidate

    def evaluator(method):
        return {"score": next(scores)}

    config = make_config(tmp_path, max_steps=4, save_every=None, eval_every=2, metric_for_best="score")
    config.train.eval_at_start = True
    result = Trainer(build(minilm_path), sentences(), config, evaluator=evaluator).train()
    records = read_log(tmp_path / "train_log.jsonl")
    assert records[0] == {"step": 0, "epoch": 0, "world_size": 1, "eval/score": 0.9}
    assert result.start_metrics == {"score": 0.9}
    assert (result.best_step, result.best_metric) == (4, 0.3)


def test_a_fresh_run_never_mixes_with_an_old_one(tmp_path, minilm_path, one_thread):
    Trainer(build(minilm_path), sentences(), make_config(tmp_path, max_steps=4)).train()
    with pytest.raises(ConfigError, match="already holds a run.*--resume.*train.overwrite"):
        Trainer(build(minilm_path), sentences(), make_config(tmp_path, max_steps=2)).train()
    assert [record["step"] for record in read_log(tmp_path / "train_log.jsonl")] == [1, 2, 3, 4]  # untouched

    config = make_config(tmp_path, max_steps=2)
    config.train.overwrite = True
    Trainer(build(minilm_path), sentences(), config).train()
    assert [record["step"] for record in read_log(tmp_path / "train_log.jsonl")] == [1, 2]
    assert sorted(path.name for path in (tmp_path / "checkpoints").iterdir() if path.is_dir()) == ["step-000002"]


# ------------------------------------------------------------------------------------------------ CUDA


@pytest.mark.cuda
def test_cuda_mixed_precision_auto_is_bf16_on_a_bf16_gpu():
    assert resolve_mixed_precision("auto") == ("bf16" if torch.cuda.is_bf16_supported() else "fp16")
    assert resolve_mixed_precision("fp16") == "fp16" and resolve_mixed_precision("bf16") == "bf16"


@pytest.mark.cuda
@pytest.mark.parametrize("precision", ["no", "bf16", "fp16"])
def test_cuda_training_is_finite_moves_the_weights_and_saves_reloads_and_resumes(
    cuda_device, tmp_path, minilm_path, precision
):
    """3 steps, a checkpoint, 3 more steps resumed from it (optimiser, schedule, fp16 loss scaler and CUDA
    generator restored): every logged loss is finite, the weights moved, and the last checkpoint loads into a
    fresh method with exactly the trained weights. fp16 may skip its first steps (the loss scaler backs off from
    2^16 on infinite gradients), so 6 steps leave room for some to be taken."""
    start = build(minilm_path).state_dict()
    settings = {"grad_accumulation": 1, "save_every": 3, "mixed_precision": precision}
    method = build(minilm_path)
    Trainer(method, sentences(), make_config(tmp_path, max_steps=3, **settings)).train()
    assert next(method.parameters()).device.type == cuda_device.type
    assert method.center.device.type == cuda_device.type  # buffers too
    resumed = build(minilm_path, init_seed=7)
    Trainer(resumed, sentences(), make_config(tmp_path, max_steps=6, **settings)).train(resume=True)
    records = read_log(tmp_path / "train_log.jsonl")
    assert [record["step"] for record in records] == [1, 2, 3, 4, 5, 6]
    assert all(math.isfinite(record["loss"]) and math.isfinite(record["loss/infonce"]) for record in records)
    trained = {name: value.cpu() for name, value in resumed.state_dict().items()}
    assert max(float((trained[name] - start[name]).abs().max()) for name in start) > 1e-4
    assert all(torch.isfinite(value).all() for value in trained.values())
    checkpoint = latest_checkpoint(tmp_path)
    assert checkpoint.name == "step-000006"
    assert (checkpoint / "scaler.pt").is_file() == (precision == "fp16")
    restored = build(minilm_path, init_seed=9)
    load_method_state(restored, checkpoint)
    for name, value in restored.state_dict().items():
        assert torch.equal(value, trained[name]), name


def test_every_evaluation_prints_one_line_and_the_world_size_is_said_and_recorded(
    tmp_path, minilm_path, one_thread, capsys, monkeypatch
):
    """Issue 22: the evaluations every eval_every went only to the JSONL, and nothing said (or recorded) how many
    processes trained. Each evaluation prints step, headline metric and best so far; the world-size line is
    printed once per process; every log record and the result hold the world size."""
    monkeypatch.setattr(trainer_module, "_ANNOUNCED_WORLDS", set())
    scores = iter([0.5, 0.7, 0.6])

    def evaluator(method):
        return {"score": next(scores), "other": 0.1}

    config = make_config(tmp_path / "a", max_steps=6, save_every=None, eval_every=2, metric_for_best="score")
    result = Trainer(build(minilm_path), sentences(), config, evaluator=evaluator).train()
    lines = capsys.readouterr().out.splitlines()
    assert [line for line in lines if line.startswith("eval step")] == [
        "eval step 2/6: score=0.5000 (best 0.5000 at step 2)",
        "eval step 4/6: score=0.7000 (best 0.7000 at step 4)",
        "eval step 6/6: score=0.6000 (best 0.7000 at step 4)",
    ]
    assert [line for line in lines if line.startswith("world size")] == ["world size 1 (single process, cpu)"]
    records = read_log(tmp_path / "a" / "train_log.jsonl")
    assert records and all(record["world_size"] == 1 for record in records)
    assert result.world_size == 1

    # without metric_for_best the headline is "score" (else the first metric), its best tracked for the line
    scores = iter([0.3, 0.2])
    config = make_config(tmp_path / "b", max_steps=4, save_every=None, eval_every=2, metric_for_best=None,
                         greater_is_better=False)
    Trainer(build(minilm_path), sentences(), config, evaluator=evaluator).train()
    lines = capsys.readouterr().out.splitlines()
    assert [line for line in lines if line.startswith("eval step")] == [
        "eval step 2/4: score=0.3000 (best 0.3000 at step 2)",
        "eval step 4/4: score=0.2000 (best 0.2000 at step 4)",
    ]
    assert not [line for line in lines if line.startswith("world size")]  # said once per process


def _tiny_bert_gradients(tiny_bert_path, checkpointing: bool):
    """One backward pass of the tiny BERT TextEncoder (dropout off, train mode) with train.unpad on, and
    train.gradient_checkpointing as given; returns (gradients by name, the encoder)."""
    from contrastext.models.encoder import TextEncoder
    from contrastext.training.method import Method
    from contrastext.training.trainer import apply_speed_settings

    class EncoderOnly(Method):  # the Method contract around the encoder alone
        def __init__(self, encoder):
            super().__init__()
            self.encoder = encoder

        def collate(self, examples):
            raise NotImplementedError

        def forward(self, batch):
            raise NotImplementedError

    encoder = TextEncoder.from_pretrained(tiny_bert_path)
    for module in encoder.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
    apply_speed_settings(EncoderOnly(encoder), unpad=True, compile=False,
                         gradient_checkpointing=checkpointing)
    encoder.train()
    texts = ["a cat sleeps", "the green house by the slow river runs over", "dog", "small blue dogs run quickly"]
    embedding = encoder(**encoder.tokenize(texts)).embedding
    (embedding.square().sum() + embedding[0] @ embedding[1]).backward()
    return {name: p.grad.clone() for name, p in encoder.named_parameters() if p.grad is not None}, encoder


def test_gradient_checkpointing_gives_the_gradients_of_the_plain_run(tiny_bert_path, one_thread):
    """train.gradient_checkpointing: Hugging Face's checkpointing on the backbone (non-reentrant), the packed
    forward refused (it would not checkpoint), and the same gradients as without it (dropout off)."""
    from contrastext.models.unpadded import unpadding_refusal

    plain, plain_encoder = _tiny_bert_gradients(tiny_bert_path, checkpointing=False)
    checkpointed, encoder = _tiny_bert_gradients(tiny_bert_path, checkpointing=True)
    layers = encoder.backbone.encoder.layer
    assert all(layer.gradient_checkpointing for layer in layers)
    assert all(layer._gradient_checkpointing_func.keywords == {"use_reentrant": False} for layer in layers)
    assert "gradient checkpointing is on" in unpadding_refusal(encoder.backbone)
    assert unpadding_refusal(plain_encoder.backbone) is None
    assert set(plain) == set(checkpointed) and len(plain) > 10
    for name, gradient in plain.items():
        torch.testing.assert_close(checkpointed[name], gradient, rtol=1e-5, atol=1e-6, msg=name)


def test_gradient_checkpointing_in_a_run_and_a_model_without_it(tmp_path, minilm_path, one_thread):
    method = build(minilm_path)
    config = make_config(tmp_path / "a", max_steps=2, save_every=None, gradient_checkpointing=True)
    Trainer(method, sentences(), config).train()
    assert all(layer.gradient_checkpointing for layer in method.encoder.backbone.encoder.layer)
    assert math.isfinite(_losses(tmp_path / "a")[-1])

    plain = build(minilm_path)
    plain.encoder.backbone = torch.nn.Identity()  # no Hugging Face checkpointing to turn on
    config = make_config(tmp_path / "b", max_steps=2, save_every=None, gradient_checkpointing=True)
    with pytest.raises(ConfigError, match="train.gradient_checkpointing: Identity does not support"):
        Trainer(plain, sentences(), config).train()


def test_eval_every_and_save_every_epoch_act_at_the_step_that_ends_an_epoch(tmp_path, minilm_path, one_thread):
    """40 examples in batches of 8: 5 batches an epoch, 2 micro-batches a step, so epochs end within steps 3, 5
    (2.5 steps an epoch), 8 and 10; evaluation and checkpoints follow, and the last step as always."""
    steps = []

    def evaluator(method):
        steps.append(len(steps))
        return {"score": 0.5}

    config = make_config(tmp_path, max_steps=11, eval_every="epoch", save_every="epoch", keep_last=10)
    Trainer(build(minilm_path), sentences(), config, evaluator=evaluator).train()
    records = read_log(tmp_path / "train_log.jsonl")
    assert [record["step"] for record in records if "eval/score" in record] == [3, 5, 8, 10, 11]
    saved = sorted(folder.name for folder in (tmp_path / "checkpoints").glob("step-*"))
    assert saved == [f"step-{step:06d}" for step in (3, 5, 8, 10, 11)]
