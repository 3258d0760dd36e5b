"""Config loading: overrides, and errors that name the dotted key and the file (or the --set)."""

from __future__ import annotations

from typing import ClassVar

import pytest
import yaml
from pydantic import BaseModel, ConfigDict, field_validator

from contrastext.data.views import VIEWS
from contrastext.errors import ConfigError
from contrastext.training.config import (
    TrainConfig,
    load_config,
    parse_override,
    registered,
    validate_method_args,
)
from contrastext.training.key_names import HF_NAMES, config_keys

RECIPE = """\
method: simcse-unsup
model: bundled:all-MiniLM-L6-v2
output_dir: runs/x
seed: 7
train:
  max_steps: 100
  batch_size: 16
data:
  task: wiki1m
  max_length: 32
eval:
  tasks: [stsb:dev]
method_args:
  temperature: 0.05
"""


class SimArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    temperature: float = 0.05
    pooling: str = "cls"


@pytest.fixture
def recipe(tmp_path):
    path = tmp_path / "recipe.yaml"
    path.write_text(RECIPE)
    return path


def test_load_with_overrides(recipe):
    config = load_config(
        recipe,
        [
            "train.max_steps=10",
            "method_args.temperature=0.1",
            "eval.tasks=[stsb:dev, sickr]",
            "train.metric_for_best=stsb/spearman",
        ],
    )
    assert config.train.max_steps == 10 and config.train.batch_size == 16
    assert config.eval.tasks == ["stsb:dev", "sickr"]
    assert config.train_seed == 7 and config.source == str(recipe)
    assert config.method_args_as(SimArgs).temperature == 0.1


def test_unknown_key_names_key_and_file(recipe):
    recipe.write_text(RECIPE.replace("batch_size: 16", "batch_sise: 16"))
    with pytest.raises(ConfigError, match=rf"{recipe}: train.batch_sise: unknown key"):
        load_config(recipe)


@pytest.mark.parametrize(
    ("written", "hint"),
    [
        ("train.learning_rate=1e-5", "did you mean train.lr?"),
        ("learning_rate=1e-5", "did you mean train.lr?"),
        ("data.learning_rate=1e-5", "did you mean train.lr?"),
        ("num_train_epochs=2", "did you mean train.epochs?"),
        ("train.fp16=true", "did you mean train.mixed_precision? (set it to fp16)"),
        ("bf16=true", "did you mean train.mixed_precision? (set it to bf16)"),
        ("train.save_total_limit=2", "did you mean train.keep_last?"),
        ("train.gradient_accumulation_steps=4", "did you mean train.grad_accumulation?"),
        ("train.lr_scheduler_type=linear", "did you mean train.schedule?"),
        ("optim=adafactor", "did you mean train.optimizer? (adamw, adam, adafactor or sgd)"),
        ("train.optim_args=momentum=0.9", "did you mean train.momentum? (SGD's momentum;"),
        ("gradient_checkpointing=true", "did you mean train.gradient_checkpointing?"),
        ("train.lr_scheduler_kwargs={power: 2}", "did you mean train.schedule? (its settings are keys of their own"),
        ("train.per_device_train_batch_size=8", "did you mean train.batch_size? (ours is the global batch"),
        ("train.max_grad_norm=1.0", "did you mean train.grad_clip?"),
        ("train.eval_steps=50", "did you mean train.eval_every?"),
        ("logging_steps=5", "did you mean train.log_every?"),
        ("report_to=none", "did you mean train.report_to?"),
        ("max_seq_length=64", "did you mean data.max_length?"),
        ("warmup_ratio=0.1", "did you mean train.warmup_ratio?"),
        ("train.max_length=64", "did you mean data.max_length?"),  # the same name in another section
        ("limit=5", "did you mean data.limit or eval.limit?"),
        ("train.batch_sise=8", "did you mean train.batch_size?"),  # a close spelling
        ("train.learning_rte=1e-5", "did you mean train.lr?"),  # a close spelling of a Hugging Face name
        ("trian.lr=1e-5", "did you mean train?"),
    ],
)
def test_an_unknown_key_gets_a_did_you_mean_that_knows_hugging_face_names(recipe, written, hint):
    key = written.partition("=")[0]
    with pytest.raises(ConfigError) as caught:
        load_config(recipe, [written])
    message = str(caught.value)
    assert message.startswith(f"--set {key} (over {recipe}): ")
    assert f": unknown key; {hint}" in message


