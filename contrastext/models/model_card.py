"""Model cards: the README.md of every saved encoder and exported classifier, as sentence-transformers writes one.

A card is YAML front matter (``base_model``, ``library_name``, ``pipeline_tag``, ``tags``, ``datasets``,
``metrics``: what the Hugging Face Hub reads) and a Markdown body: model details, how to load it
(sentence-transformers / transformers / contrastext snippets), the recipe, the training data, the final
metrics and the training settings.

Two writers:

- :func:`encoder_card` for a sentence-transformers folder (``TextEncoder.save``: ``best/encoder``,
  ``final/encoder``). The saving code knows only the encoder, so the card it writes is a basic one;
  :mod:`contrastext.runs.stages` rewrites it after training with the run's ``details``.
- :func:`classifier_card` for a Hugging Face sequence-classification folder
  (:func:`contrastext.models.hf_export.export_classifier`).

``details`` is a plain dict (every key optional): ``base_model``, ``recipe`` (the method name), ``recipe_file``,
``method_doc`` (its page), ``data`` (key → value describing the training data), ``metrics`` (name → value),
``metrics_note`` (which weights and split they are of), ``training`` (settings), ``weights`` (``best`` or
``final``), ``output_dir``.

A card holds no local path (:func:`portable_details`): ``base_model`` is a hub id or absent
(:func:`contrastext.models.names.hub_id`), a shipped recipe is named as ``recipes/<name>.yaml`` and any other
file or folder by its name only. Its settings show the length that ran: ``max_steps`` and the steps trained,
without the ``epochs`` that ``max_steps`` overrode (or ``epochs`` without an unused ``max_steps``).

Example::

    >>> text = encoder_card(encoder_facts(encoder), {"recipe": "simcse-unsup", "metrics": {"stsb_dev_spearman": 81.2}})
    >>> write_card("runs/simcse/best/encoder", text)
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

CARD_FILE = "README.md"
DOCS_URL = "docs/methods/{}.md"
SHIPPED_RECIPES = Path(__file__).resolve().parents[1] / "runs" / "recipes"
ABSOLUTE = re.compile(r"^(~|/|[A-Za-z]:[\\/])")
SPEC = re.compile(r"^([A-Za-z][\w-]*):(.+)$")  # "kind:path" evaluation / task specs


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("contrastext")
    except Exception:  # not installed as a distribution (a source checkout)
        return "unknown"


def _format_value(value: Any) -> str:
    if isinstance(value, float):
        return "n/a" if not math.isfinite(value) else f"{value:.4g}"
    if isinstance(value, list | tuple):
        return ", ".join(_format_value(item) for item in value) or "(none)"
    return "" if value is None else str(value).replace("|", "\\|").replace("\n", " ")


def _table(rows: Mapping[str, Any], headers: tuple[str, str]) -> list[str]:
    lines = [f"| {headers[0]} | {headers[1]} |", "|:--|:--|"]
    lines += [f"| {_format_value(key)} | {_format_value(value)} |" for key, value in rows.items()]
    return lines


def _front_matter(fields: dict[str, Any]) -> list[str]:
    kept = {key: value for key, value in fields.items() if value not in (None, [], {})}
    return ["---", yaml.safe_dump(kept, sort_keys=False, allow_unicode=True).rstrip(), "---", ""]


def _numeric_metrics(metrics: Mapping[str, Any] | None) -> dict[str, float]:
    numeric = {}
    for name, value in (metrics or {}).items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            continue
        numeric[str(name)] = float(value)
    return numeric


def _datasets(data: Mapping[str, Any]) -> list[str]:
    names = []
    for key in ("task", "tasks", "path", "dataset"):
        value = data.get(key)
        if isinstance(value, str) and value:
            names.append(value)
        elif isinstance(value, list | tuple):
            names.extend(str(item) for item in value)
    return names


def _portable(value: Any) -> Any:
    """``value`` without a local absolute path: a path (alone or in a ``kind:path`` spec) becomes its name."""
    if isinstance(value, list | tuple):
        return [_portable(item) for item in value]
    if not isinstance(value, str):
        return value
    spec = SPEC.match(value)
    if spec and ABSOLUTE.match(spec.group(2)) and len(spec.group(1)) > 1:
        return f"{spec.group(1)}:{_portable(spec.group(2))}"
    if ABSOLUTE.match(value):
        return Path(value.replace("\\", "/")).name or value
    return value


def _recipe_file(path: Any) -> str | None:
    """A shipped recipe as ``recipes/<name>.yaml``; any other recipe file by its name (never a local path)."""
    if not path:
        return None
    file = Path(str(path)).expanduser()
    try:
        shipped = file.resolve().parent == SHIPPED_RECIPES
    except OSError:
        shipped = False
    return f"recipes/{file.name}" if shipped else str(_portable(str(path)))


def _run_length(training: Mapping[str, Any]) -> dict[str, Any]:
    """The settings with the run's length told once: ``max_steps`` bounded the run when it is set and the steps
    trained reached it (``epochs`` was not used: dropped); else ``epochs`` did (``max_steps`` dropped). A
    ``length_from`` entry (``max_steps`` / ``epochs``) says which, when the writer knows."""
    rows = dict(training)
    length_from = rows.pop("length_from", None)
    steps, max_steps, epochs = rows.get("steps trained"), rows.get("max_steps"), rows.get("epochs")
    if length_from is None and max_steps is not None and epochs is not None:
        length_from = "epochs" if steps is not None and steps != max_steps else "max_steps"
    if length_from == "max_steps":
        rows.pop("epochs", None)
    elif length_from == "epochs":
        rows.pop("max_steps", None)
    return rows


def portable_details(details: Mapping[str, Any] | None, facts: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``details`` as a card may publish them: the hub id of the base model (or none), no local path, one length."""
    from contrastext.models.names import hub_id

    tidy = dict(details or {})
    tidy["base_model"] = hub_id(tidy.get("base_model") or (facts or {}).get("base_model"))
    tidy["recipe_file"] = _recipe_file(tidy.get("recipe_file"))
    if tidy.get("output_dir"):
        tidy["output_dir"] = _portable(str(tidy["output_dir"]))
    for key in ("data", "training"):
        if tidy.get(key):
            tidy[key] = {name: _portable(value) for name, value in tidy[key].items()}
    if tidy.get("training"):
        tidy["training"] = _run_length(tidy["training"])
    return tidy


