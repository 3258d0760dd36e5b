"""Benchmark: the cost of the objectives' NaN / ±inf input check (issue 21, item 7).

Usage::

    python bench/finite_check.py [--batch 1024] [--dim 384] [--threads 1] [--repeats 7] [--device cpu]

Times ``InfoNCE()(anchors, positives)`` (forward, and forward + backward) on a ``--batch`` × ``--dim`` float32
batch with the check on and off, run round-robin (on, off, on, off ...) so that a load spike on a shared machine
hits both alike, and ``check_finite`` alone on the two inputs. Each figure is the best of ``--repeats`` runs of
20 calls (200 for the check alone). ``--threads`` (default 1) fixes ``torch.set_num_threads``: on a shared 2-core
machine two threads give figures that swing by 2x from run to run.
"""

from __future__ import annotations

import argparse
import timeit

import torch

from contrastext.objectives import InfoNCE, set_finite_checks
from contrastext.objectives.checks import check_finite


def best_ms(call, number: int, repeats: int, device: torch.device) -> float:
    def timed():
        call()
        if device.type == "cuda":
            torch.cuda.synchronize()

    timed()
    return min(timeit.repeat(timed, number=number, repeat=repeats)) / number * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    generator = torch.Generator().manual_seed(0)
    anchors = torch.randn(args.batch, args.dim, generator=generator).to(device).requires_grad_()
    positives = torch.randn(args.batch, args.dim, generator=generator).to(device).requires_grad_()
    loss = InfoNCE()
    cases = {"forward": lambda: loss(anchors, positives), "forward + backward": lambda: loss(anchors, positives).backward()}
    times: dict[tuple[str, bool], list[float]] = {}
    for _ in range(3):
        for name, call in cases.items():
            for on in (True, False):
                set_finite_checks(on)
                times.setdefault((name, on), []).append(best_ms(call, 20, args.repeats, device))
    set_finite_checks(True)
    print(f"InfoNCE on {args.batch}x{args.dim} float32, {device}, {args.threads} thread(s): best of {args.repeats}x20 calls")
    for name in cases:
        on, off = min(times[(name, True)]), min(times[(name, False)])
        print(f"  {name:<20} check on {on:7.3f} ms   off {off:7.3f} ms   difference {on - off:+.3f} ms")
    inputs = {"anchors": anchors, "positives": positives}
    alone = best_ms(lambda: check_finite("InfoNCE", inputs), 200, args.repeats, device)
    print(f"  check_finite alone on both inputs: {alone:.3f} ms")


if __name__ == "__main__":
    main()
