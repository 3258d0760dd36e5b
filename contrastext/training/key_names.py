"""Did-you-mean for unknown config keys, knowing the names a Hugging Face Trainer / sentence-transformers user
writes (``learning_rate``, ``num_train_epochs``, ``fp16``, ...).

:func:`suggest` takes an unknown dotted key (``train.learning_rate``, ``learning_rate``, ``data.fp16``) and
the dotted keys that exist, and returns ``"did you mean train.lr?"`` (with a short note where the meaning
differs, e.g. our batch size is the global one), or ``""`` when nothing is close. The order:

1. a Hugging Face / sentence-transformers name (:data:`HF_NAMES`), wherever it was written;
2. the same name in another section (``train.max_length`` -> ``data.max_length``);
3. a close spelling (difflib), in the key's own section first, then anywhere.

Example::

    >>> suggest("train.learning_rate", config_keys())
    'did you mean train.lr?'
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Iterable

from pydantic import BaseModel

GLOBAL_BATCH = "ours is the global batch of all processes together, not per device"

HF_NAMES: dict[str, tuple[str, str]] = {
    # transformers.TrainingArguments (and SentenceTransformerTrainingArguments) -> (our key, note)
    "learning_rate": ("train.lr", ""),
    "num_train_epochs": ("train.epochs", ""),
    "max_steps": ("train.max_steps", ""),
    "fp16": ("train.mixed_precision", "set it to fp16"),
    "bf16": ("train.mixed_precision", "set it to bf16"),
    "save_total_limit": ("train.keep_last", ""),
    "gradient_accumulation_steps": ("train.grad_accumulation", ""),
    "lr_scheduler_type": ("train.schedule", ""),
    "lr_scheduler_kwargs": (
        "train.schedule",
        "its settings are keys of their own: train.power, train.lr_end (polynomial); train.decay_steps, "
        "train.decay_type, train.min_lr_ratio (warmup_stable_decay)",
    ),
    "optim": ("train.optimizer", "adamw, adam, adafactor or sgd"),
    "optim_args": ("train.momentum", "SGD's momentum; Adam's betas and epsilon: train.adam_betas, train.adam_epsilon"),
    "gradient_checkpointing": ("train.gradient_checkpointing", ""),
    "per_device_train_batch_size": ("train.batch_size", GLOBAL_BATCH),
    "per_device_eval_batch_size": ("eval.batch_size", ""),
    "warmup_ratio": ("train.warmup_ratio", ""),
    "warmup_steps": ("train.warmup_steps", ""),
    "weight_decay": ("train.weight_decay", ""),
    "max_grad_norm": ("train.grad_clip", ""),
    "adam_beta1": ("train.adam_betas", "one pair [beta1, beta2]"),
    "adam_beta2": ("train.adam_betas", "one pair [beta1, beta2]"),
    "adam_epsilon": ("train.adam_epsilon", ""),
    "data_seed": ("train.seed", "the seed of data order, views and dropout"),
    "eval_steps": ("train.eval_every", ""),
    "eval_strategy": ("train.eval_every", "a number of steps, or epoch"),
    "save_steps": ("train.save_every", ""),
    "save_strategy": ("train.save_every", "a number of steps, or epoch"),
    "logging_steps": ("train.log_every", ""),
    "logging_strategy": ("train.log_every", "a log record every N steps"),
    "report_to": ("train.report_to", ""),
    "metric_for_best_model": ("train.metric_for_best", ""),
    "load_best_model_at_end": ("train.metric_for_best", "best/ holds the weights best by this metric"),
    "greater_is_better": ("train.greater_is_better", ""),
    "dataloader_drop_last": ("train.drop_last", ""),
    "batch_sampler": ("data.batch_sampler", "batch_sampler or no_duplicates, in the data section"),
    "torch_compile": ("train.compile", ""),
    "disable_tqdm": ("train.progress_bar", "the opposite: false hides the bar"),
    "seed": ("seed", ""),
    "output_dir": ("output_dir", ""),
    # a SentenceTransformer's attribute, set by many training scripts
    "max_seq_length": ("data.max_length", "tokens per text in training batches"),
}
"""Hugging Face names -> (the contrastext key, a note where the meaning differs). Every key is checked to exist
in :class:`~contrastext.training.config.TrainConfig` by the tests, every name to be a field of transformers'
``TrainingArguments`` or sentence-transformers' training arguments (``max_seq_length``: the model's)."""


def config_keys(model: type[BaseModel], prefix: str = "") -> list[str]:
    """Every dotted key of ``model`` (sections walked; a section's own key included)."""
    keys = []
    for name, field in model.model_fields.items():
        keys.append(prefix + name)
        annotation = field.annotation
        for kind in (annotation, *getattr(annotation, "__args__", ())):
            if isinstance(kind, type) and issubclass(kind, BaseModel):
                keys.extend(config_keys(kind, f"{prefix}{name}."))
    return keys


def suggest(key: str, known: Iterable[str]) -> str:
    """``"did you mean X?"`` (plus a note) for the unknown dotted ``key``, or ``""``."""
    known = list(dict.fromkeys(known))
    section, _, last = key.rpartition(".")
    targets = _hf_name(last, known) or _same_name(key, last, known) or _close(section, last, known)
    if not targets:
        return ""
    text = "did you mean " + " or ".join(target for target, _ in targets) + "?"
    notes = [note for _, note in targets if note]
    return text + (f" ({'; '.join(notes)})" if notes else "")


def _hf_name(last: str, known: Collection[str]) -> list[tuple[str, str]]:
    target = HF_NAMES.get(last)
    return [target] if target is not None and target[0] in known else []


def _same_name(key: str, last: str, known: Iterable[str]) -> list[tuple[str, str]]:
    return [(candidate, "") for candidate in known if candidate != key and candidate.rpartition(".")[2] == last]


def _close(section: str, last: str, known: Iterable[str]) -> list[tuple[str, str]]:
    prefix = f"{section}." if section else ""
    here = {candidate[len(prefix):]: candidate for candidate in known
            if candidate.startswith(prefix) and "." not in candidate[len(prefix):]}
    match = difflib.get_close_matches(last, list(here), n=1, cutoff=0.75)
    if match:
        return [(here[match[0]], "")]
    anywhere = {candidate.rpartition(".")[2]: candidate for candidate in known}
    names = list(anywhere) + list(HF_NAMES)
    match = difflib.get_close_matches(last, names, n=1, cutoff=0.8)
    if not match:
        return []
    if match[0] in anywhere:
        return [(anywhere[match[0]], "")]
    return _hf_name(match[0], set(known))
