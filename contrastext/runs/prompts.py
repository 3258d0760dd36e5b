"""``data.prompts``: text put before every training text, per column, as sentence-transformers' training prompts.

``SentenceTransformerTrainingArguments(prompts=...)`` takes one string for every column or ``{column: prompt}``,
and its data collator puts the column's prompt before each of its texts; the Pooling module's default
``include_prompt=True`` pools the prompt's tokens with the text's. Here the prompt is put before the text of the
training examples themselves (the same tokens), for the recipes of the SimCSE method (mnrl, simcse-unsup,
simcse-sup, gd): :func:`prompted_examples`. Column names are the data's (``data.description["columns"]``: a
file's or dataset's text columns, the n-tuples' negative column for every negative, NLI's hypothesis column for
the positive and the negative); data without named columns (a registry task, a ``.txt`` file) names its texts by
role, ``text``, ``pair``, ``negative``. A key that names no text column is a ConfigError naming
``data.prompts.<key>`` and the columns.

The trained model keeps them (:func:`model_prompts`), in config_sentence_transformers.json, so that
``encode --prompt-name`` and sentence-transformers' ``encode(prompt_name=...)`` apply the same text: ``{column:
prompt}`` as the model's named prompts, one string as the prompt ``default`` and the ``default_prompt_name``
(applied to every text, as in training).

Example::

    data:
      path: pairs.csv          # columns query, passage
      prompts: {query: "query: ", passage: "passage: "}

    contrastext encode -m runs/x/best/encoder -i questions.txt -o q.npy --prompt-name query
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from contrastext.data.examples import Example
from contrastext.errors import ConfigError
from contrastext.training.config import TrainConfig

ROLES: tuple[str, ...] = ("text", "pair", "negative")
"""The names of a training example's texts when the data names no columns (data.columns' roles)."""
DEFAULT_PROMPT = "default"
"""The saved name of a single ``data.prompts`` string, the model's ``default_prompt_name``."""


def text_columns(description: dict) -> list[str]:
    """The data's text columns in example order (NLI rows: premise, hypothesis; no names: none)."""
    columns = list(description.get("columns") or [])
    return columns[:-1] if "nli" in description else columns


def column_of(position: int, columns: Sequence[str]) -> str:
    """The column (or role) of text ``position`` of an example: the last column for every later text (n-tuples'
    negatives, NLI's two hypotheses, the dropout twin of a sentence)."""
    names = list(columns) or list(ROLES)
    return names[min(position, len(names) - 1)]


def prompted_examples(config: TrainConfig, examples: list[Example], description: dict, origin: str) -> list[Example]:
    """``examples`` with ``data.prompts`` put before their texts (unchanged without ``data.prompts``); a key
    naming no text column is a ConfigError (``origin``: where ``data.prompts`` came from)."""
    prompts = config.data.prompts
    if prompts is None:
        return examples
    columns = text_columns(description)
    if isinstance(prompts, dict):
        width = max((len(example.texts) for example in examples), default=1)
        known = list(dict.fromkeys(column_of(position, columns) for position in range(max(width, len(columns)))))
        for key in prompts:
            if key not in known:
                where = description.get("train", "the training data")
                kind = "text columns" if columns else "texts (no column names: by role)"
                raise ConfigError(
                    f"{origin}: data.prompts.{key}: not a text column of {where}; its {kind}: {', '.join(known)}"
                )

    def prompt_of(position: int) -> str:
        return prompts if isinstance(prompts, str) else prompts.get(column_of(position, columns), "")

    return [replace(example, texts=tuple(prompt_of(i) + text for i, text in enumerate(example.texts)))
            for example in examples]  # fmt: skip


def model_prompts(config: TrainConfig) -> tuple[dict[str, str], str | None]:
    """What the trained model saves: ``{column: prompt}`` and no default, or one string as ``default`` (its
    ``default_prompt_name``); ``({}, None)`` without ``data.prompts``."""
    prompts = config.data.prompts
    if prompts is None:
        return {}, None
    if isinstance(prompts, str):
        return {DEFAULT_PROMPT: prompts}, DEFAULT_PROMPT
    return dict(prompts), None


def apply_model_prompts(config: TrainConfig, encoder) -> None:
    """Add ``data.prompts`` to the encoder's own prompts (kept from its folder); a string also becomes its
    default prompt, so evaluation during training and the saved model encode as the training did."""
    prompts, default = model_prompts(config)
    if not prompts:
        return
    encoder.prompts = {**encoder.prompts, **prompts}
    if default is not None:
        encoder.default_prompt_name = default
