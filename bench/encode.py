"""Benchmark: ``contrastext encode`` against ``SentenceTransformer.encode``, in process and as whole processes.

Usage::

    python bench/encode.py [--texts 6000] [--batch-size 32] [--rounds 5] [--process-rounds 3] [--threads N]
                           [--model bundled:all-MiniLM-L6-v2] [--data-root ../shared/data] [--device cpu]
                           [--no-quality] [--output BENCHMARKS.md] [--section-suffix TEXT] [--quick]

The texts: the first ``--texts`` sentences of STS-B train (sentence 1 and sentence 2 of each row, file order),
all-MiniLM-L6-v2, batch ``--batch-size``, L2-normalised embeddings on both sides.

- **In process**: the encode call alone, both models loaded once and warmed up on 64 texts: our
  ``TextEncoder.encode`` (what ``contrastext encode`` calls: batches sorted by token length, the texts tokenised
  once, inference mode, the packed forward of ``contrastext/models/unpadded.py``), the same with
  ``encoder.unpad = False`` (the padded forward), with ``--quantize-weights int8`` (dynamic int8 linear layers), and
  ``SentenceTransformer.encode(texts, batch_size, normalize_embeddings=True)``. "ours" packs a batch only when
  it holds at least ``unpad_min_padding`` (10 %) padding, which length-sorted batches rarely do; "always
  packed" packs every batch. ``--rounds`` rounds,
  round-robin, the order reversed every round; medians.
- **Whole process**: ``contrastext encode --model M --input FILE --output OUT.npy --batch-size B --no-progress``
  (also with ``--quantize-weights int8``) against a Python process that imports sentence-transformers, loads the model,
  reads the file, encodes and saves the ``.npy`` (this script with ``--peer-child``), ``--process-rounds`` rounds
  round-robin; medians of the wall times.
- **Same embeddings**: max abs difference between ours and ST's (in process and between the saved files).
- **Where the time goes**: one encode call of ours under ``torch.profiler``, self CPU time by op group
  (attention, linear layers, LayerNorm, GELU, embeddings, copies), the tokenisation time, and for the whole
  processes the start-up (a fresh Python that imports what each side imports).
- **int8**: its max abs difference and smallest cosine to the float embeddings, and the STS-B dev Spearman of
  the float and the int8 model (``contrastext.evaluation.sts.evaluate_sts``), with the change.

``--device cuda`` (default ``cpu``) runs both sides there: our encoder moved with ``.to(device)``,
``SentenceTransformer(..., device=...)``, in process and in the whole processes; the clocks are read after
``torch.cuda.synchronize``, and the profile groups the CUDA kernel time by the op that launched it (self CUDA
time) instead of the self CPU time; the whole-process arm of ours is ``contrastext encode --device DEVICE``.
The int8 arms are skipped there: dynamic int8 quantisation runs on the CPU only. ``--no-quality`` skips what only means something with
pretrained weights (the STS-B dev Spearman of the float and int8 models), e.g. for a randomly initialised model
of the same shape; speed and the embedding differences stay.

``--threads N`` sets ``torch.set_num_threads`` here and ``OMP_NUM_THREADS`` / ``MKL_NUM_THREADS`` for the children
(default: torch's default, one thread per core). The report goes to stdout and, with ``--output``, replaces the
block between ``<!-- begin bench/encode.py -->`` / ``<!-- end bench/encode.py -->`` of that file
(``--section-suffix TEXT`` appends TEXT to both markers and to the section title). ``--quick`` is a
smoke run (seconds; 200 texts, one round each): its numbers mean nothing. The exit status is 1 when our float
embeddings differ from ST's by more than ``--tolerance`` (1e-5).
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/ is not a package
import common  # noqa: E402
import markdown_block  # noqa: E402
from common import REPO, synchronize  # noqa: E402
from device_arg import device_name  # noqa: E402

SCRIPT = "encode.py"
BEGIN_MARKER, END_MARKER = markdown_block.markers(SCRIPT)  # --section-suffix appends to them
SECTION = "## Encoding: contrastext encode vs SentenceTransformer.encode"
DEFAULT_MODEL = "bundled:all-MiniLM-L6-v2"


def stsb_texts(data_root: Path, count: int) -> list[str]:
    from contrastext.data.tasks import load_task

    texts = [text for example in load_task("stsb:train", data_root).examples for text in example.texts]
    if len(texts) < count:
        raise SystemExit(f"STS-B train holds {len(texts)} sentences; --texts {count} asks for more")
    return texts[:count]


def on_cpu(device: str) -> bool:
    return device == "cpu"


# -------------------------------------------------------------------------------------------- in process


def in_process(args, texts: list[str], model_path: str) -> dict:
    import torch
    from sentence_transformers import SentenceTransformer

    from contrastext.cli.encode_command import load_model, quantize_encoder

    # One model for the three float arms of ours, its forward switched per arm: with a copy per arm, the
    # first-loaded copy ran 2-16 % slower than the padded copy in every round on nearly the same path (few sorted
    # batches reach 10 % padding), a difference between copies, not paths.
    device = args.device
    ours = load_model(model_path).to(device)

    def ours_with(unpad: bool, min_padding: float) -> Callable[[], object]:
        def run():
            ours.unpad, ours.unpad_min_padding = unpad, min_padding
            return ours.encode(texts, batch_size=batch, normalize=True)

        return run

    # Dynamic int8 quantisation runs on the CPU only (quantize_encoder refuses a model on another device).
    int8 = quantize_encoder(load_model(model_path), "int8") if on_cpu(device) else None
    theirs = SentenceTransformer(model_path, device=device)
    batch = args.batch_size
    default_min_padding = ours.unpad_min_padding  # packs only batches with >= 10 % padding (sorted ones: rarely)
    encoders = {
        "ours": ours_with(True, default_min_padding),
        "ours, always packed": ours_with(True, 0.0),
        "ours, padded": ours_with(False, default_min_padding),
        "ours, --quantize-weights int8": lambda: int8.encode(texts, batch_size=batch, normalize=True),
        "sentence-transformers": lambda: theirs.encode(
            texts, batch_size=batch, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
        ),
    }
    if int8 is None:
        del encoders["ours, --quantize-weights int8"]
    warm = texts[:64]
    ours.encode(warm, batch_size=batch)
    if int8 is not None:
        int8.encode(warm, batch_size=batch)
    theirs.encode(warm, batch_size=batch, show_progress_bar=False)
    times = common.round_robin_times(encoders, args.rounds, device, progress=True)
    embeddings = {name: np.asarray(run(), dtype=np.float32) for name, run in encoders.items()}
    ours.unpad, ours.unpad_min_padding = True, default_min_padding  # the default, for the profile below
    reference = embeddings["sentence-transformers"]
    result = {
        "times": times,
        "diff_st": float(np.abs(embeddings["ours"] - reference).max()),
        "diff_padded": float(np.abs(embeddings["ours, padded"] - embeddings["ours, always packed"]).max()),
        "int8_diff": None,
        "int8_min_cos": None,
        "spearman": None,
        "threads": torch.get_num_threads(),
    }
    if int8 is not None:
        quantized = embeddings["ours, --quantize-weights int8"]
        result["int8_diff"] = float(np.abs(quantized - embeddings["ours"]).max())
        result["int8_min_cos"] = float((quantized * embeddings["ours"]).sum(axis=1).min())
    if not args.no_quality:
        result["spearman"] = stsb_dev_spearman(args, {"float": ours, **({"int8": int8} if int8 is not None else {})})
    result["profile"] = where_the_time_goes(ours, texts, batch, device)
    return result


# Self CPU time of the profiler's ops, by the layer kind they serve (first matching pattern wins).
OP_GROUPS = (
    ("attention (SDPA, softmax, batched matmul)", ("scaled_dot_product", "softmax", "bmm", "flash", "attention")),
    ("linear layers (QKV, output, FFN)", ("addmm", "aten::mm", "linear", "matmul")),
    ("LayerNorm", ("layer_norm",)),
    ("GELU", ("gelu",)),
    ("embeddings", ("embedding",)),
    ("copies, reshapes, gathers", ("copy", "cat", "clone", "contiguous", "index", "view", "reshape", "transpose",
                                   "permute", "empty", "to", "select", "slice", "expand", "pad", "stack")),
)


def op_group(name: str) -> str:
    lowered = name.lower()
    for group, patterns in OP_GROUPS:
        if any(pattern in lowered for pattern in patterns):
            return group
    return "other (pooling, normalising, Python)"


def where_the_time_goes(encoder, texts: list[str], batch: int, device: str = "cpu") -> dict:
    """Tokenisation time, and the encode call's self time by op group (torch.profiler, one call): self CPU time
    on the CPU; on CUDA the kernels' time, each kernel counted under the op that launched it (the self device
    time of the CPU-side ops; the kernel rows themselves are left out, they would count it twice)."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    start = time.perf_counter()
    encoder.tokenizer(texts, truncation=True, max_length=encoder.max_seq_length)
    tokenize_s = time.perf_counter() - start
    cuda = device.startswith("cuda")
    activities = [ProfilerActivity.CPU, ProfilerActivity.CUDA] if cuda else [ProfilerActivity.CPU]
    try:
        synchronize(device)
        start = time.perf_counter()
        with profile(activities=activities) as prof:
            encoder.encode(texts, batch_size=batch, normalize=True)
            synchronize(device)
        call_s = time.perf_counter() - start
        groups: dict[str, float] = {}
        for event in prof.key_averages():
            if cuda and event.device_type != DeviceType.CPU:
                continue
            group = op_group(event.key)
            seconds = (event.self_device_time_total if cuda else event.self_cpu_time_total) / 1e6
            groups[group] = groups.get(group, 0.0) + seconds
    except Exception as error:  # a profiler without CUDA support (CUPTI) must not cost the measured figures
        if not cuda:
            raise
        print(f"profiling the CUDA encode call failed: {error!r}", file=sys.stderr)
        return {"tokenize_s": tokenize_s, "profiled_call_s": float("nan"), "groups": {}, "error": repr(error)}
    result = {"tokenize_s": tokenize_s, "profiled_call_s": call_s, "groups": groups}
    if cuda and not any(groups.values()):  # the profiler ran without CUDA activity (no CUPTI): say so
        result["error"] = "no CUDA kernel time recorded (CUDA profiling unavailable?)"
    return result


