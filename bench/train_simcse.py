"""Benchmark: ``contrastext train simcse-unsup`` against the sentence-transformers trainer, whole processes.

Usage::

    python bench/train_simcse.py [--rounds 3] [--steps 30] [--batch-size 64] [--max-length 32]
                                 [--mixed-precision no|bf16|fp16] [--loss-tolerance X] [--model M]
                                 [--data-root ../shared/data] [--threads N] [--output BENCHMARKS.md]
                                 [--section-suffix TEXT] [--quick]

``--model M`` (default the recipe's, ``bundled:all-MiniLM-L6-v2``) is every arm's model: ours gets ``--set model=M``.

Three arms, each a whole process started by this script, run round-robin (the order reversed every round, so a
load spike on a shared machine hits all arms alike), ``--rounds`` times:

- **ours**: ``contrastext train simcse-unsup`` as a user runs it (the shipped recipe: all-MiniLM-L6-v2, [CLS] +
  MLP in training, InfoNCE τ = 0.05, lr 3e-5 linear, clip 1.0) for ``--steps`` steps of ``--batch-size`` at
  ``data.max_length`` ``--max-length`` on wiki1m, with the evaluation switched off (``eval.tasks=``) and a log
  record every step; it still writes its last checkpoint and exports ``final/encoder``, as every run does;
- **ours, padded**: the same with ``train.unpad=false`` (the padded forward): the loss curves of the two must be
  equal, ``|Δloss| ≤ --loss-tolerance`` (1e-4 in float32, 5e-2 under mixed precision) at every step (same seed,
  same dropout masks: see ``contrastext/models/unpadded.py``); the script exits with status 1 when they are not;
- **sentence-transformers**: ``SentenceTransformerTrainer`` with ``MultipleNegativesRankingLoss(scale=20)`` (= 1/τ)
  on (s, s) pairs of the same sentences, in the very batches our trainer draws (our seeded order, fed to ST
  with a sequential batch sampler), batch ``--batch-size``, ``max_seq_length`` ``--max-length``, lr 3e-5 linear
  without warmup, max_grad_norm 1.0, seed 42, no evaluation, no checkpoint, the model saved at the end.

Times: the wall time of each whole process (start-up, data, model loading, training, saving), and the time of the
training steps alone: for ours the per-step times of ``train_log.jsonl`` (batch / ``samples_per_s``, one record
per step: collate + forward + backward + optimiser step), for sentence-transformers the time from the first
``on_step_begin`` to the last ``on_step_end`` callback (data loading and collation of every batch but the first,
forward, backward, optimiser step; not the model-card examples ST computes when training starts). The
report gives medians over the rounds and the median of the per-round ratios ST / ours (> 1: we are faster).

Device and precision: every arm trains on the GPU when torch sees one (ours through Accelerate, the
sentence-transformers trainer likewise), else on the CPU. ``--mixed-precision`` (default ``no``: float32) is
passed to ours as ``--set train.mixed_precision=<v>`` (always, so the recipe's ``auto``, bf16 on a GPU, does not
apply) and to sentence-transformers as ``bf16=True`` / ``fp16=True``; fp16 needs a GPU (our trainer refuses it on
the CPU). Under mixed precision the padded and packed forwards round differently, so the loss tolerance defaults
to 5e-2 there (bf16 keeps 8 bits of mantissa: ~0.4 % of a loss of ~4 is 0.016 per step). On CUDA the
sentence-transformers step times are read after ``torch.cuda.synchronize``; ours come from the trainer's log,
whose per-step host transfer of the loss synchronises every step but the optimiser's step of the last.

``--threads N`` sets ``OMP_NUM_THREADS`` / ``MKL_NUM_THREADS`` for every child (default: unset, torch's own
default, one thread per core). The report (markdown) goes to stdout and, with ``--output``, replaces the block
between ``<!-- begin bench/train_simcse.py -->`` / ``<!-- end bench/train_simcse.py -->`` of that file
(``--section-suffix TEXT`` appends TEXT to both markers and to the section title, so runs at several precisions
or on other machines keep blocks of their own).
``--quick`` is a smoke run of seconds (2 steps of batch 8, one round): it checks that everything runs, its
numbers mean nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/ is not a package
import common  # noqa: E402
import markdown_block  # noqa: E402
from common import REPO  # noqa: E402

SCRIPT = "train_simcse.py"
BEGIN_MARKER, END_MARKER = markdown_block.markers(SCRIPT)  # --section-suffix appends to them
SECTION = "## Training: unsupervised SimCSE vs sentence-transformers"
ARMS = ("ours", "ours, padded", "sentence-transformers")
DEFAULT_MODEL = "bundled:all-MiniLM-L6-v2"  # the simcse-unsup recipe's
LR, SEED, SCALE = 3e-5, 42, 20.0  # the recipe's lr and seed; MNRL's scale = 1 / τ (τ = 0.05)
PRECISIONS = ("no", "bf16", "fp16")
LOSS_TOLERANCE = {"no": 1e-4, "bf16": 5e-2, "fp16": 5e-2}  # default --loss-tolerance per --mixed-precision


# ------------------------------------------------------------------------------------------------- data


def batch_texts(data_root: Path, steps: int, batch_size: int) -> list[list[str]]:
    """The sentences of our trainer's first ``steps`` batches, in its seeded order (the recipe's seed, one
    process): what both trainers see."""
    from contrastext.data.sampling import RandomBatchSampler
    from contrastext.data.tasks import load_task

    examples = load_task("wiki1m", data_root).examples
    batches = RandomBatchSampler(len(examples), batch_size, SEED, drop_last=True).batches(0)
    if len(batches) < steps:
        raise SystemExit(f"wiki1m holds {len(batches)} batches of {batch_size}; --steps {steps} needs more")
    return [[examples[i].texts[0] for i in batch] for batch in batches[:steps]]


def padding_share(model_path: str, batches: list[list[str]], max_length: int) -> tuple[float, float]:
    """(real tokens per sentence, tokens per padded row) over the batches, each padded to its longest."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_path)
    real = padded = rows = 0
    for batch in batches:
        lengths = [len(ids) for ids in tokenizer(batch, truncation=True, max_length=max_length)["input_ids"]]
        real += sum(lengths)
        padded += max(lengths) * len(lengths)
        rows += len(lengths)
    return real / rows, padded / rows


