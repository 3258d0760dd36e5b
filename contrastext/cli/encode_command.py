"""``contrastext encode``: embed a text file (one text a line) into a ``.npy`` matrix.

Example::

    contrastext encode --model runs/simcse/best --input texts.txt --output emb.npy --batch-size 128
    contrastext encode --model runs/simcse/best --input texts.txt --output emb.npy --precision ubinary
    contrastext encode --model runs/mnrl/best/encoder --input texts.txt --output emb.npy --dim 128
    contrastext encode --model runs/e5/best/encoder --input queries.txt --output q.npy --prompt-name query

``--precision float32|int8|uint8|binary|ubinary`` stores the embeddings as sentence-transformers'
``quantize_embeddings`` does (``contrastext/models/embedding_precision.py``; int8 / uint8 ranges from the
embeddings themselves or ``--ranges``); ``--quantize-weights int8`` is another thing: int8 weights for a faster
CPU forward (the old name ``--quantize`` is refused with a line naming the new one).

Row i of the matrix is line i of the input: only ``\\n`` ends a line (a trailing ``\\r`` is dropped, a lone
``\\r`` inside a line stays in its text). The matrix is written to exactly the ``--output`` path given (in
the ``.npy`` format, whatever the suffix), and only when every value is finite.

Also home of what every command shares: :func:`load_model`, which turns ``--model`` (a folder,
``bundled:all-MiniLM-L6-v2`` or a hub name) into a ``TextEncoder`` with a one-line error instead of a Hugging
Face traceback, and the output checks
:func:`check_output_file` / :func:`check_output_folder`, run before any work starts.
"""

from __future__ import annotations

import os
import stat
import tempfile
import warnings
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import numpy as np
import typer

from contrastext.cli import app
from contrastext.errors import (
    ConfigError,
    ContrastextError,
    DataFormatError,
    EmptyDataError,
    MissingDataError,
    NonFiniteError,
)
from contrastext.models.quiet import quiet_transformers
from contrastext.runtime.paths import check_apart

MODEL_HELP = (
    "Folder of a saved model (ours, sentence-transformers or Hugging Face), bundled:all-MiniLM-L6-v2, or a "
    "Hugging Face hub name (offline: only a model already in the local Hugging Face cache)."
)
TRUST_REMOTE_CODE_HELP = (
    "Allow running Python code shipped with the model folder (config.json auto_map). Off by default: "
    "only for a folder you trust."
)


DEVICE_HELP = (
    "Where the model runs: cpu, cuda, cuda:N or mps. Default: the first CUDA GPU when there is one, else the "
    "CPU (as SentenceTransformer chooses); --quantize-weights int8 runs on the CPU."
)


class Quantize(StrEnum):
    none = "none"
    int8 = "int8"


QUANTIZE_HELP = (
    "The model's weights, not the output: int8: dynamic int8 linear layers (torch.ao.quantization.quantize_dynamic; CPU only): faster, and the "
    "embeddings change a little (BENCHMARKS.md reports the STS-B dev Spearman change); none: as trained."
)


def quantize_encoder(encoder, quantize: str = "none"):
    """``encoder`` with its ``nn.Linear`` layers replaced by dynamic int8 ones (``quantize="int8"``), a copy;
    ``"none"`` returns it as it is. Weights are quantised once per output channel, activations per batch (per
    tensor); CPU only. On all-MiniLM-L6-v2 the embeddings keep a cosine of about 0.98 to the float ones."""
    if quantize == Quantize.none:
        return encoder
    if quantize != Quantize.int8:
        raise ContrastextError(
            f"--quantize-weights {quantize!r}: expected one of: {', '.join(q.value for q in Quantize)}"
        )
    import torch

    if encoder.device.type != "cpu":
        raise ContrastextError(f"--quantize-weights int8 runs on CPU only; the model is on {encoder.device}")
    quantization = getattr(getattr(torch, "ao", None), "quantization", None)
    if quantization is None or not hasattr(quantization, "quantize_dynamic"):
        raise ContrastextError(
            f"--quantize-weights int8 needs torch.ao.quantization, which torch {torch.__version__} lacks"
        )
    with warnings.catch_warnings():  # torch.ao.quantization announces its move to torchao on every call
        warnings.simplefilter("ignore")
        qconfig = quantization.per_channel_dynamic_qconfig  # per output channel: cos 0.98 against 0.93 per tensor
        return quantization.quantize_dynamic(encoder, {torch.nn.Linear: qconfig}, dtype=torch.qint8)


