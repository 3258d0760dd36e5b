"""Export an encoder + linear head as a Hugging Face sequence-classification folder, and load such folders.

A fine-tuned classifier here is ``logits = W · pool(backbone(x)) + b`` (:class:`~contrastext.models.heads.
ClassificationHead`, or :class:`~contrastext.models.heads.RegressionHead` with one output; dropout is off at
inference). :func:`export_classifier` writes it as a folder that ``transformers`` loads with no custom code::

    AutoModelForSequenceClassification.from_pretrained(folder)
    pipeline("text-classification", model=folder)      # add truncation=True for long inputs

Exact routes (``EXPORT_ROUTES``); each is checked on probe inputs when it is written (:func:`check_export`):

- pooling ``pooler`` (BERT's ``tanh(W_p h_[CLS] + b_p)``) on a BERT backbone → ``BertForSequenceClassification``,
  whose forward is exactly pooler → dropout → ``classifier``: the backbone's weights under ``bert.``, our head as
  ``classifier``.
- pooling ``cls`` / ``cls_before_pooler`` (the raw last-layer [CLS] vector) on a BERT or ELECTRA backbone →
  ``ElectraForSequenceClassification``. ``BertForSequenceClassification`` always puts the pooler's dense+tanh
  between [CLS] and the classifier, and tanh cannot be undone exactly, so BERT's own class has no exact
  equivalent. ELECTRA's discriminator is BERT's encoder without the pooler (same embeddings, layers and
  weight names under ``electra.``, with ``embedding_size = hidden_size``), and its head is
  ``out_proj(gelu(dense(h_[CLS])))``. GELU(u) − GELU(−u) = u·Φ(u) + u·Φ(−u) = u for every u, so with
  ``dense`` = [W; −W] (bias 0) and ``out_proj`` = [I, −I] (bias b) the head computes W·h + b exactly
  (to float rounding: no approximation). It needs 2 · num_labels ≤ hidden_size. The folder's
  ``config.json`` says ``model_type: electra``: the architecture, not the pre-training, of the weights.

- a dense+tanh head (:class:`~contrastext.models.heads.DenseTanhHead`, SCL's ``head: dense_tanh``:
  ``out_proj(tanh(dense(h_[CLS])))``) with pooling ``cls`` / ``cls_before_pooler`` on a BERT backbone →
  ``BertForSequenceClassification``: its pooler is exactly dense → tanh on [CLS], so our ``dense`` becomes
  ``bert.pooler.dense`` and ``out_proj`` the ``classifier`` (route ``bert-dense-tanh``). On another backbone, or
  over pooling ``pooler`` (two dense+tanh layers), it is refused with a ConfigError.

Anything else (mean / max / first_last_avg pooling, RoBERTa and other backbones) is a :class:`ConfigError`
naming the reason and the poolings that export, before anything is written.

Regression heads (STS-B) export with ``num_labels=1`` and ``problem_type="regression"`` (the pipeline then
returns the raw score). Label names go to ``config.json`` (``id2label`` / ``label2id``). The tokenizer is saved
with ``model_max_length`` = the encoder's ``max_seq_length``, so ``truncation=True`` cuts where we cut.
``contrastext_config.json`` records the pooling and max length (so ``TextEncoder.load(folder)`` gives the
encoder back) and, under ``classifier``, the task, its kind, the label names and the route.

:func:`load_classifier` loads any local sequence-classification folder (ours or another) as a
:class:`SequenceClassifier` with ``scores`` (the pipeline's probabilities: softmax, sigmoid for one label or
multi-label, none for regression) and a ``predict`` with the evaluator's contract.

Example::

    >>> export_classifier(encoder, head.linear, "out/classifier", label_names=["negative", "positive"])
    >>> classifier = load_classifier("out/classifier")
    >>> classifier.scores(["a fine film"]).round(3)          # doctest: +SKIP
    array([[0.12, 0.88]], dtype=float32)
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from contrastext.errors import ConfigError, ContrastextError, MissingDataError
from contrastext.models.quiet import quiet_loading, quiet_transformers

CONTRASTEXT_CONFIG = "contrastext_config.json"
CLASSIFIER_KEY = "classifier"
FORMAT_VERSION = 1
CLS_POOLINGS = ("cls", "cls_before_pooler")
EXPORT_ROUTES: dict[str, str] = {
    "pooler": "BertForSequenceClassification (BERT backbones)",
    "cls": "ElectraForSequenceClassification (BERT or ELECTRA backbones)",
    "cls_before_pooler": "ElectraForSequenceClassification (BERT or ELECTRA backbones)",
}
"""Pooling -> the Hugging Face class an exact export uses."""

PROBE_TEXTS = (
    "A fine, moving film.",
    "the worst plot i have seen in years , and the acting is no better",
    "Is this a question?",
)
_BERT_TO_ELECTRA_KEYS = (
    "vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "hidden_act",
    "hidden_dropout_prob", "attention_probs_dropout_prob", "max_position_embeddings", "type_vocab_size",
    "initializer_range", "layer_norm_eps", "pad_token_id",
)  # fmt: skip


@dataclass
class ExportPlan:
    """How one encoder exports: the route's name, the HF class and the model type it writes."""

    route: str  # "bert-pooler" or "electra-cls"
    hf_class: str
    model_type: str


