"""Read and write the sentence-transformers (ST) folder layout, so ST loads what we train and we load theirs.

Layout written by ``write_st_folder`` (``SentenceTransformer(path)`` loads it)::

    modules.json                       Transformer (path ""), Pooling, [Dense ...], [Normalize]
    config_sentence_transformers.json  versions, prompts + default_prompt_name (the encoder's), similarity function
    sentence_bert_config.json          max_seq_length, do_lower_case
    config.json, model.safetensors     the Hugging Face backbone (save_pretrained)
    tokenizer files                    (tokenizer.save_pretrained)
    1_Pooling/config.json              word_embedding_dimension + pooling_mode_* flags
    2_Dense/, 3_Dense/ ...             one ST Dense per projection layer used at inference
                                       (config.json + model.safetensors with linear.weight / linear.bias)
    N_Normalize/                       when embeddings are L2-normalised
    contrastext_config.json            our own settings (pooling name, projection config, flags)
    contrastext_projection.safetensors a projection used in training only (ST ignores it)
    README.md                          model card (models/model_card.py; a finished run adds its recipe, metrics)

Pooling names map to ST's flags: ``cls`` and ``cls_before_pooler`` -> ``pooling_mode_cls_token``,
``mean`` -> ``pooling_mode_mean_tokens``, ``max`` -> ``pooling_mode_max_tokens``. ST has no
``pooler`` (BERT's dense+tanh on [CLS]) nor ``first_last_avg`` (SimCSE's avg of first and last
layers): those are written with the nearest ST mode (``cls`` and ``mean``) so ST still loads the
folder, but **ST cannot reproduce them exactly**; the true pooling is recorded in
``contrastext_config.json`` and ``TextEncoder.load`` restores it.

``read_st_folder`` reads the same files from a local folder or a hub name (through
``huggingface_hub`` when the name is not a folder); the backbone may sit at the folder root or in a
subfolder such as ``0_Transformer`` (older ST saves), as ``modules.json`` says.

Example::

    >>> encoder.save("out/model")                       # doctest: +SKIP
    >>> SentenceTransformer("out/model").encode(["hi"])  # doctest: +SKIP
"""

from __future__ import annotations

import functools
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import torch
from safetensors.torch import save_file

from contrastext.errors import ConfigError
from contrastext.models.pooling import check_pooling_name
from contrastext.models.projection import DenseLayer, Projection, activation_class_path
from contrastext.models.weights import load_safetensors, load_torch_weights

CONTRASTEXT_CONFIG = "contrastext_config.json"
ST_CONFIG = "config_sentence_transformers.json"
CONTRASTEXT_PROJECTION = "contrastext_projection.safetensors"
FORMAT_VERSION = 1

ST_POOLING_FLAGS: dict[str, str] = {
    "cls": "pooling_mode_cls_token",
    "cls_before_pooler": "pooling_mode_cls_token",
    "pooler": "pooling_mode_cls_token",
    "mean": "pooling_mode_mean_tokens",
    "first_last_avg": "pooling_mode_mean_tokens",
    "max": "pooling_mode_max_tokens",
}
"""Our pooling name -> the ST flag written in 1_Pooling/config.json (approximate for pooler, first_last_avg)."""

ST_EXACT_POOLINGS: frozenset[str] = frozenset({"cls", "cls_before_pooler", "mean", "max"})
"""Poolings ST reproduces exactly."""

_ST_LEGACY_FLAGS: dict[str, str] = {
    "pooling_mode_cls_token": "cls",
    "pooling_mode_max_tokens": "max",
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
    "pooling_mode_weightedmean_tokens": "weightedmean",
    "pooling_mode_lasttoken": "lasttoken",
}
_ST_MODULE = "sentence_transformers.models.{}"