def test_a_hugging_face_name_in_the_recipe_file_gets_the_did_you_mean(recipe):
    recipe.write_text(RECIPE.replace("  batch_size: 16", "  learning_rate: 2.0e-5\n  per_device_train_batch_size: 16"))
    with pytest.raises(ConfigError) as caught:
        load_config(recipe)
    message = str(caught.value)
    assert f"{recipe}: train.learning_rate: unknown key; did you mean train.lr?" in message
    assert f"{recipe}: train.per_device_train_batch_size: unknown key; did you mean train.batch_size? (ours is " \
        "the global batch of all processes together, not per device)" in message


def test_nothing_close_is_a_bare_unknown_key(recipe):
    with pytest.raises(ConfigError, match=r"train.zzzz: unknown key$"):
        load_config(recipe, ["train.zzzz=1"])


def test_method_args_get_a_did_you_mean_too(recipe):
    with pytest.raises(ConfigError, match=r"method_args.temprature: unknown key; did you mean method_args.temperature\?"):
        validate_method_args(SimArgs, {"temprature": 0.1}, recipe)
    with pytest.raises(ConfigError, match=r"method_args.learning_rate: unknown key; did you mean train.lr\?"):
        validate_method_args(SimArgs, {"learning_rate": 0.1}, recipe)


def test_every_hugging_face_name_is_theirs_and_maps_to_one_of_our_keys():
    """The table names real fields of transformers' TrainingArguments (or sentence-transformers' training
    arguments; max_seq_length is a SentenceTransformer attribute) and real contrastext keys."""
    import dataclasses

    from sentence_transformers import SentenceTransformerTrainingArguments
    from transformers import TrainingArguments

    theirs = {field.name for field in dataclasses.fields(TrainingArguments)}
    theirs |= {field.name for field in dataclasses.fields(SentenceTransformerTrainingArguments)}
    ours = set(config_keys(TrainConfig))
    for name, (key, _) in HF_NAMES.items():
        assert name in theirs or name == "max_seq_length", name
        assert key in ours, (name, key)


def test_schedule_optimizer_and_checkpointing_keys(recipe):
    config = load_config(recipe, ["train.schedule=polynomial", "train.power=2", "train.lr_end=0",
                                  "train.optimizer=sgd", "train.momentum=0.9", "train.gradient_checkpointing=true"])
    train = config.train
    assert (train.schedule, train.power, train.lr_end) == ("polynomial", 2.0, 0.0)
    assert (train.optimizer, train.momentum, train.gradient_checkpointing) == ("sgd", 0.9, True)
    assert load_config(recipe, ["train.schedule=wsd"]).train.schedule == "warmup_stable_decay"
    defaults = load_config(recipe).train
    assert (defaults.schedule, defaults.optimizer, defaults.gradient_checkpointing) == ("linear", "adamw", False)
    assert (defaults.lr_end, defaults.power) == (1e-7, 1.0)  # Hugging Face's polynomial defaults
    with pytest.raises(ConfigError, match=rf"--set train.optimizer \(over {recipe}\): train.optimizer: .*'adafactor'"):
        load_config(recipe, ["train.optimizer=lion"])
    with pytest.raises(ConfigError, match=r"train.schedule: .*'warmup_stable_decay'"):
        load_config(recipe, ["train.schedule=cosine_with_restarts"])


def test_eval_every_and_save_every_take_steps_or_epoch(recipe):
    config = load_config(recipe, ["train.eval_every=epoch", "train.save_every=50"])
    assert (config.train.eval_every, config.train.save_every) == ("epoch", 50)
    assert load_config(recipe, ["train.save_every=epoch"]).train.save_every == "epoch"
    with pytest.raises(ConfigError) as caught:
        load_config(recipe, ["train.eval_every=epochs"])
    assert str(caught.value) == (f"--set train.eval_every (over {recipe}): train.eval_every: Value error, expected a "
                                 "number of steps or `epoch` (got 'epochs')")
    with pytest.raises(ConfigError, match="train.save_every"):
        load_config(recipe, ["train.save_every=0"])