def plan_export(encoder, num_outputs: int, dense_tanh: bool = False) -> ExportPlan:
    """The exact route for ``encoder`` (its pooling and backbone) and the head (``dense_tanh``: a dense+tanh before
    the last layer), or ConfigError saying why there is none."""
    pooling = encoder.pooling
    model_type = getattr(encoder.backbone.config, "model_type", None)
    if encoder.projection is not None and encoder.projection_at_inference:
        raise ConfigError(
            "cannot export a Hugging Face classifier: the head reads the pooled vector but this encoder also keeps a "
            "projection at inference; Hugging Face's classification classes have no place for it"
        )
    if pooling not in EXPORT_ROUTES:
        routes = "; ".join(f"pooling {name}: {target}" for name, target in EXPORT_ROUTES.items())
        raise ConfigError(
            f"cannot export a Hugging Face classifier for pooling {pooling!r}: no transformers sequence-classification "
            f"class pools that way, so it would not predict what this model predicts. Exact exports: {routes}; "
            "train with method_args.pooling=cls or pooler to get one"
        )
    if getattr(encoder.tokenizer, "padding_side", "right") != "right":
        raise ConfigError(
            "cannot export a Hugging Face classifier: the tokenizer pads on the left, and the Hugging Face heads read "
            "position 0 where our [CLS] pooling reads the first real token"
        )
    position_type = getattr(encoder.backbone.config, "position_embedding_type", "absolute")
    if dense_tanh:
        return _dense_tanh_plan(pooling, model_type)
    if pooling == "pooler":
        if model_type != "bert":
            raise ConfigError(
                f"cannot export a Hugging Face classifier for pooling 'pooler' on a {model_type!r} backbone: "
                "the exact route (BertForSequenceClassification) needs a BERT backbone"
            )
        return ExportPlan("bert-pooler", "BertForSequenceClassification", "bert")
    if model_type not in ("bert", "electra"):
        raise ConfigError(
            f"cannot export a Hugging Face classifier for pooling {pooling!r} on a {model_type!r} backbone: the "
            "exact route for the raw [CLS] vector (ElectraForSequenceClassification) needs a BERT or ELECTRA "
            f"backbone; {model_type}'s own classification head puts a dense+tanh before the classifier, which a "
            "linear head on [CLS] cannot be turned into"
        )
    if position_type not in (None, "absolute"):
        raise ConfigError(
            f"cannot export a Hugging Face classifier: position_embedding_type {position_type!r} has no ELECTRA "
            "equivalent; only absolute positions export"
        )
    if 2 * num_outputs > encoder.hidden_size:
        raise ConfigError(
            f"cannot export a Hugging Face classifier with {num_outputs} labels on a {encoder.hidden_size}-wide "
            f"encoder: the exact ELECTRA route needs 2 x labels <= hidden size"
        )
    return ExportPlan("electra-cls", "ElectraForSequenceClassification", "electra")


def _dense_tanh_plan(pooling: str, model_type: str | None) -> ExportPlan:
    """A dense+tanh head on the raw [CLS] vector of a BERT backbone is BertForSequenceClassification exactly (its
    pooler is that dense+tanh); every other case is a ConfigError."""
    if pooling not in CLS_POOLINGS:
        raise ConfigError(
            f"cannot export a Hugging Face classifier for a dense+tanh head (method_args.head=dense_tanh) over pooling "
            f"{pooling!r}: only the raw [CLS] vector (pooling cls) exports, as BertForSequenceClassification; train "
            "with method_args.pooling=cls, or method_args.head=linear"
        )
    if model_type != "bert":
        raise ConfigError(
            f"cannot export a Hugging Face classifier for a dense+tanh head (method_args.head=dense_tanh) on a "
            f"{model_type!r} backbone: the exact route (its dense+tanh as BertForSequenceClassification's pooler) "
            "needs a BERT backbone; method_args.head=linear exports on BERT or ELECTRA backbones"
        )
    return ExportPlan("bert-dense-tanh", "BertForSequenceClassification", "bert")