def import_seconds(code: str, env: dict[str, str], rounds: int) -> float:
    """Median wall time of a fresh Python process that runs ``code`` (the imports a command pays at start)."""
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True, env=env, capture_output=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def stsb_dev_spearman(args, encoders: dict) -> dict[str, float]:
    from contrastext.data.tasks import load_task
    from contrastext.evaluation.sts import evaluate_sts

    pairs = load_task("stsb:dev", args.data_root).examples
    if args.quick:
        pairs = pairs[:200]
    return {name: float(evaluate_sts(encoder.encode, pairs, args.batch_size)["spearman"])
            for name, encoder in encoders.items()}


# ----------------------------------------------------------------------------------------- whole process


OUR_IMPORTS = "import contrastext.cli.encode_command, contrastext.models.encoder"
PEER_IMPORTS = "import sentence_transformers"


OURS_PROCESS = "contrastext encode"  # the whole-process arm of ours: the command itself


def ours_process_name(device: str) -> str:
    return OURS_PROCESS if on_cpu(device) else f"{OURS_PROCESS} --device {device}"


def whole_processes(args, texts_file: Path, model_path: str, work: Path, env: dict[str, str]) -> dict:
    outputs = {name: work / f"{name}.npy" for name in ("ours", "int8", "st")}
    encode_args = ["encode", "--model", model_path, "--input", str(texts_file), "--batch-size", str(args.batch_size),
              "--no-progress"]
    child = [sys.executable, str(Path(__file__).resolve()), "--texts-file", str(texts_file), "--model", model_path,
             "--batch-size", str(args.batch_size), "--device", args.device]
    commands = {
        ours_process_name(args.device): [
            *common.contrastext_command(), *encode_args, "--device", args.device, "--output", str(outputs["ours"])
        ]
    }
    if on_cpu(args.device):  # dynamic int8 quantisation runs on the CPU only
        commands["contrastext encode --quantize-weights int8"] = [
            *common.contrastext_command(), *encode_args, "--output", str(outputs["int8"]), "--quantize-weights", "int8"
        ]
    commands["sentence-transformers script"] = [*child, "--peer-child", str(outputs["st"])]

    def runner(command: list[str]) -> Callable[[], None]:
        def run() -> None:
            done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=REPO)
            if done.returncode != 0:
                raise SystemExit(f"{shlex.join(command)} failed ({done.returncode}):\n{done.stderr[-3000:]}")

        return run

    runs = {name: runner(command) for name, command in commands.items()}
    times = common.round_robin_times(runs, args.process_rounds, progress=True)
    diff = float(np.abs(np.load(outputs["ours"]) - np.load(outputs["st"])).max())
    imports = {
        ours_process_name(args.device): import_seconds(OUR_IMPORTS, env, args.process_rounds),
        "sentence-transformers script": import_seconds(PEER_IMPORTS, env, args.process_rounds),
    }
    return {"times": times, "diff_st": diff, "imports": imports}