def test_wrong_type_names_key_and_file(recipe):
    recipe.write_text(RECIPE.replace("max_length: 32", "max_length: long"))
    with pytest.raises(ConfigError, match=rf"{recipe}: data.max_length: .*'long'"):
        load_config(recipe)


@pytest.mark.parametrize("written", ["no", "'no'", "off", "false"])
def test_mixed_precision_no_unquoted_is_accelerates_no(recipe, written):
    """YAML 1.1 reads an unquoted no/off as false; Accelerate's name for that setting is "no"."""
    assert load_config(recipe, [f"train.mixed_precision={written}"]).train.mixed_precision == "no"
    recipe.write_text(RECIPE.replace("train:", f"train:\n  mixed_precision: {written}", 1))
    assert load_config(recipe).train.mixed_precision == "no"
    with pytest.raises(ConfigError, match="train.mixed_precision"):
        load_config(recipe, ["train.mixed_precision=yes"])


def test_bad_override_says_it_came_from_set(recipe):
    with pytest.raises(ConfigError, match=r"--set train.max_steps .*recipe.yaml.*train.max_steps"):
        load_config(recipe, ["train.max_steps=ten"])
    with pytest.raises(ConfigError, match=r"--set train.nope .*train.nope: unknown key"):
        load_config(recipe, ["train.nope=1"])
    with pytest.raises(ConfigError, match="expected KEY=VALUE"):
        load_config(recipe, ["train.max_steps"])
    with pytest.raises(ConfigError, match="seed is a value"):
        load_config(recipe, ["seed.x=1"])


def test_missing_length_and_missing_file(recipe, tmp_path):
    recipe.write_text(RECIPE.replace("  max_steps: 100\n", ""))
    with pytest.raises(ConfigError, match="train: .*set train.max_steps or train.epochs"):
        load_config(recipe)
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "absent.yaml")


def test_method_args_are_validated_by_the_method(recipe):
    with pytest.raises(ConfigError, match=rf"{recipe}: method_args.temprature: unknown key"):
        validate_method_args(SimArgs, {"temprature": 0.1}, recipe)
    config = load_config(recipe, ["method_args.pooling=[1]"])
    with pytest.raises(ConfigError, match=r"--set method_args.pooling .*method_args.pooling"):
        config.method_args_as(SimArgs)


def test_parse_override_reads_yaml_scalars():
    assert parse_override("a.b=1e-3") == ("a.b", 1e-3)
    assert parse_override("a=true") == ("a", True)
    assert parse_override("a=null") == ("a", None)
    assert parse_override("model=path/to:x") == ("model", "path/to:x")


# ------------------------------------------------------------------ issue 10: non-finite numbers, encodings

FLOAT_KEYS = [
    "train.epochs",
    "train.lr",
    "train.weight_decay",
    "train.warmup_ratio",
    "train.grad_clip",
    "data.label_noise",
    "data.task_temperature",
]


@pytest.mark.parametrize("key", FLOAT_KEYS)
@pytest.mark.parametrize("value", [".inf", "-.inf", ".nan", "1e999", "inf", "nan"])
def test_every_float_key_rejects_non_finite_numbers(recipe, key, value):
    """train.lr=.inf used to pass validation and gave a run of NaN weights."""
    with pytest.raises(ConfigError, match=rf"--set {key} .*{key}: .*finite"):
        load_config(recipe, [f"{key}={value}"])


def test_non_finite_numbers_in_the_file_and_in_lists_name_the_key(recipe):
    recipe.write_text(RECIPE.replace("  batch_size: 16", "  batch_size: 16\n  lr: .inf"))
    with pytest.raises(ConfigError, match=rf"{recipe}: train.lr: .*finite"):
        load_config(recipe)
    recipe.write_text(RECIPE)
    with pytest.raises(ConfigError, match=r"data.task_weights.1: .*finite"):
        load_config(recipe, ["data.task_weights=[1.0, .nan]"])