def _cpu_state(module: nn.Module) -> dict[str, Tensor]:
    return {name: tensor.detach().to("cpu", torch.float32).clone() for name, tensor in module.state_dict().items()}


def _labels_config(label_names: Sequence[str] | None, regression: bool, num_outputs: int, task: str | None) -> dict:
    if regression:
        names = [task or "score"]
    else:
        names = [str(name) for name in (label_names or [str(i) for i in range(num_outputs)])]
        if len(names) != num_outputs:
            raise ConfigError(f"{len(names)} label names {names} for a head with {num_outputs} outputs")
        if len(set(names)) != len(names):
            raise ConfigError(f"label names must be distinct, got {names}")
    return {
        "num_labels": num_outputs,
        "id2label": dict(enumerate(names)),
        "label2id": {name: index for index, name in enumerate(names)},
        "problem_type": "regression" if regression else "single_label_classification",
    }


def build_hf_classifier(
    encoder, linear: nn.Linear, plan: ExportPlan, labels: dict, dense: nn.Linear | None = None
) -> nn.Module:
    """The transformers model of ``plan`` holding the encoder's backbone, ``dense`` (route ``bert-dense-tanh``: as
    the pooler) and ``linear`` (float32, CPU, eval)."""
    from transformers import BertForSequenceClassification, ElectraConfig, ElectraForSequenceClassification

    backbone_state = _cpu_state(encoder.backbone)
    weight = linear.weight.detach().to("cpu", torch.float32)
    bias = (
        linear.bias.detach().to("cpu", torch.float32)
        if linear.bias is not None
        else torch.zeros(weight.shape[0])
    )
    source = encoder.backbone.config
    if plan.route in ("bert-pooler", "bert-dense-tanh"):
        config = type(source).from_dict({**source.to_dict(), **labels})
        config.architectures = [plan.hf_class]
        model = BertForSequenceClassification(config)
        state = {f"bert.{name}": tensor for name, tensor in backbone_state.items()}
        state.update({"classifier.weight": weight, "classifier.bias": bias})
        if plan.route == "bert-dense-tanh":  # the head's dense+tanh in the pooler's place
            if dense is None:
                raise ConfigError("the bert-dense-tanh route needs the head's dense layer")
            state.update({"bert.pooler.dense.weight": dense.weight.detach().to("cpu", torch.float32),
                          "bert.pooler.dense.bias": dense.bias.detach().to("cpu", torch.float32)})
    else:
        if source.model_type == "electra":
            config = ElectraConfig.from_dict({**source.to_dict(), **labels})
        else:
            shape = {key: getattr(source, key) for key in _BERT_TO_ELECTRA_KEYS if hasattr(source, key)}
            config = ElectraConfig(embedding_size=source.hidden_size, **shape, **labels)
        config.architectures = [plan.hf_class]
        model = ElectraForSequenceClassification(config)
        outputs, width = weight.shape[0], source.hidden_size
        dense = torch.zeros(width, width)
        dense[:outputs] = weight
        dense[outputs : 2 * outputs] = -weight
        out_proj = torch.zeros(outputs, width)
        out_proj[:, :outputs] = torch.eye(outputs)
        out_proj[:, outputs : 2 * outputs] = -torch.eye(outputs)
        state = {f"electra.{name}": tensor for name, tensor in backbone_state.items() if not name.startswith("pooler.")}
        state.update(
            {
                "classifier.dense.weight": dense,
                "classifier.dense.bias": torch.zeros(width),
                "classifier.out_proj.weight": out_proj,
                "classifier.out_proj.bias": bias,
            }
        )
    expected = model.state_dict()
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    if missing or unexpected:
        raise ConfigError(
            f"cannot export to {plan.hf_class}: the backbone's weights do not map onto it "
            f"(missing {missing[:4]}, unexpected {unexpected[:4]})"
        )
    model.load_state_dict(state, strict=True)
    return model.eval()


