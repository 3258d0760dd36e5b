"""bench/markdown_block.py: the markers every bench script writes, and blocks under --section-suffix side by side."""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
SCRIPTS = ("objectives.py", "grad_cache_memory.py", "reclaim_overhead.py", "train_simcse.py", "encode.py",
           "no_duplicates_sampler.py")


@pytest.fixture(scope="module")
def markdown_block():
    spec = importlib.util.spec_from_file_location("bench_markdown_block", BENCH / "markdown_block.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_default_markers_are_the_plain_ones(markdown_block):
    for script in SCRIPTS:
        assert markdown_block.markers(script) == (f"<!-- begin bench/{script} -->", f"<!-- end bench/{script} -->")
    assert markdown_block.heading("## Training") == "## Training"


def test_suffix_goes_into_both_markers_and_the_heading(markdown_block):
    assert markdown_block.markers("train_simcse.py", "bf16") == (
        "<!-- begin bench/train_simcse.py bf16 -->",
        "<!-- end bench/train_simcse.py bf16 -->",
    )
    assert markdown_block.heading("## Training", "H100 bf16") == "## Training H100 bf16"


def test_blocks_with_other_suffixes_live_side_by_side(markdown_block, tmp_path):
    path = tmp_path / "BENCHMARKS.md"
    path.write_text("# Benchmarks\n\n## Training\n\n<!-- begin bench/train_simcse.py -->\nold cpu\n"
                    "<!-- end bench/train_simcse.py -->\n\n## After\n\nkept\n")

    def block(suffix: str, body: str) -> str:
        begin, end = markdown_block.markers("train_simcse.py", suffix)
        return f"{begin}\n{body}\n{end}\n"

    markdown_block.write_script_block(path, block("bf16", "gpu bf16"), "train_simcse.py", "## Training", "bf16")
    markdown_block.write_script_block(path, block("no", "gpu fp32"), "train_simcse.py", "## Training", "no")
    markdown_block.write_script_block(path, block("bf16", "gpu bf16 again"), "train_simcse.py", "## Training", "bf16")
    markdown_block.write_script_block(path, block("", "new cpu"), "train_simcse.py", "## Training")
    text = path.read_text()
    assert "old cpu" not in text and "new cpu" in text and "kept" in text
    assert "gpu bf16 again" in text and "gpu bf16\n" not in text and "gpu fp32" in text
    assert text.count("## Training bf16\n") == 1 and text.count("## Training no\n") == 1
    assert text.count("<!-- begin bench/train_simcse.py -->") == 1


def test_suffix_that_could_end_a_marker_is_refused(markdown_block):
    assert markdown_block.section_suffix("  H100 bf16 ") == "H100 bf16"
    for bad in ("a --> b", "<!-- x", "two\nlines"):
        with pytest.raises(argparse.ArgumentTypeError):
            markdown_block.section_suffix(bad)


@pytest.mark.parametrize("script", SCRIPTS)
def test_every_script_takes_section_suffix(script, markdown_block):
    name = f"bench_{script.removesuffix('.py')}_for_suffix"
    spec = importlib.util.spec_from_file_location(name, BENCH / script)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    try:
        spec.loader.exec_module(module)
        assert markdown_block.markers(script) == (module.BEGIN_MARKER, module.END_MARKER)
        args = module.parse_args(["--section-suffix", "H100"])
        assert args.section_suffix == "H100"
        assert module.parse_args([]).section_suffix == ""
    finally:
        del sys.modules[name]

