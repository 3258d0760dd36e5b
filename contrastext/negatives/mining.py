"""Offline hard-negative mining from (query, positive) rows, as sentence-transformers' ``mine_hard_negatives`` does.

The options have ST's names and meanings (``sentence_transformers.util.hard_negatives.mine_hard_negatives``, v6):

1. the corpus is the distinct texts of ``corpus`` (``--corpus``) followed by the positives, or the distinct
   positives alone; the queries are the distinct anchors (a query given with several positives keeps them all);
2. everything is embedded once, L2-normalised, and each query's ``range_max + max_positives + 1`` nearest corpus
   texts (the extra one: the query's own text, when the corpus holds it) are found by cosine similarity (``search``: any registered search, :data:`contrastext.negatives.search.SEARCHES`:
   ``exact``, chunked matrix products; ``faiss``, a flat inner-product index; ``ivf``, faiss's approximate inverted
   lists, built once over the corpus), ``query_chunk_size`` queries at a time;
   ``range_max`` defaults to ``range_min + num_negatives + max_positives``, or ``range_min + 10·num_negatives +
   max_positives`` when a margin or ``max_score`` is set (``max_positives``: the most rows of one query);
3. a query's own positives are removed (unless ``include_positives``), then candidates that fail a filter:
   ``absolute_margin`` (score + margin > the query's lowest positive score), ``relative_margin`` (score >
   lowest positive − |lowest positive|·margin), ``max_score`` (score > it), ``min_score`` (score < it);
   a query's own text, when the corpus holds it, is never its candidate (ST ≥ 6.3; with ``include_positives`` a
   query that is its own positive keeps it);
4. of the ``range_max`` best left, the first ``range_min`` are skipped and ``num_negatives`` taken: the best
   (``sampling_strategy="top"``) or drawn at random among the valid ones (``"random"``, seeded; ST's draws for
   ``random.seed(seed)``), best first;
5. rows as ``output_format``: ``triplet`` (anchor, positive, negative: one row per negative found),
   ``n-tuple`` (anchor, positive, negative_1 … negative_n: rows with all n found; forced by
   ``include_positives``), ``labeled-pair`` (anchor, text, label: 1 for each positive, 0 for each negative).

:attr:`MinedRows.summary` is ST's printed statistics table (positive, negative and difference scores) and its
lines about skipped candidates and rows that found too few negatives.

Example::

    mined = mine_hard_negatives(queries, positives, encode, options=MiningOptions(num_negatives=5, relative_margin=0.05))
    print("\\n".join(mined.summary))
    mined.columns, mined.rows[0]       # ('query', 'answer', 'negative'), ('q', 'its answer', 'a hard negative')
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import Tensor

from contrastext.errors import ConfigError, EmptyDataError, UnknownNameError
from contrastext.negatives.search import SEARCHES

SAMPLING: tuple[str, ...] = ("top", "random")
MINING_SEARCH_SETTINGS: dict[str, object] = {"exact_below": 0, "storage": "float32"}
"""Settings given to a search that takes them: mining asks for an index whatever the corpus size, with full-precision
codes (the banks' float16 codes save memory that a one-off mining run does not need)."""
OUTPUT_FORMATS: tuple[str, ...] = ("triplet", "n-tuple", "labeled-pair")
EncodeFn = Callable[[list[str]], np.ndarray]


@dataclass(frozen=True)
class MiningOptions:
    """ST's options under their names (see the module docstring), plus the search and its query chunk."""

    range_min: int = 0
    range_max: int | None = None
    max_score: float | None = None
    min_score: float | None = None
    absolute_margin: float | None = None
    relative_margin: float | None = None
    num_negatives: int = 3
    sampling_strategy: str = "top"
    include_positives: bool = False
    output_format: str = "triplet"
    search: str = "exact"
    query_chunk_size: int = 1024
    seed: int = 0

    def check(self) -> None:
        """ConfigError naming the option (as ``--range-min`` …) when a value cannot be used."""
        for name, value, choices in (("--sampling-strategy", self.sampling_strategy, SAMPLING),
                                     ("--output-format", self.output_format, OUTPUT_FORMATS),
                                     ("--search", self.search, SEARCHES.names())):  # fmt: skip
            if value not in choices:
                raise UnknownNameError(f"{name} {value!r}: choose one of {', '.join(choices)}")
        if self.num_negatives < 1:
            raise ConfigError(f"--num-negatives must be at least 1, got {self.num_negatives}")
        if self.range_min < 0:
            raise ConfigError(f"--range-min must be non-negative, got {self.range_min}")
        if self.query_chunk_size < 1:
            raise ConfigError(f"--query-chunk-size must be at least 1, got {self.query_chunk_size}")

    @property
    def filtered(self) -> bool:
        return any(v is not None for v in (self.absolute_margin, self.relative_margin, self.max_score))


@dataclass
class MinedRows:
    """The mined rows (``columns`` names them), the scores behind ST's statistics and the lines to print."""

    columns: tuple[str, ...]
    rows: list[tuple]
    positive_scores: Tensor
    negative_scores: Tensor
    difference_scores: Tensor
    notes: list[str] = field(default_factory=list)
    summary: list[str] = field(default_factory=list)
    negatives_of: list[list[str]] = field(default_factory=list)
    """The negatives of each distinct query, best first (what the tests compare with ST)."""


def derive_range_max(options: MiningOptions, max_positives: int) -> int:
    """ST's default ``range_max`` when none is given."""
    if options.range_max is not None:
        return options.range_max
    if options.filtered:
        return options.range_min + options.num_negatives * 10 + max_positives
    return options.range_min + options.num_negatives + max_positives


def search_candidates(
    query_embeddings: Tensor, corpus_embeddings: Tensor, k: int, search: str, query_chunk_size: int,
    progress: Callable[[int], None] | None = None,
) -> tuple[Tensor, Tensor]:
    """Each query's ``k`` best corpus rows by cosine (scores, indices), padded with −inf / −1 past the corpus."""
    available = min(k, corpus_embeddings.size(0))
    scores_list, indices_list = [], []
    accepted = SEARCHES.accepted_arguments(search)
    searcher = SEARCHES.make(search, **{key: v for key, v in MINING_SEARCH_SETTINGS.items() if key in accepted})
    for start in range(0, query_embeddings.size(0), query_chunk_size):
        chunk = query_embeddings[start : start + query_chunk_size]
        changed = None if start == 0 else torch.empty(0, dtype=torch.long)  # the corpus is fixed: index it once
        scores, indices = searcher.topk(chunk, corpus_embeddings, available, changed=changed)
        scores_list.append(scores.float())
        indices_list.append(indices.long())
        if progress is not None:
            progress(chunk.size(0))
    scores, indices = torch.cat(scores_list), torch.cat(indices_list)
    missing = k - scores.size(1)
    if missing > 0:
        scores = torch.cat([scores, scores.new_full((scores.size(0), missing), -float("inf"))], dim=1)
        indices = torch.cat([indices, indices.new_full((indices.size(0), missing), -1)], dim=1)
    scores[indices == -1] = -float("inf")
    return scores, indices


def _row_format(values: Sequence[str]) -> str:
    return "{:<6} {:>14} {:>14} {:>14}".format(*values)


def statistics_table(positive: Tensor, negative: Tensor, difference: Tensor) -> list[str]:
    """ST's printed table: count, mean, median, std, min, quartiles, max of the three score lists."""

    def shown(value) -> str:
        return f"{value.item():.4f}" if isinstance(value, Tensor) else f"{value:,}"

    lines = [_row_format(["Metric", "Positive", "Negative", "Difference"]),
             _row_format(["Count", shown(len(positive)), shown(len(negative)), ""])]  # fmt: skip
    functions = [
        ("mean", torch.mean), ("median", torch.median), ("std", torch.std),
        ("min", lambda s: torch.min(s) if s.numel() > 0 else float("inf")),
        ("25%", lambda s: torch.quantile(s.float(), q=0.25) if s.numel() > 0 else float("inf")),
        ("50%", lambda s: torch.quantile(s.float(), q=0.5) if s.numel() > 0 else float("inf")),
        ("75%", lambda s: torch.quantile(s.float(), q=0.75) if s.numel() > 0 else float("inf")),
        ("max", lambda s: torch.max(s) if s.numel() > 0 else float("-inf")),
    ]  # fmt: skip
    for metric, function in functions:
        lines.append(_row_format([metric.capitalize(), shown(function(positive)), shown(function(negative)),
                                  shown(function(difference))]))  # fmt: skip
    return lines


def mine_hard_negatives(
    queries: Sequence[str],
    positives: Sequence[str],
    encode: EncodeFn,
    corpus: Sequence[str] | None = None,
    options: MiningOptions | None = None,
    anchor_name: str = "anchor",
    positive_name: str = "positive",
    progress: Callable[[int], None] | None = None,
) -> MinedRows:
    """Mine hard negatives for (``queries[i]``, ``positives[i]``) rows; ``encode(texts)`` returns their embeddings
    (normalised here). ``progress(n)`` is called after each chunk of ``n`` queries is searched."""
    options = options or MiningOptions()
    options.check()
    if not queries:
        raise EmptyDataError("no (query, positive) rows to mine from")
    if len(queries) != len(positives):
        raise ValueError(f"{len(queries)} queries but {len(positives)} positives")
    output_format = "n-tuple" if options.include_positives else options.output_format
    notes: list[str] = []
    counts = Counter(queries)
    max_positives = max(counts.values())
    range_max = derive_range_max(options, max_positives)
    if options.range_max is None:
        notes.append(f"Setting range_max to {range_max} based on the provided parameters.")
    if options.range_min >= range_max:
        raise ConfigError(f"--range-min must be smaller than --range-max, got {options.range_min} and {range_max}")
    if options.num_negatives > range_max - options.range_min:
        raise ConfigError(
            f"cannot mine {options.num_negatives} negatives per query: only {range_max - options.range_min} "
            f"candidates remain after skipping the first --range-min {options.range_min} of --range-max {range_max}"
        )

    texts = list(dict.fromkeys(list(corpus if corpus is not None else positives) + list(positives)))
    corpus_index = {text: index for index, text in enumerate(texts)}
    unique_queries = list(dict.fromkeys(queries))
    query_index = {query: index for index, query in enumerate(unique_queries)}
    n_queries = len(unique_queries)
    if n_queries != len(queries):
        notes.append(f"Found {n_queries} unique queries out of {len(queries)} total queries.")
    if max_positives > 1:
        notes.append(f"Found an average of {np.mean(list(counts.values())):.3f} positives per query.")

    corpus_embeddings = _normalised(encode(texts))
    query_embeddings = _normalised(encode(unique_queries))
    k = range_max + max_positives + 1  # ST >= 6.3: one more, for the query's own text in the corpus
    scores, indices = search_candidates(query_embeddings, corpus_embeddings, k, options.search,
                                        options.query_chunk_size, progress)  # fmt: skip

    positive_lists: list[list[int]] = [[] for _ in range(n_queries)]
    for query, positive in zip(queries, positives, strict=True):
        own = positive_lists[query_index[query]]
        if corpus_index[positive] not in own:
            own.append(corpus_index[positive])
    n_positives = [len(own) for own in positive_lists]
    widest = max(n_positives)
    padded = torch.full((n_queries, widest), -2, dtype=torch.long)
    for row, own in enumerate(positive_lists):
        padded[row, : len(own)] = torch.tensor(own)
    flat_queries = torch.repeat_interleave(torch.arange(n_queries), torch.tensor(n_positives))
    flat_positives = torch.cat([torch.tensor(own) for own in positive_lists])
    positive_scores = (query_embeddings[flat_queries] * corpus_embeddings[flat_positives]).sum(dim=1)

    own_text = torch.tensor([corpus_index.get(query, -1) for query in unique_queries])
    if options.include_positives:  # a query that is its own positive keeps itself (ST)
        for query, positive in zip(queries, positives, strict=True):
            if query == positive:
                own_text[query_index[query]] = -1
    scores[(indices == own_text.unsqueeze(1)) & (indices != -1)] = -float("inf")
    if not options.include_positives:
        scores[(indices.unsqueeze(2) == padded.unsqueeze(1)).any(dim=2)] = -float("inf")
    candidates = scores.numel()
    skipped: dict[str, tuple[int, float]] = {}

    def drop(name: str, removed: Tensor, count_after: bool = True) -> None:
        nonlocal candidates
        number = int(removed.sum().item())
        scores[removed] = -float("inf")
        if number:
            skipped[name] = (number, number / candidates)
            if count_after:
                candidates -= number

    if options.absolute_margin is not None or options.relative_margin is not None:
        lowest = torch.full((n_queries, widest), float("inf"))
        lowest[torch.arange(widest).unsqueeze(0) < torch.tensor(n_positives).unsqueeze(1)] = positive_scores
        lowest = lowest.min(dim=1).values.unsqueeze(1)
        if options.absolute_margin is not None:
            drop("absolute_margin", scores + options.absolute_margin > lowest)
        if options.relative_margin is not None:
            drop("relative_margin", scores > lowest - lowest.abs() * options.relative_margin)
    if options.max_score is not None:
        drop("max_score", scores > options.max_score, count_after=False)
    if options.min_score is not None:
        drop("min_score", scores < options.min_score, count_after=False)

    negative_scores, local = torch.topk(scores, k=range_max, dim=1)
    rows = torch.arange(n_queries).unsqueeze(1)
    indices = indices[rows, local][:, options.range_min :]
    negative_scores = negative_scores[:, options.range_min :]
    n = options.num_negatives
    if options.sampling_strategy == "top":
        indices, negative_scores = indices[:, :n], negative_scores[:, :n]
    else:
        draw = random.Random(options.seed)
        options_left = (indices.size(1) - negative_scores.isinf().sum(1)).clamp(min=n)
        sampled = torch.tensor([draw.sample(range(int(count)), k=n) for count in options_left])
        indices, negative_scores = indices[rows, sampled], negative_scores[rows, sampled]
        negative_scores, order = negative_scores.sort(dim=1, descending=True)
        indices = indices[rows, order]

    found = negative_scores != -float("inf")
    negatives_of = [[texts[i] for i, ok in zip(row, keep, strict=True) if ok]
                    for row, keep in zip(indices.tolist(), found.tolist(), strict=True)]  # fmt: skip
    per_positive = torch.repeat_interleave(negative_scores, torch.tensor(n_positives), dim=0)
    positive_matrix = positive_scores.unsqueeze(1).expand(-1, n)
    out_rows: list[tuple] = []
    if output_format == "triplet":
        columns = (anchor_name, positive_name, "negative")
        for query_row, positive_row in zip(flat_queries.tolist(), flat_positives.tolist(), strict=True):
            for negative in negatives_of[query_row]:
                out_rows.append((unique_queries[query_row], texts[positive_row], negative))
        kept = per_positive != -float("inf")
        maximum = kept.numel()
    elif output_format == "n-tuple":
        columns = (anchor_name, positive_name, *(f"negative_{i}" for i in range(1, n + 1)))
        complete = found.all(dim=1)
        for query_row, positive_row in zip(flat_queries.tolist(), flat_positives.tolist(), strict=True):
            if complete[query_row]:
                out_rows.append((unique_queries[query_row], texts[positive_row], *negatives_of[query_row]))
        kept = per_positive != -float("inf")
        kept = kept & kept.all(dim=1, keepdim=True)
        maximum = len(flat_queries)
    else:
        columns = (anchor_name, positive_name, "label")
        for query_row in range(n_queries):
            out_rows.extend((unique_queries[query_row], texts[p], 1) for p in positive_lists[query_row])
            out_rows.extend((unique_queries[query_row], negative, 0) for negative in negatives_of[query_row])
        kept = per_positive != -float("inf")
        maximum = n_queries * n + len(queries)
    mined_negative_scores = per_positive[kept]
    difference = positive_matrix[kept] - mined_negative_scores

    summary = ["Negative candidates mined, preparing dataset...",
               *statistics_table(positive_scores, mined_negative_scores, difference)]  # fmt: skip
    for name in ("absolute_margin", "relative_margin", "max_score", "min_score"):
        if name in skipped:
            number, ratio = skipped[name]
            summary.append(f"Skipped {number:,} potential negatives ({ratio:.2%}) due to the {name} of "
                           f"{getattr(options, name)}.")  # fmt: skip
    missing = maximum - len(out_rows)
    if missing > 0:
        solutions = ["range_max"] + [name for name, used in (
            ("range_min", options.range_min > 0), ("absolute_margin", options.absolute_margin is not None),
            ("relative_margin", options.relative_margin is not None), ("max_score", options.max_score is not None),
        ) if used]  # fmt: skip
        considered = ", ".join(solutions[:-1]) + " and " + solutions[-1] if len(solutions) > 1 else solutions[0]
        summary.append(
            f"Could not find enough negatives for {missing} samples ({missing / maximum:.2%}). Consider adjusting "
            f"the {considered} parameter{'s' if len(solutions) > 1 else ''} if you'd like to find more valid negatives."
        )
    return MinedRows(columns, out_rows, positive_scores, mined_negative_scores, difference, notes, summary,
                     negatives_of)  # fmt: skip


def _normalised(embeddings) -> Tensor:
    matrix = torch.as_tensor(np.asarray(embeddings, dtype=np.float32))
    return torch.nn.functional.normalize(matrix, p=2, dim=1)