@dataclass
class StFolder:
    """What a sentence-transformers (or our) folder says about the encoder stacked on its backbone."""

    backbone_subfolder: str = ""
    pooling: str | None = None
    max_seq_length: int | None = None
    normalize: bool = False
    dense: Projection | None = None
    training_projection: Projection | None = None
    contrastext: dict[str, Any] = field(default_factory=dict)
    pooling_dimension: int | None = None
    """``word_embedding_dimension`` of the Pooling module's config (the model's width when it is right)."""
    pooling_file: Path | None = None
    dense_file: Path | None = None
    """The config.json of the first Dense module (its ``in_features`` must be the model's width)."""
    training_projection_file: Path | None = None
    prompts: dict[str, str] = field(default_factory=dict)
    """``prompts`` of config_sentence_transformers.json: name -> text put before a text (``encode(prompt_name=)``)."""
    default_prompt_name: str | None = None
    """The prompt ``encode`` applies when none is named (sentence-transformers' ``default_prompt_name``)."""
    include_prompt: bool = True
    """The Pooling module's ``include_prompt`` (False: prompt tokens left out of the pooling, INSTRUCTOR models)."""

    @property
    def projection(self) -> Projection | None:
        return self.dense if self.dense is not None else self.training_projection

    @property
    def projection_at_inference(self) -> bool:
        return self.dense is not None


# ----------------------------------------------------------------------------------------------- reading


@functools.lru_cache(maxsize=32)
def _hub_files(name: str) -> frozenset[str]:
    """Files of a hub repository (one request); empty when the name is not on a reachable hub."""
    try:
        from huggingface_hub import list_repo_files

        return frozenset(list_repo_files(name))
    except Exception:  # invalid name, offline, private: read as a plain Hugging Face model
        return frozenset()


def locate(name_or_path: str | os.PathLike, relative: str) -> Path | None:
    """Path of ``relative`` inside a local folder, or downloaded from the hub; None when absent."""
    folder = Path(name_or_path)
    if folder.is_dir():
        candidate = folder / relative
        return candidate if candidate.is_file() else None
    from huggingface_hub import constants, hf_hub_download, try_to_load_from_cache

    if constants.HF_HUB_OFFLINE:  # offline: only what the local hub cache holds
        cached = try_to_load_from_cache(str(name_or_path), relative)
        return Path(cached) if isinstance(cached, str) else None
    if relative not in _hub_files(str(name_or_path)):
        return None

    return Path(hf_hub_download(repo_id=str(name_or_path), filename=relative))


def _read_json(path: Path) -> Any:
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except json.JSONDecodeError as error:
        raise ConfigError(f"{path}: not valid JSON ({error})") from None
    except UnicodeDecodeError as error:
        raise ConfigError(f"{path}: not valid UTF-8 ({error.reason} at byte {error.start})") from None
    except OSError as error:
        raise ConfigError(f"{path}: cannot read the file ({error.strerror or error})") from None


def _read_json_object(path: Path) -> dict[str, Any]:
    """A JSON file that must hold an object (``{...}``); ConfigError naming the file otherwise."""
    content = _read_json(path)
    if not isinstance(content, dict):
        raise ConfigError(f"{path}: expected a JSON object, found {type(content).__name__}")
    return content


def _read_max_seq_length(path: Path) -> int | None:
    """``max_seq_length`` of a ``sentence_bert_config.json``: a positive integer or absent."""
    length = _read_json_object(path).get("max_seq_length")
    if length is None:
        return None
    if isinstance(length, bool) or not isinstance(length, int) or length < 1:
        raise ConfigError(f"{path}: key 'max_seq_length' must be a positive integer, found {length!r}")
    return length


def _join(*parts: str) -> str:
    return "/".join(part.strip("/") for part in parts if part and part.strip("/"))


ST_POOLING_KEYS: frozenset[str] = frozenset(
    {"word_embedding_dimension", "pooling_mode", "include_prompt", *_ST_LEGACY_FLAGS}
)
"""Every key of an ST ``1_Pooling/config.json`` that contrastext understands."""


