"""bench/ans_profile.py on a small ANS: the search part times each bank's kept index at each nprobe with its recall
against the exact search (1 when every list is probed), the objective part times loss, backward and bank updates
with the nearest rows fixed and lists the operators, and the block renders both."""

from __future__ import annotations

from types import SimpleNamespace

import torch

from contrastext.negatives.search import IVFSearch
from contrastext.objectives.ans import ANS
from contrastext.objectives.critic import WassersteinCritic
from tests.bench._scripts import loaded_bench


def small_ans(size: int = 2000, width: int = 16) -> ANS:
    torch.manual_seed(0)
    ans = ANS(WassersteinCritic(width, width, hidden=8), bank_size=size, dim_u=width, dim_v=width, k=5,
              search=IVFSearch(nlist=8, exact_below=0))  # fmt: skip
    ans.bank_u.bank.copy_(torch.randn(size, width))
    ans.bank_v.bank.copy_(torch.randn(size, width))
    return ans.train()


def test_the_profile_times_both_parts_and_the_block_holds_them(tmp_path):
    with loaded_bench("ans_profile") as bench:
        args = SimpleNamespace(batch_size=8, k=5, steps=2, warmup=1, nprobes=[8, 1], recall_queries=32, seed=0,
                               threads=1, argv=["--quick"])  # fmt: skip
        ans, evict = small_ans(), bench.Evictor()
        searches = bench.search_profile(args, ans, 2000, evict)
        assert [line["nprobe"] for line in searches] == [8, 1] and searches[0]["nlist"] == 8
        assert searches[0]["u_recall"] == searches[0]["v_recall"] == 1.0  # every list probed: the exact top-K
        assert all(line["u_ms"] > 0 and line["v_ms"] > 0 and 0 <= line["v_recall"] <= 1 for line in searches)
        assert ans.search_u.index.nprobe == ans.search_v.index.nprobe == 8  # the default restored (min(2048/√8, 8))

        before = ans.bank_u.bank.clone()
        objective = bench.objective_profile(args, ans, 2000, evict)
        assert objective["forward"] > 0 and objective["backward"] > 0 and objective["update"] > 0
        assert 5 <= objective["distinct_u"] <= 8 * 5 and objective["operators"]
        assert not torch.equal(before, ans.bank_u.bank)  # the momentum updates ran

        block = bench.render(args, (0.0, 0.0, 0.0), [objective], searches)
        assert "| 2,000 | 8 | 8 |" in block and "### The objective" in block and "`aten::" in block
