"""PCGrad: "gradient surgery" for multi-task learning (Yu et al., "Gradient Surgery for Multi-Task
Learning", NeurIPS 2020, Algorithm 1).

With gᵢ the gradient of task i's loss with respect to the SHARED parameters, every task's gradient is
projected off the normal plane of each other task's gradient it conflicts with (negative dot product),
the other tasks being visited in a random order:

    g̃ᵢ ← gᵢ
    for j ≠ i (random order):  if g̃ᵢ · gⱼ < 0:   g̃ᵢ ← g̃ᵢ − (g̃ᵢ · gⱼ / ‖gⱼ‖²) gⱼ
    Δθ = Σᵢ g̃ᵢ                  (``reduction="sum"``: Yu et al., Algorithm 1)
    Δθ = (1/T) Σᵢ g̃ᵢ            (``reduction="mean"``: the CS224N multi-task report, §4 "We set the final
                                 gradient as the mean of the input gradients"; also the default of the
                                 widely used PyTorch port WeiChengTseng/Pytorch-PCGrad)

(the gⱼ projected against are the ORIGINAL gradients, as in the paper). Non-conflicting gradients pass
unchanged, so with no conflict PCGrad is the plain sum (or mean). Task-specific parameters (each task's
head) get their own task's gradient only, never projected nor averaged (Pytorch-PCGrad sums the
gradients of parameters that not every task reaches).

Three layers, each usable on its own:

- :func:`project_conflicting` / :func:`pcgrad`: the math on a list of flat gradient vectors;
- :func:`pcgrad_gradients`: per-task ``torch.autograd.grad`` of a list of losses -> one combined gradient
  per parameter (shared parameters projected, the others summed);
- :func:`pcgrad_surrogate`: a scalar whose VALUE is 0 and whose GRADIENT is the combined gradient, so a
  method-agnostic trainer that calls ``loss.backward()`` applies PCGrad without knowing about it.

Example::

    >>> g1, g2 = torch.tensor([1.0, 0.0]), torch.tensor([-1.0, 1.0])     # g1 · g2 = −1: they conflict
    >>> project_conflicting([g1, g2])
    [tensor([0.5000, 0.5000]), tensor([0., 1.])]
    >>> pcgrad([g1, g2])
    tensor([0.5000, 1.5000])
    >>> pcgrad([g1, g2], reduction="mean")
    tensor([0.2500, 0.7500])
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn

REDUCTIONS: tuple[str, ...] = ("sum", "mean")


def project_conflicting(gradients: Sequence[Tensor], generator: torch.Generator | None = None) -> list[Tensor]:
    """Each task's gradient with its conflicts with every other task's gradient projected away.

    ``gradients``: one flat (1-D) tensor per task, all of the same length. The other tasks are visited in
    a random order drawn from ``generator`` (the paper shuffles them; with two tasks order is moot).
    A zero gradient gⱼ conflicts with nothing and is skipped.
    """
    gradients = list(gradients)
    if not gradients:
        raise ValueError("PCGrad needs at least one task gradient")
    shape = gradients[0].shape
    for index, gradient in enumerate(gradients):
        if gradient.dim() != 1 or gradient.shape != shape:
            raise ValueError(
                f"PCGrad expects flat gradients of one length; gradient {index} has shape "
                f"{tuple(gradient.shape)}, gradient 0 has {tuple(shape)}"
            )
    originals = [gradient.detach().float() for gradient in gradients]
    projected = []
    for i, own in enumerate(originals):
        result = own.clone()
        others = [j for j in range(len(originals)) if j != i]
        order = torch.randperm(len(others), generator=generator).tolist()
        for position in order:
            other = originals[others[position]]
            dot = torch.dot(result, other)
            norm_squared = torch.dot(other, other)
            if dot < 0 and norm_squared > 0:
                result = result - (dot / norm_squared) * other
        projected.append(result.to(gradients[i].dtype))
    return projected


def pcgrad(gradients: Sequence[Tensor], generator: torch.Generator | None = None, reduction: str = "sum") -> Tensor:
    """The PCGrad update direction: the sum (Algorithm 1) or the mean of the projected task gradients."""
    if reduction not in REDUCTIONS:
        raise ValueError(f"PCGrad reduction must be one of {', '.join(REDUCTIONS)}, got {reduction!r}")
    projected = torch.stack(project_conflicting(gradients, generator))
    return projected.sum(dim=0) if reduction == "sum" else projected.mean(dim=0)


def _flat(gradients: Sequence[Tensor | None], parameters: Sequence[Tensor]) -> Tensor:
    return torch.cat(
        [
            (torch.zeros_like(parameter) if gradient is None else gradient).reshape(-1).float()
            for gradient, parameter in zip(gradients, parameters, strict=True)
        ]
    )


def pcgrad_gradients(
    losses: Sequence[Tensor],
    shared: Sequence[nn.Parameter],
    specific: Sequence[nn.Parameter] = (),
    generator: torch.Generator | None = None,
    reduction: str = "sum",
) -> list[Tensor]:
    """One combined gradient per parameter of ``[*shared, *specific]``.

    Shared parameters get the PCGrad combination (``reduction``) of the per-task gradients; task-specific
    parameters get the plain sum (a head only receives its own task's gradient anyway). The graph is kept
    (``retain_graph``) between tasks and freed after the last one.
    """
    losses = list(losses)
    shared, specific = list(shared), list(specific)
    if not losses:
        raise ValueError("PCGrad needs at least one task loss")
    parameters = shared + specific
    if not parameters:
        raise ValueError("PCGrad needs parameters to compute gradients for (shared and/or specific)")
    per_task_shared, specific_sum = [], [torch.zeros_like(p) for p in specific]
    for index, loss in enumerate(losses):
        last = index == len(losses) - 1
        grads = torch.autograd.grad(loss, parameters, retain_graph=not last, allow_unused=True)
        per_task_shared.append(_flat(grads[: len(shared)], shared))
        for position, gradient in enumerate(grads[len(shared) :]):
            if gradient is not None:
                specific_sum[position] = specific_sum[position] + gradient
    combined = pcgrad(per_task_shared, generator, reduction) if shared else torch.zeros(0)
    result, offset = [], 0
    for parameter in shared:
        count = parameter.numel()
        result.append(combined[offset : offset + count].view_as(parameter).to(parameter.dtype))
        offset += count
    return result + specific_sum


def pcgrad_surrogate(
    losses: Sequence[Tensor],
    shared: Sequence[nn.Parameter],
    specific: Sequence[nn.Parameter] = (),
    generator: torch.Generator | None = None,
    reduction: str = "sum",
) -> Tensor:
    """A 0-valued scalar whose gradient with respect to every parameter is the PCGrad combination.

    ``s = Σ_p ⟨p, ĝ_p⟩ − stopgrad(Σ_p ⟨p, ĝ_p⟩)`` with ĝ the detached combined gradients: ∂s/∂p = ĝ_p and
    s = 0. Adding ``s`` to detached task losses lets a trainer that only calls ``total.backward()`` apply
    PCGrad (linear in p, so loss scaling and gradient accumulation behave as for an ordinary loss).
    """
    parameters = list(shared) + list(specific)
    combined = pcgrad_gradients(losses, shared, specific, generator, reduction)
    surrogate = sum(
        (parameter * gradient.detach()).sum() for parameter, gradient in zip(parameters, combined, strict=True)
    )
    return surrogate - surrogate.detach()
