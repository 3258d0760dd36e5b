"""The ``contrastext`` command. Each sub-command lives in its own module and registers itself on ``app``.

Errors caused by the user's input print one line, ``error: <message>``, on stderr and exit with code 2:
:class:`contrastext.errors.ContrastextError` raised by a command, and the usage errors of the command line
itself (an unknown option, a missing one, ``--batch-size 0``), which click would draw as a usage box.
"""

from __future__ import annotations

import errno
import importlib
import re
import sys

import typer

from contrastext.errors import ContrastextError

# click's exceptions, wherever this typer takes click from (typer >= 0.17 vendors it as typer._click).
_click_exceptions = importlib.import_module(typer.BadParameter.__module__)
UsageError: type[Exception] = _click_exceptions.UsageError
ClickException: type[Exception] = _click_exceptions.ClickException
NoArgsIsHelpError: type[Exception] = getattr(_click_exceptions, "NoArgsIsHelpError", ())  # click >= 8.2

app = typer.Typer(
    name="contrastext",
    help="Contrastive learning of text representations: train, evaluate and use sentence encoders.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)

USAGE_EXIT_CODE = 2


# Sub-command name -> the module that registers it.
COMMAND_MODULES: dict[str, str] = {
    "train": "train_command",
    "eval": "eval_command",
    "encode": "encode_command",
    "predict": "predict_command",
    "plot": "plot_command",
    "compare": "compare_command",
    "demo": "demo_command",
    "config": "config_command",
    "mine": "mine_command",
    "nli-to-beir": "nli_retrieval_command",
}


@app.callback()
def _group() -> None:
    """Contrastive learning of text representations: train, evaluate and use sentence encoders."""


def _register_commands(argv: list[str] | None = None) -> None:
    """Import the module of the sub-command on the command line, or every one (for the help and unknown names).

    Imported for their side effect: each module adds its command to ``app``. One module only keeps a command's
    start-up free of the others' imports (``encode`` does not import scikit-learn through ``eval``).
    """
    words = [word for word in (sys.argv[1:] if argv is None else argv) if not word.startswith("-")]
    chosen = COMMAND_MODULES.get(words[0]) if words else None
    for module in [chosen] if chosen else COMMAND_MODULES.values():
        importlib.import_module(f"contrastext.cli.{module}")


def one_line(message: str) -> str:
    """``message`` on a single line: line breaks (and the blanks around them) become one space."""
    return re.sub(r"\s*[\r\n]+\s*", " ", str(message).strip())


def print_error(message: str) -> None:
    """Print ``error: <message>`` as one line on stderr."""
    typer.secho(f"error: {one_line(message)}", err=True, fg=typer.colors.RED)


def usage_message(error) -> str:
    """A click usage error as one line naming the command and pointing at its ``--help``."""
    ctx = getattr(error, "ctx", None)
    command = ctx.command_path if ctx is not None else "contrastext"
    return f"{command}: {error.format_message()} (see '{command} --help')"


DISK_ERRORS = (errno.ENOSPC, errno.EROFS, errno.EDQUOT)
"""OSErrors of a full or read-only disk, reported as one line by :func:`main`."""


def main(argv: list[str] | None = None) -> None:
    """Entry point of the console script: run the command, turn user errors into one line and exit code 2."""
    _register_commands(argv)
    try:
        result = app(args=argv, standalone_mode=False)
    except NoArgsIsHelpError:
        sys.exit(USAGE_EXIT_CODE)  # the help was already printed
    except UsageError as error:
        print_error(usage_message(error))
        sys.exit(USAGE_EXIT_CODE)
    except ClickException as error:
        print_error(error.format_message())
        sys.exit(USAGE_EXIT_CODE)
    except typer.Abort:
        typer.echo("Aborted!", err=True)
        sys.exit(1)
    except ContrastextError as error:
        print_error(str(error))
        sys.exit(USAGE_EXIT_CODE)
    except OSError as error:  # a disk that filled up or turned read-only during the work: one line, not a traceback
        if error.errno not in DISK_ERRORS:
            raise
        where = f" {error.filename}" if error.filename else ""
        print_error(f"cannot write{where}: {error.strerror}; files written atomically were left as they were")
        sys.exit(USAGE_EXIT_CODE)
    sys.exit(result if isinstance(result, int) else 0)
