"""Views: random corruptions of tokenised text, for contrastive pairs (SimCSE, CAPT) and MLM.

A view takes a token batch, a dict of ``[batch, length]`` tensors with at least ``input_ids``,
``attention_mask`` and ``special_tokens_mask`` (1 on [CLS], [SEP] and [PAD]; ``token_type_ids`` is
carried along when present) and returns a new dict of the same form. Special tokens are never
corrupted. Every random draw comes from the ``generator`` argument, so a seeded generator gives the
same view on every run.

- ``identity``: the same ids (SimCSE's views differ by dropout only);
- ``token_mask``: BERT's masking: ``probability`` (15%) of the tokens are chosen; of those 80% become
  [MASK], 10% a random token, 10% stay; adds ``labels`` (the original id where chosen, -100 elsewhere);
- ``span_mask``: SpanBERT-style contiguous spans (length ~ Geometric(p), at most ``max_span``) until
  about ``probability`` of the tokens are chosen, then 80/10/10 as above; adds ``labels``;
- ``shuffle``: local shuffling with window ``k`` (Lample et al. 2018, §2.3: sort positions by ``i + U(0, α)``
  with ``α = k + 1``): no token moves more than ``k`` places, and never across a special token;
- ``delete``: each token is dropped with ``probability`` (at least one is kept), rows are re-padded;
- ``substitute``: each token is replaced by a uniformly random vocabulary id with ``probability``.

Example::

    >>> batch = tokenizer(texts, padding=True, return_tensors="pt", return_special_tokens_mask=True)
    >>> view = make_view("token_mask", mask_token_id=tokenizer.mask_token_id, vocab_size=len(tokenizer))
    >>> corrupted = view(dict(batch), generator=torch.Generator().manual_seed(0))
    >>> corrupted["labels"]  # -100 where nothing was masked
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from contrastext.runtime.registry import Registry

IGNORE_INDEX = -100
TokenBatch = dict[str, Tensor]
REQUIRED_KEYS = ("input_ids", "attention_mask", "special_tokens_mask")


def _check(batch: TokenBatch) -> None:
    missing = [key for key in REQUIRED_KEYS if key not in batch]
    if missing:
        raise ValueError(
            f"a view needs a token batch with {', '.join(REQUIRED_KEYS)}; missing {', '.join(missing)} "
            "(tokenize with return_special_tokens_mask=True)"
        )
    shape = batch["input_ids"].shape
    if batch["input_ids"].dim() != 2:
        raise ValueError(f"input_ids must be [batch, length], got shape {tuple(shape)}")
    for key, value in batch.items():
        if isinstance(value, Tensor) and value.shape != shape:
            raise ValueError(f"{key} has shape {tuple(value.shape)}, expected {tuple(shape)} like input_ids")


def _corruptible(batch: TokenBatch) -> Tensor:
    """True where a token may be corrupted: attended and not special."""
    return batch["attention_mask"].bool() & ~batch["special_tokens_mask"].bool()


def _copy(batch: TokenBatch) -> TokenBatch:
    return {key: value.clone() if isinstance(value, Tensor) else value for key, value in batch.items()}


def _uniform(shape: torch.Size, generator: torch.Generator | None, device: torch.device) -> Tensor:
    return torch.rand(shape, generator=generator).to(device)


class View:
    """Base class: ``view(batch, generator) -> batch``."""

    name = "view"

    def __call__(self, batch: TokenBatch, generator: torch.Generator | None = None) -> TokenBatch:
        _check(batch)
        return self.apply(_copy(batch), generator)

    def apply(self, batch: TokenBatch, generator: torch.Generator | None) -> TokenBatch:
        raise NotImplementedError


class Identity(View):
    """The same token ids (the two views of SimCSE differ by dropout alone)."""

    name = "identity"

    def apply(self, batch: TokenBatch, generator: torch.Generator | None) -> TokenBatch:
        return batch


def _bert_replace(
    batch: TokenBatch, chosen: Tensor, mask_token_id: int, vocab_size: int, generator
) -> TokenBatch:
    """BERT's 80/10/10 on the ``chosen`` positions; sets ``labels``."""
    ids = batch["input_ids"]
    labels = torch.where(chosen, ids, torch.full_like(ids, IGNORE_INDEX))
    draw = _uniform(ids.shape, generator, ids.device)
    to_mask = chosen & (draw < 0.8)
    to_random = chosen & (draw >= 0.8) & (draw < 0.9)
    random_ids = torch.randint(vocab_size, ids.shape, generator=generator).to(ids.device)
    ids = torch.where(to_mask, torch.full_like(ids, mask_token_id), ids)
    batch["input_ids"] = torch.where(to_random, random_ids, ids)
    batch["labels"] = labels
    return batch


