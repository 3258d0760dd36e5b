"""The ``contrastext`` command. Each sub-command lives in its own module and registers itself on ``app``.

Errors caused by the user's input (:class:`contrastext.errors.ContrastextError`) print one line and exit 2.
"""

from __future__ import annotations

import sys

import typer

from contrastext.errors import ContrastextError

app = typer.Typer(
    name="contrastext",
    help="Contrastive learning of text representations: train, evaluate and use sentence encoders.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


def _register_commands() -> None:
    # Imported for their side effect: each module adds its command to `app`.
    from contrastext.cli import (  # noqa: F401
        demo_command,
        encode_command,
        eval_command,
        plot_command,
        train_command,
    )


def main(argv: list[str] | None = None) -> None:
    """Entry point of the console script."""
    _register_commands()
    try:
        app(args=argv, standalone_mode=True)
    except ContrastextError as error:
        typer.secho(f"error: {error}", err=True, fg=typer.colors.RED)
        sys.exit(2)