def read_st_pooling(config: dict[str, Any], source: Path) -> str:
    """Our pooling name from an ST ``1_Pooling/config.json`` (legacy flags or ST >= 5 ``pooling_mode``).

    A key that is not an ST pooling key (``pooling_mode_weird``), a flag that is not true/false, flags that are
    all false, two modes at once, or a mode contrastext cannot compute is a ConfigError naming the file and key.
    """
    unknown = sorted(key for key in config if key not in ST_POOLING_KEYS and key.startswith("pooling_mode"))
    if unknown:
        raise ConfigError(
            f"{source}: unknown pooling key {unknown[0]!r}; expected pooling_mode or one of "
            f"{', '.join(_ST_LEGACY_FLAGS)}"
        )
    for flag in _ST_LEGACY_FLAGS:
        if flag in config and not isinstance(config[flag], bool):
            raise ConfigError(f"{source}: key {flag!r} must be true or false, found {config[flag]!r}")
    mode = config.get("pooling_mode")
    if mode is None:
        flags = [flag for flag in _ST_LEGACY_FLAGS if flag in config]
        modes = [_ST_LEGACY_FLAGS[flag] for flag in flags if config[flag]]
        if flags and not modes:
            raise ConfigError(f"{source}: every pooling_mode_* flag is false: set one of {', '.join(flags)} to true")
        modes = modes or ["mean"]  # no flag at all: sentence-transformers' own default
    elif isinstance(mode, str) or (isinstance(mode, list) and all(isinstance(item, str) for item in mode)):
        modes = [mode] if isinstance(mode, str) else list(mode)
    else:
        raise ConfigError(f"{source}: key 'pooling_mode' must be a name or a list of names, found {mode!r}")
    if len(modes) != 1 or modes[0] not in ("cls", "mean", "max"):
        raise ConfigError(
            f"{source}: pooling mode {'+'.join(modes)} is not supported; contrastext reads ST poolings cls, mean, max"
        )
    return modes[0]


def read_st_pooling_dimension(config: dict[str, Any], source: Path) -> int | None:
    """``word_embedding_dimension`` of an ST pooling config: a positive integer, or None when absent."""
    dimension = config.get("word_embedding_dimension")
    if dimension is None:
        return None
    if isinstance(dimension, bool) or not isinstance(dimension, int) or dimension < 1:
        raise ConfigError(f"{source}: key 'word_embedding_dimension' must be a positive integer, found {dimension!r}")
    return dimension


def _read_dense(name_or_path: str | os.PathLike, subfolder: str, modules_file: Path) -> DenseLayer:
    config_path = locate(name_or_path, _join(subfolder, "config.json"))
    if config_path is None:
        raise ConfigError(f"{modules_file}: Dense module {subfolder!r} has no config.json")
    config = _read_json_object(config_path)
    if config.get("use_residual", False):
        raise ConfigError(f"{config_path}: Dense with use_residual=true is not supported")
    try:
        layer = DenseLayer(
            int(config["in_features"]),
            int(config["out_features"]),
            activation=str(config.get("activation_function", "torch.nn.modules.activation.Tanh")),
            bias=bool(config.get("bias", True)),
        )
    except KeyError as error:
        raise ConfigError(f"{config_path}: missing key {error}") from error
    except (TypeError, ValueError) as error:
        raise ConfigError(f"{config_path}: bad Dense config ({error})") from None
    weights_path = locate(name_or_path, _join(subfolder, "model.safetensors"))
    if weights_path is not None:
        state = load_safetensors(weights_path)
    else:
        weights_path = locate(name_or_path, _join(subfolder, "pytorch_model.bin"))
        if weights_path is None:
            raise ConfigError(f"{config_path}: Dense module has no model.safetensors nor pytorch_model.bin beside it")
        state = load_torch_weights(weights_path)
    if not isinstance(state, dict):
        raise ConfigError(f"{weights_path}: expected a state dict of tensors, found {type(state).__name__}")
    try:
        layer.load_state_dict(state)
    except RuntimeError as error:
        raise ConfigError(f"{weights_path}: weights do not fit the Dense config ({error})") from error
    return layer


def _supported_order(kinds: list[str]) -> bool:
    """Transformer, Pooling, any number of Dense, then at most one Normalize."""
    rest = kinds[2:]
    if rest and rest[-1] == "Normalize":
        rest = rest[:-1]
    return kinds[:2] == ["Transformer", "Pooling"] and all(kind == "Dense" for kind in rest)


