"""SimCSE: contrastive learning of sentence embeddings with dropout twins or NLI triplets.

Gao, Yao & Chen, "SimCSE: Simple Contrastive Learning of Sentence Embeddings", EMNLP 2021
(princeton-nlp/SimCSE). Both variants minimise InfoNCE over in-batch candidates, τ = 0.05:

    ℓ_i = −log  exp(sim(h_i, h_i⁺)/τ) / Σ_j [exp(sim(h_i, h_j⁺)/τ) + exp(sim(h_i, h_j⁻)/τ + w·[j = i])]

- ``simcse-unsup`` (Eq. 4): h_i and h_i⁺ are the SAME sentence encoded twice in train mode, the two
  dropout masks being the only augmentation; there are no h⁻ terms. [CLS] pooling with SimCSE's MLP
  (Linear + tanh) in training only (``--pooler_type cls --mlp_only_train``, evaluated as
  ``cls_before_pooler``): here ``pooling: cls`` + ``mlp: train``, written in the recipe.
- ``simcse-sup`` (Eq. 5): (anchor, entailment, contradiction) triplets from NLI; the contradiction is a
  hard negative, ``w`` is ``hard_negative_weight`` (SimCSE's option, 0 by default), added to the logit of
  anchor i's own hard negative. SimCSE's supervised script (run_sup_example.sh) uses ``--pooler_type cls``
  WITHOUT ``--mlp_only_train``: the MLP is kept at test time, here ``mlp: always``, written in the recipe.

``pooling`` and ``mlp`` left unset (None) keep the model as it is: a sentence-transformers model keeps its
pooling, Dense layers and normalisation, and no MLP is added. The recipes apply SimCSE's explicitly, and the
run prints a ``model: pooling mean -> cls, ...`` line saying how the model changed.

n-tuples (anchor, positive, negative_1 … negative_m), e.g. rows with lists of negatives
(:mod:`contrastext.data.readers.ntuples`), give the objective the m negative blocks stacked, ``[n_1; …; n_m]``
((m·B, d), row j·B + i the j-th negative of anchor i), as sentence-transformers' ``MultipleNegativesRankingLoss``
stacks its negative columns: InfoNCE then computes MNRL's loss on the same embeddings.

The batch is encoded in one forward pass ([anchors; positives; negatives] rows), as SimCSE does, so every row
gets its own dropout mask. With several processes (``gather: true``) the embeddings of all processes are
gathered with their gradients and every process computes the loss of the global batch (SimCSE's
``do_mlm``-less ``cl_forward`` gathers z1, z2, z3 the same way).

Cached gradients (``train.cache_chunk: N``, :mod:`contrastext.training.grad_cache`): :meth:`SimCSE.split_batch`
cuts the batch into chunks of N examples, each with all its views (the unsupervised twins stay in one forward,
``[anchors; anchors]`` of the chunk, so they still get two different dropout masks); :meth:`SimCSE.embed`
encodes a chunk and :meth:`SimCSE.loss_from_embeddings` computes the loss (gathered across processes) of the
whole batch's embeddings. ``forward`` is exactly ``loss_from_embeddings(embed(batch), batch)``.

Online hard negatives (``negatives: {source: bank}``, :mod:`contrastext.negatives.online`): with ``negatives`` (an
:class:`~contrastext.negatives.online.OnlineNegatives`) each anchor also gets its ``k`` nearest bank rows as
candidates, constant vectors (detached: no gradient reaches the bank), after the in-batch ones:

    ℓ_i = −log  exp(s(a_i, p_i)/τ) / [Σ_j (exp(s(a_i, p_j)/τ) + exp(s(a_i, n_j)/τ + w·[j = i])) + Σ_m v_im·exp(s(a_i, b_im)/τ)]

(b_im the m-th bank row chosen for anchor i, v_im ∈ {0, 1} whether the slot holds one). InfoNCE only
(:func:`infonce_with_bank`); the rows are addressed by ``IndexedExample.index`` (``batch["indices"]``), and after
each step the bank takes the step's fresh positive and negative embeddings of every process (momentum refresh) or
is encoded again (re-encode refresh). Without ``negatives`` nothing of this runs.

Any objective of :mod:`contrastext.objectives` that takes the batch plugs in: ``loss(anchors, positives)``
for pairs and dropout twins (its ``pair``), ``loss(anchors, positives, negatives)`` for triplets (its
``takes_negatives``); the recipes build them by name with :func:`contrastext.objectives.make_objective` and
refuse a misfit before the model loads (:func:`contrastext.runs.simcse.check_objective_fits`). How a recipe
becomes this module (data, encoder, evaluator) and the recipes' ``method_args`` (``SimCSEUnsupArgs``,
``SimCSESupArgs``, ``MNRLArgs``, ``GDArgs``) are in :mod:`contrastext.runs` (``simcse.py``, ``mnrl.py``, ``gd.py``):
this module holds the Method only.

Example::

    >>> encoder = TextEncoder.from_pretrained(path, pooling="cls", max_seq_length=32, projection="mlp")
    >>> method = SimCSE(encoder, InfoNCE(temperature=0.05), supervised=False)
    >>> method(method.collate([Example(("a cat sleeps",)), Example(("dogs run",))]))
    {'infonce': tensor(0.02, grad_fn=...)}
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from contrastext.data.collate import encoder_inputs, tokenize
from contrastext.data.examples import Example
from contrastext.errors import DataFormatError
from contrastext.negatives.distributed import all_gather_rows, all_gather_with_grad
from contrastext.negatives.online import OnlineNegatives
from contrastext.objectives.checks import upcast
from contrastext.objectives.infonce import InfoNCE
from contrastext.objectives.matryoshka import Matryoshka
from contrastext.objectives.similarity import pairwise_similarity
from contrastext.objectives.temperature import temperature_value
from contrastext.runtime.processes import is_distributed, is_main_process
from contrastext.training.grad_cache import split_view_major
from contrastext.training.method import Method


class SimCSE(Method):
    """InfoNCE between two views of each example (+ its hard negative when the examples are triplets).

    ``views`` is the number of texts encoded per example: 2 for dropout twins (the sentence twice) and
    for (anchor, positive) pairs, 3 for (anchor, positive, hard negative) triplets, 2 + m for n-tuples with m
    negatives. ``loss`` is called as ``loss(anchors, positives)`` (or with the hard negatives, m blocks of B rows
    stacked, as a third argument), so any pair objective of :mod:`contrastext.objectives` fits; its value is the
    loss part ``part_name``.
    """

    def __init__(
        self,
        encoder,
        loss: torch.nn.Module,
        supervised: bool,
        gather: bool = True,
        part_name: str = "infonce",
        negatives: OnlineNegatives | None = None,
    ):
        super().__init__()
        self.encoder = encoder
        self.loss = loss
        self.supervised = supervised
        self.gather = gather
        self.part_name = part_name
        self.loss_weights = {part_name: 1.0}
        if isinstance(loss, Matryoshka):
            self.loss_weights = {f"{part_name}_{dim}": weight for dim, weight in zip(loss.dims, loss.weights, strict=True)}
        if negatives is not None:
            if not (supervised and isinstance(loss, InfoNCE)):
                raise ValueError("SimCSE's bank negatives need supervised rows and the InfoNCE objective")
            self.negatives = negatives  # a submodule only when given: the state of a run without is unchanged
            self._pending: list[tuple[Tensor, list[Tensor]]] = []

    def collate(self, examples: list[Example]) -> dict:
        if not examples:
            raise ValueError("SimCSE.collate got an empty batch")
        if self.supervised:
            views = len(examples[0].texts)
            for example in examples:
                if len(example.texts) != views or views < 2:
                    raise DataFormatError(
                        example.source or "<examples>",
                        None,
                        f"simcse-sup needs (anchor, positive) pairs, (anchor, positive, hard_negative) triplets or "
                        f"(anchor, positive, negative_1 … negative_m) n-tuples, all of one kind; got "
                        f"{len(example.texts)} texts after {views}-text examples",
                    )
            texts = [example.texts[view] for view in range(views) for example in examples]
            batch = tokenize(self.encoder.tokenizer, texts, self.encoder.train_max_length, special_tokens_mask=False)
        else:
            views = 2  # dropout twins: the same tokens twice, two dropout masks
            once = tokenize(
                self.encoder.tokenizer, [example.texts[0] for example in examples], self.encoder.train_max_length,
                special_tokens_mask=False,
            )
            batch = {name: torch.cat([tensor, tensor], dim=0) for name, tensor in once.items()}
        batch["views"] = views
        if getattr(self, "negatives", None) is not None:
            indices = [getattr(example, "index", -1) for example in examples]
            if min(indices) < 0:
                raise ValueError("SimCSE with bank negatives trains on IndexedExample rows (the bank is addressed by row)")
            batch["indices"] = torch.tensor(indices, dtype=torch.long)
        return batch

    supports_cached_gradients = True

    def split_batch(self, batch: dict, chunk_size: int) -> list[dict]:
        """Chunks of at most ``chunk_size`` examples, each holding all views of its examples (view-major rows,
        as :meth:`collate` lays them out), trimmed to the chunk's longest row."""
        return split_view_major(batch, int(batch["views"]), chunk_size)

    def embed(self, batch: dict) -> list[Tensor]:
        """The batch's embeddings split per view: ``[anchors, positives(, negatives)]``, each (B, d); one
        encoder forward for all rows, so every row (each twin too) gets its own dropout mask."""
        embedding = self.encoder(**encoder_inputs(batch)).embedding
        return list(embedding.chunk(int(batch["views"]), dim=0))

    def embed_views(self, batch: dict) -> list[Tensor]:
        """The same as :meth:`embed` (the name the gd diagnostics and the tests use)."""
        return self.embed(batch)

    def loss_from_embeddings(self, views: Sequence[Tensor], batch: dict) -> dict[str, Tensor]:
        """The loss part from the views' embeddings, gathered across processes with ``gather``."""
        views = list(views)
        local = views
        gathered = self.gather and is_distributed()
        if gathered:
            views = [all_gather_with_grad(view) for view in views]
        anchors, positives, *negatives = views
        stacked = None
        if negatives:  # m blocks of B rows, stacked as sentence-transformers stacks its negative columns
            stacked = negatives[0] if len(negatives) == 1 else torch.cat(negatives, dim=0)
        online = getattr(self, "negatives", None)
        if online is not None:
            indices = batch["indices"]
            if self.training:  # the bank's update after the step: this process's rows (gathered there)
                self._pending.append((indices.detach(), [view.detach() for view in local[1:]]))
            if gathered:
                indices = all_gather_rows(indices)
            vectors, valid = online.candidates(anchors, positives, indices)
            return {self.part_name: infonce_with_bank(self.loss, anchors, positives, stacked, vectors, valid)}
        if stacked is not None:
            return self.loss_parts(anchors, positives, stacked)
        return self.loss_parts(anchors, positives)

    def loss_parts(self, *inputs: Tensor) -> dict[str, Tensor]:
        """``{part_name: loss(*inputs)}``; a :class:`~contrastext.objectives.matryoshka.Matryoshka` objective gives
        one part per dim, ``<part_name>_<dim>``, weighed by its weight (``loss_weights``), so the total is its loss."""
        if isinstance(self.loss, Matryoshka):
            return {f"{self.part_name}_{dim}": loss for dim, loss in self.loss.parts(*inputs).items()}
        return {self.part_name: self.loss(*inputs)}

    def forward(self, batch: dict) -> dict[str, Tensor]:
        return self.loss_from_embeddings(self.embed(batch), batch)

    def on_train_start(self, total_steps: int) -> None:
        """The base's, then the bank filled by encoding every text, unless it was (a resumed run's bank)."""
        super().on_train_start(total_steps)
        online = getattr(self, "negatives", None)
        if online is not None and not bool(online.filled):
            seconds = online.fill(self.encode_texts)
            if is_main_process():
                print(f"negatives: bank of {len(online.bank)} texts encoded in {seconds:.1f} s", flush=True)

    @torch.no_grad()
    def after_step(self) -> None:
        """With bank negatives: the momentum update with every process's rows of the step (gathered, so the banks
        stay identical on every rank), then the re-encoding when one is due (its time printed, amortised)."""
        online = getattr(self, "negatives", None)
        if online is None:
            return
        for indices, columns in self._pending:
            online.update(all_gather_rows(indices), [all_gather_rows(column) for column in columns])
        self._pending.clear()
        seconds = online.after_step(self.encode_texts)
        if seconds is not None and is_main_process():
            print(f"negatives: bank re-encoded at step {int(online.steps)} in {seconds:.1f} s "
                  f"({seconds / online.reencode_every:.3f} s a step over {online.reencode_every} steps)", flush=True)

    @torch.no_grad()
    def encode_texts(self, texts: list[str]) -> Tensor:
        """Embeddings of ``texts`` in the space the loss sees (the training projection included), tokenised as
        training batches, with no dropout (eval mode; the training mode restored after)."""
        was_training = self.encoder.training
        self.encoder.eval()
        try:
            batch = tokenize(self.encoder.tokenizer, texts, self.encoder.train_max_length, special_tokens_mask=False)
            device = next(self.encoder.parameters()).device
            output = self.encoder(**{name: tensor.to(device) for name, tensor in encoder_inputs(batch).items()})
            return (output.projected if output.projected is not None else output.embedding).float()
        finally:
            self.encoder.train(was_training)