def _probe_batch(encoder, text_pair: bool, max_length: int) -> dict[str, Tensor]:
    from contrastext.data.collate import encoder_inputs, tokenize

    texts = list(PROBE_TEXTS)
    pairs = list(reversed(PROBE_TEXTS)) if text_pair else None
    encoded = tokenize(encoder.tokenizer, texts, max_length, pairs=pairs, special_tokens_mask=False)
    return encoder_inputs(encoded)


@torch.no_grad()
def check_export(
    encoder, linear: nn.Linear, model: nn.Module, text_pair: bool, max_length: int | None = None,
    dense: nn.Linear | None = None,
) -> float:
    """Largest |logit difference| between ``linear(encoder(x).pooled)`` (``linear(tanh(dense(...)))`` with ``dense``)
    and ``model(x).logits`` on probe inputs.

    ConfigError when it is above float noise (``1e-3 · max(1, |logits|)``): the export would not predict what
    the model predicts, so nothing is written.
    """
    batch = _probe_batch(encoder, text_pair, max_length or encoder.max_seq_length)
    was_training = encoder.training
    encoder.eval()
    try:
        device = encoder.device
        pooled = encoder(**{name: tensor.to(device) for name, tensor in batch.items()}).pooled
        if dense is not None:
            pooled = torch.tanh(nn.functional.linear(pooled.float(), dense.weight.float(), dense.bias.float()))
        reference = nn.functional.linear(pooled.float(), linear.weight.float(), None if linear.bias is None else linear.bias.float())
    finally:
        encoder.train(was_training)
    reference = reference.cpu()
    exported = model(**batch).logits.float()
    difference = float((reference - exported).abs().max())
    tolerance = 1e-3 * max(1.0, float(reference.abs().max()))
    if not difference <= tolerance:
        raise ConfigError(
            f"the Hugging Face export differs from the model on probe inputs (max |logit difference| {difference:.3g}); "
            "nothing was written"
        )
    return difference


def _write_json(path: Path, content: Any) -> None:
    path.write_text(json.dumps(content, indent=2) + "\n", encoding="utf-8")


def _save_tokenizer(tokenizer, folder: Path, max_length: int) -> None:
    """The tokenizer's files, with ``model_max_length`` = our max length (so ``truncation=True`` matches)."""
    tokenizer.save_pretrained(folder)
    config_path = folder / "tokenizer_config.json"
    if config_path.is_file():
        config = json.loads(config_path.read_text(encoding="utf-8"))
        config["model_max_length"] = int(max_length)
        _write_json(config_path, config)


def export_classifier(
    encoder,
    linear: nn.Linear,
    folder: str | os.PathLike,
    *,
    label_names: Sequence[str] | None = None,
    regression: bool = False,
    text_pair: bool = False,
    task: str | None = None,
    task_kind: str | None = None,
    max_length: int | None = None,
    card: dict[str, Any] | None = None,
    dense: nn.Linear | None = None,
) -> Path:
    """Write ``encoder`` + ``linear`` (the head's last layer) as a transformers sequence-classification folder.

    ``dense``: the dense layer of a dense+tanh head (:class:`~contrastext.models.heads.DenseTanhHead`: logits =
    ``linear(tanh(dense(pooled)))``), exported as BERT's pooler (route ``bert-dense-tanh``); None for a linear head.

    ``label_names`` name the head's outputs in order (default ``"0"``, ``"1"``, …); ``regression`` exports one
    raw score; ``text_pair`` says the model reads ``[CLS] a [SEP] b [SEP]`` pairs (recorded for ``predict``).
    ``max_length``: the truncation the model's own predictions use (default the encoder's ``max_seq_length``);
    it becomes the tokenizer's ``model_max_length``. ``card`` (the run's details,
    :func:`contrastext.models.model_card.classifier_card`) goes into README.md.
    Raises ConfigError (nothing written) when the pooling or backbone has no exact route (see the module
    docstring) or the export does not reproduce the model's logits on probe inputs. Returns the folder.
    """
    from contrastext.models.model_card import classifier_card, write_card

    num_outputs = int(linear.weight.shape[0])
    if regression and num_outputs != 1:
        raise ConfigError(f"a regression head has one output, this one has {num_outputs}")
    max_length = int(max_length or encoder.max_seq_length)
    plan = plan_export(encoder, num_outputs, dense_tanh=dense is not None)
    labels = _labels_config(label_names, regression, num_outputs, task)
    model = build_hf_classifier(encoder, linear, plan, labels, dense=dense)
    difference = check_export(encoder, linear, model, text_pair, max_length, dense=dense)
    root = Path(folder)
    root.mkdir(parents=True, exist_ok=True)
    with quiet_transformers():
        model.save_pretrained(root)
    _save_tokenizer(encoder.tokenizer, root, max_length)
    _write_json(root / "sentence_bert_config.json", {"max_seq_length": max_length, "do_lower_case": False})
    metadata = {
        "task": task,
        "kind": task_kind,
        "text_pair": bool(text_pair),
        "labels": list(labels["id2label"].values()),
        "problem_type": labels["problem_type"],
        "route": plan.route,
        "hf_class": plan.hf_class,
        "max_abs_logit_difference_on_probes": difference,
    }
    _write_json(
        root / CONTRASTEXT_CONFIG,
        {
            "format_version": FORMAT_VERSION,
            "pooling": encoder.pooling,
            "max_seq_length": max_length,
            "normalize": False,
            "projection": None,
            "projection_at_inference": False,
            CLASSIFIER_KEY: metadata,
        },
    )
    base_model = getattr(encoder.backbone.config, "name_or_path", None) or None
    write_card(root, classifier_card(metadata, {"base_model": base_model, **(card or {})}, max_length))
    return root