def test_non_finite_method_args_name_the_key(recipe):
    with pytest.raises(ConfigError, match=rf"{recipe}: method_args.temperature: expected a finite number"):
        validate_method_args(SimArgs, {"temperature": float("inf")}, recipe)
    config = load_config(recipe, ["method_args.temperature=.nan"])
    with pytest.raises(ConfigError, match=r"--set method_args.temperature .*method_args.temperature: expected a finite"):
        config.method_args_as(SimArgs)
    with pytest.raises(ConfigError, match=r"method_args.weights.1"):
        validate_method_args(SimArgs, {"weights": [1.0, float("-inf")]}, recipe)


def test_a_recipe_that_is_not_utf8_names_the_file_and_line(recipe):
    recipe.write_bytes(RECIPE.encode("utf-8").replace(b"runs/x", b"runs/\xe9t\xe9"))
    with pytest.raises(ConfigError, match=rf"{recipe}:3: not valid UTF-8") as caught:
        load_config(recipe)
    assert "\n" not in str(caught.value)


# ----------------------------------------------------------------------------------------------- YAML bounds (issue 21, item 5)


def test_a_duplicate_key_is_refused_naming_the_key_and_both_lines(tmp_path):
    path = tmp_path / "recipe.yaml"
    path.write_text(RECIPE + "train:\n  batch_size: 4\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    first = RECIPE.splitlines().index("train:") + 1
    second = len(RECIPE.splitlines()) + 1
    assert str(info.value) == f"{path}:{second}: duplicate key 'train' (first at line {first}); a key may appear once"


def test_duplicate_keys_in_a_nested_or_flow_mapping_are_refused(tmp_path):
    path = tmp_path / "recipe.yaml"
    path.write_text(RECIPE.replace("  batch_size: 16\n", "  batch_size: 16\n  max_steps: 5\n"))
    with pytest.raises(ConfigError, match=r":8: duplicate key 'max_steps' \(first at line 6\)"):
        load_config(path)
    path.write_text(RECIPE.replace("tasks: [stsb:dev]", "tasks: {a: 1, a: 2}"))
    with pytest.raises(ConfigError, match="duplicate key 'a'"):
        load_config(path)


def test_a_merge_key_may_still_be_overridden():
    from contrastext.runtime.yaml_reader import read_yaml

    assert read_yaml("base: &b {x: 1, y: 2}\nt:\n  <<: *b\n  x: 3\n")["t"] == {"x": 3, "y": 2}


def _bomb(levels: int = 9) -> str:
    text = "method: simcse-unsup\nl0: &l0 [x, x, x, x, x, x, x, x, x]\n"
    for level in range(1, levels + 1):
        text += f"l{level}: &l{level} [" + ", ".join([f"*l{level - 1}"] * 9) + "]\n"
    return text


@pytest.mark.parametrize(
    "text, message",
    [
        (_bomb(), r":\d+: aliases expand to more than 100,000 values"),
        ("method: simcse-unsup\nx: " + "[" * 20000 + "]" * 20000 + "\n", r":2: nested more than 64 levels deep"),
        ("".join("  " * i + f"k{i}:\n" for i in range(5000)), r":64: nested more than 64 levels deep"),
        ("a0: &a0 [1]\n" + "".join(f"a{i}: &a{i} [*a{i - 1}]\n" for i in range(1, 200)), "aliases nest more"),
        ("x: &x [*x]\n", "an alias refers to its own anchor"),
    ],
    ids=["billion-laughs", "20k-deep-flow", "5k-deep-block", "alias-chain", "alias-cycle"],
)
def test_yaml_bombs_and_deep_nesting_are_one_config_error(tmp_path, text, message):
    import time

    path = tmp_path / "recipe.yaml"
    path.write_text(text)
    started = time.monotonic()
    with pytest.raises(ConfigError, match=message) as info:
        load_config(path)
    assert time.monotonic() - started < 10
    assert str(info.value).startswith(f"{path}:") and "\n" not in str(info.value)


def test_a_deep_set_key_or_value_is_one_config_error(recipe):
    with pytest.raises(ConfigError, match=r"the key has 5000 dotted parts; at most 32 are allowed") as info:
        load_config(recipe, [".".join(["a"] * 5000) + "=1"])
    assert len(str(info.value)) < 200
    with pytest.raises(ConfigError, match=r"--set method_args.x: the value: line 1: nested more than 64 levels"):
        load_config(recipe, ["method_args.x=" + "[" * 5000 + "]" * 5000])
    with pytest.raises(ConfigError, match=r"--set method_args.x: the value: line 1: duplicate key 'a'"):
        load_config(recipe, ["method_args.x={a: 1, a: 2}"])


def test_a_checkpoint_config_with_a_duplicate_key_is_a_config_error(recipe):
    from contrastext.training.resume_check import check_resume_config

    config = load_config(recipe)
    with pytest.raises(ConfigError, match=r"--resume: the config.yaml of ck cannot be read: line 2: duplicate key"):
        check_resume_config("seed: 7\nseed: 8\n", config, "ck")


# --- issue 20: one name per key, registered parts by name ----------------------------------------------------


class MovedArgs(SimArgs):
    moved_keys: ClassVar[dict[str, str]] = {"tau": "method_args.temperature", "old.deep": "data.new_place"}


def test_a_moved_key_is_an_error_naming_the_new_key(recipe, tmp_path):
    with pytest.raises(ConfigError, match=r"--set train.tensorboard \(over .*\): train.tensorboard: .*set train.report_to"):
        load_config(recipe, ["train.tensorboard=false"])
    config = load_config(recipe, ["method_args.tau=0.1"])
    with pytest.raises(ConfigError, match=r"--set method_args.tau .*method_args.tau: .*set method_args.temperature$"):
        config.method_args_as(MovedArgs)
    with pytest.raises(ConfigError, match=r"recipe.yaml: method_args.old.deep: .*set data.new_place"):
        validate_method_args(MovedArgs, {"old": {"deep": 1}}, recipe)
    assert validate_method_args(MovedArgs, {"temperature": 0.1}, recipe).temperature == 0.1


class NamedArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    view: str = "identity"

    @field_validator("view")
    @classmethod
    def _registered(cls, name: str) -> str:
        return registered(name, VIEWS)


def test_a_registered_name_is_checked_against_its_registry_listing_the_names(recipe):
    assert validate_method_args(NamedArgs, {"view": "shuffle"}, recipe).view == "shuffle"
    with pytest.raises(ConfigError, match=r"method_args.view: .*unknown view 'shufle'; known views: delete, identity.*"
                                          r"did you mean 'shuffle'"):  # fmt: skip
        validate_method_args(NamedArgs, {"view": "shufle"}, recipe)


def test_a_config_saved_before_a_key_moved_reads_under_todays_names(recipe):
    """A checkpoint's config.yaml from before issue 20: the moved keys at their new place, the data keys added since
    at their defaults, so resuming it compares like with like (training/resume_check.py)."""
    from contrastext.training.config import dump_config, saved_under_current_names
    from contrastext.training.resume_check import changed_keys

    config = load_config(recipe, ["data.few_shot_sampling=per_class", "data.round_robin_order=[a, b]"])
    old = yaml.safe_load(dump_config(config))
    for key in ("few_shot_sampling", "round_robin_order", "round_robin_unit", "proportional_replacement"):
        old["method_args"][key] = old["data"].pop(key)
    upgraded = saved_under_current_names(old)
    assert upgraded["data"]["few_shot_sampling"] == "per_class" and upgraded["data"]["round_robin_order"] == ["a", "b"]
    assert "few_shot_sampling" not in upgraded["method_args"] and "few_shot_sampling" in old["method_args"]
    assert changed_keys(yaml.safe_dump(old), config) == []
    older = yaml.safe_load(dump_config(load_config(recipe)))
    del older["data"]["proportional_replacement"], older["data"]["round_robin_unit"]  # not written then
    assert changed_keys(yaml.safe_dump(older), load_config(recipe)) == []


def test_recipe_is_accepted_for_method(tmp_path):
    """The key that names the recipe to run may be written ``recipe:`` (``method:`` stays, for the recipes written)."""
    path = tmp_path / "recipe.yaml"
    path.write_text(RECIPE.replace("method: simcse-unsup", "recipe: gd"))
    config = load_config(path)
    assert config.method == "gd" and "recipe" not in config.model_dump()
    assert load_config(path, ["recipe=mnrl"]).method == "mnrl"
    with pytest.raises(ConfigError, match=r"--set recipe .*recipe and method both name the recipe to run"):
        load_config(tmp_path / "recipe.yaml", ["method=scl", "recipe=gd"])