# ------------------------------------------------------------------------------------------------- arms


def ours_command(args: argparse.Namespace, output: Path, unpad: bool) -> list[str]:
    return [
        *common.contrastext_command(), "train", "simcse-unsup", "--data-root", str(args.data_root), "--output", str(output),
        "--set",
        f"train.max_steps={args.steps}", f"train.batch_size={args.batch_size}", f"data.max_length={args.max_length}",
        "eval.tasks=", "train.eval_every=null", "train.metric_for_best=null", "train.log_every=1",
        "train.progress_bar=false", "train.overwrite=true", f"train.unpad={'true' if unpad else 'false'}",
        # Quoted: YAML reads a bare `no` as false, which the config refuses (contrastext/training/config.py).
        f"train.mixed_precision='{args.mixed_precision}'",
        *([f"model={args.model}"] if args.model != DEFAULT_MODEL else []),
    ]


def peer_command(args: argparse.Namespace, output: Path, texts_file: Path) -> list[str]:
    return [
        sys.executable, str(Path(__file__).resolve()), "--peer-child", str(output), "--texts-file", str(texts_file),
        "--model", args.model, "--steps", str(args.steps), "--batch-size", str(args.batch_size),
        "--max-length", str(args.max_length), "--mixed-precision", args.mixed_precision,
    ]


def run_child(command: list[str], log: Path, env: dict[str, str]) -> float:
    """Run one arm; its wall time in seconds. Exits with the child's log tail when it fails."""
    start = time.perf_counter()
    with open(log, "w") as handle:
        code = subprocess.call(command, stdout=handle, stderr=subprocess.STDOUT, env=env, cwd=REPO)
    seconds = time.perf_counter() - start
    if code != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-30:])
        raise SystemExit(f"{shlex.join(command)} failed with status {code}:\n{tail}")
    return seconds