def _common_sections(details: Mapping[str, Any]) -> list[str]:
    """Recipe, training data, metrics and settings: the parts both cards share."""
    lines: list[str] = []
    recipe = details.get("recipe")
    if recipe:
        lines += ["## Training recipe", ""]
        doc = details.get("method_doc") or DOCS_URL.format(recipe)
        lines.append(f"Trained with the contrastext recipe **`{recipe}`** (method page: `{doc}`).")
        if details.get("recipe_file"):
            lines.append(f"Recipe file: `{details['recipe_file']}`.")
        if details.get("output_dir"):
            lines.append(f"Run folder: `{details['output_dir']}` (`config.yaml` there holds every setting).")
        lines.append("")
    data = details.get("data") or {}
    if data:
        lines += ["## Training data", "", *_table(data, ("key", "value")), ""]
    metrics = _numeric_metrics(details.get("metrics"))
    lines += ["## Evaluation", ""]
    if metrics:
        note = details.get("metrics_note")
        if note:
            lines += [str(note), ""]
        lines += [*_table(metrics, ("metric", "value")), ""]
        lines += ["Scores are ×100 (accuracy, F1, MCC, Spearman and Pearson correlations).", ""]
    elif recipe:
        lines += ["No metrics: this run evaluated nothing at these weights (no `eval.tasks`).", ""]
    else:
        lines += ["Not evaluated yet: this card was written when the model was saved, before any evaluation.", ""]
    training = details.get("training") or {}
    if training:
        lines += ["## Training settings", "", *_table(training, ("setting", "value")), ""]
    return lines


def _framework_lines() -> list[str]:
    import torch
    import transformers

    return [
        "## Framework versions",
        "",
        f"- contrastext: {_version()}",
        f"- transformers: {transformers.__version__}",
        f"- PyTorch: {torch.__version__}",
        "",
    ]