class TokenMask(View):
    """BERT masking: choose ``probability`` of tokens; 80% -> [MASK], 10% -> random id, 10% kept."""

    name = "token_mask"

    def __init__(self, mask_token_id: int, vocab_size: int, probability: float = 0.15) -> None:
        if not 0.0 <= probability <= 1.0:
            raise ValueError(f"token_mask probability must be in [0, 1], got {probability}")
        self.mask_token_id, self.vocab_size, self.probability = mask_token_id, vocab_size, probability

    def apply(self, batch: TokenBatch, generator: torch.Generator | None) -> TokenBatch:
        ids = batch["input_ids"]
        chosen = (_uniform(ids.shape, generator, ids.device) < self.probability) & _corruptible(batch)
        return _bert_replace(batch, chosen, self.mask_token_id, self.vocab_size, generator)


class SpanMask(View):
    """SpanBERT masking: spans of Geometric(``p``) length (≤ ``max_span``) until ~``probability`` chosen."""

    name = "span_mask"

    def __init__(
        self,
        mask_token_id: int,
        vocab_size: int,
        probability: float = 0.15,
        p: float = 0.2,
        max_span: int = 10,
    ) -> None:
        if not 0.0 <= probability <= 1.0 or not 0.0 < p <= 1.0 or max_span < 1:
            raise ValueError(
                f"span_mask needs 0<=probability<=1, 0<p<=1, max_span>=1; got {probability}, {p}, {max_span}"
            )
        self.mask_token_id, self.vocab_size = mask_token_id, vocab_size
        self.probability, self.p, self.max_span = probability, p, max_span

    def apply(self, batch: TokenBatch, generator: torch.Generator | None) -> TokenBatch:
        allowed = _corruptible(batch).cpu()
        chosen = torch.zeros_like(allowed)
        log_fail = torch.log1p(torch.tensor(-self.p, dtype=torch.float64))
        for row in range(allowed.shape[0]):
            positions = allowed[row].nonzero().flatten()
            target = round(self.probability * len(positions))
            for _ in range(4 * max(target, 1)):  # bounded: spans may overlap
                if int(chosen[row].sum()) >= target:
                    break
                # Geometric draws failures before the first success; +1 gives lengths >= 1.
                uniform = torch.rand((), generator=generator, dtype=torch.float64).clamp_min(1e-12)
                length = min(int(torch.floor(torch.log(uniform) / log_fail)) + 1, self.max_span)
                length = min(length, target - int(chosen[row].sum()))
                start = int(positions[torch.randint(len(positions), (), generator=generator)])
                span = torch.arange(start, min(start + length, allowed.shape[1]))
                chosen[row, span] = allowed[row, span]
        chosen = chosen.to(batch["input_ids"].device)
        return _bert_replace(batch, chosen, self.mask_token_id, self.vocab_size, generator)


def _runs(mask_row: Tensor) -> list[tuple[int, int]]:
    """[start, end) of each run of True in a 1-D bool tensor."""
    runs, start = [], None
    for index, value in enumerate(mask_row.tolist()):
        if value and start is None:
            start = index
        elif not value and start is not None:
            runs.append((start, index))
            start = None
    if start is not None:
        runs.append((start, len(mask_row)))
    return runs


