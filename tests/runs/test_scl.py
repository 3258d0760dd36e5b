"""SCL end to end on small slices of real GLUE data: the paper's protocol (Gunel et al., ICLR 2021, §4.1), the
parts of Eq. 1 and 3, few-shot draws and label flips, and the top-3-by-validation summary."""

from __future__ import annotations

import json
import math
import statistics
from collections import Counter

import pytest
import torch

from contrastext.data.tasks import get_task
from contrastext.errors import ConfigError
from contrastext.methods.scl import SCLMethod
from contrastext.models.heads import ClassificationHead, DenseTanhHead
from contrastext.runs.registry import get_recipe, run_recipe
from contrastext.runs.scl import FEW_SHOT_SAMPLING, SCLArgs, all_draws, build, load_data, top_k_by_validation
from contrastext.runs.stages import run_training
from contrastext.training.config import load_config
from tests.objectives import naive_objectives as naive
from tests.runs.recipe_runs import RECIPES, read_log, recipe_config, train_overrides

FAST = [
    *train_overrides(max_steps=3, batch_size=8, lr="1e-4", warmup_ratio=0, eval_every=None),
    "data.max_length=32",
    "eval.limit=40",  # 40 dev rows: 20 test, 20 validation
]


def fast_config(tmp_path, model_path, *overrides: str):
    return recipe_config("scl", tmp_path, model_path, *FAST, *overrides)


def test_recipe_defaults_are_the_papers():
    """§4.1: Adam, lr 1e-5, batch 16, dropout 0.1; N in total; 10 draws; top 3 by validation; Eq. 3 sums."""
    config = load_config(RECIPES / "scl.yaml", [])
    args = SCLArgs.model_validate(config.method_args)
    assert (config.train.lr, config.train.batch_size, config.train.weight_decay) == (1e-5, 16, 0.0)
    assert config.data.few_shot == 20 and config.data.few_shot_sampling == "label_distribution"
    assert args.seeds == list(range(1, 11)) and args.top_k == 3 and args.report_metric == "accuracy"
    assert (args.protocol, args.validation_size, args.test_share) == ("validation_test", 500, 0.5)
    assert args.supcon_reduction == "sum" and args.head_dropout == 0.1 and args.pooling == "cls"
    defaults = SCLArgs()
    assert (defaults.protocol, FEW_SHOT_SAMPLING, defaults.supcon_reduction) == (
        "validation_test", "label_distribution", "sum"
    )


def test_the_moved_few_shot_sampling_key_names_its_new_place():
    """The draw's keys are all data.* (issue 20): the old method_args key is an error naming data.few_shot_sampling."""
    config = load_config(RECIPES / "scl.yaml", ["method_args.few_shot_sampling=per_class"])
    with pytest.raises(ConfigError, match=r"--set method_args.few_shot_sampling .*set data.few_shot_sampling"):
        config.method_args_as(SCLArgs)


def test_checkpoint_is_selected_on_validation_and_scored_once_on_test(tmp_path, tiny_bert_path, data_root):
    config = fast_config(
        tmp_path, tiny_bert_path, "data.limit=300", "data.few_shot=8", "train.max_steps=4", "train.eval_every=1",
        "train.save_every=1", "train.lr=5e-3",
    )
    args = get_recipe("scl").args_model.model_validate(config.method_args)
    data = load_data(config, args, data_root)
    assert len(data.eval) == 20 and len(data.test) == 20
    assert not {e.source for e in data.eval} & {e.source for e in data.test}
    bundle = build(config, args, data_root)
    summary = run_training(config, bundle)

    evals = [record for record in read_log(tmp_path) if "eval/sst2_validation_accuracy" in record]
    assert [record["step"] for record in evals] == [1, 2, 3, 4]
    assert not any(key.startswith("eval/sst2_test") or key.startswith("eval/sst2_dev") for r in evals for key in r)
    values = [record["eval/sst2_validation_accuracy"] for record in evals]
    best = values.index(max(values))  # the first maximum: a later equal value is no improvement
    assert summary["best_step"] == evals[best]["step"] and summary["best_metric"] == max(values)
    assert summary["metrics"]["score"] == summary["metrics"]["sst2_validation_accuracy"] == max(values)
    assert not any(key.startswith("sst2_test") for key in summary["metrics"])

    # The method now holds the selected weights: its test accuracy, computed here by hand, is the report's.
    predicted = bundle.method.predict(data.test, batch_size=16, task="sst2")
    expected = 100 * sum(int(p) == e.label for p, e in zip(predicted, data.test, strict=True)) / len(data.test)
    test_metrics = summary["report"]["test_metrics"]
    assert test_metrics["sst2_test_accuracy"] == pytest.approx(expected)
    assert "score" not in test_metrics and test_metrics["sst2_test_score"] == test_metrics["sst2_test_accuracy"]
    assert summary["report"]["n_validation"] == 20 and summary["report"]["n_test"] == 20