def encoder_facts(encoder) -> dict[str, Any]:
    """What an encoder card says about the model itself (from a ``TextEncoder``)."""
    projection = encoder.projection
    return {
        "base_model": getattr(encoder.backbone.config, "name_or_path", None) or None,
        "model_type": getattr(encoder.backbone.config, "model_type", None),
        "pooling": encoder.pooling,
        "max_seq_length": encoder.max_seq_length,
        "hidden_size": encoder.hidden_size,
        "embedding_dim": encoder.embedding_dim,
        "normalize": encoder.normalize,
        "projection": None if projection is None else ("at inference" if encoder.projection_at_inference else "training only"),
    }


def encoder_card(facts: Mapping[str, Any], details: Mapping[str, Any] | None = None) -> str:
    """README.md text of a sentence-transformers folder (``facts`` from :func:`encoder_facts`)."""
    details = portable_details(details, facts)
    base_model = details.get("base_model")
    recipe = details.get("recipe")
    metrics = _numeric_metrics(details.get("metrics"))
    front = _front_matter(
        {
            "base_model": base_model,
            "library_name": "sentence-transformers",
            "pipeline_tag": "sentence-similarity",
            "tags": ["sentence-transformers", "sentence-similarity", "feature-extraction", "contrastext",
                     *([recipe] if recipe else [])],
            "datasets": _datasets(details.get("data") or {}),
            "metrics": sorted(metrics),
        }
    )
    title = f"# SentenceTransformer based on {base_model}" if base_model else "# SentenceTransformer"
    exact = facts.get("pooling") in ("cls", "cls_before_pooler", "mean", "max")
    model_rows = {
        "Model type": "Sentence Transformer (saved by contrastext)",
        "Base model": base_model or "unknown",
        "Recipe": recipe or "unknown (written when the encoder was saved)",
        "Maximum sequence length": f"{facts.get('max_seq_length')} tokens",
        "Output dimensionality": f"{facts.get('embedding_dim')} dimensions",
        "Pooling": facts.get("pooling"),
        "Normalized embeddings": facts.get("normalize"),
        "Similarity function": "cosine similarity",
    }
    if facts.get("projection"):
        model_rows["Projection"] = facts["projection"]
    lines = [
        *front,
        title,
        "",
        "A sentence encoder trained with contrastext (contrastive learning of text representations). It maps "
        "sentences to dense vectors for semantic similarity, search and clustering.",
        "",
        "## Model details",
        "",
        *_table(model_rows, ("", "")),
        "",
        "## Usage",
        "",
        "### sentence-transformers",
        "",
        "```python",
        "from sentence_transformers import SentenceTransformer",
        "",
        'model = SentenceTransformer("path/to/this/folder")',
        'embeddings = model.encode(["A man is playing a guitar.", "Someone plays an instrument."])',
        "print(model.similarity(embeddings, embeddings))",
        "```",
        "",
    ]
    if not exact:
        lines += [
            f"Pooling `{facts.get('pooling')}` has no exact sentence-transformers mode: sentence-transformers loads "
            "this folder with the nearest one. Use contrastext (below) for the exact embeddings.",
            "",
        ]
    lines += [
        "### contrastext",
        "",
        "```python",
        "from contrastext.models import TextEncoder",
        "",
        'encoder = TextEncoder.load("path/to/this/folder")',
        'embeddings = encoder.encode(["A man is playing a guitar."])',
        "```",
        "",
        "```",
        "contrastext encode --model path/to/this/folder --input texts.txt --output embeddings.npy",
        "contrastext eval --model path/to/this/folder --tasks stsb:dev --data-root DATA",
        "```",
        "",
        *_common_sections(details),
        *_framework_lines(),
    ]
    return "\n".join(lines)


