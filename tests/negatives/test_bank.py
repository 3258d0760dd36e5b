"""MemoryBank: N(0, I) init (RECLAIM §3.4) or unit rows, momentum update (Eq. 7), duplicates, state_dict, errors."""

import pytest
import torch

from contrastext.errors import UnknownNameError
from contrastext.negatives.bank import MemoryBank


def test_initial_rows_are_standard_gaussian_draws():
    """RECLAIM §3.4: "initialized with Gaussian noise: u ∼ N(0, I)", not rescaled."""
    bank = MemoryBank(size=50, dim=8, momentum=0.5, generator=torch.Generator().manual_seed(0))
    assert torch.equal(bank.bank, torch.randn(50, 8, generator=torch.Generator().manual_seed(0)))
    big = MemoryBank(size=4000, dim=8, generator=torch.Generator().manual_seed(1)).bank
    assert abs(big.mean().item()) < 0.03 and abs(big.var().item() - 1.0) < 0.05
    assert abs(big.pow(2).sum(dim=1).mean().item() - 8.0) < 0.3  # E‖x‖² = dim, not 1
    assert MemoryBank(size=5, dim=3).init == "gaussian"


def test_unit_init_option_gives_the_same_directions_at_unit_norm():
    draws = torch.randn(50, 8, generator=torch.Generator().manual_seed(0))
    bank = MemoryBank(size=50, dim=8, generator=torch.Generator().manual_seed(0), init="unit")
    assert torch.allclose(bank.bank.norm(dim=1), torch.ones(50), atol=1e-6)
    assert torch.allclose(bank.bank, draws / draws.norm(dim=1, keepdim=True), atol=1e-6)
    with pytest.raises(UnknownNameError, match="gaussian, unit"):
        MemoryBank(size=5, dim=3, init="zeros")


def test_momentum_update_matches_formula_and_leaves_others():
    bank = MemoryBank(size=6, dim=4, momentum=0.3)
    before = bank.bank.clone()
    indices = torch.tensor([4, 1])
    values = torch.randn(2, 4, requires_grad=True)
    bank.update(indices, values)
    expected = 0.7 * values.detach() + 0.3 * before[indices]
    assert torch.allclose(bank.get(indices), expected)
    untouched = torch.tensor([0, 2, 3, 5])
    assert torch.equal(bank.get(untouched), before[untouched])
    assert not bank.bank.requires_grad


def test_duplicate_indices_average_values_then_apply_momentum_once():
    bank = MemoryBank(size=3, dim=2, momentum=0.2)  # ρ ≠ 0.5, so ρ and 1 − ρ cannot be swapped unnoticed
    before = bank.bank.clone()
    values = torch.tensor([[1.0, 0.0], [3.0, 2.0], [5.0, 5.0]])
    bank.update(torch.tensor([2, 0, 2]), values)
    assert torch.allclose(bank.bank[2], 0.8 * torch.tensor([3.0, 2.5]) + 0.2 * before[2])
    assert torch.allclose(bank.bank[0], 0.8 * values[1] + 0.2 * before[0])
    # Order of the duplicated rows does not matter.
    other = MemoryBank(size=3, dim=2, momentum=0.2)
    other.load_state_dict({"bank": before})
    other.update(torch.tensor([2, 2, 0]), values[[2, 0, 1]])
    assert torch.allclose(other.bank, bank.bank)


def test_get_keeps_index_shape():
    bank = MemoryBank(size=10, dim=4)
    assert bank.get(torch.tensor([[1, 2, 3], [4, 5, 6]])).shape == (2, 3, 4)


def test_state_dict_round_trip():
    bank = MemoryBank(size=5, dim=3, momentum=0.5)
    bank.update(torch.tensor([0, 3]), torch.ones(2, 3))
    restored = MemoryBank(size=5, dim=3, momentum=0.5)
    restored.load_state_dict(bank.state_dict())
    assert torch.equal(restored.bank, bank.bank)


def test_bad_input_is_a_clear_error():
    bank = MemoryBank(size=5, dim=3)
    with pytest.raises(IndexError, match="5 rows"):
        bank.get(torch.tensor([5]))
    with pytest.raises(IndexError, match="out of range"):
        bank.update(torch.tensor([-1]), torch.zeros(1, 3))
    with pytest.raises(ValueError, match=r"values \(n, 3\)"):
        bank.update(torch.tensor([0, 1]), torch.zeros(2, 4))
    with pytest.raises(ValueError, match="integer"):
        bank.get(torch.tensor([0.0]))
    with pytest.raises(ValueError, match="momentum"):
        MemoryBank(size=5, dim=3, momentum=1.5)


@pytest.mark.cuda
def test_cuda_bank_updates_on_the_device_as_on_the_cpu_and_names_the_changed_rows(cuda_device):
    """On the GPU: the momentum rule with a duplicate index (values averaged first), indices and values given on
    the CPU or on the device, the changed rows named on the device; the move itself counts as an unknown change."""
    on_cpu = MemoryBank(size=300, dim=8, momentum=0.3, generator=torch.Generator().manual_seed(0))
    bank = MemoryBank(size=300, dim=8, momentum=0.3, generator=torch.Generator().manual_seed(0))
    assert bank.take_changed() is None  # the first call: unknown
    bank = bank.to(cuda_device)
    assert bank.bank.device.type == cuda_device.type
    moved = cuda_device.type != "cpu"  # (.to("cpu") leaves the buffer where it is)
    assert (bank.take_changed() is None) == moved  # the buffer moved: any row may have changed
    generator = torch.Generator().manual_seed(1)
    for indices in (torch.tensor([3, 7, 3, 250]), torch.tensor([7, 0])):
        values = torch.randn(len(indices), 8, generator=generator)
        on_cpu.update(indices, values)
        bank.update(indices.to(cuda_device), values.to(cuda_device))
    bank.update(torch.tensor([299]), torch.ones(1, 8))  # CPU indices and values: moved to the bank's device
    on_cpu.update(torch.tensor([299]), torch.ones(1, 8))
    changed = bank.take_changed()
    assert changed.device.type == cuda_device.type and changed.tolist() == [0, 3, 7, 250, 299]
    assert torch.allclose(bank.bank.cpu(), on_cpu.bank, atol=1e-6)
    assert torch.allclose(bank.get(torch.tensor([[3, 7]])).cpu(), on_cpu.get(torch.tensor([[3, 7]])), atol=1e-6)
    assert bank.take_changed().numel() == 0  # nothing written since