def test_selecting_on_a_key_of_another_split_is_a_config_error(tmp_path, tiny_bert_path, data_root):
    config = fast_config(tmp_path, tiny_bert_path, "data.limit=300", "train.metric_for_best=sst2_test_accuracy")
    with pytest.raises(ConfigError, match=r"train.metric_for_best='sst2_test_accuracy'.*sst2_validation_accuracy"):
        build(config, SCLArgs(), data_root)
    dev_protocol = fast_config(tmp_path, tiny_bert_path, "data.limit=300", "method_args.protocol=dev")
    data = load_data(dev_protocol, SCLArgs(protocol="dev"), data_root)
    assert data.test is None and data.eval_set.prefix == "sst2_dev" and len(data.eval) == 40


def test_top_3_by_validation_and_plain_mean_from_per_draw_numbers():
    """Draws 2 and 5 tie on validation (90, seed order kept), then 3 (85): test 60, 65, 75."""
    per_draw = {
        1: {"v": 80.0, "t": 70.0},
        2: {"v": 90.0, "t": 60.0},
        3: {"v": 85.0, "t": 75.0},
        4: {"v": 70.0, "t": 95.0},
        5: {"v": 90.0, "t": 65.0},
    }
    figure = top_k_by_validation(per_draw, "v", "t", 3)
    assert figure["draws"] == [2, 5, 3] and figure["top_k"] == 3
    assert figure["mean"] == pytest.approx(200 / 3) and figure["std"] == pytest.approx(math.sqrt(175 / 3))
    assert figure["validation_mean"] == pytest.approx(265 / 3)
    assert figure["text"] == "66.67 ± 7.64"
    plain = all_draws(per_draw, "t")
    assert plain["mean"] == pytest.approx(73.0) and plain["std"] == pytest.approx(math.sqrt(182.5))
    assert plain["n"] == 5
    two = top_k_by_validation({1: {"v": 1.0, "t": 2.0}, 2: {"v": 3.0, "t": 4.0}}, "v", "t", 3)
    assert two["draws"] == [2, 1] and two["top_k"] == 2 and two["mean"] == pytest.approx(3.0)


def test_draws_summary_reports_the_papers_figure_and_all_draws(tmp_path, tiny_bert_path, data_root):
    config = fast_config(
        tmp_path,
        tiny_bert_path,
        "data.limit=300",
        "data.few_shot=8",
        "data.label_noise=0.25",
        "method_args.seeds=[1, 2, 3, 4]",
        "train.lr=5e-3",
    )
    lam = config.method_args["lam"]
    assert 0 < lam < 1  # both parts weigh in the total checked below
    result = run_recipe(config, data_root=data_root)

    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["seeds"] == [1, 2, 3, 4] and summary["protocol"] == "validation_test"
    per_seed = {s: json.loads((tmp_path / f"seed-{s}" / "metrics.json").read_text()) for s in (1, 2, 3, 4)}
    validation = {s: run["metrics"]["sst2_validation_accuracy"] for s, run in per_seed.items()}
    test = {s: run["report"]["test_metrics"]["sst2_test_accuracy"] for s, run in per_seed.items()}
    top3 = sorted(validation, key=lambda s: -validation[s])[:3]
    figure = summary["paper_figure"]
    assert figure["metric"] == "sst2_test_accuracy" and figure["selected_by"] == "sst2_validation_accuracy"
    assert figure["draws"] == top3
    assert figure["mean"] == pytest.approx(statistics.fmean(test[s] for s in top3))
    assert figure["std"] == pytest.approx(statistics.stdev(test[s] for s in top3))
    assert summary["all_draws"]["mean"] == pytest.approx(statistics.fmean(test.values()))
    assert summary["all_draws"]["std"] == pytest.approx(statistics.stdev(test.values()))
    assert result["metrics"]["top3_sst2_test_accuracy"] == pytest.approx(figure["mean"])
    assert result["metrics_std"]["top3_sst2_test_accuracy"] == pytest.approx(figure["std"])
    assert summary["summary"]["sst2_validation_accuracy"]["mean"] == pytest.approx(statistics.fmean(validation.values()))
    for seed, run in per_seed.items():
        report = run["report"]
        assert report["draw_seed"] == seed and report["n_train"] == 8 and report["labels_flipped"] == 2
        assert sum(report["train_label_counts"].values()) == 8
        log = read_log(tmp_path / f"seed-{seed}")
        assert [record["step"] for record in log] == [1, 2, 3]
        for record in log:  # the logged total is Eq. 1 of the logged parts, at the recipe's λ
            expected = (1 - lam) * record["loss/ce"] + lam * record["loss/supcon"]
            assert record["loss"] == pytest.approx(expected, rel=1e-5)