# ----------------------------------------------------------------------------------------------- loading


def _read_json_object(path: Path) -> dict[str, Any]:
    try:
        content = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ConfigError(f"{path}: not a readable JSON file ({str(error).splitlines()[0]})") from None
    if not isinstance(content, dict):
        raise ConfigError(f"{path}: expected a JSON object, found {type(content).__name__}")
    return content


def classifier_architectures(folder: str | os.PathLike) -> list[str]:
    """The ``*ForSequenceClassification`` names in ``folder/config.json`` (empty when none or no such file)."""
    path = Path(folder) / "config.json"
    if not path.is_file():
        return []
    try:
        architectures = _read_json_object(path).get("architectures") or []
    except ConfigError:
        return []
    if not isinstance(architectures, list):
        return []
    return [name for name in architectures if isinstance(name, str) and name.endswith("ForSequenceClassification")]


def is_classifier_folder(folder: str | os.PathLike) -> bool:
    """Whether ``folder`` is a local Hugging Face sequence-classification folder (ours or another)."""
    return Path(folder).is_dir() and bool(classifier_architectures(folder))


class SequenceClassifier:
    """A loaded sequence-classification folder: ``logits``, ``scores`` (probabilities) and ``predict``.

    ``label_names`` (from ``id2label``), ``regression``, ``function`` (what turns logits into the scores the
    transformers pipeline reports: ``softmax``, ``sigmoid`` or ``none``), ``max_length``, ``text_pair`` (True or
    False for our exports, None when the folder does not say) and ``task`` (our exports' task name, else None).
    """

    def __init__(self, model: nn.Module, tokenizer, max_length: int, metadata: dict[str, Any] | None = None):
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.max_length = int(max_length)
        config = model.config
        self.num_labels = int(config.num_labels)
        id2label = {int(key): str(value) for key, value in (config.id2label or {}).items()}
        self.label_names = [id2label.get(index, f"LABEL_{index}") for index in range(self.num_labels)]
        self.problem_type = getattr(config, "problem_type", None)
        self.regression = self.problem_type == "regression"
        if self.regression:
            self.function = "none"
        elif self.problem_type == "multi_label_classification" or self.num_labels == 1:
            self.function = "sigmoid"
        else:
            self.function = "softmax"
        metadata = metadata or {}
        self.text_pair: bool | None = metadata.get("text_pair")
        self.task: str | None = metadata.get("task")
        self.metadata = metadata

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @torch.no_grad()
    def logits(self, texts: Sequence[str], pairs: Sequence[str] | None = None, batch_size: int = 32) -> np.ndarray:
        """(len(texts), num_labels) float32 logits, row i for text i (and ``pairs[i]``), in eval mode."""
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        texts = list(texts)
        if pairs is not None and len(pairs) != len(texts):
            raise ValueError(f"{len(texts)} texts but {len(pairs)} pair texts")
        chunks = []
        for start in range(0, len(texts), batch_size):
            second = list(pairs[start : start + batch_size]) if pairs is not None else None
            batch = self.tokenizer(
                texts[start : start + batch_size],
                second,
                truncation=True,
                max_length=self.max_length,
                padding=True,
                return_tensors="pt",
            )
            batch = {name: tensor.to(self.device) for name, tensor in batch.items()}
            chunks.append(self.model(**batch).logits.float().cpu())
        if not chunks:
            return np.zeros((0, self.num_labels), dtype=np.float32)
        return torch.cat(chunks).numpy()

    def scores_from_logits(self, logits: np.ndarray) -> np.ndarray:
        """Probabilities as the transformers pipeline computes them (raw scores for regression)."""
        tensor = torch.from_numpy(np.asarray(logits, dtype=np.float32))
        if self.function == "softmax":
            return torch.softmax(tensor, dim=-1).numpy()
        if self.function == "sigmoid":
            return torch.sigmoid(tensor).numpy()
        return tensor.numpy()

    def scores(self, texts: Sequence[str], pairs: Sequence[str] | None = None, batch_size: int = 32) -> np.ndarray:
        return self.scores_from_logits(self.logits(texts, pairs, batch_size))

    def predicted_ids(self, logits: np.ndarray) -> np.ndarray:
        """Class ids (argmax; for one sigmoid output: 1 when its logit is > 0)."""
        if self.num_labels == 1:
            return (np.asarray(logits)[:, 0] > 0).astype(np.int64)
        return np.asarray(logits).argmax(axis=-1)

    def predict(self, examples: Sequence, batch_size: int = 64, task: str | None = None) -> np.ndarray:
        """Class ids (scores for regression) of ``Example`` rows, in order: the evaluators' ``predict`` contract.

        Examples with two texts are read as pairs."""
        texts = [example.texts[0] for example in examples]
        pairs = [example.texts[1] for example in examples] if examples and len(examples[0].texts) > 1 else None
        logits = self.logits(texts, pairs, batch_size)
        return logits[:, 0] if self.regression else self.predicted_ids(logits)


