"""Online hard negatives from a kept bank: the ``negatives:`` section of ``mnrl`` and ``simcse-sup``.

The bank (:class:`~contrastext.negatives.bank.MemoryBank`) holds one embedding per DISTINCT text of the training
rows' positive and negative columns (and of an optional corpus): equal texts share one row, found by the text's
hash (a dict). :func:`bank_layout` maps every training row to the bank rows of its texts and to the rows that must
never be its negatives:

- every positive of the row's anchor, over all rows with the same anchor text (a query with several positives,
  one row per positive), and so every text equal to one of them (they are the same bank row);
- the anchor's own text when it is banked (a text is no negative of itself).

Each step, :meth:`OnlineNegatives.candidates` searches the bank (``search``: exact, faiss, ivf; the kept IVF index
is updated in place with the rows written since its last call) for the nearest rows to each anchor, drops the
excluded rows and the margin violators (sentence-transformers' ``mine_hard_negatives`` meaning, with the cosine of
the anchor and its row's positive as the positive's similarity: ``absolute_margin`` drops a candidate when
``score + margin > positive``, ``relative_margin`` when ``score > positive − |positive|·margin``) and keeps the
first ``k``. An anchor left with fewer than ``k`` (a small bank, many dropped) gets ``valid`` False in the empty
slots: they are no candidates at all (logit −∞). The search asks for ``k`` + the widest exclusion list + 1 rows,
and ``MARGIN_POOL``·k + that when a margin is set, since margin violators are the nearest rows.

The candidate vectors are the bank's rows, **constant** (detached): no text is encoded again for its gradient, as
RECLAIM's active negative selection uses its bank rows; the gradient reaches the anchors only.

Refresh (``refresh``):

- ``momentum``: after each optimiser step, the bank rows of the step's positive and negative texts take their
  fresh (detached, training-mode) embeddings by RECLAIM's Eq. 7, ``row ← (1 − ρ)·fresh + ρ·row``; rows of the
  corpus that no training row holds keep their first encoding;
- ``reencode``: every ``reencode_every`` steps every text is encoded again (eval mode: no dropout), in batches;
  the time of each encoding is kept (``encode_seconds``) so that its cost per step, amortised, can be reported.

The bank is first filled by encoding every text before the first step (:meth:`OnlineNegatives.fill`).

State (the bank, the steps taken, whether it was filled) is in registered buffers, so the checkpoint holds it and
a resume continues with the very bank it left (the exact search then gives the uninterrupted run's candidates; the
IVF index is rebuilt from the restored bank). The layout tables are rebuilt from the data (non-persistent).

Memory: 4·dim bytes per bank row (float32; 1,536 B at 384 dims, 3,072 B at 768), plus 8·(texts per row − 1 +
exclusion width) bytes per training row for the tables; ``ivf`` adds its index (≈ 2·dim + 16 bytes a row with
float16 storage); the search itself needs O(B·(chunk + pool)) scores at a time.

With several processes the banks stay identical on every rank: the updates take every process's rows
(:func:`~contrastext.negatives.distributed.all_gather_rows`), and a re-encoding is the same computation everywhere.

Example::

    layout = bank_layout(examples)                        # examples: (anchor, positive[, negatives...]) rows
    online = OnlineNegatives(layout, dim=384, k=8)
    online.fill(encode)                                   # encode(list[str]) -> (n, 384)
    vectors, valid = online.candidates(anchors, positives, indices)    # (B, 8, 384), (B, 8)
    online.update(indices, [positives.detach(), negatives.detach()])   # after the optimiser step
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from contrastext.negatives.bank import MemoryBank
from contrastext.negatives.search import NearestNeighbourSearch, make_search

MARGIN_POOL = 4
"""With a margin, the search asks for ``MARGIN_POOL``·k rows (+ the exclusions): the margin drops the nearest."""

ENCODE_BATCH = 256
"""Texts per forward when the bank is filled or re-encoded."""


@dataclass(frozen=True)
class BankLayout:
    """The bank's texts and, per training row, its texts' bank rows and the rows never to be its negatives.

    ``row_texts`` (N, C): the bank rows of row i's texts after the anchor (positive, then negatives), C = texts per
    row − 1; ``excluded`` (N, E): row i's excluded bank rows, −1 padded (E ≥ 1)."""

    texts: list[str]
    row_texts: Tensor
    excluded: Tensor