def classifier_card(metadata: Mapping[str, Any], details: Mapping[str, Any] | None, max_length: int) -> str:
    """README.md text of an exported sequence-classification folder (``metadata``: its contrastext_config
    ``classifier`` entry)."""
    details = portable_details(details)
    base_model = details.get("base_model")
    recipe = details.get("recipe")
    labels = list(metadata.get("labels") or [])
    regression = metadata.get("problem_type") == "regression"
    pair = bool(metadata.get("text_pair"))
    metrics = _numeric_metrics(details.get("metrics"))
    front = _front_matter(
        {
            "base_model": base_model,
            "library_name": "transformers",
            "pipeline_tag": "text-classification",
            "tags": ["text-classification", "contrastext", *([recipe] if recipe else [])],
            "datasets": _datasets(details.get("data") or {}),
            "metrics": sorted(metrics),
        }
    )
    task = metadata.get("task")
    example = '{"text": "A man is playing a guitar.", "text_pair": "Someone plays an instrument."}' if pair else (
        '"A fine, moving film."'
    )
    call_options = ', function_to_apply="none"' if regression else ", top_k=None"
    model_rows = {
        "Model type": f"{metadata.get('hf_class')} (transformers, no custom code)",
        "Base model": base_model or "unknown",
        "Recipe": recipe or "unknown",
        "Task": task or "unknown",
        "Input": "a pair of texts, encoded together ([CLS] a [SEP] b [SEP])" if pair else "one text",
        "Output": "one score (regression)" if regression else f"{len(labels)} classes",
        "Maximum sequence length": f"{max_length} tokens (longer inputs: pass truncation=True)",
    }
    route = metadata.get("route")
    why = {
        "bert-pooler": "The head reads BERT's pooler output, exactly what `BertForSequenceClassification` does.",
        "electra-cls": (
            "The head reads the raw last-layer [CLS] vector. `BertForSequenceClassification` would put BERT's "
            "pooler (dense + tanh) in between, so the model is stored as `ElectraForSequenceClassification`: "
            "the same BERT encoder without the pooler, whose head `out_proj(gelu(dense(h)))` holds the linear head "
            "exactly (dense = [W; -W], out_proj = [I, -I]: GELU(u) - GELU(-u) = u)."
        ),
    }.get(str(route), "")
    lines = [
        *front,
        f"# {task or 'Text'} classifier based on {base_model or 'a fine-tuned encoder'}",
        "",
        "A fine-tuned sequence classifier exported by contrastext as a plain Hugging Face folder: "
        "`transformers` loads it with `AutoModelForSequenceClassification` or `pipeline`, no custom code.",
        "",
        "## Model details",
        "",
        *_table(model_rows, ("", "")),
        "",
    ]
    if why:
        lines += [why, "", "It predicts exactly what the contrastext model predicted (checked when exported).", ""]
    if labels and not regression:
        lines += ["### Labels", "", *_table(dict(enumerate(labels)), ("id", "label")), ""]
    lines += [
        "## Usage",
        "",
        "### transformers pipeline",
        "",
        "```python",
        "from transformers import pipeline",
        "",
        'classifier = pipeline("text-classification", model="path/to/this/folder")',
        f"print(classifier({example}, truncation=True{call_options}))",
        "```",
        "",
        "### transformers",
        "",
        "```python",
        "import torch",
        "from transformers import AutoModelForSequenceClassification, AutoTokenizer",
        "",
        'tokenizer = AutoTokenizer.from_pretrained("path/to/this/folder")',
        'model = AutoModelForSequenceClassification.from_pretrained("path/to/this/folder").eval()',
        (
            'batch = tokenizer(["A man is playing a guitar."], ["Someone plays an instrument."], truncation=True, '
            'padding=True, return_tensors="pt")'
            if pair
            else 'batch = tokenizer(["A fine, moving film."], truncation=True, padding=True, return_tensors="pt")'
        ),
        "with torch.no_grad():",
        "    logits = model(**batch).logits",
        "print(logits[:, 0])  # the predicted score" if regression else "print(model.config.id2label[int(logits.argmax(-1)[0])])",
        "```",
        "",
        "### contrastext",
        "",
        "```",
        "contrastext predict --model path/to/this/folder --input texts.txt --output predictions.jsonl",
        "```",
        "",
        "One text a line" + (" (a pair: the two texts separated by a TAB)" if pair else "") + "; row i of the "
        "output is line i.",
        "",
        *_common_sections(details),
        *_framework_lines(),
    ]
    return "\n".join(lines)


def write_card(folder: str | os.PathLike, text: str) -> Path:
    """Write ``text`` as ``folder/README.md``; returns the path."""
    path = Path(folder) / CARD_FILE
    path.write_text(text if text.endswith("\n") else text + "\n", encoding="utf-8")
    return path
