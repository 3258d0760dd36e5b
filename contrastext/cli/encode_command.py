"""``contrastext encode``: embed a text file (one text a line) into a ``.npy`` matrix.

Example::

    contrastext encode --model runs/simcse/best --input texts.txt --output emb.npy --batch-size 128

Also home of :func:`load_model`, which every command uses to turn ``--model PATH`` into a ``TextEncoder``
with a one-line error instead of a Hugging Face traceback.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import numpy as np
import typer

from contrastext.cli import app
from contrastext.errors import ContrastextError, DataFormatError, MissingDataError


def load_model(model: str | Path):
    """Load a saved model folder (ours or sentence-transformers', or a plain Hugging Face one).

    Raises ContrastextError naming the path when it is missing or holds no loadable model.
    """
    from contrastext.models.encoder import TextEncoder

    path = Path(model).expanduser()
    if not path.exists():
        raise ContrastextError(f"model {model}: no such file or folder (give the folder of a saved model)")
    if not path.is_dir():
        raise ContrastextError(f"model {model}: not a folder (give the folder of a saved model)")
    try:
        return TextEncoder.load(path)
    except ContrastextError:
        raise
    except (OSError, ValueError, KeyError, TypeError, RuntimeError) as error:
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ContrastextError(f"model {model}: cannot load a model from this folder ({reason})") from error


def read_texts(path: Path) -> list[str]:
    """One text a line (UTF-8). A blank line is a DataFormatError naming the file and line."""
    if not path.is_file():
        raise MissingDataError(f"input file {path} does not exist")
    texts = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            text = line.rstrip("\r\n")
            if not text.strip():
                raise DataFormatError(path, number, "empty line: give one non-empty text a line")
            texts.append(text)
    if not texts:
        raise DataFormatError(path, None, "the file holds no text")
    return texts


@app.command("encode")
def encode_command(
    model: Annotated[
        str, typer.Option("--model", "-m", help="Folder of a saved model (ours, sentence-transformers or Hugging Face).")
    ],
    input: Annotated[
        Path, typer.Option("--input", "-i", help="UTF-8 text file, one text a line; blank lines are an error.")
    ],
    output: Annotated[
        Path,
        typer.Option("--output", "-o", help="Where to write the embeddings: a float32 .npy of shape (texts, dim)."),
    ],
    batch_size: Annotated[int, typer.Option("--batch-size", min=1, help="Texts per forward pass.")] = 64,
    normalize: Annotated[
        bool,
        typer.Option(
            "--normalize/--no-normalize",
            help="L2-normalise every embedding (unit length, so dot product = cosine).",
        ),
    ] = True,
    progress: Annotated[
        bool, typer.Option("--progress/--no-progress", help="Show a progress bar on stderr while encoding.")
    ] = True,
) -> None:
    """Embed every line of --input with --model and save the matrix to --output (.npy, row i = line i)."""
    texts = read_texts(input)
    encoder = load_model(model)
    embeddings = encoder.encode(
        texts, batch_size=batch_size, normalize=normalize, convert_to="numpy", show_progress=progress
    )
    output.parent.mkdir(parents=True, exist_ok=True)
    np.save(output, np.asarray(embeddings, dtype=np.float32))
    typer.echo(f"wrote {output} ({len(texts)} x {np.shape(embeddings)[1]})", err=True)
