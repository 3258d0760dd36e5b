"""all_gather_with_grad / gather_for_contrastive: identity in one process; two gloo processes reproduce
the single-process InfoNCE loss and gradient on the same global batch.

Scaling checked: each rank's loss L_r is the mean over its B local anchors, the global loss is the mean
over all W·B anchors, so L_global = mean_r L_r; and the gradient reaching rank r's local embeddings is
∂(Σ_r' L_r')/∂x_r = W · ∂L_global/∂x_r (DDP then divides parameter gradients by W).
"""

import socket

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F

from contrastext.negatives.distributed import all_gather_rows, all_gather_with_grad, gather_for_contrastive

WORLD_SIZE = 2
BATCH = 4
DIM = 6
TAU = 0.05


def info_nce(anchors, candidates, labels):
    logits = F.normalize(anchors, dim=1) @ F.normalize(candidates, dim=1).T / TAU
    return F.cross_entropy(logits, labels)


def global_batch():
    generator = torch.Generator().manual_seed(0)
    anchors = torch.randn(WORLD_SIZE * BATCH, DIM, generator=generator, dtype=torch.float64)
    positives = anchors + 0.5 * torch.randn(WORLD_SIZE * BATCH, DIM, generator=generator, dtype=torch.float64)
    negatives = torch.randn(WORLD_SIZE * BATCH, DIM, generator=generator, dtype=torch.float64)
    return anchors, positives, negatives


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def worker(rank: int, port: int, out_dir: str) -> None:
    torch.set_num_threads(1)  # forked child: stay out of the parent's thread pools
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=WORLD_SIZE)
    try:
        anchors, positives, negatives = global_batch()
        local = slice(rank * BATCH, (rank + 1) * BATCH)
        a = anchors[local].clone().requires_grad_(True)
        p = positives[local].clone().requires_grad_(True)
        n = negatives[local].clone().requires_grad_(True)
        gathered = gather_for_contrastive(a, p, n)
        loss = info_nce(gathered.anchors, gathered.candidates, gathered.labels)
        loss.backward()
        mean_loss = loss.detach().clone()
        dist.all_reduce(mean_loss)
        mean_loss /= WORLD_SIZE
        torch.save(
            {"loss": mean_loss, "a": a.grad, "p": p.grad, "n": n.grad, "labels": gathered.labels},
            f"{out_dir}/rank{rank}.pt",
        )
    finally:
        dist.destroy_process_group()


def test_two_processes_match_single_process_global_batch(tmp_path):
    # fork: the children reuse the imported torch (spawn would re-import it, ~10 s on 2 cores).
    mp.start_processes(worker, args=(free_port(), str(tmp_path)), nprocs=WORLD_SIZE, start_method="fork")

    anchors, positives, negatives = global_batch()
    a, p, n = (t.clone().requires_grad_(True) for t in (anchors, positives, negatives))
    labels = torch.arange(WORLD_SIZE * BATCH)
    expected_loss = info_nce(a, torch.cat([p, n]), labels)
    expected_loss.backward()

    for rank in range(WORLD_SIZE):
        result = torch.load(tmp_path / f"rank{rank}.pt")
        local = slice(rank * BATCH, (rank + 1) * BATCH)
        assert torch.equal(result["labels"], labels[local])
        assert torch.allclose(result["loss"], expected_loss)
        for name, grad in (("a", a.grad), ("p", p.grad), ("n", n.grad)):
            assert torch.allclose(result[name] / WORLD_SIZE, grad[local]), name


def test_single_process_is_identity():
    x = torch.randn(3, 4, requires_grad=True)
    assert all_gather_with_grad(x) is x
    anchors, positives = torch.randn(3, 4), torch.randn(3, 4)
    gathered = gather_for_contrastive(anchors, positives, torch.randn(2, 4))
    assert gathered.anchors is anchors
    assert gathered.candidates.shape == (5, 4)
    assert torch.equal(gathered.candidates[:3], positives)
    assert torch.equal(gathered.labels, torch.arange(3))


def rows_worker(rank: int, port: int, out_dir: str) -> None:
    """Rank r holds r + 2 rows of value 10·r + row: uneven local sizes, as a last batch can have."""
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=WORLD_SIZE)
    try:
        local = torch.tensor([[10.0 * rank + row, -1.0] for row in range(rank + 2)])
        torch.save(all_gather_rows(local), f"{out_dir}/rows{rank}.pt")
    finally:
        dist.destroy_process_group()


def test_all_gather_rows_concatenates_uneven_rows_in_rank_order(tmp_path):
    mp.start_processes(rows_worker, args=(free_port(), str(tmp_path)), nprocs=WORLD_SIZE, start_method="fork")
    expected = torch.tensor([[0.0, -1.0], [1.0, -1.0], [10.0, -1.0], [11.0, -1.0], [12.0, -1.0]])
    for rank in range(WORLD_SIZE):
        assert torch.equal(torch.load(tmp_path / f"rows{rank}.pt"), expected)  # the same on every rank


def test_all_gather_rows_is_identity_in_one_process():
    x = torch.randn(3, 2)
    assert all_gather_rows(x) is x
