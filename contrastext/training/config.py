"""Typed, validated training configuration: one YAML file plus ``--set key=value`` overrides.

Every section forbids unknown keys; a misspelt key, a value of the wrong type or a non-finite number
(``.inf``, ``.nan``, ``1e999``) raises :class:`~contrastext.errors.ConfigError` naming the dotted key and the
file (or the ``--set`` override it came from); so does a file that is not valid UTF-8. ``method_args`` is free here and validated by each method with its own pydantic model
through :func:`validate_method_args`, with the same kind of messages.

Example::

    >>> config = load_config("recipes/simcse-unsup.yaml", ["train.max_steps=10", "method_args.temperature=0.1"])
    >>> config.train.max_steps
    10
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Collection, Iterable
from pathlib import Path
from typing import Any, Literal, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, model_validator

from contrastext.errors import ConfigError

NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)[eE][+-]?\d+$")
ModelT = TypeVar("ModelT", bound=BaseModel)


class Section(BaseModel):
    """Base of every config section: unknown keys and non-finite floats are errors, assignments are validated."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)


class TrainSection(Section):
    """Optimisation, schedule, precision, evaluation and checkpoint cadence."""

    max_steps: int | None = Field(default=None, gt=0, description="optimiser steps; wins over epochs")
    epochs: float | None = Field(default=None, gt=0)
    batch_size: int = Field(default=64, gt=0, description="global batch size (all processes)")
    drop_last: bool = True
    group_by_length: bool = False
    lr: float = Field(default=3e-5, gt=0)
    weight_decay: float = Field(default=0.0, ge=0)
    adam_betas: tuple[float, float] = Field(
        default=(0.9, 0.999), description="AdamW's (beta1, beta2); CAPT's Table 4 uses (0.9, 0.98)"
    )
    adam_epsilon: float = Field(default=1e-8, gt=0, description="AdamW's epsilon; CAPT's Table 4 uses 1e-6")
    schedule: Literal["linear", "constant"] = "linear"
    warmup_ratio: float = Field(default=0.0, ge=0, le=1)
    warmup_steps: int | None = Field(default=None, ge=0, description="wins over warmup_ratio")
    grad_clip: float | None = Field(default=1.0, gt=0)
    grad_accumulation: int = Field(default=1, gt=0)
    mixed_precision: Literal["no", "fp16", "bf16", "auto"] = "auto"
    seed: int | None = Field(default=None, ge=0, description="data order, views, dropout; default: seed")
    eval_every: int | None = Field(default=None, gt=0)
    eval_at_start: bool = Field(default=False, description="evaluate the starting weights, logged at step 0")
    overwrite: bool = Field(
        default=False, description="a fresh run may replace the run already in output_dir (else an error)"
    )
    save_every: int | None = Field(default=None, gt=0)
    log_every: int = Field(default=10, gt=0)
    metric_for_best: str | None = None
    greater_is_better: bool = True
    early_stopping_patience: int | None = Field(default=None, gt=0, description="evaluations")
    keep_last: int = Field(default=2, gt=0, description="checkpoints kept on disk")
    progress_bar: bool = True
    tensorboard: bool = True
    on_nonfinite: Literal["stop", "skip"] = Field(
        default="stop", description="a NaN/inf loss or gradient: stop with an error naming the step, or skip the step"
    )

    @model_validator(mode="after")
    def _needs_a_length(self) -> TrainSection:
        if self.max_steps is None and self.epochs is None:
            raise ValueError("set train.max_steps or train.epochs")
        return self


class DataSection(Section):
    """What to train on. Methods read the fields that concern them."""

    task: str | None = Field(default=None, description="a task spec such as 'wiki1m' or 'nli:train'")
    tasks: list[str] = Field(default_factory=list, description="several task specs (multi-task)")
    path: str | None = Field(default=None, description="a data file read directly")
    max_length: int = Field(default=32, gt=0)
    limit: int | None = Field(default=None, gt=0, description="first N training examples only")
    few_shot: int | None = Field(
        default=None, gt=0, description="N training examples drawn (SCL: N in total, see method_args.few_shot_sampling)"
    )
    label_noise: float = Field(default=0.0, ge=0, lt=1, description="share of labels flipped")
    task_sampling: Literal["sequential", "round_robin", "proportional"] = "proportional"
    task_temperature: float = Field(default=1.0, gt=0)
    task_weights: list[float] | None = None


class EvalSection(Section):
    """Development-set evaluation during training."""

    tasks: list[str] = Field(default_factory=list, description="dev task specs such as 'stsb:dev'")
    batch_size: int = Field(default=64, gt=0)
    limit: int | None = Field(default=None, gt=0)


class TrainConfig(Section):
    """A whole run: which method, which model, where to write, and the sections above."""

    method: str
    model: str
    output_dir: str
    seed: int = Field(default=42, ge=0)
    train: TrainSection
    data: DataSection = Field(default_factory=DataSection)
    eval: EvalSection = Field(default_factory=EvalSection)
    method_args: dict[str, Any] = Field(default_factory=dict)

    _source: str | None = PrivateAttr(default=None)
    _overridden: frozenset[str] = PrivateAttr(default=frozenset())

    @property
    def source(self) -> str | None:
        """The file this config was read from (None when built in code)."""
        return self._source

    @property
    def overridden_keys(self) -> frozenset[str]:
        """Dotted keys that came from ``--set``."""
        return self._overridden

    @property
    def train_seed(self) -> int:
        """The seed of data order, views and dropout: ``train.seed``, else ``seed``."""
        return self.seed if self.train.seed is None else self.train.seed

    def method_args_as(self, model_cls: type[ModelT]) -> ModelT:
        """``method_args`` validated with a method's own model (see :func:`validate_method_args`)."""
        return validate_method_args(model_cls, self.method_args, self._source, self._overridden)