def resolve_device(device: str | None, quantize: str = "none"):
    """``--device`` as a ``torch.device``: as given (checked: known, and present on this machine), or by
    default CUDA when available and the CPU otherwise; int8 quantisation (CPU only) defaults to the CPU."""
    import torch

    if device is None:
        cuda = torch.cuda.is_available() and quantize == Quantize.none
        return torch.device("cuda" if cuda else "cpu")
    try:
        chosen = torch.device(device)
    except (RuntimeError, ValueError) as error:
        raise ContrastextError(f"--device {device!r}: not a device (cpu, cuda, cuda:N or mps)") from error
    if chosen.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise ContrastextError(f"--device {device}: no CUDA GPU is available here (use --device cpu)")
        if chosen.index is not None and chosen.index >= count:
            raise ContrastextError(f"--device {device}: this machine has {count} CUDA GPU(s), cuda:0..cuda:{count - 1}")
    elif chosen.type == "mps" and not torch.backends.mps.is_available():
        raise ContrastextError(f"--device {device}: MPS is not available here (use --device cpu)")
    elif chosen.type not in ("cpu", "cuda", "mps"):
        raise ContrastextError(f"--device {device}: not supported (cpu, cuda, cuda:N or mps)")
    return chosen


def load_model(model: str | Path, trust_remote_code: bool = False, device=None):
    """Load ``--model``: a saved model folder (ours, sentence-transformers' or a plain Hugging Face one),
    ``bundled:all-MiniLM-L6-v2``, or a Hugging Face hub name; on ``device`` when given (else the CPU).

    Raises ContrastextError naming the model when it is missing, holds no loadable model, or is a hub name
    that cannot be had offline (one line, at once: see :func:`contrastext.models.names.locate_model`); no
    code from the folder is run unless ``trust_remote_code``.
    """
    from contrastext.models.encoder import TextEncoder
    from contrastext.models.names import locate_model

    source = locate_model(str(model))
    path = Path(source).expanduser()
    local = path.exists()
    if local and not path.is_dir():
        raise ContrastextError(f"model {model}: not a folder (give the folder of a saved model)")
    try:
        with quiet_transformers():
            if local:
                encoder = TextEncoder.load(path, trust_remote_code=trust_remote_code)
            else:
                encoder = TextEncoder.from_pretrained(source, trust_remote_code=trust_remote_code)
        return encoder if device is None else encoder.to(device)
    except ContrastextError:
        raise
    except Exception as error:  # a hostile folder can make transformers fail in any way: one line, no traceback
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        where = "this folder" if local else "the hub"
        raise ContrastextError(
            f"model {model}: cannot load a model from {where} ({type(error).__name__}: {reason})"
        ) from error


def read_texts(path: Path) -> list[str]:
    """One text a line (UTF-8): line i of the file is text i.

    Only ``\\n`` ends a line; a trailing ``\\r`` (CRLF files) is dropped and a UTF-8 byte-order mark at the
    start is ignored. A blank line or undecodable bytes are a DataFormatError naming the file and line.
    """
    from contrastext.data.readers.lines import check_regular_file, iter_lines

    if path.is_dir():
        raise MissingDataError(f"input file {path} is a folder: give a text file, one text a line")
    check_regular_file(path, "input file")  # a FIFO or a device is named as what it is
    texts = []
    for number, text in iter_lines(path):
        if not text.strip():
            raise DataFormatError(path, number, "empty line: give one non-empty text a line")
        texts.append(text)
    if not texts:
        raise EmptyDataError(f"{path}: the file holds no text")
    return texts


def _nearest_existing(path: Path) -> Path:
    """``path`` or its closest ancestor that exists."""
    for candidate in (path, *path.parents):
        if candidate.exists():
            return candidate
    return Path(".")


def _check_writable_folder(folder: Path, option: str, target: Path) -> None:
    """The folder that will hold ``target`` exists (or can be created) and accepts a new file."""
    existing = _nearest_existing(folder)
    if not existing.is_dir():
        raise ContrastextError(f"{option} {target}: {existing} is a file, not a folder, so nothing can be written under it")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".contrastext-write-test-"):
            pass
    except OSError as error:
        raise ContrastextError(f"{option} {target}: cannot write in {folder} ({error.strerror or error})") from None


def check_output_file(path: Path, option: str) -> Path:
    """Fail now, before any work, unless ``path`` can be written as a file (its folders are created).

    A folder, a path under a file, a read-only folder or a read-only existing file is a ContrastextError
    naming ``option`` and the path.
    """
    path = Path(path)
    if path.is_dir():
        raise ContrastextError(f"{option} {path}: is a folder; give a file path")
    if path.exists() and not os.access(path, os.W_OK):
        raise ContrastextError(f"{option} {path}: the file exists and is read-only")
    if path.exists() and not path.is_file():
        return path  # a device or a pipe (/dev/null): written in place
    _check_writable_folder(_real(path).parent, option, path)
    return path


