"""bench/reclaim_overhead.py's verdict rules: the goal per model and bank size, no verdict below 3 rounds, and
``--interleave``'s ratio taken within each child (its twin's steps) instead of against the baseline's child; the
in-step profile of the top-K rows (the searches' own time and the distinct rows gathered)."""

from __future__ import annotations

from types import SimpleNamespace

from tests.bench._scripts import loaded_bench


def cell(bench, row, results):
    return bench.Cell(row, 67_349, results=results)


def test_the_goal_is_issue_24s_for_minilm_and_the_papers_for_another_model():
    with loaded_bench("reclaim_overhead") as bench:
        minilm, other = SimpleNamespace(model=None), SimpleNamespace(model="bert-base-random")
        assert (bench.time_goal(minilm, 67_349), bench.time_goal(minilm, 1_000_000)) == (10.0, 15.0)
        assert (bench.time_goal(other, 67_349), bench.time_goal(other, 1_000_000)) == (4.4, 10.0)


def test_fewer_than_three_rounds_give_no_verdict_and_three_give_the_median_with_the_range():
    with loaded_bench("reclaim_overhead") as bench:
        assert bench.goal_verdict([0.9], 10.0).startswith("not judged: 1 round(s)")
        assert bench.goal_verdict([1.0, 1.2], 10.0).startswith("not judged: 2 round(s)")
        assert bench.goal_verdict([1.05, 1.30, 0.95], 10.0) == "met; rounds -5.0 to +30.0 %"
        assert bench.goal_verdict([1.11, 1.30, 0.95], 10.0).startswith("not met")


def test_interleaved_rounds_are_paired_with_their_own_twin_and_give_no_memory_delta():
    with loaded_bench("reclaim_overhead") as bench:
        baseline = [{"round": r, "step_s": [1.0, 1.0], "peak_mib": 100.0} for r in range(3)]
        # Each child's own twin ran at another speed than the baseline's child: only the twin's steps count.
        row = [{"round": r, "step_s": [1.2, 1.2], "baseline_step_s": [1.1, 1.1], "peak_mib": 300.0} for r in range(3)]
        table = bench.summarise([cell(bench, "baseline", baseline), cell(bench, "top-K none", row)])
        line = next(line for line in table if line["row"] == "top-K none")
        assert [round(ratio, 6) for ratio in line["round_ratios"]] == [round(1.2 / 1.1, 6)] * 3
        assert "extra_mib" not in line
        separate = [{"round": r, "step_s": [1.2, 1.2], "peak_mib": 300.0} for r in range(3)]
        table = bench.summarise([cell(bench, "baseline", baseline), cell(bench, "top-K none", separate)])
        line = next(line for line in table if line["row"] == "top-K none")
        assert line["ratio"] == 1.2 and line["extra_mib"] == 200.0


def test_a_reused_index_is_named_by_what_fixes_the_bank_rows_and_passed_to_every_child(tmp_path):
    with loaded_bench("reclaim_overhead") as bench:
        args = bench.parse_args(["--reuse-index", "--cache-dir", str(tmp_path)])
        args.features = tmp_path / "minilm-67349.pt"
        u, v = bench.kept_index_paths(args, 1_000_000)
        assert u.parent == tmp_path / "indexes" and u.name.endswith("-u.faiss") and v.name.endswith("-v.faiss")
        others = set()
        for change in ({"jitter": 0.5}, {"seed": 7}, {"nlist": 512}):
            others.add(bench.kept_index_paths(SimpleNamespace(**{**vars(args), **change}), 1_000_000)[0])
        assert len(others | {u, bench.kept_index_paths(args, 67_349)[0]}) == 5
        assert "--reuse-index" in bench.child_command(args, "top-K ivf", 1_000_000, args.features)


def test_the_in_step_profile_times_the_searches_and_counts_the_gathered_rows_of_each_step():
    import torch

    class Bank:
        def get(self, rows):
            return rows * 2

    class FakeANS:
        bank_u, bank_v = Bank(), Bank()

        def nearest_negatives(self, u, v, indices):
            return u, v

    with loaded_bench("reclaim_overhead") as bench:
        ans = FakeANS()
        found = bench.in_step_profile(ans)
        assert ans.nearest_negatives(1, 2, None) == (1, 2) and found == {"search_s": [], "rows": []}  # no step yet
        for count in (3, 5):  # two steps, as run_child starts them
            found["search_s"].append(0.0)
            found["rows"].append(0)
            ans.nearest_negatives(1, 2, None)
            assert torch.equal(ans.bank_u.get(torch.arange(count)), 2 * torch.arange(count))
            ans.bank_v.get(torch.arange(4))
        assert found["rows"] == [7, 9] and all(seconds > 0 for seconds in found["search_s"])
        table = [{"row": "top-K none", "size": 10, "gathered_rows": 6400.0},
                 {"row": "top-K ivf", "size": 10, "search_ms": 25.0, "gathered_rows": 2100.0}]
        assert bench.in_step_sentence(table[1], table, 500.0) == (
            " Inside the step the two searches took 25.0 ms (5.0 % of the baseline's step) and the critic gathered "
            "2,100 distinct bank rows (both banks), against 6,400 for the random rows of `top-K none`.")
        assert bench.in_step_sentence({"row": "top-K ivf"}, table, 500.0) == ""
