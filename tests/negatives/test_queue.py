"""Queue: FIFO order, overflow keeps the newest rows, detached storage, state_dict round trip."""

import pytest
import torch

from contrastext.negatives.queue import Queue


def rows(start: int, count: int, dim: int = 3) -> torch.Tensor:
    """Rows whose every entry is their global number, so order is easy to read."""
    return torch.arange(start, start + count, dtype=torch.float32).unsqueeze(1).repeat(1, dim)


def test_fills_in_order_then_drops_oldest():
    queue = Queue(capacity=5, dim=3)
    assert len(queue) == 0
    assert queue.contents().shape == (0, 3)
    queue.enqueue(rows(0, 3))
    assert len(queue) == 3
    assert torch.equal(queue.contents(), rows(0, 3))
    queue.enqueue(rows(3, 4))  # 7 rows seen, capacity 5: rows 2..6 remain, oldest first
    assert len(queue) == 5
    assert torch.equal(queue.contents(), rows(2, 5))
    queue.enqueue(rows(7, 1))
    assert torch.equal(queue.contents(), rows(3, 5))


def test_enqueue_larger_than_capacity_keeps_newest():
    queue = Queue(capacity=4, dim=3)
    queue.enqueue(rows(0, 2))
    queue.enqueue(rows(10, 9))
    assert torch.equal(queue.contents(), rows(15, 4))
    queue.enqueue(rows(100, 1))
    assert torch.equal(queue.contents(), torch.cat([rows(16, 3), rows(100, 1)]))


def test_stores_detached_copies():
    queue = Queue(capacity=4, dim=3)
    x = torch.randn(2, 3, requires_grad=True)
    queue.enqueue(x * 2)
    assert not queue.contents().requires_grad
    assert torch.allclose(queue.contents(), x.detach() * 2)


def test_state_dict_round_trip():
    queue = Queue(capacity=4, dim=3)
    queue.enqueue(rows(0, 6))
    state = queue.state_dict()
    assert set(state) == {"embeddings", "pointer", "filled"}
    restored = Queue(capacity=4, dim=3)
    restored.load_state_dict(state)
    assert len(restored) == 4
    assert torch.equal(restored.contents(), queue.contents())
    restored.enqueue(rows(6, 1))
    queue.enqueue(rows(6, 1))
    assert torch.equal(restored.contents(), queue.contents())


def test_wrong_width_is_a_clear_error():
    queue = Queue(capacity=4, dim=3)
    with pytest.raises(ValueError, match=r"\(n, 3\)"):
        queue.enqueue(torch.zeros(2, 5))
