"""Cached-gradient training (GradCache): a batch of any size in the memory of one chunk.

Gao, Zhang, Han & Callan, "Scaling Deep Contrastive Learning Batch Size under Memory Limited Setup"
(RepL4NLP 2021; luyug/GradCache). An in-batch contrastive loss couples every example with every other, so
the batch cannot simply be split into accumulated micro-batches: that changes the loss (fewer negatives).
But the loss depends on the encoder only through the embeddings, so its gradient splits in two:
``dL/dθ = Σ_rows (dL/dz_row) · (dz_row/dθ)``. With ``train.cache_chunk: N`` one micro-batch is trained in
three passes (:func:`cached_backward`):

1. **Embed without a graph.** The batch is cut into chunks of N examples (``method.split_batch``); each
   chunk is encoded under ``torch.no_grad()`` (``method.embed``) and the state of torch's CPU and CUDA
   generators at its start is kept (:class:`RandContext`, GradCache's ``RandContext``).
2. **Loss on all embeddings.** The chunks' embeddings are concatenated per view into leaf tensors that
   require gradients; ``method.loss_from_embeddings`` computes the loss of the whole batch (gathered across
   processes as the plain path does) and one backward gives ``dL/dz`` for every row (and the gradients of
   the loss's own parameters: a learnable temperature, a critic).
3. **Replay each chunk with its graph.** Each chunk is encoded again, with gradients, from its saved RNG
   states, so dropout draws exactly the masks of pass 1; ``backward(z_chunk, grad=dL/dz_chunk)`` (the
   gradient of the surrogate ``Σ z·stop_grad(dL/dz)``) accumulates its parameter gradients. Only one chunk's
   graph exists at a time. The generators end where pass 1 left them, so the next step (and a resumed run)
   draw as after one pass.

Memory: one chunk's activations plus the batch's embeddings (rows × d) and its score matrix; time: one more
forward without a graph (about +⅓ of a step).

What is identical, precisely:

- **The gradient is the exact gradient of the loss of pass 1's embeddings** (and of pass 3's, which are the
  same numbers: same chunks, same inputs, same dropout masks). It equals, within float rounding (≤ 1e-5, tested),
  the plain forward + backward of the batch done chunk by chunk, keeping every chunk's graph.
- **Dropout off** (or eval mode): it equals the plain one-forward path's gradient within float rounding
  (≤ 1e-5, tested): a row's embedding does not depend on the rows beside it.
- **Dropout on**: masks are drawn per forward call for the call's whole input tensor, so they depend on how
  rows are grouped into calls. Unsupervised SimCSE's twins stay in ONE forward per chunk (``[anchors;
  anchors]`` of the chunk: two rows, two independent masks, exactly as in the plain path) and the replay gives
  the loss's embeddings and the gradient's graph the same masks. But the masks are NOT the draws the plain
  path makes for the same seed on the unchunked batch (a (2N, L, H) tensor per draw instead of (2B, L, H)),
  so a cached run and a plain run of the same seed follow different (equally distributed) dropout noise;
  their losses agree in distribution, not bitwise. With ``cache_chunk`` ≥ the local batch there is one chunk
  and the trainer takes the plain path (:func:`trainer_step`): identical by construction.
- Randomness in ``embed`` that does not come from torch's global generators (a private ``torch.Generator``,
  Python's ``random``) is not replayed and would make the gradient wrong: methods must not do that.

Several processes: pass 2 gathers the embeddings of every process with gradients (the plain path's
semantics: every process's loss sees the global batch's candidates, see :mod:`contrastext.negatives.distributed`);
pass 3 runs outside DistributedDataParallel's forward (so DDP never syncs), and :func:`average_gradients`
all-reduces the accumulated gradients once per optimiser step (mean over processes, as DDP does).

Example::

    >>> parts, total = cached_backward(method, method.collate(examples), chunk_size=64)
    >>> optimizer.step()          # the gradients of the whole batch's loss are in .grad
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager, nullcontext

import torch
import torch.distributed as dist
from torch import Tensor, nn
from torch.utils.checkpoint import get_device_states, set_device_states

from contrastext.errors import ConfigError
from contrastext.runtime.processes import is_distributed, rank_and_world_size
from contrastext.training.config import TrainConfig
from contrastext.training.method import Method, total_loss

Parts = dict[str, Tensor]


class RandContext:
    """The CPU generator's state and those of the CUDA devices of ``tensors`` when created; ``with context:``
    runs its body from those states and puts the generators back as they were before it on exit.

    Example::

        >>> context = RandContext(batch_tensor)
        >>> first = torch.nn.functional.dropout(x, 0.1)
        >>> with context:
        ...     again = torch.nn.functional.dropout(x, 0.1)     # the same mask as `first`
    """

    def __init__(self, *tensors: Tensor) -> None:
        self.cpu_state = torch.get_rng_state()
        self.devices, self.device_states = get_device_states(*tensors)
        self._fork: AbstractContextManager | None = None

    def __enter__(self) -> RandContext:
        self._fork = torch.random.fork_rng(devices=self.devices, enabled=True)
        self._fork.__enter__()
        torch.set_rng_state(self.cpu_state)
        set_device_states(self.devices, self.device_states)
        return self

    def __exit__(self, *exc) -> None:
        assert self._fork is not None
        self._fork.__exit__(*exc)
        self._fork = None


# ---------------------------------------------------------------------------------------------- batches


def trim_padding(batch: dict) -> dict:
    """``batch`` with the trailing columns that are padding in every row removed from each per-token tensor
    (those whose first two dimensions are ``attention_mask``'s). A chunk of a batch padded to the batch's
    longest row is thus padded to its own longest row; left-padded batches are left as they are."""
    mask = batch.get("attention_mask")
    if not isinstance(mask, Tensor) or mask.dim() != 2 or mask.shape[1] == 0:
        return batch
    used = mask.ne(0).any(dim=0)
    columns = used.nonzero()
    length = int(columns.max()) + 1 if columns.numel() else mask.shape[1]
    if length == mask.shape[1]:
        return batch
    shape = tuple(mask.shape)
    return {
        name: value[:, :length] if isinstance(value, Tensor) and value.dim() >= 2 and tuple(value.shape[:2]) == shape
        else value
        for name, value in batch.items()
    }


def split_view_major(batch: dict, views: int, chunk_size: int, trim: bool = True) -> list[dict]:
    """Cut a batch whose rows are view-major (``[view 0 of examples 0..B-1; view 1 of 0..B-1; ...]``, as
    SimCSE collates) into chunks of at most ``chunk_size`` examples, each view-major too, so every view of an
    example lands in the same chunk and ``embed(chunk)`` can be concatenated per view.

    Tensors with ``views·B`` rows are split that way, tensors with ``B`` rows (per-example labels) by example;
    other entries (``views``, scalars) are copied into every chunk. With ``trim``, each chunk is cut to its own
    longest row (:func:`trim_padding`).

    Example::

        >>> chunks = split_view_major({"input_ids": ids_2B_by_L, "attention_mask": mask, "views": 2}, 2, 64)
        >>> [chunk["input_ids"].shape[0] for chunk in chunks]     # 2 rows per example
        [128, 128, ...]
    """
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be a positive number of examples, got {chunk_size}")
    if views < 1:
        raise ValueError(f"views must be at least 1, got {views}")
    tensors = {name: value for name, value in batch.items() if isinstance(value, Tensor) and value.dim() > 0}
    if not tensors:
        raise ValueError("split_view_major needs a batch with tensors")
    reference = tensors.get("attention_mask", tensors.get("input_ids", next(iter(tensors.values()))))
    rows = reference.shape[0]
    if rows % views:
        raise ValueError(f"a batch of {rows} rows cannot hold {views} views of equally many examples")
    examples = rows // views
    chunks = []
    for start in range(0, examples, chunk_size):
        stop = min(start + chunk_size, examples)
        chunk = {}
        for name, value in batch.items():
            if name in tensors and value.shape[0] == rows:
                parts = [value[view * examples + start : view * examples + stop] for view in range(views)]
                chunk[name] = parts[0] if views == 1 else torch.cat(parts, dim=0)
            elif name in tensors and value.shape[0] == examples:
                chunk[name] = value[start:stop]
            else:
                chunk[name] = value
        chunks.append(trim_padding(chunk) if trim else chunk)
    return chunks


def _tensors(batch: dict) -> list[Tensor]:
    return [value for value in batch.values() if isinstance(value, Tensor)]


# --------------------------------------------------------------------------------------------- the step


def check_chunk(method: Method, cache_chunk: int | None, where: str | None = None) -> None:
    """A ConfigError naming ``train.cache_chunk`` (and ``where`` it was set) when it is set for a method without
    cached gradients."""
    if cache_chunk is None:
        return
    where = f"{where}: " if where else ""
    if cache_chunk < 1:
        raise ConfigError(f"{where}train.cache_chunk must be a positive number of examples, got {cache_chunk}")
    if not method.supports_cached_gradients:
        raise ConfigError(
            f"{where}train.cache_chunk={cache_chunk}: {type(method).__name__} has no cached-gradient path (it needs "
            f"a loss computed from per-example embeddings: Method.supports_cached_gradients; the SimCSE method of "
            f"simcse-unsup, simcse-sup and gd has one). Remove train.cache_chunk; a smaller train.batch_size or "
            f"train.grad_accumulation also saves memory, with fewer in-batch negatives"
        )


def check_cache_chunk(method: Method, config: TrainConfig) -> None:
    """:func:`check_chunk` of a run's ``train.cache_chunk``, naming the file or the ``--set`` override."""
    source = config.source or "<config>"
    if "train.cache_chunk" in config.overridden_keys:
        source = f"--set train.cache_chunk (over {source})"
    check_chunk(method, config.train.cache_chunk, source)


def cached_backward(
    method: Method,
    batch: dict,
    chunk_size: int,
    backward: Callable[[Tensor], None] | None = None,
    autocast: Callable[[], AbstractContextManager] = nullcontext,
) -> tuple[Parts, Tensor]:
    """One batch's gradients by GradCache (module docstring): accumulates into the parameters' ``.grad``
    what ``backward(total_loss(method(batch)))`` would, with one chunk's activations alive at a time.

    ``backward(total)`` back-propagates the weighted total loss (default ``total.backward()``; the trainer
    passes Accelerate's, which scales for fp16 and divides by the accumulation steps: the embeddings' gradients
    inherit that scaling). ``autocast()`` wraps every forward (the trainer's mixed precision).
    Returns the loss parts and the total, detached.
    """
    check_chunk(method, chunk_size)
    return _cached_backward(method, batch, method.split_batch(batch, chunk_size), backward, autocast)


def _cached_backward(
    method: Method,
    batch: dict,
    chunks: list[dict],
    backward: Callable[[Tensor], None] | None,
    autocast: Callable[[], AbstractContextManager],
) -> tuple[Parts, Tensor]:
    if not chunks:
        raise ValueError("split_batch returned no chunk")
    run_backward = backward if backward is not None else (lambda total: total.backward())

    # 1. every chunk's embeddings without a graph; the RNG states at the start of each chunk
    contexts: list[RandContext] = []
    cached: list[list[Tensor]] = []
    with torch.no_grad():
        for chunk in chunks:
            contexts.append(RandContext(*_tensors(chunk)))
            with autocast():
                cached.append([view.detach() for view in method.embed(chunk)])
    counts = {len(views) for views in cached}
    if len(counts) != 1:
        raise ValueError(f"embed returned different numbers of views for the chunks of one batch: {sorted(counts)}")

    # 2. the loss of the whole batch from the embeddings; its backward stops at them
    views = [torch.cat([chunk_views[v] for chunk_views in cached], dim=0).requires_grad_(True)
             for v in range(counts.pop())]
    with autocast():
        parts = method.loss_from_embeddings(views, batch)
    total = total_loss(parts, method.loss_weights)
    run_backward(total)
    gradients = [view.grad for view in views]
    del views, cached

    # 3. each chunk again, with its graph and its own dropout masks; backward with the cached gradients
    start = 0
    for chunk, context in zip(chunks, contexts, strict=True):
        with context, autocast():
            embedded = method.embed(chunk)
        rows = embedded[0].shape[0]
        pairs = [(z, g[start : start + rows]) for z, g in zip(embedded, gradients, strict=True) if g is not None]
        start += rows
        if pairs:
            torch.autograd.backward([z for z, _ in pairs], grad_tensors=[g.to(z.dtype) for z, g in pairs])
        del embedded, pairs
    return {name: value.detach() for name, value in parts.items()}, total.detach()


@torch.no_grad()
def average_gradients(parameters: Iterable[nn.Parameter]) -> None:
    """All-reduce (mean over processes) the gradients of ``parameters``, as DistributedDataParallel does after
    a backward. A parameter without a gradient on some processes gets zeros there when another process has one;
    one without a gradient anywhere keeps none. Nothing happens in a single process."""
    if not is_distributed():
        return
    _, world = rank_and_world_size()
    params = [p for p in parameters if p.requires_grad]
    if not params:
        return
    present = torch.tensor([p.grad is not None for p in params], dtype=torch.float32, device=params[0].device)
    dist.all_reduce(present, op=dist.ReduceOp.MAX)
    groups: dict[tuple[torch.device, torch.dtype], list[nn.Parameter]] = {}
    for param, used in zip(params, present.tolist(), strict=True):
        if not used:
            continue
        if param.grad is None:
            param.grad = torch.zeros_like(param)
        groups.setdefault((param.grad.device, param.grad.dtype), []).append(param)
    for group in groups.values():  # one all-reduce per device and dtype
        flat = torch.cat([param.grad.reshape(-1) for param in group])
        dist.all_reduce(flat, op=dist.ReduceOp.SUM)
        flat.div_(world)
        offset = 0
        for param in group:
            count = param.grad.numel()
            param.grad.copy_(flat[offset : offset + count].view_as(param.grad))
            offset += count


def trainer_step(
    model: nn.Module,
    method: Method,
    batch: dict,
    chunk_size: int,
    accelerator,
    grad_accumulation: int,
    last_micro_batch: bool,
) -> tuple[Parts, Tensor]:
    """The trainer's micro-batch with ``train.cache_chunk``: :func:`cached_backward` with Accelerate's
    backward (fp16 scaling, ``/ grad_accumulation``) and autocast; the gradients averaged over processes after
    the last micro-batch of the step. A batch that fits in one chunk takes the plain path (``model(batch)``,
    through DDP): the same result without the extra forward. Returns the parts and the total (detached)."""
    check_chunk(method, chunk_size)
    chunks = method.split_batch(batch, chunk_size)
    if len(chunks) == 1:
        parts = model(batch)
        loss = total_loss(parts, method.loss_weights)
        accelerator.backward(loss / grad_accumulation)
        return {name: value.detach() for name, value in parts.items()}, loss.detach()
    parts, total = _cached_backward(
        method,
        batch,
        chunks,
        backward=lambda loss: accelerator.backward(loss / grad_accumulation),
        autocast=accelerator.autocast,
    )
    if last_micro_batch and accelerator.num_processes > 1:
        average_gradients(method.parameters())
    return parts, total


__all__: Sequence[str] = (
    "RandContext",
    "average_gradients",
    "cached_backward",
    "check_cache_chunk",
    "check_chunk",
    "split_view_major",
    "trainer_step",
    "trim_padding",
)
