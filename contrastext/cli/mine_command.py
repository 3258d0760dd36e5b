"""``contrastext mine``: offline hard-negative mining from (query, positive) rows, as sentence-transformers mines.

Example::

    contrastext mine -m bundled:all-MiniLM-L6-v2 -i pairs.csv -o triplets.csv --num-negatives 3 --relative-margin 0.05
    contrastext mine -m my-model -i pairs_dataset/ --corpus corpus.txt -o mined/ --search faiss
    contrastext train mnrl --set data.path=triplets.csv

``--input``: a CSV / TSV / JSONL file or a ``datasets`` folder (``--split``), read as training reads it: the first
two text columns (or ``--anchor-column`` / ``--positive-column``) are the query and its positive. ``--corpus``:
more candidate texts (a ``.txt`` file, one a line; a table or dataset with one text column, or
``--corpus-column``), searched together with the positives. The options and their meanings are those of
sentence-transformers' ``mine_hard_negatives`` (``contrastext/negatives/mining.py``); the output (by its suffix:
``.csv``, ``.tsv``, ``.jsonl``, else a ``datasets`` folder) is what ``contrastext train mnrl`` reads as it is.
The statistics table ST prints is printed on stdout; the output is written whole or not at all, and never over
an input.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from contrastext.cli import app
from contrastext.cli.encode_command import (
    DEVICE_HELP,
    MODEL_HELP,
    TRUST_REMOTE_CODE_HELP,
    load_model,
    resolve_device,
)
from contrastext.errors import ConfigError
from contrastext.runtime.paths import check_apart


def _spec(path: Path, split: str | None, columns: dict[str, str | None], option: str):
    from contrastext.data.sources import DataSpec

    if path.is_dir():
        return DataSpec(dataset=str(path), split=split, columns=columns, origin=option)
    if split is not None:
        raise ConfigError(f"--split {split}: {option} {path} is a file, which has no splits")
    return DataSpec(path=str(path), columns=columns, origin=option)


def read_pairs(path: Path, split: str | None, anchor: str | None, positive: str | None):
    """(queries, positives, anchor column name, positive column name) of ``--input``."""
    from contrastext.data.sources import read_texts

    if (anchor is None) != (positive is None):
        raise ConfigError("--anchor-column and --positive-column: give both or neither")
    data = read_texts(_spec(path, split, {"text": anchor, "pair": positive}, "--input"), "pairs", "contrastext mine")
    names = data.description.get("columns", ["anchor", "positive"])
    return ([e.texts[0] for e in data.examples], [e.texts[1] for e in data.examples], names[0], names[1])


def read_corpus(path: Path, split: str | None, column: str | None) -> list[str]:
    from contrastext.data.sources import read_texts

    data = read_texts(_spec(path, split, {"text": column}, "--corpus"), "sentences", "--corpus")
    return [example.texts[0] for example in data.examples]


@app.command("mine")
def mine_command(
    model: Annotated[str, typer.Option("--model", "-m", help=MODEL_HELP)],
    input: Annotated[Path, typer.Option("--input", "-i", help="(query, positive) rows: a .csv/.tsv/.jsonl file or a "
                                        "datasets folder.")],  # fmt: skip
    output: Annotated[Path, typer.Option("--output", "-o", help="A .csv, .tsv or .jsonl file, or (any other path) "
                                         "a new datasets folder.")],  # fmt: skip
    corpus: Annotated[Path | None, typer.Option("--corpus", help="More candidate texts: .txt (one a line), a "
                                                "table or a datasets folder.")] = None,  # fmt: skip
    split: Annotated[str | None, typer.Option("--split", help="The split of a datasets folder --input.")] = None,
    anchor_column: Annotated[str | None, typer.Option("--anchor-column")] = None,
    positive_column: Annotated[str | None, typer.Option("--positive-column")] = None,
    corpus_column: Annotated[str | None, typer.Option("--corpus-column")] = None,
    range_min: Annotated[int, typer.Option("--range-min", help="Skip this many best candidates.")] = 0,
    range_max: Annotated[int | None, typer.Option("--range-max", help="Consider this many best candidates.")] = None,
    max_score: Annotated[float | None, typer.Option("--max-score")] = None,
    min_score: Annotated[float | None, typer.Option("--min-score")] = None,
    absolute_margin: Annotated[float | None, typer.Option("--absolute-margin")] = None,
    relative_margin: Annotated[float | None, typer.Option("--relative-margin")] = None,
    num_negatives: Annotated[int, typer.Option("--num-negatives")] = 3,
    sampling_strategy: Annotated[str, typer.Option("--sampling-strategy", help="top or random.")] = "top",
    include_positives: Annotated[bool, typer.Option("--include-positives")] = False,
    output_format: Annotated[str, typer.Option("--output-format", help="triplet, n-tuple or labeled-pair.")] = "triplet",
    search: Annotated[str, typer.Option("--search", help="A registered search: exact, faiss (flat index) or ivf (faiss IVF), or one a user registered.")] = "exact",
    query_chunk_size: Annotated[int, typer.Option("--query-chunk-size", help="Queries searched at once.")] = 1024,
    seed: Annotated[int, typer.Option("--seed", help="Seed of --sampling-strategy random.")] = 0,
    batch_size: Annotated[int, typer.Option("--batch-size", min=1, help="Texts per forward pass.")] = 64,
    progress: Annotated[bool, typer.Option("--progress/--no-progress", help="Progress bars on stderr.")] = True,
    device: Annotated[str | None, typer.Option("--device", help=DEVICE_HELP)] = None,
    trust_remote_code: Annotated[bool, typer.Option("--trust-remote-code", help=TRUST_REMOTE_CODE_HELP)] = False,
) -> None:
    """Mine hard negatives for (query, positive) rows with --model and write the rows to --output."""
    from contrastext.negatives.mined_files import check_output, write_rows
    from contrastext.negatives.mining import MiningOptions, mine_hard_negatives

    options = MiningOptions(
        range_min=range_min, range_max=range_max, max_score=max_score, min_score=min_score,
        absolute_margin=absolute_margin, relative_margin=relative_margin, num_negatives=num_negatives,
        sampling_strategy=sampling_strategy, include_positives=include_positives, output_format=output_format,
        search=search, query_chunk_size=query_chunk_size, seed=seed,
    )  # fmt: skip
    options.check()
    check_output(output)
    check_apart(output, "--output", [("--input", input), ("--corpus", corpus), ("--model", model)])
    queries, positives, anchor_name, positive_name = read_pairs(input, split, anchor_column, positive_column)
    texts = read_corpus(corpus, None, corpus_column) if corpus is not None else None
    encoder = load_model(model, trust_remote_code=trust_remote_code, device=resolve_device(device))

    def encode(batch: list[str]):
        return encoder.encode(batch, batch_size=batch_size, normalize=True, convert_to="numpy", show_progress=progress)

    from tqdm import tqdm

    bars: list = []  # the search's bar opens once encoding is done, so the two never interleave

    def searched(count: int) -> None:
        if not bars:
            bars.append(tqdm(total=len(set(queries)), desc="Searching the corpus", unit="query", disable=not progress))
        bars[0].update(count)

    try:
        mined = mine_hard_negatives(queries, positives, encode, corpus=texts, options=options,
                                    anchor_name=anchor_name, positive_name=positive_name, progress=searched)  # fmt: skip
    finally:
        for bar in bars:
            bar.close()
    for line in [*mined.notes, *mined.summary]:
        typer.echo(line)
    if not mined.rows:
        raise ConfigError("no row was mined (every candidate was filtered out): nothing was written; loosen "
                          "--range-max, --max-score or the margins")  # fmt: skip
    kind = write_rows(output, mined.columns, mined.rows)
    typer.echo(f"wrote {output} ({kind}, {len(mined.rows)} rows: {', '.join(mined.columns)})", err=True)
