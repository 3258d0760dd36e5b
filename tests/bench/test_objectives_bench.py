"""Smoke test of bench/objectives.py: the --quick run writes the expected rows and our losses equal the peers'.

The script is imported from its path (bench/ is not a package) and its ``main`` run in-process with
``--quick`` (batch 8 and 32, width 32, PML NTXent only at 8, banks of 300 and 1000 rows), writing into a copy of a BENCHMARKS.md
that already holds another section and an old generated block.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "objectives.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_objectives", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    yield module
    del sys.modules[spec.name]


def table_rows(text: str, first_header: str) -> list[list[str]]:
    """The data rows (cells stripped) of the markdown table whose header starts with ``first_header``."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {first_header} |"))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def test_quick_run_reports_every_case_and_losses_agree_with_peers(bench, tmp_path):
    output = tmp_path / "BENCHMARKS.md"
    output.write_text(
        "# Benchmarks\n\n## Training speed\n\nkept as is\n\n"
        f"{bench.BEGIN_MARKER}\nold numbers\n{bench.END_MARKER}\n\n## After\n\nalso kept\n"
    )

    assert bench.main(["--quick", "--output", str(output)]) == 0

    text = output.read_text()
    assert "kept as is" in text and "also kept" in text and "old numbers" not in text
    assert text.count(bench.BEGIN_MARKER) == 1 and text.count(bench.END_MARKER) == 1
    assert "torch.get_num_threads() = 1" in text

    loss_rows = table_rows(text, "objective")
    expected = {
        (objective, batch, peer)
        for batch in ("8", "32")
        for objective, peer in [
            ("InfoNCE", "ST MNRL"),
            ("InfoNCE", "PML NTXent"),
            ("InfoNCE + 1 hard neg.", "ST MNRL"),
            ("InfoNCE + 1 hard neg.", "PML NTXent"),
            ("SupCon", "PML SupCon"),
        ]
    }
    assert {(row[0], row[1], row[2]) for row in loss_rows} == expected
    for row in loss_rows:
        if row[2] == "PML NTXent" and row[1] == "32":  # --quick caps PML NTXent (memory B^3) at batch 16
            assert row[4] == "skipped" and row[7] == "skipped"
            continue
        assert float(row[-1]) < 1e-5, f"loss differs from {row[2]}: {row}"
        assert float(row[3]) > 0 and float(row[4]) > 0  # times measured
        assert float(row[6]) > 0 and float(row[7]) > 0  # peak memory measured

    search_rows = table_rows(text, "bank rows")
    assert [(row[0], row[1].split("(")[0].strip()) for row in search_rows] == [
        (size, method)
        for size in ("300", "1,000")
        for method in ("naive torch.topk", "naive, normalising per call", "ExactSearch", "FaissSearch")
    ]
    for row in search_rows:
        # The same top-K scores; indices may only swap between near-tied scores.
        assert float(row[-2]) < 1e-5 and float(row[-1].rstrip("%")) >= 99.0, f"top-K differs from naive: {row}"


def test_peak_memory_counts_the_similarity_matrix(bench):
    import torch

    a = torch.randn(512, 16)
    peak = bench.peak_memory_bytes(lambda: (a @ a.T).sum(), torch.device("cpu"))
    assert 512 * 512 * 4 <= peak < 2 * 512 * 512 * 4 + 4096
