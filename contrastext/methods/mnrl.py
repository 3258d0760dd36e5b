"""Multiple-negatives ranking (MNRL): fine-tune a sentence-transformers model on the user's own pairs.

The most common real fine-tuning job, as sentence-transformers' ``MultipleNegativesRankingLoss`` does it (Henderson
et al. 2017, "Efficient Natural Language Response Suggestion for Smart Reply"; the loss of
``SentenceTransformerTrainer`` examples): for a batch of ``(anchor_i, positive_i[, hard_negative_i])`` rows,

    ℓ_i = −log  exp(s·cos(a_i, p_i)) / Σ_j [exp(s·cos(a_i, p_j)) + exp(s·cos(a_i, n_j))]

with scale ``s = 20`` (``temperature`` τ = 1/s = 0.05): every other positive of the batch, and every hard
negative, is a negative of anchor i. The method is :class:`~contrastext.methods.simcse.SimCSE` with
``supervised=True`` and InfoNCE; this module holds the recipe's arguments and :mod:`contrastext.runs.mnrl`
builds the run.

Unlike the SimCSE recipes, nothing about the model changes: its pooling, Dense layers, normalisation and
``max_seq_length`` are kept (no [CLS] switch, no MLP); ``data.max_length`` truncates the training batches only.

Example::

    contrastext train mnrl --set data.path=pairs.csv --set model=bundled:all-MiniLM-L6-v2
"""

from __future__ import annotations

from pydantic import Field

from contrastext.methods.simcse import SimCSESupArgs


class MNRLArgs(SimCSESupArgs):
    """``method_args`` of ``mnrl``: SimCSE's supervised arguments with the model kept as it is by default."""

    gather: bool = Field(
        default=False,
        description="gather candidates across processes (sentence-transformers' gather_across_devices; "
        "off as there): true gives every process the negatives of all",
    )
    max_seq_length: int | None = Field(
        default=None,
        gt=0,
        description="the saved model's maximum input length; None keeps the model's own (data.max_length only "
        "truncates training batches)",
    )
