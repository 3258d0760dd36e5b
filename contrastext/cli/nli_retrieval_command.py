"""``contrastext nli-to-beir``: a BEIR retrieval folder from NLI triplets (contrastext/data/nli_retrieval.py).

Example::

    contrastext nli-to-beir -i ../shared/data/nli/snli_devtest_for_simcse.csv -o runs/nli-retrieval
    contrastext eval -m bundled:all-MiniLM-L6-v2 --tasks ir:runs/nli-retrieval@test
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from contrastext.cli import app


@app.command("nli-to-beir")
def nli_to_beir_command(
    input: Annotated[Path, typer.Option("--input", "-i", help="A CSV of NLI triplets: sent0 (premise), sent1 "
                                        "(entailed), hard_neg (contradicted).")],  # fmt: skip
    output: Annotated[Path, typer.Option("--output", "-o", help="A new (or empty) folder.")],
    seed: Annotated[int, typer.Option("--seed", help="Seed of the shuffle that splits the premises.")] = 0,
    test_queries: Annotated[int, typer.Option("--test-queries", min=1, help="Premises held out as test queries.")] = 1000,
    dev_queries: Annotated[int, typer.Option("--dev-queries", min=0, help="Premises held out as dev queries.")] = 500,
) -> None:
    """Build a BEIR retrieval folder from NLI triplets: premises as queries, hypotheses as documents, the entailed
    ones relevant; training pairs and triplets with no evaluation document. Prints the manifest."""
    from contrastext.data.nli_retrieval import build_nli_retrieval, write_beir_folder
    from contrastext.errors import ConfigError

    if not input.is_file():
        raise ConfigError(f"--input {input}: no such file")
    built = build_nli_retrieval(input, seed=seed, test_queries=test_queries, dev_queries=dev_queries)
    write_beir_folder(built, output)
    typer.echo(json.dumps(built["manifest"], indent=1))