def check_output_folder(path: Path, option: str) -> Path:
    """Fail now unless ``path`` is (or can be created as) a folder that accepts new files."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise ContrastextError(f"{option} {path}: is a file; give a folder")
    _check_writable_folder(path, option, path)
    return path


def _new_file_mode() -> int:
    """The permissions ``open(path, "w")`` would give a new file under the current umask."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def _real(path: Path) -> Path:
    """``path`` with symbolic links resolved, so that writing replaces the file a link points at, not the link."""
    return Path(os.path.realpath(path))


def write_file_atomically(path: Path, write, option: str) -> None:
    """``write(handle)`` into a temporary file beside ``path``, then rename it to exactly ``path``.

    A reader never sees half a file, and a failed write leaves the old file. A symbolic link is followed;
    a device or a pipe (``/dev/null``) is written in place.
    """
    target = _real(Path(path))
    try:
        if target.exists() and not target.is_file():
            with open(target, "wb") as handle:
                write(handle)
            return
        descriptor, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".contrastext-tmp.{target.name}.", suffix=".tmp")
        try:
            with os.fdopen(descriptor, "wb") as handle:
                write(handle)
            os.chmod(temporary, stat.S_IMODE(target.stat().st_mode) if target.exists() else _new_file_mode())
            os.replace(temporary, target)
        finally:
            if os.path.exists(temporary):
                os.unlink(temporary)
    except OSError as error:
        raise ContrastextError(f"{option} {path}: cannot write the file ({error.strerror or error})") from None


PRECISION_HELP = (
    "How the embeddings are stored, as sentence-transformers' quantize_embeddings: float32, int8 / uint8 (255 steps "
    "per dimension between its min and max), binary / ubinary (one bit per dimension, x > 0, 8 to a byte)."
)
RANGES_HELP = "int8 / uint8: a (2, dim) .npy of each dimension's min and max (default: those of the encoded texts)."
DIM_HELP = (
    "Keep the first N dimensions of every embedding (sentence-transformers' truncate_dim; for a model trained with "
    "method_args.matryoshka_dims), cut before --normalize. Default: all; more than the model has is an error."
)


PROMPT_HELP = (
    "Text put before every input text (sentence-transformers' encode(prompt=...)), e.g. 'query: '. Default: the "
    "model's default prompt when it has one (its default_prompt_name), else none."
)
PROMPT_NAME_HELP = (
    "One of the model's saved prompts, by name (sentence-transformers' prompt_name; a model trained with "
    "data.prompts {query: ..., passage: ...} has 'query' and 'passage')."
)


class PromptedEncoder:
    """An encoder whose ``encode`` puts one prompt before every text (what ``eval --prompt`` evaluates)."""

    def __init__(self, encoder, prompt: str):
        self.encoder, self.prompt = encoder, prompt

    def encode(self, texts, **kwargs):
        return self.encoder.encode(texts, prompt=self.prompt, **kwargs)


def chosen_prompt(encoder, prompt: str | None, prompt_name: str | None) -> str:
    """The prompt of ``--prompt`` / ``--prompt-name`` (else the model's default prompt, else ``""``), checked
    against the model: both options, an unknown name, a pooling without prompts are one error line."""
    return encoder.resolve_prompt(prompt, prompt_name, ("--prompt", "--prompt-name")) or ""


def prompted_encoder(encoder, prompt: str | None, prompt_name: str | None):
    """``encoder`` as it is without ``--prompt`` / ``--prompt-name`` (its default prompt applies), else one whose
    ``encode`` puts that prompt before every text."""
    if prompt is None and prompt_name is None:
        chosen_prompt(encoder, None, None)  # a default prompt the pooling cannot take: one line, now
        return encoder
    return PromptedEncoder(encoder, chosen_prompt(encoder, prompt, prompt_name))


def truncated_encoder(encoder, dim: int | None):
    """``encoder`` with ``truncate_dim`` set to ``--dim`` (checked against its width: one error line)."""
    if dim is not None:
        encoder.truncate_dim = encoder.check_truncate_dim(dim, "--dim")
    return encoder