def infonce_with_bank(loss: InfoNCE, anchors: Tensor, positives: Tensor, negatives: Tensor | None, bank: Tensor,
                      valid: Tensor) -> Tensor:  # fmt: skip
    """``loss(anchors, positives, negatives)`` with each anchor's own extra candidates ``bank`` (B, k, d), constant,
    in the softmax where ``valid`` (B, k): the InfoNCE equation of :mod:`contrastext.objectives.infonce` (its
    temperature, similarity, hard-negative weight, duplicate masking; the backward direction of ``symmetric`` has
    no bank candidates, as it has no hard negatives) with the k columns ``s(a_i, b_im)/τ`` added to row i."""

    def compute(anchors: Tensor, positives: Tensor, negatives: Tensor | None = None,
                positive_ids: Tensor | None = None) -> Tensor:  # fmt: skip
        tau = temperature_value(loss.temperature)
        candidates = positives if negatives is None else torch.cat([positives, negatives], dim=0)
        logits = pairwise_similarity(anchors, candidates, loss.similarity) / tau
        bias = loss._hard_negative_bias(logits)
        if bias is not None:
            logits = logits + bias
        mask = loss._duplicate_mask(positives, candidates, positive_ids)
        if mask is not None:
            logits = logits.masked_fill(mask, float("-inf"))
        extra = upcast(bank.detach()).to(anchors.dtype)
        queries = anchors
        if loss.similarity == "cos":
            queries, extra = torch.nn.functional.normalize(anchors, dim=-1), torch.nn.functional.normalize(extra, dim=-1)
        extra_logits = torch.einsum("bd,bkd->bk", queries, extra) / tau
        extra_logits = extra_logits.masked_fill(~valid.to(extra_logits.device), float("-inf"))
        targets = torch.arange(anchors.shape[0], device=anchors.device)
        result = torch.nn.functional.cross_entropy(torch.cat([logits, extra_logits], dim=1), targets)
        if not loss.symmetric:
            return result
        backward_logits = pairwise_similarity(positives, anchors, loss.similarity) / tau
        backward_mask = loss._duplicate_mask(anchors, anchors, positive_ids)
        if backward_mask is not None:
            backward_logits = backward_logits.masked_fill(backward_mask, float("-inf"))
        return (result + torch.nn.functional.cross_entropy(backward_logits, targets)) / 2

    return loss.checked(compute, anchors, positives, negatives)