def _read_modules(name_or_path: str | os.PathLike, modules_file: Path, folder: StFolder) -> None:
    modules = _read_json(modules_file)
    if not isinstance(modules, list) or not all(isinstance(module, dict) for module in modules):
        raise ConfigError(f"{modules_file}: expected a list of module objects")
    kinds = [str(module.get("type", "")).rsplit(".", 1)[-1] for module in modules]
    if not _supported_order(kinds):
        raise ConfigError(
            f"{modules_file}: modules {kinds} are not supported; contrastext reads "
            "Transformer, Pooling, then optional Dense modules, then an optional Normalize"
        )
    layers = []
    for module, kind in zip(modules, kinds, strict=True):
        path = str(module.get("path", ""))
        if kind == "Transformer":
            folder.backbone_subfolder = path
        elif kind == "Pooling":
            pooling_path = locate(name_or_path, _join(path, "config.json"))
            if pooling_path is None:
                raise ConfigError(f"{modules_file}: Pooling module {path!r} has no config.json")
            pooling_config = _read_json_object(pooling_path)
            folder.pooling = read_st_pooling(pooling_config, pooling_path)
            folder.pooling_dimension = read_st_pooling_dimension(pooling_config, pooling_path)
            folder.pooling_file = pooling_path
            folder.include_prompt = pooling_config.get("include_prompt", True) is not False
        elif kind == "Dense":
            layers.append(_read_dense(name_or_path, path, modules_file))
            folder.dense_file = folder.dense_file or locate(name_or_path, _join(path, "config.json"))
        else:
            folder.normalize = True
    if layers:
        folder.dense = Projection(layers)


def read_st_folder(name_or_path: str | os.PathLike) -> StFolder | None:
    """Read modules.json / sentence_bert_config.json / pooling / Dense / Normalize and our own config.

    Returns None when the source has neither ``modules.json`` nor ``contrastext_config.json``
    (a plain Hugging Face model), except that a ``0_Transformer`` subfolder is still found.
    """
    folder = StFolder()
    modules_file = locate(name_or_path, "modules.json")
    ours_file = locate(name_or_path, CONTRASTEXT_CONFIG)
    if modules_file is None and ours_file is None:
        if locate(name_or_path, "config.json") is None and locate(name_or_path, "0_Transformer/config.json"):
            folder.backbone_subfolder = "0_Transformer"
            return folder
        return None
    if modules_file is not None:
        _read_modules(name_or_path, modules_file, folder)
    sbert_file = locate(name_or_path, _join(folder.backbone_subfolder, "sentence_bert_config.json"))
    if sbert_file is not None:
        folder.max_seq_length = _read_max_seq_length(sbert_file)
    if ours_file is not None:
        _read_contrastext_config(name_or_path, ours_file, folder)
    st_config = locate(name_or_path, ST_CONFIG)
    if st_config is not None:
        folder.prompts, folder.default_prompt_name = read_prompts(_read_json_object(st_config), st_config)
    return folder


def read_prompts(config: dict[str, Any], source: Path) -> tuple[dict[str, str], str | None]:
    """``prompts`` (an object of strings) and ``default_prompt_name`` (null or one of them) of a
    config_sentence_transformers.json; a ConfigError naming the file and the key otherwise."""
    prompts = config.get("prompts") or {}
    if not isinstance(prompts, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in prompts.items()):
        raise ConfigError(f"{source}: key 'prompts' must be an object of strings (name -> prompt), found {prompts!r}")
    default = config.get("default_prompt_name")
    if default is not None and default not in prompts:
        raise ConfigError(
            f"{source}: key 'default_prompt_name' is {default!r}, which is not among its prompts "
            f"({', '.join(prompts) or 'none'})"
        )
    return dict(prompts), default


def _read_contrastext_config(name_or_path: str | os.PathLike, ours_file: Path, folder: StFolder) -> None:
    ours = _read_json_object(ours_file)
    folder.contrastext = ours
    if "pooling" in ours:
        try:
            folder.pooling = check_pooling_name(str(ours["pooling"]))
        except KeyError as error:
            raise ConfigError(f"{ours_file}: key 'pooling': {error}") from error
    projection_config = ours.get("projection")
    if projection_config is None or ours.get("projection_at_inference", False):
        return
    weights_path = locate(name_or_path, CONTRASTEXT_PROJECTION)
    if weights_path is None:
        raise ConfigError(f"{ours_file}: key 'projection' is set but {CONTRASTEXT_PROJECTION} is missing beside it")
    projection = Projection.from_config(projection_config, source=f"{ours_file}: key 'projection'")
    try:
        projection.load_state_dict(load_safetensors(weights_path))
    except RuntimeError as error:
        raise ConfigError(f"{weights_path}: weights do not fit key 'projection' of {ours_file} ({error})") from error
    folder.training_projection = projection
    folder.training_projection_file = ours_file


# ----------------------------------------------------------------------------------------------- writing