def peer_child(args) -> int:
    """The whole-process sentence-transformers arm: import, load, read, encode, save."""
    from sentence_transformers import SentenceTransformer

    texts = Path(args.texts_file).read_text(encoding="utf-8").split("\n")
    texts = [text for text in texts if text]
    model = SentenceTransformer(args.model, device=args.device)
    embeddings = model.encode(texts, batch_size=args.batch_size, normalize_embeddings=True, show_progress_bar=False)
    np.save(args.peer_child, np.asarray(embeddings, dtype=np.float32))
    return 0


# ------------------------------------------------------------------------------------------------ report


def speedup(times: dict[str, list[float]], name: str, peer: str) -> float:
    """Median over rounds of peer time / this arm's time (> 1: this arm is faster)."""
    return statistics.median(p / t for p, t in zip(times[peer], times[name], strict=True))


def render(args, inproc: dict, processes: dict, load_before: tuple[float, ...]) -> str:
    import sentence_transformers
    import torch
    import transformers

    peer = "sentence-transformers"
    begin, end = markdown_block.markers(SCRIPT, args.section_suffix)
    model = "all-MiniLM-L6-v2" if args.model == DEFAULT_MODEL else f"model `{args.model}`"
    versions = (
        f"torch {torch.__version__}, torch.get_num_threads() = {inproc['threads']} (children: "
        f"{args.threads or 'default'}); transformers {transformers.__version__}; sentence-transformers "
        f"{sentence_transformers.__version__}"
    )
    texts = (
        f"{args.texts} STS-B train sentences, batch {args.batch_size}, {model}, normalised embeddings; "
        f"{args.rounds} in-process round(s), {args.process_rounds} whole-process round(s)"
        + ("" if on_cpu(args.device) else f"; both sides on {args.device}, float32, clocks read after "
           "torch.cuda.synchronize")
    )
    lines = [
        begin,
        *common.run_conditions(SCRIPT, args.argv, args.device, load_before, versions, [texts],
                               load_note="(arms run round-robin, the order reversed every round)"),
        "",
        "| encode call, in process | median s | ST / arm (median of rounds) |",
        "|---|---:|---:|",
    ]
    for name, values in inproc["times"].items():
        lines.append(f"| {name} | {statistics.median(values):.2f} | {speedup(inproc['times'], name, peer):.2f} |")
    script = "sentence-transformers script"
    lines += ["", "| whole process | median s | ST / arm (median of rounds) |", "|---|---:|---:|"]
    for name, values in processes["times"].items():
        lines.append(f"| `{name}` | {statistics.median(values):.2f} | {speedup(processes['times'], name, script):.2f} |")
    profile = inproc["profile"]
    total = sum(profile["groups"].values()) or 1.0
    kind = "CPU" if on_cpu(args.device) else "CUDA"
    lines += [
        "",
        f"Where the time goes: one profiled encode call of ours ({profile['profiled_call_s']:.2f} s under "
        f"torch.profiler; tokenising the {args.texts} texts alone takes {profile['tokenize_s']:.2f} s), self {kind} "
        "time by op group" + ("" if on_cpu(args.device) else " (each kernel under the op that launched it)") + ":",
        "",
        f"| op group | self {kind} s | share |",
        "|---|---:|---:|",
    ]
    for group, seconds in sorted(profile["groups"].items(), key=lambda item: -item[1]):
        lines.append(f"| {group} | {seconds:.2f} | {100 * seconds / total:.0f} % |")
    if "error" in profile:
        lines.append(f"| profiling failed: {profile['error']} | – | – |")
    imports = processes["imports"]
    lines += [
        "",
        "Start-up of the whole processes (median wall time of a fresh Python that only imports what the command "
        "imports): " + "; ".join(
            f"`{name}` {seconds:.2f} s of {statistics.median(processes['times'][name]):.2f} s"
            for name, seconds in imports.items()
        ) + ".",
    ]
    call = speedup(inproc["times"], "ours", peer)
    whole = speedup(processes["times"], ours_process_name(args.device), script)
    lines += [
        "",
        f"- Goal (issue 11): encoding ≥ 1.3× sentence-transformers: **{call:.2f}×** for the encode call, "
        f"**{whole:.2f}×** whole process ({'met' if min(call, whole) >= 1.3 else 'not met'}).",
        f"- Same embeddings: max abs difference to ST {inproc['diff_st']:.1e} in process, {processes['diff_st']:.1e} "
        f"between the saved files; always-packed vs padded forward {inproc['diff_padded']:.1e}.",
        int8_line(args, inproc),
        end,
    ]
    return "\n".join(lines) + "\n"