def our_curve(output: Path, batch_size: int) -> tuple[list[float], float]:
    """(loss per step, seconds of the training steps) from ``train_log.jsonl`` (one record per step)."""
    records = [json.loads(line) for line in (output / "train_log.jsonl").read_text().splitlines() if line.strip()]
    records = [record for record in records if "loss" in record and record.get("step", 0) > 0]
    return [float(r["loss"]) for r in records], sum(batch_size / float(r["samples_per_s"]) for r in records)


def peer_child(args: argparse.Namespace) -> int:
    """The sentence-transformers arm (run in its own process by the parent)."""
    import torch
    from datasets import Dataset
    from sentence_transformers import (
        SentenceTransformer,
        SentenceTransformerTrainer,
        SentenceTransformerTrainingArguments,
    )
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss
    from torch.utils.data import BatchSampler, SequentialSampler
    from transformers import TrainerCallback

    from contrastext.models.names import resolve_model

    output = Path(args.peer_child)
    texts = json.loads(Path(args.texts_file).read_text())
    cuda = torch.cuda.is_available()  # as our trainer (Accelerate): the GPU when there is one
    model = SentenceTransformer(resolve_model(args.model), device="cuda" if cuda else "cpu")
    model.max_seq_length = args.max_length
    dataset = Dataset.from_dict({"anchor": texts, "positive": texts})

    def sequential(dataset, batch_size, drop_last, **_ignored):  # our order, already in the dataset
        return BatchSampler(SequentialSampler(dataset), batch_size=batch_size, drop_last=drop_last)

    class StepTimes(TrainerCallback):
        def __init__(self) -> None:
            self.marks: list[float] = []

        def on_step_begin(self, *_args, **_kwargs):
            if not self.marks:  # after on_train_begin's model-card work, which is not a training step
                if cuda:
                    torch.cuda.synchronize()
                self.marks = [time.perf_counter()]

        def on_step_end(self, *_args, **_kwargs):
            if cuda:
                torch.cuda.synchronize()
            self.marks.append(time.perf_counter())

    timer = StepTimes()
    training_args = SentenceTransformerTrainingArguments(
        output_dir=str(output / "st"), max_steps=args.steps, per_device_train_batch_size=args.batch_size,
        learning_rate=LR, lr_scheduler_type="linear", warmup_steps=0, weight_decay=0.0, max_grad_norm=1.0,
        seed=SEED, data_seed=SEED, logging_steps=1, save_strategy="no", eval_strategy="no", report_to="none",
        disable_tqdm=True, dataloader_drop_last=True, batch_sampler=sequential, use_cpu=not cuda,
        bf16=args.mixed_precision == "bf16", fp16=args.mixed_precision == "fp16",
    )
    trainer = SentenceTransformerTrainer(
        model=model, args=training_args, train_dataset=dataset,
        loss=MultipleNegativesRankingLoss(model, scale=SCALE), callbacks=[timer],
    )
    trainer.train()
    model.save(str(output / "final"))
    losses = [float(entry["loss"]) for entry in trainer.state.log_history if "loss" in entry]
    result = {"losses": losses, "steps_seconds": timer.marks[-1] - timer.marks[0],
              "threads": torch.get_num_threads()}
    (output / "peer.json").write_text(json.dumps(result))
    return 0


# ------------------------------------------------------------------------------------------------ report


@dataclass
class Results:
    whole: dict[str, list[float]] = field(default_factory=lambda: {arm: [] for arm in ARMS})
    steps: dict[str, list[float]] = field(default_factory=lambda: {arm: [] for arm in ARMS})
    loss_diffs: list[float] = field(default_factory=list)
    peer_threads: int | None = None
    first_losses: dict[str, float] = field(default_factory=dict)
    last_losses: dict[str, float] = field(default_factory=dict)