class SavableEncoder(Protocol):
    """What ``write_st_folder`` reads of an encoder (``TextEncoder`` has it; this module does not import it).

    Typed structurally so that the encoder module imports this one and never the other way round.
    """

    backbone: Any
    tokenizer: Any
    pooling: str
    max_seq_length: int
    hidden_size: int
    normalize: bool
    projection: Projection | None
    projection_at_inference: bool

    @property
    def embedding_dim(self) -> int: ...


def _write_json(path: Path, content: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(content, handle, indent=2)
        handle.write("\n")


def _versions() -> dict[str, str]:
    import transformers

    versions = {"transformers": transformers.__version__, "pytorch": torch.__version__}
    try:
        import sentence_transformers

        versions = {"sentence_transformers": sentence_transformers.__version__, **versions}
    except ImportError:  # ST is optional: without it no ST version is claimed
        pass
    return versions


def pooling_config(pooling: str, dimension: int) -> dict[str, Any]:
    """ST's 1_Pooling/config.json for our pooling (legacy flags, read by every ST version)."""
    flag = ST_POOLING_FLAGS[check_pooling_name(pooling)]
    config: dict[str, Any] = {"word_embedding_dimension": dimension}
    for legacy in list(_ST_LEGACY_FLAGS)[:4]:
        config[legacy] = legacy == flag
    return config


def _write_dense(layer: DenseLayer, folder: Path) -> None:
    config = layer.config()
    _write_json(
        folder / "config.json",
        {
            "in_features": config["in_features"],
            "out_features": config["out_features"],
            "bias": config["bias"],
            "activation_function": activation_class_path(config["activation"]),
        },
    )
    state = {name: tensor.detach().contiguous().cpu() for name, tensor in layer.state_dict().items()}
    save_file(state, str(folder / "model.safetensors"))


def write_st_folder(encoder: SavableEncoder, path: str | os.PathLike) -> Path:
    """Save ``encoder`` in the ST layout described in this module's docstring; returns the folder."""
    root = Path(path)
    root.mkdir(parents=True, exist_ok=True)
    encoder.backbone.save_pretrained(root)
    encoder.tokenizer.save_pretrained(root)
    _write_json(root / "sentence_bert_config.json", {"max_seq_length": encoder.max_seq_length, "do_lower_case": False})
    _write_json(
        root / ST_CONFIG,
        {
            "model_type": "SentenceTransformer",
            "__version__": _versions(),
            "prompts": dict(getattr(encoder, "prompts", None) or {}),
            "default_prompt_name": getattr(encoder, "default_prompt_name", None),
            "similarity_fn_name": "cosine",
        },
    )
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": _ST_MODULE.format("Transformer")},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": _ST_MODULE.format("Pooling")},
    ]
    _write_json(root / "1_Pooling" / "config.json", pooling_config(encoder.pooling, encoder.hidden_size))
    projection = encoder.projection
    if projection is not None and encoder.projection_at_inference:
        for layer in projection.layers:
            idx = len(modules)
            _write_dense(layer, root / f"{idx}_Dense")
            modules.append({"idx": idx, "name": str(idx), "path": f"{idx}_Dense", "type": _ST_MODULE.format("Dense")})
    elif projection is not None:
        state = {name: tensor.detach().contiguous().cpu() for name, tensor in projection.state_dict().items()}
        save_file(state, str(root / CONTRASTEXT_PROJECTION))
    if encoder.normalize:
        idx = len(modules)
        (root / f"{idx}_Normalize").mkdir(exist_ok=True)
        modules.append({"idx": idx, "name": str(idx), "path": f"{idx}_Normalize", "type": _ST_MODULE.format("Normalize")})
    _write_json(root / "modules.json", modules)
    _write_json(
        root / CONTRASTEXT_CONFIG,
        {
            "format_version": FORMAT_VERSION,
            "pooling": encoder.pooling,
            "exact_in_sentence_transformers": encoder.pooling in ST_EXACT_POOLINGS,
            "max_seq_length": encoder.max_seq_length,
            "normalize": encoder.normalize,
            "projection": projection.config() if projection is not None else None,
            "projection_at_inference": bool(projection is not None and encoder.projection_at_inference),
        },
    )
    from contrastext.models.model_card import encoder_card, encoder_facts, write_card

    write_card(root, encoder_card(encoder_facts(encoder)))  # basic; a finished run rewrites it (runs/stages.py)
    return root