def load_config(path: str | os.PathLike, overrides: Iterable[str] = ()) -> TrainConfig:
    """Read a YAML config, apply dotted ``key=value`` overrides, validate everything but ``method_args``."""
    file = str(path)
    try:
        data = Path(path).read_bytes()
    except OSError as error:
        raise ConfigError(f"{file}: cannot read the config file ({error.strerror or error})") from error
    text = _decode(data, file)
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise ConfigError(f"{file}: not valid YAML: {error}") from error
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{file}: the top level must be a mapping of keys, got {type(raw).__name__}")
    overridden = apply_overrides(raw, overrides, file)
    config = _validate(TrainConfig, raw, file, overridden, prefix="")
    config._source = file
    config._overridden = frozenset(overridden)
    return config


def _decode(data: bytes, file: str) -> str:
    """The text of a config file; ConfigError naming the file and line when it is not valid UTF-8."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise ConfigError(f"{file}:{line}: not valid UTF-8 ({error.reason} at byte {error.start}); save it as UTF-8") from None


def parse_override(text: str) -> tuple[str, Any]:
    """``"train.max_steps=10"`` -> ``("train.max_steps", 10)``; the value is read as a YAML scalar or list."""
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or not key or any(not part for part in key.split(".")):
        raise ConfigError(f"--set {text!r}: expected KEY=VALUE with a dotted key, e.g. train.max_steps=10")
    try:
        parsed = yaml.safe_load(value)
    except yaml.YAMLError:
        parsed = value  # not YAML: keep the text as a string
    if isinstance(parsed, str) and NUMBER.match(parsed.strip()):
        parsed = float(parsed)  # YAML 1.1 reads "1e-3" as text
    return key, parsed


def apply_overrides(raw: dict, overrides: Iterable[str], file: str) -> set[str]:
    """Set each dotted override into ``raw`` (creating sections); returns the dotted keys set."""
    overridden = set()
    for text in overrides:
        key, value = parse_override(text)
        node = raw
        parts = key.split(".")
        for depth, part in enumerate(parts[:-1]):
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                where = ".".join(parts[: depth + 1])
                raise ConfigError(
                    f"--set {text!r}: {where} is a value ({child!r}) in {file}, not a section with keys"
                )
            node = child
        node[parts[-1]] = value
        overridden.add(key)
    return overridden


def validate_method_args(
    model_cls: type[ModelT],
    raw: dict | None,
    file: str | os.PathLike | None,
    overridden: Collection[str] = (),
) -> ModelT:
    """Validate a method's ``method_args`` with its own pydantic model (which should forbid extra keys).

    Errors name ``method_args.<key>`` and the file, or the ``--set`` override the value came from.
    """
    raw = {} if raw is None else raw
    if not isinstance(raw, dict):
        raise ConfigError(f"{file or '<config>'}: method_args must be a mapping of keys, got {raw!r}")
    where = str(file) if file else "<config>"
    for key, value in _non_finite(raw, "method_args"):
        raise ConfigError(f"{_origin(key, where, overridden)}: {key}: expected a finite number, got {value!r}")
    return _validate(model_cls, raw, str(file) if file else "<config>", set(overridden), "method_args.")


def _non_finite(value: Any, key: str) -> Iterable[tuple[str, float]]:
    """``(dotted key, value)`` of every NaN or infinite float inside ``value`` (mappings and lists walked)."""
    if isinstance(value, float) and not math.isfinite(value):
        yield key, value
    elif isinstance(value, dict):
        for name, item in value.items():
            yield from _non_finite(item, f"{key}.{name}")
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from _non_finite(item, f"{key}.{index}")


def _validate(model_cls: type[ModelT], raw: dict, file: str, overridden: Collection[str], prefix: str):
    try:
        return model_cls.model_validate(raw)
    except ValidationError as error:
        raise ConfigError(_describe(error, file, overridden, prefix)) from None


def _describe(error: ValidationError, file: str, overridden: Collection[str], prefix: str) -> str:
    lines = []
    for item in error.errors():
        key = prefix + ".".join(str(part) for part in item["loc"])
        key = key.rstrip(".") or "(top level)"
        kind = item["type"]
        if kind == "extra_forbidden":
            what = "unknown key"
        elif kind == "missing":
            what = "required key is missing"
        else:
            what = f"{item['msg']} (got {item.get('input')!r})"
        origin = _origin(key, file, overridden)
        lines.append(f"{origin}: {key}: {what}")
    return "; ".join(lines)


def _origin(key: str, file: str, overridden: Collection[str]) -> str:
    for candidate in overridden:
        if key == candidate or key.startswith(candidate + ".") or candidate.startswith(key + "."):
            return f"--set {candidate} (over {file})"
    return file


def dump_config(config: TrainConfig) -> str:
    """The config as YAML text (what checkpoints store)."""
    return yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False)