def load_classifier(folder: str | os.PathLike, trust_remote_code: bool = False) -> SequenceClassifier:
    """Load a local sequence-classification folder; one-line ContrastextError naming the folder otherwise.

    No code shipped with the folder is run unless ``trust_remote_code``; safetensors files are checked first.
    """
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from contrastext.models.weights import check_backbone_weights, check_loaded_backbone, first_line

    path = Path(folder)
    if not path.is_dir():
        raise MissingDataError(f"no classifier at {folder}: not a folder")
    if not (path / "config.json").is_file():
        raise ContrastextError(f"{folder}: not a Hugging Face model folder (no config.json)")
    architectures = _read_json_object(path / "config.json").get("architectures")
    if not classifier_architectures(path):
        raise ContrastextError(
            f"{folder}: not a sequence-classification model (config.json architectures: {architectures}); "
            "give a classifier folder such as <run>/classifier, or use `contrastext encode` for a sentence encoder"
        )
    ours = _read_json_object(path / CONTRASTEXT_CONFIG) if (path / CONTRASTEXT_CONFIG).is_file() else {}
    metadata = ours.get(CLASSIFIER_KEY) if isinstance(ours.get(CLASSIFIER_KEY), dict) else {}
    check_backbone_weights(path)
    try:
        with quiet_loading():
            model, info = AutoModelForSequenceClassification.from_pretrained(
                path, trust_remote_code=trust_remote_code, output_loading_info=True, ignore_mismatched_sizes=True
            )
            tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=trust_remote_code)
    except ContrastextError:
        raise
    except Exception as error:  # a damaged folder can make transformers fail in any way: one line, no traceback
        raise ContrastextError(
            f"{folder}: cannot load the classifier ({type(error).__name__}: {first_line(error)})"
        ) from error
    # config.json against the weights; no tensor, the head included, randomly initialised
    check_loaded_backbone(model, info, path, remedy="use the classifier/ folder a fine-tuning run exported, complete")
    max_length = ours.get("max_seq_length")
    if not isinstance(max_length, int) or max_length < 1:
        limits = [getattr(tokenizer, "model_max_length", None), getattr(model.config, "max_position_embeddings", None)]
        limits = [int(value) for value in limits if isinstance(value, int) and 0 < value < 1_000_000]
        max_length = min(limits) if limits else 512
    return SequenceClassifier(model, tokenizer, max_length, metadata)