def bank_layout(rows: Sequence[Sequence[str]], corpus: Sequence[str] = ()) -> BankLayout:
    """The layout of a bank over the texts after the anchor of each row of ``rows`` (each ``(anchor, positive,
    negatives...)``, all of one length ≥ 2), then ``corpus``; equal texts are one row."""
    if not rows:
        raise ValueError("a bank of hard negatives needs training rows")
    width = len(rows[0])
    if width < 2 or any(len(row) != width for row in rows):
        raise ValueError(f"a bank of hard negatives needs (anchor, positive[, negatives...]) rows of one length, "
                         f"got lengths {sorted({len(row) for row in rows})}")
    position: dict[str, int] = {}

    def row_of(text: str) -> int:
        return position.setdefault(text, len(position))

    row_texts = [[row_of(text) for text in row[1:]] for row in rows]
    for text in corpus:
        row_of(text)
    positives: dict[str, set[int]] = {}
    for row, texts in zip(rows, row_texts, strict=True):
        positives.setdefault(row[0], set()).add(texts[0])
    excluded = []
    for row in rows:
        own = sorted(positives[row[0]])
        if row[0] in position:
            own.append(position[row[0]])
        excluded.append(own)
    most = max(len(own) for own in excluded)
    table = torch.full((len(rows), most), -1, dtype=torch.long)
    for i, own in enumerate(excluded):
        table[i, : len(own)] = torch.tensor(own, dtype=torch.long)
    return BankLayout(list(position), torch.tensor(row_texts, dtype=torch.long), table)


def margin_violations(scores: Tensor, positive: Tensor, absolute_margin: float | None,
                      relative_margin: float | None) -> Tensor:  # fmt: skip
    """(B, n) True where a candidate's ``scores`` break a margin against the (B,) ``positive`` similarities:
    ``score + absolute_margin > positive``, ``score > positive − |positive|·relative_margin`` (sentence-transformers'
    ``mine_hard_negatives``)."""
    dropped = torch.zeros_like(scores, dtype=torch.bool)
    positive = positive.unsqueeze(1)
    if absolute_margin is not None:
        dropped |= scores + absolute_margin > positive
    if relative_margin is not None:
        dropped |= scores > positive - positive.abs() * relative_margin
    return dropped


def first_kept(kept: Tensor, k: int) -> Tensor:
    """(B, k) positions of the first ``k`` True entries of each row of ``kept`` (B, n), order kept; rows with fewer
    are padded with positions of False entries (the caller masks them)."""
    return torch.sort((~kept).to(torch.int8), dim=1, stable=True).indices[:, :k]


