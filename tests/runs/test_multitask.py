"""Multi-task BERT (CS224N report) on small slices of the minBERT SST-5 / Quora / STS files.

The references are written from the report: §4 "Dense Prediction Heads" (a cross-encoder in both orders plus
the difference, a linear layer per branch, an activation, a final linear layer), §4 "Parameter Sharing" (a
common tanh layer first), §6.1 (the pooler output), §3.2 (multiple negatives ranking), §4 "Random Batch
Sampling" (PCGrad, "the mean of the input gradients"), §5 (the plain mean of the three scores), Table 2
(task orders, 2× Quora).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from contrastext.data.examples import TaskExample
from contrastext.data.sampling import JointTaskBatchSampler
from contrastext.errors import ConfigError
from contrastext.methods.pcgrad import pcgrad
from contrastext.models.encoder import TextEncoder
from contrastext.runs.data import load_multitask_data
from contrastext.runs.multitask import (
    MultitaskArgs,
    batch_sampler,
    build,
    prestep_examples,
    schedule_description,
)
from contrastext.runs.registry import run_recipe
from contrastext.training.method import total_loss
from tests.runs.recipe_runs import RECIPES, read_log, recipe_config, train_overrides

pytestmark = pytest.mark.usefixtures("single_torch_thread")

TASKS = ("minbert-sst", "minbert-quora", "minbert-sts")
FAST = [
    *train_overrides(epochs=None, max_steps=3, batch_size=4, lr="1e-4", warmup_ratio=0, eval_every=None),
    "data.max_length=24",
    "data.limit=4",  # one batch per task
    "eval.limit=12",
    "method_args.simcse=none",
]


@pytest.fixture(scope="module")
def tiny_bert(make_tiny_bert) -> str:
    """A randomly initialised 2-layer, 64-wide BERT with all-MiniLM-L6-v2's vocabulary (tests/conftest.py).

    It has BERT's pooler layer, so the recipe's ``pooling: pooler`` reads it. The recipe's default model is
    all-MiniLM-L6-v2; a tiny backbone keeps the tests within budget on 2 shared CPU cores.
    """
    return make_tiny_bert(hidden_size=64)


def fast_config(tmp_path, model_path, *overrides: str):
    return recipe_config("multitask", tmp_path, model_path, *FAST, *overrides)


def logged_tasks(folder) -> list[str]:
    """The task of each logged step (one task per batch)."""
    tasks = []
    for record in read_log(folder):
        names = [name for name in TASKS if f"loss/{name}" in record]
        assert len(names) == 1, record
        tasks.append(names[0])
    return tasks


def test_recipe_defaults_are_the_reports_final_setting():
    from contrastext.training.config import load_config

    config = load_config(RECIPES / "multitask.yaml")
    args = config.method_args_as(MultitaskArgs)
    # §5.1 / Table 2 Exp 13-15: 5 epochs, lr 1e-5, batch 64, MT-DNN sampling with 2x QQP.
    assert (config.train.epochs, config.train.lr, config.train.batch_size) == (5, 1e-5, 64)
    assert config.data.task_sampling == "proportional"
    assert dict(zip(config.data.tasks, config.data.task_weights, strict=True))["minbert-quora"] == 2.0
    assert config.train.metric_for_best == "mean"
    assert (args.pooling, args.pair_encoding, args.pair_difference, args.pair_activation, args.shared_layer) == (
        "pooler", "joint", True, "tanh", True)
    assert (args.simcse, args.simcse_task, args.simcse_epochs) == ("supervised", "nli-triplets", 100)
    assert (args.pcgrad, args.pcgrad_reduction, args.mnr) == (False, "mean", False)
    assert config.data.round_robin_order == ["minbert-sst", "minbert-sts", "minbert-sst", "minbert-sts", "minbert-quora"]
    assert config.data.sequential_order == ["minbert-quora", "minbert-sst", "minbert-sts"]


def test_pair_heads_are_cross_encoders_in_both_orders_with_the_difference(tmp_path, tiny_bert, data_root):
    config = fast_config(tmp_path, tiny_bert)
    method = build(config, config.method_args_as(MultitaskArgs), data_root).method.eval()
    pairs = [("how do i learn python ?", "what is the best way to learn python ?"), ("is it raining ?", "why ?")]
    rows = [TaskExample(texts, label, task=1) for texts, label in zip(pairs, [1, 0], strict=True)]
    batch = method.collate(rows)["minbert-quora"]

    # [CLS] s1 [SEP] s2 [SEP] for rows 0..B-1, [CLS] s2 [SEP] s1 [SEP] for rows B..2B-1, segment ids 0 / 1.
    tokenizer = method.encoder.tokenizer
    for row, (s1, s2) in enumerate(pairs):
        for texts, position in (((s1, s2), row), ((s2, s1), row + len(pairs))):
            encoded = tokenizer(*texts)
            length = len(encoded["input_ids"])
            assert batch["joint"]["input_ids"][position, :length].tolist() == encoded["input_ids"]
            assert batch["joint"]["token_type_ids"][position, :length].tolist() == encoded["token_type_ids"]

    # By hand: BERT's pooler output of each order (the HF backbone directly), the common layer
    # c(x) = tanh(W_c x + b_c), one linear layer per branch, tanh, then the output layer (one logit).
    with torch.no_grad():
        pooled = method.encoder.backbone(**batch["joint"]).pooler_output
        e12, e21 = pooled[: len(pairs)], pooled[len(pairs) :]
        shared, head = method.shared.linear, method.heads["minbert-quora"]

        def common(x):
            return torch.tanh(x @ shared.weight.T + shared.bias)

        branch = [torch.tanh(common(x) @ layer.weight.T + layer.bias)
                  for x, layer in zip((e12, e21, e12 - e21), head.branches, strict=True)]
        expected = (torch.cat(branch, dim=-1) @ head.output.weight.T + head.output.bias).squeeze(-1)
        logits = method.outputs("minbert-quora", batch)
        loss = method.task_loss("minbert-quora", batch)
    torch.testing.assert_close(logits, expected, atol=1e-5, rtol=1e-5)
    # One logit, binary cross-entropy (§4 "a single logit with BCELoss"), labels (1, 0).
    p = torch.sigmoid(expected)
    torch.testing.assert_close(loss, -(torch.log(p[0]) + torch.log(1 - p[1])) / 2, atol=1e-5, rtol=1e-5)
    predictions = method.predict(rows, task="minbert-quora")
    assert predictions.tolist() == (expected > 0).long().tolist()


def test_scored_heads_start_at_the_mean_training_score(tmp_path, tiny_bert, data_root):
    for encoding in ("joint", "separate"):
        config = fast_config(tmp_path, tiny_bert, f"method_args.pair_encoding={encoding}")
        bundle = build(config, config.method_args_as(MultitaskArgs), data_root)
        method = bundle.method.eval()
        sts = [example for example in bundle.train_examples if example.task == 2]
        mean = sum(float(example.label) for example in sts) / len(sts)
        bias = (method.heads["minbert-sts"].output if encoding == "joint"
                else method.heads["minbert-sts"].classifier.linear).bias
        assert bias.item() == pytest.approx(mean, abs=1e-6)
        # the class heads keep PyTorch's initialisation
        assert abs(method.heads["minbert-sst"].linear.bias).max().item() < 1.0
    torch_init = fast_config(tmp_path, tiny_bert, "method_args.score_bias_init=torch")
    method = build(torch_init, torch_init.method_args_as(MultitaskArgs), data_root).method
    assert abs(method.heads["minbert-sts"].output.bias.item()) < 1.0  # U(-1/sqrt(3), 1/sqrt(3))
    with pytest.raises(ValueError, match="not a scored pair task"):
        method.start_scores_at({"minbert-sst": 2.0})


def test_separate_pair_encoding_is_the_bi_encoder_option(tmp_path, tiny_bert, data_root):
    config = fast_config(tmp_path, tiny_bert, "method_args.pair_encoding=separate")
    method = build(config, config.method_args_as(MultitaskArgs), data_root).method.eval()
    batch = method.collate([TaskExample(("a b", "c d e"), 2.5, task=2)])["minbert-sts"]
    assert set(batch) == {"first", "second", "labels"}
    assert batch["first"]["input_ids"][0].tolist() == method.encoder.tokenizer("a b")["input_ids"]


def test_multiple_negatives_ranking_part_is_infonce_over_quora_duplicates(tmp_path, tiny_bert, data_root):
    config = fast_config(tmp_path, tiny_bert, "method_args.mnr=true", "method_args.mnr_temperature=0.1")
    method = build(config, config.method_args_as(MultitaskArgs), data_root).method.eval()
    pairs = [("a cat sat", "a cat was sitting"), ("red car", "blue sky"), ("dogs bark", "a dog barks"),
             ("we eat", "they eat food")]
    rows = [TaskExample(texts, label, task=1) for texts, label in zip(pairs, [1, 0, 1, 1], strict=True)]
    with torch.no_grad():
        parts = method(method.collate(rows))
        duplicates = [pairs[0], pairs[2], pairs[3]]
        # Henderson et al.: each text encoded alone; −(1/K) Σ_i log softmax_j(cos(x_i, y_j)/τ)_i.
        tokens = method.encoder.tokenize([x for x, _ in duplicates] + [y for _, y in duplicates])
        pooled = method.encoder.backbone(**tokens).pooler_output
        x, y = F.normalize(pooled[:3], dim=-1), F.normalize(pooled[3:], dim=-1)
        logits = x @ y.T / 0.1
        expected = -torch.stack([logits[i, i] - torch.logsumexp(logits[i], dim=0) for i in range(3)]).mean()
    assert set(parts) == {"minbert-quora", "mnr"}
    torch.testing.assert_close(parts["mnr"], expected, atol=1e-5, rtol=1e-5)
    assert method.loss_weights["mnr"] == 1.0


def test_round_robin_follows_the_order_list(tmp_path, tiny_bert, data_root):
    # data.limit=4 and batch 4: one batch per task, so one epoch is the recipe's order (Table 2 Exp 3).
    config = fast_config(tmp_path, tiny_bert, "data.task_sampling=round_robin", "train.max_steps=6")
    run_recipe(config, data_root=data_root)
    order = ["minbert-sst", "minbert-sts", "minbert-sst", "minbert-sts", "minbert-quora"]
    assert logged_tasks(tmp_path) == order + order[:1]


def test_sequential_trains_all_epochs_of_a_task_before_the_next(tmp_path, tiny_bert, data_root):
    # Order (Exp 2): Quora, SST, STS; 2 epochs of one batch each: quora, quora, sst, sst, sts, sts.
    config = fast_config(tmp_path, tiny_bert, "data.task_sampling=sequential", "train.max_steps=null",
                         "train.epochs=2")
    run_recipe(config, data_root=data_root)
    assert logged_tasks(tmp_path) == ["minbert-quora"] * 2 + ["minbert-sst"] * 2 + ["minbert-sts"] * 2


def test_proportional_epoch_holds_every_batch_once_and_quora_twice(tmp_path, tiny_bert, data_root):
    config = fast_config(tmp_path, tiny_bert, "train.max_steps=null", "train.epochs=1")
    summary = run_recipe(config, data_root=data_root)
    tasks = logged_tasks(tmp_path)
    assert sorted(tasks) == sorted(["minbert-sst", "minbert-quora", "minbert-quora", "minbert-sts"])
    metrics = summary["metrics"]
    sst, quora, sts = (metrics["minbert-sst_dev_accuracy"], metrics["minbert-quora_dev_accuracy"],
                       metrics["minbert-sts_dev_pearson"])
    # §5: "the average of SST accuracy, STS pearson correlation coefficient, and the paraphrase detection accuracy".
    assert metrics["mean"] == pytest.approx((sst + quora + sts) / 3)
    assert metrics["leaderboard_mean"] == pytest.approx((sst + quora + (sts + 100) / 2) / 3)
    assert summary["report"]["sampling"] == {"strategy": "proportional", "weights": [1.0, 2.0, 1.0],
                                             "temperature": 1.0, "replacement": False}
    assert "holdout" in summary["report"]["tasks"]["minbert-quora"]["eval"]


def test_quora_holdout_is_fixed_and_disjoint(tmp_path, tiny_bert, data_root):
    config = fast_config(tmp_path, tiny_bert, "data.limit=null", "eval.limit=null", "data.tasks=[minbert-quora]",
                         "data.task_weights=null")
    data = load_multitask_data(config, MultitaskArgs(), data_root)
    again = load_multitask_data(config, MultitaskArgs(), data_root)
    train_texts = {example.texts for example in data.train}
    eval_texts = [example.texts for example in data.eval["minbert-quora"]]
    assert eval_texts == [example.texts for example in again.eval["minbert-quora"]]
    assert len(eval_texts) == pytest.approx(0.2 * (len(train_texts) + len(eval_texts)), abs=50)
    assert not any(texts in train_texts for texts in eval_texts[:500])


def test_pcgrad_steps_use_every_task_and_average_the_projected_gradients(tmp_path, tiny_bert, data_root):
    config = fast_config(tmp_path, tiny_bert, "method_args.pcgrad=true")
    bundle = build(config, config.method_args_as(MultitaskArgs), data_root)
    method = bundle.method
    batch_indices = JointTaskBatchSampler([4, 4, 4], batch_size=4, seed=0).batches(0)[0]
    assert sorted(bundle.train_examples[i].task for i in batch_indices) == [0] * 4 + [1] * 4 + [2] * 4

    batch = method.collate([bundle.train_examples[i] for i in batch_indices])
    # forward takes the PCGrad path when the method is training; dropout stays off in its submodules.
    method.eval()
    method.training = True
    method.set_generator(torch.Generator().manual_seed(0))  # the random order of the projections
    parts = method(batch)
    assert set(parts) == {*TASKS, "pcgrad"} and float(parts["pcgrad"].detach()) == 0.0
    assert all(not parts[name].requires_grad for name in TASKS)
    total_loss(parts, method.loss_weights).backward()
    weight = method.encoder.backbone.embeddings.word_embeddings.weight
    head = method.heads["minbert-sst"].linear.weight
    applied, applied_head = weight.grad.clone(), head.grad.clone()

    # By hand: per-task gradients on the full shared vector, projected, then the MEAN (the report §4).
    shared = [p for p in [*method.encoder.parameters(), *method.shared.parameters()] if p.requires_grad]
    flat = []
    for name in TASKS:
        grads = torch.autograd.grad(method.task_loss(name, batch[name]), shared, allow_unused=True)
        flat.append(torch.cat([(torch.zeros_like(p) if g is None else g).reshape(-1)
                               for g, p in zip(grads, shared, strict=True)]))
    combined = pcgrad(flat, generator=torch.Generator().manual_seed(0)) / 3  # Yu et al.'s sum, over 3 tasks
    offset = sum(p.numel() for p in shared[: next(i for i, p in enumerate(shared) if p is weight)])
    expected = combined[offset : offset + weight.numel()].view_as(weight)
    assert torch.allclose(applied, expected, atol=1e-7)
    # A head gets its own task's gradient, not divided by the number of tasks.
    torch.testing.assert_close(applied_head, torch.autograd.grad(method.task_loss("minbert-sst", batch["minbert-sst"]), head)[0])


def test_supervised_simcse_prestep_reads_nli_triplets_and_trains_the_encoder(tmp_path, tiny_bert, data_root):
    config = fast_config(tmp_path, tiny_bert, "method_args.simcse=supervised", "method_args.simcse_steps=2",
                         "method_args.simcse_batch_size=4", "train.max_steps=1", "data.limit=8")
    args = config.method_args_as(MultitaskArgs)
    rows, where = prestep_examples(config, args, data_root, [])
    assert len(rows) == 8 and all(len(row.texts) == 3 for row in rows) and "simcse" in where
    summary = run_recipe(config, data_root=data_root)
    prestep = read_log(tmp_path / "simcse-prestep")
    assert [record["step"] for record in prestep] == [1, 2]
    assert summary["report"]["simcse"]["data"] == where and summary["report"]["simcse"]["n_train"] == 8
    before = TextEncoder.load(tiny_bert).backbone.encoder.layer[0].attention.self.query.weight
    after = TextEncoder.load(tmp_path / "simcse-prestep" / "final" / "encoder").backbone.encoder.layer[0].attention.self.query.weight
    assert not torch.allclose(before, after)
    # Unsupervised stays an option: the distinct texts of the multi-task rows, one per example.
    unsup = config.method_args_as(MultitaskArgs).model_copy(update={"simcse": "unsupervised"})
    texts, _ = prestep_examples(config, unsup, data_root, [TaskExample(("a", "b"), 1, task=1),
                                                         TaskExample(("a",), 0, task=0)])
    assert [row.texts for row in texts] == [("a",), ("b",)]


def test_bad_settings_are_named(tmp_path, tiny_bert, data_root):
    with pytest.raises(ConfigError, match=r"method_args\.pcgrd"):
        run_recipe(fast_config(tmp_path, tiny_bert, "method_args.pcgrd=true"), data_root=data_root)
    with pytest.raises(ConfigError, match="eval.tasks"):
        run_recipe(fast_config(tmp_path, tiny_bert, "eval.tasks=[stsb:dev]"), data_root=data_root)
    with pytest.raises(ConfigError, match="loss_weights"):
        run_recipe(fast_config(tmp_path, tiny_bert, "method_args.loss_weights={sst: 2.0}"), data_root=data_root)
    with pytest.raises(ConfigError, match=r"data\.round_robin_order.*unknown: \['sst'\]"):
        run_recipe(fast_config(tmp_path, tiny_bert, "data.task_sampling=round_robin",
                               "data.round_robin_order=[sst, minbert-sts]"), data_root=data_root)
    with pytest.raises(ConfigError, match=r"data\.task_weights has 2 values for 3 tasks"):
        run_recipe(fast_config(tmp_path, tiny_bert, "data.task_weights=[1.0, 2.0]"), data_root=data_root)
    with pytest.raises(ConfigError, match=r"method_args\.simcse_task: stsb has kind 'sts'"):
        run_recipe(fast_config(tmp_path, tiny_bert, "method_args.simcse=supervised", "method_args.simcse_task=stsb"),
                   data_root=data_root)
    with pytest.raises(ConfigError, match=r"method_args\.mnr_task"):
        run_recipe(fast_config(tmp_path, tiny_bert, "method_args.mnr=true", "method_args.mnr_task=minbert-sts"),
                   data_root=data_root)


def test_limit_rows_random_draws_each_task_on_its_own_stream(tmp_path, data_root):
    first = load_multitask_data(fast_config(tmp_path, "unused-model", "data.limit=30"), MultitaskArgs(), data_root)
    config = fast_config(tmp_path, "unused-model", "data.limit=30", "data.limit_rows=random")
    drawn = load_multitask_data(config, MultitaskArgs(), data_root)
    again = load_multitask_data(config, MultitaskArgs(), data_root)
    assert [e.texts for e in drawn.train] == [e.texts for e in again.train]
    for index in range(3):
        rows = [e.texts for e in drawn.train if e.task == index]
        assert len(rows) == 30 and rows != [e.texts for e in first.train if e.task == index]


def test_pcgrad_says_that_it_ignores_the_task_weights(tmp_path, caplog):
    # PCGrad batches hold every task (JointTaskBatchSampler), so the recipe's 2x Quora weight cannot apply:
    # the run says so in its log and in the schedule it reports, rather than dropping it silently.
    config = fast_config(tmp_path, "unused-model", "method_args.pcgrad=true")
    args = config.method_args_as(MultitaskArgs)
    with caplog.at_level("WARNING", logger="contrastext.runs"):
        sampler = batch_sampler(config, args, [4, 4, 4], list(TASKS))
    assert isinstance(sampler, JointTaskBatchSampler)
    assert "data.task_weights [1.0, 2.0, 1.0] have no effect with method_args.pcgrad" in caplog.text
    described = schedule_description(config, args, list(TASKS))
    assert described["ignored"] == {"data.task_weights": [1.0, 2.0, 1.0]}

    unweighted = fast_config(tmp_path, "unused-model", "method_args.pcgrad=true", "data.task_weights=null")
    caplog.clear()
    with caplog.at_level("WARNING", logger="contrastext.runs"):
        batch_sampler(unweighted, args, [4, 4, 4], list(TASKS))
    assert caplog.text == ""
    assert "ignored" not in schedule_description(unweighted, args, list(TASKS))


def test_pcgrad_is_refused_across_processes_with_a_clear_error(tmp_path, tiny_bert, data_root, monkeypatch):
    """PCGrad of per-process gradients averaged by DDP is not PCGrad: the method refuses when the trainer starts."""
    import contrastext.methods.multitask as multitask_module

    config = fast_config(tmp_path, tiny_bert, "method_args.pcgrad=true")
    method = build(config, config.method_args_as(MultitaskArgs), data_root).method
    method.on_train_start(3)  # one process: fine
    monkeypatch.setattr(multitask_module, "is_distributed", lambda: True)
    with pytest.raises(ConfigError, match="single process"):
        method.on_train_start(3)


def test_the_task_schedule_keys_moved_to_data_name_their_new_place():
    """The schedule is data.* with data.task_sampling (issue 20): an old method_args key names its data key."""
    from contrastext.training.config import load_config

    for key, value in (("round_robin_order", "[minbert-sst]"), ("sequential_order", "[minbert-sst]"),
                       ("round_robin_unit", "batch"), ("proportional_replacement", "true")):  # fmt: skip
        config = load_config(RECIPES / "multitask.yaml", [f"method_args.{key}={value}"])
        with pytest.raises(ConfigError, match=rf"--set method_args.{key} .*set data.{key}$"):
            config.method_args_as(MultitaskArgs)