def with_precision(embeddings: np.ndarray, precision: str, ranges: Path | None) -> np.ndarray:
    """``embeddings`` at ``--precision`` (``--ranges``: a .npy of shape (2, dim), int8 / uint8 only)."""
    from contrastext.models.embedding_precision import quantize_embeddings

    if ranges is not None and not precision.endswith("int8"):
        raise ConfigError(f"--ranges is for --precision int8 or uint8, not {precision}")
    bounds = None
    if ranges is not None:
        from contrastext.data.readers.lines import check_regular_file

        try:
            bounds = np.load(check_regular_file(ranges, "--ranges file"), allow_pickle=False)
        except (OSError, ValueError) as error:
            raise DataFormatError(ranges, None, f"not a .npy matrix ({error})") from None
    return quantize_embeddings(embeddings, precision, bounds)


def check_finite(embeddings: np.ndarray, texts: list[str], source: str) -> None:
    """NonFiniteError naming the first bad row (line) when any embedding holds NaN or infinity."""
    bad_rows = np.flatnonzero(~np.isfinite(embeddings).all(axis=1))
    if bad_rows.size:
        first = int(bad_rows[0])
        raise NonFiniteError(
            f"the model produced NaN or infinite embeddings for {bad_rows.size} of {len(texts)} texts "
            f"(first: {source}:{first + 1}); its weights are probably diverged: nothing was written"
        )


@app.command("encode")
def encode_command(
    model: Annotated[
        str, typer.Option("--model", "-m", help=MODEL_HELP)
    ],
    input: Annotated[
        Path,
        typer.Option(
            "--input",
            "-i",
            help="UTF-8 text file, one text a line (only \\n ends a line); blank lines are an error.",
        ),
    ],
    output: Annotated[
        Path,
        typer.Option(
            "--output",
            "-o",
            help="Where to write the embeddings: a float32 .npy matrix of shape (texts, dim), written to exactly "
            "this path (no suffix is added).",
        ),
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
    trust_remote_code: Annotated[bool, typer.Option("--trust-remote-code", help=TRUST_REMOTE_CODE_HELP)] = False,
    quantize: Annotated[Quantize, typer.Option("--quantize-weights", help=QUANTIZE_HELP)] = Quantize.none,
    device: Annotated[str | None, typer.Option("--device", help=DEVICE_HELP)] = None,
    precision: Annotated[str, typer.Option("--precision", help=PRECISION_HELP)] = "float32",
    ranges: Annotated[Path | None, typer.Option("--ranges", help=RANGES_HELP)] = None,
    dim: Annotated[int | None, typer.Option("--dim", min=1, help=DIM_HELP)] = None,
    prompt: Annotated[str | None, typer.Option("--prompt", help=PROMPT_HELP)] = None,
    prompt_name: Annotated[str | None, typer.Option("--prompt-name", help=PROMPT_NAME_HELP)] = None,
    old_quantize: Annotated[str | None, typer.Option("--quantize", hidden=True)] = None,
) -> None:
    """Embed every line of --input with --model and save the matrix to --output (.npy, row i = line i)."""
    from contrastext.models.embedding_precision import PRECISIONS

    if old_quantize is not None:
        raise ConfigError(
            f"--quantize {old_quantize} is now --quantize-weights {old_quantize} (int8 weights); to store the "
            "embeddings themselves as int8 or bits, use --precision"
        )
    if precision not in PRECISIONS:
        raise ConfigError(f"--precision {precision!r}: choose one of {', '.join(PRECISIONS)}")
    if ranges is not None and not precision.endswith("int8"):
        raise ConfigError(f"--ranges is for --precision int8 or uint8, not {precision}")
    check_output_file(output, "--output")
    check_apart(output, "--output", [("--input", input), ("--model", model)])  # never over an input
    chosen = resolve_device(device, quantize)
    if quantize != Quantize.none and chosen.type != "cpu":
        raise ContrastextError(f"--quantize-weights {quantize.value} runs on the CPU only; drop --device {device}")
    texts = read_texts(input)
    encoder = load_model(model, trust_remote_code=trust_remote_code, device=chosen)
    encoder = prompted_encoder(truncated_encoder(quantize_encoder(encoder, quantize), dim), prompt, prompt_name)
    embeddings = encoder.encode(
        texts, batch_size=batch_size, normalize=normalize, convert_to="numpy", show_progress=progress
    )
    embeddings = np.asarray(embeddings, dtype=np.float32)
    check_finite(embeddings, texts, str(input))
    embeddings = with_precision(embeddings, precision, ranges)
    write_file_atomically(output, lambda handle: np.save(handle, embeddings), "--output")
    typer.echo(f"wrote {output} ({len(texts)} x {embeddings.shape[1]})", err=True)