class OnlineNegatives(nn.Module):
    """A bank of the training texts' embeddings, searched for ``k`` hard negatives per anchor at every step."""

    def __init__(
        self,
        layout: BankLayout,
        dim: int,
        k: int = 8,
        *,
        refresh: str = "momentum",
        momentum: float = 0.5,
        reencode_every: int = 1000,
        search: str | NearestNeighbourSearch = "exact",
        absolute_margin: float | None = None,
        relative_margin: float | None = None,
    ):
        super().__init__()
        if refresh not in ("momentum", "reencode"):
            raise ValueError(f"OnlineNegatives refresh must be momentum or reencode, got {refresh!r}")
        if k < 1 or k >= len(layout.texts):
            raise ValueError(f"OnlineNegatives needs 1 <= k < the bank's {len(layout.texts)} rows, got k={k}")
        if reencode_every < 1:
            raise ValueError(f"OnlineNegatives reencode_every must be >= 1, got {reencode_every}")
        self.texts = layout.texts
        self.k, self.refresh, self.reencode_every = k, refresh, reencode_every
        self.absolute_margin, self.relative_margin = absolute_margin, relative_margin
        self.search = make_search(search) if isinstance(search, str) else search
        # Placeholder rows until fill(); a private generator leaves torch's global one (dropout) as it was.
        self.bank = MemoryBank(len(layout.texts), dim, momentum=momentum, init="unit",
                               generator=torch.Generator().manual_seed(0))
        self.register_buffer("row_texts", layout.row_texts, persistent=False)
        self.register_buffer("excluded", layout.excluded, persistent=False)
        self.register_buffer("steps", torch.zeros((), dtype=torch.long))
        self.register_buffer("filled", torch.zeros((), dtype=torch.bool))
        self.encode_seconds: list[float] = []

    @property
    def pool(self) -> int:
        """Rows asked of the search per anchor (at most the bank)."""
        margins = self.absolute_margin is not None or self.relative_margin is not None
        wanted = (MARGIN_POOL * self.k if margins else self.k) + self.excluded.size(1) + 1
        return min(wanted, len(self.bank))

    @torch.no_grad()
    def candidates(self, anchors: Tensor, positives: Tensor, indices: Tensor) -> tuple[Tensor, Tensor]:
        """``(vectors (B, k, d), valid (B, k))``: the bank rows chosen for each anchor (detached) and which slots
        hold a candidate; ``indices`` (B,) are the anchors' training rows."""
        indices = indices.to(self.excluded.device)
        anchors = anchors.detach()
        changed = self.bank.take_changed() if self.search.stateful else None
        scores, rows = self.search.topk(anchors, self.bank.bank, self.pool, changed=changed)
        rows = rows.to(self.excluded.device)
        kept = ~(rows.unsqueeze(2) == self.excluded[indices].unsqueeze(1)).any(dim=2)
        if self.absolute_margin is not None or self.relative_margin is not None:
            positive = F.cosine_similarity(anchors.float(), positives.detach().float(), dim=1)
            dropped = margin_violations(scores.to(positive), positive.to(scores.device), self.absolute_margin,
                                        self.relative_margin)  # fmt: skip
            kept &= ~dropped.to(kept.device)
        chosen = first_kept(kept, self.k)
        valid = kept.gather(1, chosen)
        vectors = self.bank.get(rows.gather(1, chosen))
        return vectors.to(anchors.device), valid.to(anchors.device)

    @torch.no_grad()
    def update(self, indices: Tensor, columns: Sequence[Tensor]) -> None:
        """``refresh: momentum``: the bank rows of the texts after the anchor of training rows ``indices`` (n,) take
        ``columns`` (one (n, d) tensor per text: positive, negatives...) by Eq. 7. Nothing under ``reencode``."""
        if self.refresh != "momentum" or not len(columns):
            return
        rows = self.row_texts[indices.to(self.row_texts.device)][:, : len(columns)]
        values = torch.stack([column.detach() for column in columns], dim=1)  # (n, C, d), rows' order
        self.bank.update(rows.reshape(-1), values.reshape(-1, values.size(-1)))

    @torch.no_grad()
    def fill(self, encode: Callable[[list[str]], Tensor]) -> float:
        """Every bank row from ``encode`` (texts -> (n, d)); returns the seconds it took (also kept)."""
        start = time.perf_counter()
        for begin in range(0, len(self.texts), ENCODE_BATCH):
            part = encode(self.texts[begin : begin + ENCODE_BATCH])
            self.bank.bank[begin : begin + part.size(0)] = part.detach().to(self.bank.bank)
        self.filled.fill_(True)
        seconds = time.perf_counter() - start
        self.encode_seconds.append(seconds)
        return seconds

    def after_step(self, encode: Callable[[list[str]], Tensor]) -> float | None:
        """Count the step; under ``reencode``, every ``reencode_every`` steps fill the bank again: the seconds it
        took, else None."""
        self.steps += 1
        if self.refresh == "reencode" and int(self.steps) % self.reencode_every == 0:
            return self.fill(encode)
        return None

    def report(self) -> dict[str, float | int]:
        """The bank's rows, bytes per row, and the encodings' time (the first fill included): total, and per step
        taken so far."""
        steps = int(self.steps)
        total = sum(self.encode_seconds)
        return {
            "bank_rows": len(self.bank),
            "bytes_per_row": self.bank.bank.element_size() * self.bank.dim,
            "encodings": len(self.encode_seconds),
            "encode_seconds": round(total, 3),
            "encode_seconds_per_step": round(total / steps, 4) if steps else 0.0,
        }

    def extra_repr(self) -> str:
        return (f"rows={len(self.bank)}, k={self.k}, refresh={self.refresh!r}, search={type(self.search).__name__}, "
                f"absolute_margin={self.absolute_margin}, relative_margin={self.relative_margin}")
