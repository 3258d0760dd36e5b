"""Smoke test of bench/online_negatives.py: the corpus lines and the jittered bank rows are as documented, the
cells not run say why, and a ``--quick`` run (120 pairs, banks of their positives and of 12,000 rows, a tiny random
sentence-transformers model) writes its block: every arm, the re-encode's log line, recall of the searches.

The cells run in this process (``child_process.run_child`` replaced by a call of the script's ``main`` with the
child's arguments), so the test takes seconds; tests/bench/test_child_process.py covers the child process itself.
"""

from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch

from tests.bench._scripts import BENCH, loaded_bench, run_arms_in_process


@pytest.fixture(scope="module")
def bench():
    with loaded_bench("online_negatives") as module:
        yield module


@pytest.fixture
def in_process_arms(bench, monkeypatch):
    """Run each cell's worker command in this process."""
    run_arms_in_process(bench, monkeypatch)


def test_its_help_prints():
    done = subprocess.run([sys.executable, str(BENCH / "online_negatives.py"), "--help"], capture_output=True, text=True)
    assert done.returncode == 0 and "--bank-sizes" in done.stdout, done.stderr[-2000:]


def test_the_corpus_lines_are_distinct_single_lines(bench):
    lines = bench.corpus_lines(["a cat", "two\nlines"], 5)
    assert lines[:3] == ["a cat #0", "two lines #1", "a cat #2"] and len(set(lines)) == 5


def test_the_bank_holds_the_real_rows_then_seeded_jittered_copies(bench):
    real = torch.randn(4, 3, generator=torch.Generator().manual_seed(1))

    def filled(seed: int) -> SimpleNamespace:
        online = SimpleNamespace(bank=SimpleNamespace(bank=torch.zeros(10, 3)), filled=torch.zeros((), dtype=torch.bool))
        bench.fill_bank(online, real, 0.25, seed)
        return online

    online = filled(0)
    bank = online.bank.bank
    assert torch.equal(bank[:4], real) and bool(online.filled)
    noise = bank[4:] - real[torch.arange(6) % 4]
    assert bool((noise != 0).all()) and bool((noise.abs() <= 6 * 0.25 * real.std(dim=0)).all())
    assert torch.equal(filled(0).bank.bank, bank) and not torch.equal(filled(1).bank.bank, bank)


def test_the_sizes_need_the_training_set_and_the_cells_not_run_say_why(bench):
    assert bench.size_list("train,1_000_000") == [bench.TRAIN, 1_000_000]
    with pytest.raises(Exception, match="must include 'train'"):
        bench.size_list("5000")
    args = bench.parse_args([])
    assert bench.skip_reason("momentum-ivf", bench.TRAIN, 4258, args).startswith("= exact")
    assert bench.skip_reason("momentum-ivf", 1_000_000, 4258, args) is None
    assert bench.skip_reason("momentum-exact", 1_000_000, 4258, args) is None
    assert "whole corpus" in bench.skip_reason("reencode-exact", 1_000_000, 4258, args)
    assert "--faiss-max-rows" in bench.skip_reason("momentum-faiss", 1_000_000, 4258, args)
    assert bench.skip_reason("momentum-faiss", bench.TRAIN, 4258, args) is None


def test_a_quick_run_writes_its_block_with_every_arm(bench, in_process_arms, tmp_path, data_root, make_st_model):
    output = tmp_path / "BENCHMARKS.md"
    output.write_text("# Benchmarks\n\n## Another section\n\nkept\n")
    code = bench.main(["--quick", "--model", make_st_model(), "--data-root", str(data_root),
                       "--cache-dir", str(tmp_path / "cache"), "--output", str(output)])  # fmt: skip
    assert code == 0
    text = output.read_text()
    assert "kept" in text and bench.BEGIN_MARKER in text and bench.END_MARKER in text
    block = text.split(bench.BEGIN_MARKER)[1].split(bench.END_MARKER)[0]
    rows = {tuple(cell.strip() for cell in line.split("|")[1:3]): line.split("|")[3:-1]
            for line in block.splitlines() if line[2:].split("|")[0].strip().replace(",", "").isdigit()}  # fmt: skip
    train = next(size for size, words in rows if words == bench.ARM_WORDS["in-batch"])
    assert rows[(train, bench.ARM_WORDS["in-batch"])][1].strip() == "1 (ref.)"
    for arm in ("momentum-exact", "reencode-exact", "momentum-faiss"):
        assert float(rows[(train, bench.ARM_WORDS[arm])][0].replace(",", "")) > 0  # ms/step
    assert rows[(train, bench.ARM_WORDS["momentum-ivf"])][0].strip().startswith("= exact")
    assert float(rows[(train, bench.ARM_WORDS["momentum-faiss"])][5]) >= 0.95  # a flat index: exact
    assert "not run: one re-encoding of 12,000 texts" in rows[("12,000", bench.ARM_WORDS["reencode-exact"])][0]
    assert "--faiss-max-rows" in rows[("12,000", bench.ARM_WORDS["momentum-faiss"])][0]  # --quick: 1,000
    ivf = rows[("12,000", bench.ARM_WORDS["momentum-ivf"])]
    assert 0.5 <= float(ivf[5]) <= 1 and "index build" in ivf[6]
    assert "negatives: bank re-encoded at step 1000 in" in block and "kept IVF index: nlist" in block


def test_interleave_pairs_each_bank_arm_with_an_in_batch_twin_in_its_process(bench, in_process_arms, tmp_path,
                                                                             data_root, make_st_model):
    output = tmp_path / "BENCHMARKS.md"
    code = bench.main(["--quick", "--interleave", "--arms", "in-batch,momentum-exact", "--bank-sizes", "train",
                       "--model", make_st_model(), "--data-root", str(data_root), "--cache-dir", str(tmp_path / "cache"),
                       "--output", str(output)])  # fmt: skip
    assert code == 0
    block = output.read_text().split(bench.BEGIN_MARKER)[1].split(bench.END_MARKER)[0]
    row = next(line.split("|")[1:-1] for line in block.splitlines() if bench.ARM_WORDS["momentum-exact"] in line)
    assert float(row[3]) > 0 and row[5].strip() == "–"  # × baseline against the twin; no memory column
    assert "--interleave: each bank arm's child also holds the in-batch run" in block


def test_nprobe_reaches_the_kept_index_of_the_ivf_arm(bench, in_process_arms, tmp_path, data_root, make_st_model):
    output = tmp_path / "BENCHMARKS.md"
    code = bench.main(["--quick", "--arms", "in-batch,momentum-ivf", "--nprobe", "3", "--model", make_st_model(),
                       "--data-root", str(data_root), "--cache-dir", str(tmp_path / "cache"), "--output", str(output)])
    assert code == 0
    assert "kept IVF index: nlist" in output.read_text() and "nprobe 3;" in output.read_text()