def test_pair_task_trains_and_changes_parameters(tmp_path, tiny_bert_path, data_root):
    config = fast_config(tmp_path, tiny_bert_path, "data.task=mrpc", "eval.tasks=[mrpc:dev]", "data.few_shot=8")
    args = get_recipe("scl").args_model.model_validate({"lam": 0.9, "temperature": 0.3})
    bundle = build(config, args, data_root)
    assert Counter(example.label for example in bundle.train_examples) == {0: 3, 1: 5}  # MRPC train: 1194 / 2474
    before = {name: value.detach().clone() for name, value in bundle.method.named_parameters()}
    summary = run_training(config, bundle)
    after = dict(bundle.method.named_parameters())
    assert not torch.equal(before["head.out_proj.weight"], after["head.out_proj.weight"])
    changed = [name for name in before if name.startswith("encoder.") and not torch.equal(before[name], after[name])]
    assert changed, "no encoder parameter changed"
    assert summary["metrics"]["score"] == summary["metrics"]["mrpc_validation_f1"]  # MRPC's metric is F1
    assert "mrpc_test_f1" in summary["report"]["test_metrics"]
    assert bundle.method.loss_weights == pytest.approx({"ce": 0.1, "supcon": 0.9})


@pytest.mark.parametrize("reduction", ["sum", "mean"])
def test_parts_are_ce_and_eq_3_on_the_cls_vector(tmp_path, minilm_path, data_root, reduction):
    config = fast_config(tmp_path, minilm_path, "data.limit=200", "data.few_shot=8")
    bundle = build(config, SCLArgs(supcon_reduction=reduction), data_root)
    method = bundle.method.eval()  # no dropout: parts are reproducible
    batch = method.collate(bundle.train_examples)
    with torch.no_grad():
        parts = method(batch)
        cls = method.encode_batch(batch).pooled
        logits = method.head(cls)
    assert set(parts) == {"ce", "supcon"}
    assert parts["ce"].item() == pytest.approx(naive.cross_entropy(logits, batch["labels"]), rel=1e-5)
    expected = naive.supcon(cls, batch["labels"], tau=0.3, reduction=reduction)
    assert parts["supcon"].item() == pytest.approx(expected, rel=1e-5)
    if reduction == "sum":  # every anchor of this 8-row draw has a positive: Eq. 3's sum is 8 × the mean
        assert min(Counter(batch["labels"].tolist()).values()) >= 2
        assert expected == pytest.approx(8 * naive.supcon(cls, batch["labels"], tau=0.3, reduction="mean"))


def test_the_head_is_the_papers_dense_tanh_by_default_and_linear_on_request(tmp_path, tiny_bert_path, data_root):
    """fairseq's RobertaClassificationHead (dropout, dense, tanh, dropout, out_proj) unless method_args.head=linear."""
    assert SCLArgs().head == "dense_tanh"
    config = fast_config(tmp_path, tiny_bert_path, "data.limit=64", "data.few_shot=8")
    paper = build(config, config.method_args_as(SCLArgs), data_root).method
    assert isinstance(paper.head, DenseTanhHead)
    width = paper.encoder.hidden_size
    assert (paper.head.dense.in_features, paper.head.dense.out_features, paper.head.out_proj.out_features) == (
        width, width, 2)
    config = fast_config(tmp_path, tiny_bert_path, "data.limit=64", "data.few_shot=8", "method_args.head=linear")
    linear = build(config, config.method_args_as(SCLArgs), data_root).method
    assert isinstance(linear.head, ClassificationHead) and linear.head_kind == "linear"
    with pytest.raises(ConfigError, match=r"method_args\.head"):
        fast_config(tmp_path, tiny_bert_path, "method_args.head=mlp").method_args_as(SCLArgs)
    with pytest.raises(ConfigError, match=r"method_args\.head: unknown head 'mlp'"):
        SCLMethod(linear.encoder, get_task("sst2"), head="mlp")

def test_regression_needs_lam_zero(tmp_path, minilm_path, data_root):
    config = fast_config(tmp_path, minilm_path, "data.task=stsb", "eval.tasks=[stsb:dev]", "data.few_shot=null",
                         "data.limit=8")
    with pytest.raises(ConfigError, match="lam=0"):
        build(config, SCLArgs(lam=0.9), data_root)
    bundle = build(config, SCLArgs(lam=0.0), data_root)
    assert isinstance(bundle.method, SCLMethod)
    method = bundle.method.eval()
    batch = method.collate(bundle.train_examples)
    with torch.no_grad():
        parts = method(batch)
        predicted = method.head(method.encode_batch(batch).pooled).squeeze(-1)
    assert set(parts) == {"mse"}
    expected = statistics.fmean((p - e.label) ** 2 for p, e in zip(predicted.tolist(), bundle.train_examples, strict=True))
    assert parts["mse"].item() == pytest.approx(expected, rel=1e-5)


def test_unknown_method_arg_names_key_and_file(tmp_path, minilm_path, data_root):
    config = fast_config(tmp_path, minilm_path, "method_args.lambda=0.5")
    with pytest.raises(ConfigError, match=r"method_args\.lambda"):
        run_recipe(config, data_root=data_root)
