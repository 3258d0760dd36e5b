"""``contrastext train``: run a recipe (YAML) with ``--set`` overrides; print where outputs go and the metrics.

Example::

    contrastext train simcse-unsup --set train.max_steps=500 --output runs/simcse --data-root ../shared/data
    contrastext train my-recipe.yaml --output runs/mine
    contrastext train simcse-unsup --set data.path=my_sentences.txt data.task=null eval.tasks= \
        train.metric_for_best=null --output runs/mine     # own file: no data root needed
    contrastext train recipes/simcse-unsup.yaml --output runs/simcse --resume   # continue a killed run
    contrastext train simcse-unsup --resume-from runs/simcse/checkpoints/step-000600 --output runs/simcse-b
        # continue a checkpoint (or a run folder's latest) into a new folder; the source is left as it is
    contrastext train my.yaml --output runs/mine --resume --resume-allow-data-change   # the data file changed

SIGTERM (a cluster preempting the job) finishes the step, saves a checkpoint and exits with code 143 after one
line naming the checkpoint and the command that resumes it; a second SIGTERM exits at once.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Annotated

import typer
from typer.core import TyperCommand

from contrastext.cli import app
from contrastext.data.root import resolve_data_root
from contrastext.errors import ConfigError
from contrastext.runtime.processes import is_main_process

# Help texts are rich markup: a literal "[" is written "\\[" (else "[stsb:dev]" would vanish as a style tag).
SET_HELP = (
    "Override config keys: dotted KEY=VALUE, the value read as YAML (examples below). Several may follow one "
    "flag (--set a=1 b=2), and the flag may be repeated. An empty value clears a list. "
    "train.max_steps given here sets the length even when the recipe sets train.epochs (and train.epochs "
    "given here wins over the recipe's train.max_steps). Every key: docs/CONFIG.md."
)
SET_EXAMPLES: tuple[str, ...] = (
    "--set train.max_steps=10 method_args.temperature=0.1",
    "--set eval.tasks=\\[stsb:dev,sickr:test]",
    "--set eval.tasks=\\[]   (or eval.tasks= : an empty value clears a list)",
)
"""The --set examples, in the epilog: a full-width line each, so a narrow terminal never cuts one."""
MAIN_KEYS: tuple[tuple[str, str], ...] = (
    ("train.lr", "peak learning rate"),
    ("train.batch_size", "global batch size (all processes together)"),
    ("train.epochs / train.max_steps", "length of the run (max_steps wins; see docs/CONFIG.md)"),
    ("train.schedule", "linear, constant, cosine, polynomial or warmup_stable_decay"),
    ("train.warmup_ratio / train.warmup_steps", "learning-rate warmup"),
    ("train.mixed_precision", "auto, no, fp16 or bf16"),
    ("train.eval_every", "evaluate every N steps, or epoch (and always at the end)"),
    ("output_dir", "where the run writes (or --output)"),
)
"""The keys ``train --help`` lists (the HF user's first knobs); each is checked to exist by the tests."""


def main_keys_epilog() -> str:
    """The epilog of ``train --help``: the main keys, and where every key is."""
    rows = "\n".join(f"  {key}: {what}" for key, what in MAIN_KEYS)
    return (
        "Main keys (set with --set KEY=VALUE):\n\n" + rows + "\n\n"
        "Examples:\n\n" + "\n".join(f"  {example}" for example in SET_EXAMPLES) + "\n\n"
        "Every key with its value and origin: contrastext config show RECIPE \\[--set ...]; all keys: docs/CONFIG.md."
    )


SET_FLAG = "--set"
OVERRIDE = re.compile(r"^[A-Za-z_][\w-]*(\.[\w-]+)*=")  # KEY=... with a dotted key


def expand_set_values(args: list[str]) -> list[str]:
    """``--set a=1 b=2 recipe.yaml`` -> ``--set a=1 --set b=2 recipe.yaml``: every KEY=VALUE that follows a
    ``--set`` value gets its own flag, so click (one value per option) sees a repeated option. The first
    argument that is not KEY=VALUE (an option, the recipe, ``--``) ends the run of values."""
    expanded: list[str] = []
    state = "normal"  # "value": the next argument is --set's own value; "more": KEY=VALUE may follow
    for position, arg in enumerate(args):
        if state == "value":
            expanded.append(arg)
            state = "more"
        elif state == "more" and OVERRIDE.match(arg):
            expanded.extend([SET_FLAG, arg])
        elif arg == "--":  # the rest is positional, as given
            return expanded + args[position:]
        else:
            expanded.append(arg)
            state = "value" if arg == SET_FLAG else "more" if arg.startswith(SET_FLAG + "=") else "normal"
    return expanded


class SetValuesCommand(TyperCommand):
    """A typer command whose ``--set`` takes several KEY=VALUE arguments (see :func:`expand_set_values`)."""

    def parse_args(self, ctx, args: list[str]) -> list[str]:
        return super().parse_args(ctx, expand_set_values(list(args)))


def prepare(recipe: Path, overrides: list[str], output: Path | None):
    """Load and fully validate the recipe (config sections, method name, method_args) before any work."""
    from contrastext.runs.recipes import recipe_path
    from contrastext.runs.registry import get_recipe, parse_method_args
    from contrastext.training.config import load_config

    config = load_config(recipe_path(recipe), overrides)
    if output is not None:
        config.output_dir = str(output)
    parse_method_args(get_recipe(config.method), config)
    return config


def resume_command(recipe: Path, overrides: list[str], output_dir: str, data_root: Path | None) -> str:
    """The ``contrastext train ... --resume`` command that continues a run stopped by SIGTERM (the same recipe and
    ``--set`` overrides, so the resume's config check passes)."""
    argv = ["contrastext", "train", str(recipe)]
    for override in overrides:
        argv += [SET_FLAG, override]
    argv += ["--output", str(output_dir)]
    if data_root is not None:
        argv += ["--data-root", str(data_root)]
    return shlex.join([*argv, "--resume"])


def print_summary(summary: dict) -> None:
    """The final metrics, one per line, then where the outputs are."""
    metrics = summary.get("metrics") or {}
    spread = summary.get("metrics_std") or {}  # several seeds: mean ± sample std
    if metrics:
        selected = summary.get("best_step") is not None or any(
            run.get("best_step") is not None for run in (summary.get("runs") or {}).values()
        )
        which = "best checkpoint" if selected else "last weights"
        typer.echo(f"final metrics ({which}" + (", mean ± std over seeds):" if spread else "):"))
        for name, value in sorted(metrics.items()):
            shown = f"{value:.4f}" if isinstance(value, float) else str(value)
            if name in spread:
                shown += f" ± {spread[name]:.4f}"
            typer.echo(f"  {name}: {shown}")
    for key in ("best_model_dir", "final_model_dir", "log_path", "summary_file"):
        if summary.get(key):
            typer.echo(f"{key.replace('_', ' ')}: {summary[key]}")


# The arguments `train` and `config show` share.
RecipeArgument = Annotated[
    Path, typer.Argument(help="Recipe YAML file, or the name of a shipped recipe (simcse-unsup, scl, gd, ...).")
]
SetOption = Annotated[list[str] | None, typer.Option("--set", help=SET_HELP)]
def _output_folder(value: str) -> Path:
    """``--output``: an empty path is refused (``Path("")`` would be the current folder)."""
    from contrastext.training.config import EMPTY_OUTPUT

    if not value.strip():
        raise typer.BadParameter(EMPTY_OUTPUT)
    return Path(value)


OutputOption = Annotated[
    Path | None,
    typer.Option("--output", "-o", parser=_output_folder, help="Output folder; replaces the recipe's output_dir."),
]


@app.command("train", cls=SetValuesCommand, epilog=main_keys_epilog())
def train_command(
    recipe: RecipeArgument,
    overrides: SetOption = None,
    output: OutputOption = None,
    resume: Annotated[
        bool,
        typer.Option(
            "--resume",
            help="Continue from the last complete checkpoint in the output folder (same config); "
            "starts from scratch when there is none.",
        ),
    ] = False,
    resume_from: Annotated[
        Path | None,
        typer.Option(
            "--resume-from",
            help="Continue a checkpoint (a checkpoints/step-N folder, or a run folder: its latest) into the new "
            "--output folder, as Hugging Face's resume_from_checkpoint: its weights, optimizer, scheduler, RNG "
            "states and step. Same config as that run; the source is never written to. One-stage recipes only.",
        ),
    ] = None,
    allow_data_change: Annotated[
        bool,
        typer.Option(
            "--resume-allow-data-change",
            help="With --resume or --resume-from: continue even though a data file (data.path, data.dataset, "
            "data.eval_path) changed since the checkpoint was saved (a line says so); without it such a resume is "
            "refused, naming the file.",
        ),
    ] = False,
    data_root: Annotated[
        Path | None,
        typer.Option(
            "--data-root",
            help="Benchmark data folder (holding stsb/, glue/, wiki1m/...); default $CONTRASTEXT_DATA. Needed only "
            "when the recipe reads a registry task (data.task, eval.tasks); not for your own files.",
        ),
    ] = None,
) -> None:
    """Train a recipe: validate it, print where outputs go, train, evaluate the best checkpoint, print metrics.

    Outputs: config.yaml, train_log.jsonl (draw it with `contrastext plot OUTPUT`), checkpoints/, best/encoder
    (a sentence-transformers folder), final/encoder and metrics.json.
    """
    from contrastext.runs.registry import run_recipe
    from contrastext.runtime.signals import PREEMPTED_EXIT_CODE, TrainingPreempted

    if allow_data_change and not resume and resume_from is None:
        raise ConfigError("--resume-allow-data-change applies to a resume: add --resume or --resume-from")
    config = prepare(recipe, list(overrides or []), output)
    # Read lazily: only a registry task needs the data root (then --data-root, else $CONTRASTEXT_DATA, else
    # a MissingDataError saying so). A --data-root that is given must exist, though.
    root = resolve_data_root(data_root) if data_root is not None else None
    # Under a launcher (torchrun, accelerate launch) every process runs this command: the main one prints.
    main = is_main_process()
    action = "resuming" if resume or resume_from is not None else "training"
    source = config.model if resume_from is None else resume_from
    if main:
        typer.echo(f"{action} {config.method} from {source}; outputs in {config.output_dir}")
    try:
        summary = run_recipe(config, root, resume=resume, resume_from=resume_from,
                             allow_data_change=allow_data_change)
    except TrainingPreempted as stop:
        if main:
            command = resume_command(recipe, list(overrides or []), config.output_dir, data_root)
            typer.echo(f"{stop}; resume with: {command}", err=True)
        raise typer.Exit(PREEMPTED_EXIT_CODE) from None
    if not is_main_process():
        return
    print_summary(summary)
    written = Path(config.output_dir) / "metrics.json"
    if written.is_file():
        typer.echo(f"metrics written to {written}")