class Shuffle(View):
    """Local shuffling: inside each run of ordinary tokens, sort positions by ``q_i = i + U(0, k + 1)``.

    Lample et al. 2018 (§2.3) draw ``q_i = i + U(0, α)`` and take α = k + 1 so that the permutation σ
    that sorts q verifies |σ(i) − i| ≤ k: tokens i < j can swap only when j − i < α, so a token moves
    at most k places (and can move exactly k). CAPT (§5.2) follows them with k = 3.
    """

    name = "shuffle"

    def __init__(self, k: int = 3) -> None:
        if k < 1:
            raise ValueError(f"shuffle window k must be >= 1, got {k}")
        self.k = k

    def apply(self, batch: TokenBatch, generator: torch.Generator | None) -> TokenBatch:
        allowed = _corruptible(batch).cpu()
        ids = batch["input_ids"]
        for row in range(ids.shape[0]):
            for start, end in _runs(allowed[row]):
                keys = torch.arange(end - start, dtype=torch.float64) + (self.k + 1) * torch.rand(
                    end - start, generator=generator, dtype=torch.float64
                )
                order = torch.argsort(keys, stable=True).to(ids.device)
                ids[row, start:end] = ids[row, start:end][order]
        return batch


class Delete(View):
    """Token deletion: each ordinary token is dropped with ``probability``; rows are re-padded."""

    name = "delete"

    def __init__(self, probability: float = 0.1, pad_token_id: int = 0) -> None:
        if not 0.0 <= probability < 1.0:
            raise ValueError(f"delete probability must be in [0, 1), got {probability}")
        self.probability, self.pad_token_id = probability, pad_token_id

    def apply(self, batch: TokenBatch, generator: torch.Generator | None) -> TokenBatch:
        allowed = _corruptible(batch)
        attended = batch["attention_mask"].bool()
        drop = (_uniform(allowed.shape, generator, allowed.device) < self.probability) & allowed
        # Never delete every ordinary token of a row: keep the first one back.
        emptied = (allowed & ~drop).sum(dim=1) == 0
        first = allowed.float().argmax(dim=1)
        rows = emptied.nonzero().flatten()
        drop[rows, first[rows]] = False
        keep = attended & ~drop
        length = int(keep.sum(dim=1).max())
        result = {}
        for key, value in batch.items():
            if not isinstance(value, Tensor):
                result[key] = value
                continue
            fill = self.pad_token_id if key == "input_ids" else (1 if key == "special_tokens_mask" else 0)
            out = torch.full((value.shape[0], length), fill, dtype=value.dtype, device=value.device)
            for row in range(value.shape[0]):
                kept = value[row][keep[row]]
                out[row, : len(kept)] = kept
            result[key] = out
        return result


class Substitute(View):
    """Token substitution: each ordinary token becomes a uniformly random id with ``probability``."""

    name = "substitute"

    def __init__(self, vocab_size: int, probability: float = 0.1) -> None:
        if not 0.0 <= probability <= 1.0:
            raise ValueError(f"substitute probability must be in [0, 1], got {probability}")
        self.vocab_size, self.probability = vocab_size, probability

    def apply(self, batch: TokenBatch, generator: torch.Generator | None) -> TokenBatch:
        ids = batch["input_ids"]
        chosen = (_uniform(ids.shape, generator, ids.device) < self.probability) & _corruptible(batch)
        random_ids = torch.randint(self.vocab_size, ids.shape, generator=generator).to(ids.device)
        batch["input_ids"] = torch.where(chosen, random_ids, ids)
        return batch


VIEWS: Registry[Callable[..., View]] = Registry(
    "view", {view.name: view for view in (Identity, TokenMask, SpanMask, Shuffle, Delete, Substitute)}
)
"""The views by name (a :class:`~contrastext.runtime.registry.Registry`): a new view is one class above and its
entry here; ``VIEWS.check(name, key)`` validates a config value naming a view."""


def make_view(name: str, **kwargs) -> View:
    """Build a view by name (``VIEWS.names()``: ``delete``, ``identity``, ``shuffle``, ``span_mask``, ...); an
    unknown name is an UnknownNameError listing the known ones, an unknown, missing or invalid argument a
    ConfigError naming the view and the key (:meth:`~contrastext.runtime.registry.Registry.make`)."""
    return VIEWS.make(name, **kwargs)
