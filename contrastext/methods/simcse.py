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
from contrastext.negatives.distributed import all_gather_with_grad
from contrastext.objectives.matryoshka import Matryoshka
from contrastext.runtime.processes import is_distributed
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
        if self.gather and is_distributed():
            views = [all_gather_with_grad(view) for view in views]
        anchors, positives, *negatives = views
        if negatives:  # m blocks of B rows, stacked as sentence-transformers stacks its negative columns
            stacked = negatives[0] if len(negatives) == 1 else torch.cat(negatives, dim=0)
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