def int8_line(args, inproc: dict) -> str:
    """The int8 verdict: its differences to the float embeddings and the STS-B dev Spearman change (each part
    skipped, and said so, on a device other than the CPU or with --no-quality)."""
    spearman = inproc["spearman"]
    if inproc["int8_diff"] is None:
        line = f"- `--quantize-weights int8`: skipped on {args.device} (dynamic int8 quantisation runs on the CPU only)"
        if spearman is None:
            return line + "; STS-B dev Spearman: skipped (--no-quality)."
        return line + f"; STS-B dev Spearman of the float model {spearman['float']:.2f}."
    line = (
        f"- `--quantize-weights int8`: max abs difference to the float embeddings {inproc['int8_diff']:.2f}, smallest cosine "
        f"{inproc['int8_min_cos']:.3f}"
    )
    if spearman is None:
        return line + "; STS-B dev Spearman: skipped (--no-quality)."
    return line + (
        f"; STS-B dev Spearman {spearman['float']:.2f} (float) → {spearman['int8']:.2f} "
        f"(int8), change {spearman['int8'] - spearman['float']:+.2f}."
    )


# --------------------------------------------------------------------------------------------------- main


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--texts", type=int, default=6000)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=5, help="in-process rounds")
    parser.add_argument("--process-rounds", type=int, default=3, help="whole-process rounds")
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--data-root", type=Path, default=common.default_data_root())
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's default)")
    parser.add_argument("--tolerance", type=float, default=1e-5, help="max abs embedding difference to ST")
    parser.add_argument("--output", type=Path, default=None, help="markdown file whose marked block is replaced")
    parser.add_argument("--quick", action="store_true", help="smoke run (seconds): 200 texts, one round each")
    parser.add_argument("--device", type=device_name, default="cpu",
                        help="where both sides encode: cpu (default), cuda, cuda:1, ...")
    parser.add_argument(
        "--no-quality", action="store_true",
        help="skip the STS-B dev Spearman (float and int8): meaningless for a model with random weights",
    )
    markdown_block.add_suffix_option(parser)
    parser.add_argument("--peer-child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--texts-file", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.quick:
        args.texts, args.rounds, args.process_rounds = 200, 1, 1
    args.argv = argv
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.peer_child is not None:
        return peer_child(args)
    import torch

    if not on_cpu(args.device) and not torch.cuda.is_available():
        raise SystemExit(f"--device {args.device}: torch {torch.__version__} sees no CUDA device here")

    from contrastext.models.names import resolve_model

    env = dict(os.environ)
    if args.threads:
        torch.set_num_threads(args.threads)
        env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = str(args.threads)
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    model_path = resolve_model(args.model)
    texts = stsb_texts(args.data_root, args.texts)
    work = Path(tempfile.mkdtemp(prefix="bench-encode-"))
    try:
        texts_file = work / "texts.txt"
        texts_file.write_text("\n".join(texts) + "\n", encoding="utf-8")
        load_before = os.getloadavg()
        print("in process:", file=sys.stderr)
        inproc = in_process(args, texts, model_path)
        print("whole processes:", file=sys.stderr)
        processes = whole_processes(args, texts_file, model_path, work, env)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report = render(args, inproc, processes, load_before)
    common.publish_report(report, args, SCRIPT, SECTION)
    worst = max(inproc["diff_st"], processes["diff_st"])
    if worst > args.tolerance:
        print(f"our embeddings differ from ST's: max abs diff {worst:.2e} > {args.tolerance}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