def ratio(peer: float, ours: float) -> float:
    return peer / ours if ours > 0 else float("nan")


def median_ratio(results: Results, kind: str, arm: str) -> float:
    times = getattr(results, kind)
    return statistics.median(ratio(p, o) for p, o in zip(times["sentence-transformers"], times[arm], strict=True))


def render(args, results: Results, load_before: tuple[float, ...], tokens: tuple[float, float]) -> str:
    import sentence_transformers
    import torch
    import transformers

    rounds = len(results.whole["ours"])
    goal = median_ratio(results, "whole", "ours")
    begin, end = markdown_block.markers(SCRIPT, args.section_suffix)
    cuda = torch.cuda.is_available()  # where the children trained (ours: Accelerate; ST: the same choice)
    precision = ""  # float32 on the CPU says nothing new (the blocks measured before said nothing either)
    if cuda or args.mixed_precision != "no":
        precision = (
            "; precision: float32 (`train.mixed_precision=no`, ST without bf16/fp16)" if args.mixed_precision == "no"
            else f"; precision: {args.mixed_precision} mixed (`train.mixed_precision={args.mixed_precision}`, ST "
            f"`{args.mixed_precision}=True`)"
        )
    versions = (
        f"torch {torch.__version__} (threads in the children: {args.threads or 'default'}, "
        f"torch.get_num_threads() = {results.peer_threads}); transformers {transformers.__version__}; "
        f"sentence-transformers {sentence_transformers.__version__}"
    )
    batches = (
        f"{args.steps} steps of batch {args.batch_size} (× 2 dropout views) at max length {args.max_length} on "
        f"wiki1m, the same batches for every arm; {tokens[0]:.1f} real tokens per sentence against "
        f"{tokens[1]:.1f} per padded row ({100 * (1 - tokens[0] / tokens[1]):.0f} % padding); {rounds} round(s)"
        f"{precision}" + (f"; model `{args.model}`" if args.model != DEFAULT_MODEL else "")
    )
    lines = [
        begin,
        *common.run_conditions(SCRIPT, args.argv, "cuda:0" if cuda else "cpu", load_before, versions, [batches],
                               load_note="(arms run round-robin, the order reversed every round)"),
        "",
        "| arm | whole process s (median) | training steps s (median) | ST / arm, whole process "
        "(median of rounds) | ST / arm, steps (median of rounds) |",
        "|---|---:|---:|---:|---:|",
    ]
    for arm in ARMS:
        lines.append(
            f"| {arm} | {statistics.median(results.whole[arm]):.1f} | {statistics.median(results.steps[arm]):.1f} "
            f"| {median_ratio(results, 'whole', arm):.2f} | {median_ratio(results, 'steps', arm):.2f} |"
        )
    per_round = "; ".join(
        f"{arm}: " + ", ".join(f"{s:.1f}" for s in results.whole[arm]) for arm in ARMS
    )
    lines += [
        "",
        f"Whole-process seconds per round: {per_round}.",
        "",
        f"- Goal (issue 11): ours ≥ 1.25× sentence-transformers, whole process: **{goal:.2f}×** "
        f"({'met' if goal >= 1.25 else 'not met'}).",
        f"- Loss curves, ours vs ours padded (`train.unpad=false`), same seed: max |Δloss| over {args.steps} steps × "
        f"{rounds} round(s) = {max(results.loss_diffs):.1e} (tolerance {args.loss_tolerance:g}).",
        "- Losses at the first / last step (not comparable across libraries: our recipe trains [CLS] + MLP, ST "
        "the model's mean pooling): "
        + "; ".join(f"{arm} {results.first_losses[arm]:.4f} / {results.last_losses[arm]:.4f}" for arm in ARMS)
        + ".",
        end,
    ]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------------------- main


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--max-length", type=int, default=32)
    parser.add_argument(
        "--model", default=DEFAULT_MODEL,
        help="the model of every arm (default: the recipe's; another is passed to ours as --set model=...)",
    )
    parser.add_argument("--data-root", type=Path, default=common.default_data_root())
    parser.add_argument("--threads", type=int, default=None, help="OMP/MKL threads of the children (default: unset)")
    parser.add_argument(
        "--mixed-precision", choices=PRECISIONS, default="no",
        help="no (float32, default), bf16 or fp16 (a GPU only) for every arm",
    )
    parser.add_argument(
        "--loss-tolerance", type=float, default=None,
        help="max |Δloss| per step, ours vs ours padded (default: 1e-4 in float32, 5e-2 with bf16/fp16)",
    )
    parser.add_argument("--work-dir", type=Path, default=None, help="where the runs write (default: a temp folder)")
    parser.add_argument("--output", type=Path, default=None, help="markdown file whose marked block is replaced")
    parser.add_argument("--quick", action="store_true", help="smoke run (seconds): 2 steps of batch 8, 1 round")
    markdown_block.add_suffix_option(parser)
    parser.add_argument("--peer-child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--texts-file", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.steps, args.batch_size = 1, 2, 8
    if args.loss_tolerance is None:
        args.loss_tolerance = LOSS_TOLERANCE[args.mixed_precision]
    args.argv = argv
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.peer_child is not None:
        return peer_child(args)
    import torch

    from contrastext.models.names import resolve_model

    if args.mixed_precision == "fp16" and not torch.cuda.is_available():
        raise SystemExit("--mixed-precision fp16 needs a CUDA GPU (our trainer refuses it on the CPU); use bf16 or no")

    env = dict(os.environ)
    if args.threads:
        env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = str(args.threads)
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="bench-train-simcse-"))
    work.mkdir(parents=True, exist_ok=True)
    batches = batch_texts(args.data_root, args.steps, args.batch_size)
    texts_file = work / "texts.json"
    texts_file.write_text(json.dumps([text for batch in batches for text in batch]))
    tokens = padding_share(resolve_model(args.model), batches, args.max_length)
    results = Results()
    load_before = os.getloadavg()
    for round_index in range(args.rounds):
        order = ARMS if round_index % 2 == 0 else tuple(reversed(ARMS))
        curves: dict[str, list[float]] = {}
        for arm in order:
            output = work / f"round{round_index}-{arm.replace(', ', '-').replace(' ', '-')}"
            shutil.rmtree(output, ignore_errors=True)
            output.mkdir(parents=True)
            if arm == "sentence-transformers":
                seconds = run_child(peer_command(args, output, texts_file), output / "stdout.log", env)
                peer = json.loads((output / "peer.json").read_text())
                curves[arm], steps_seconds, results.peer_threads = peer["losses"], peer["steps_seconds"], peer["threads"]
            else:
                command = ours_command(args, output / "run", unpad=arm == "ours")
                seconds = run_child(command, output / "stdout.log", env)
                curves[arm], steps_seconds = our_curve(output / "run", args.batch_size)
            results.whole[arm].append(seconds)
            results.steps[arm].append(steps_seconds)
            print(f"round {round_index + 1}/{args.rounds} {arm}: {seconds:.1f} s whole, {steps_seconds:.1f} s steps",
                  file=sys.stderr, flush=True)
        if len(curves["ours"]) != args.steps or len(curves["ours, padded"]) != args.steps:
            raise SystemExit(f"expected {args.steps} logged steps, got {len(curves['ours'])} / "
                             f"{len(curves['ours, padded'])}")
        results.loss_diffs.append(max(abs(a - b) for a, b in zip(curves["ours"], curves["ours, padded"], strict=True)))
        for arm in ARMS:
            results.first_losses[arm], results.last_losses[arm] = curves[arm][0], curves[arm][-1]
    report = render(args, results, load_before, tokens)
    common.publish_report(report, args, SCRIPT, SECTION)
    if args.work_dir is None:
        shutil.rmtree(work, ignore_errors=True)
    worst = max(results.loss_diffs)
    if worst > args.loss_tolerance:
        print(f"unpadded and padded loss curves differ: max |Δloss| {worst:.2e} > {args.loss_tolerance}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
