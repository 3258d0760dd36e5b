"""RECLAIM: classification fine-tuning regularised by a Wasserstein-constrained critic with active negatives.

"Towards robust and efficient contrastive textual representation learning" (ICLR 2021 submission,
"RECLAIM"). Two feature levels of the same input (§5.1: "u, v are set to be the classification token
embedding (CLS) and the embedded input text representation"): u = the encoder's last-layer ``[CLS]`` vector
and v = the embedded input text (the word-embedding layer's output, mean-pooled over the real tokens,
``EncoderOutput.input_embeddings``; the pooling is not given by the paper). A critic g(u, v) ∈ (0, 1) with
spectral-normalised layers (1-Lipschitz before its sigmoid: :class:`contrastext.objectives.critic.WassersteinCritic`)
tells matching pairs from negatives (paper Eq. 6, its "−" before the halved sums read as "+", as in Eq. 3):

    L_ANS = log g(u_i, v_i) + ½ Σ_{v'∈N_v(i)} log(1 − g(u_i, v')) + ½ Σ_{u'∈N_u(i)} log(1 − g(u', v_i))

``negative_reduction: mean`` replaces each ½ Σ by a mean over the K negatives.

Active negative selection (ANS, §3.3): N_v(i) are the K entries of a memory bank B_v nearest (cosine) to
v_i, excluding i's own row, and N_u(i) likewise from B_u; both banks hold one entry per training example,
start as N(0, I) noise (§3.4; ``bank_init: unit`` for unit-norm rows) and are updated after each optimiser
step by ũ ← (1 − ρ)·u + ρ·ũ (Eq. 7, ρ = ``momentum``; the paper gives no value, see
:class:`contrastext.runs.reclaim.ReclaimArgs`).

Sign convention. The paper maximises L_ANS: total = L_task − λ·L_ANS (Eq. 8). Our part ``ans`` is the loss
to MINIMISE, ``ans = −L_ANS`` (:class:`contrastext.objectives.ans.ANS`, a CriticNCE loss ≥ 0), so the
trainer's total is ``task + λ·ans`` with ``loss_weights = {"task": 1, "ans": λ}``, λ = 0.1 (§5). Encoder,
head and critic all minimise it (the critic is trained jointly, as in the paper).

λ = 0 (``method_args.lam: 0``) skips all ANS work: ``forward`` returns the ``task`` part alone (no critic
forward, no searches, no bank gathers, no v pooling) and ``after_step`` writes nothing, so a step equals plain
fine-tuning's (:class:`~contrastext.methods.classification.FineTuneMethod`, part ``task`` instead of ``ce``).
The banks are not updated either: λ is fixed for a run, so nothing would ever read them. They are still built
(the checkpoint holds the same keys as at λ > 0) and stay at their initial noise.

Ablations (``method_args.negatives``, §5.4): ``topk`` (ANS, the paper's method), ``in_batch`` (the other
rows of the batch, no banks searched), ``random`` (negatives from a random ``random_fraction`` = 80 % of the
bank instead of the nearest ones).

How a recipe becomes this module (its ``method_args``, ``ReclaimArgs``; data, the semi-supervised draw
``labelled_fraction``, banks sized to the training set, evaluator) is :mod:`contrastext.runs.reclaim`; this module
holds the Method, whose constructor takes explicit arguments.

Example::

    >>> method = ReclaimMethod(encoder, get_task("sst2"), num_train=len(train), k=4)
    >>> method(method.collate(train[:8]))          # train: IndexedExample rows
    {'task': tensor(0.70, grad_fn=...), 'ans': tensor(3.47, grad_fn=...)}
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor

from contrastext.errors import ConfigError
from contrastext.methods.classification import ClassificationMethod
from contrastext.models.pooling import mean_pool
from contrastext.negatives.distributed import all_gather_rows


class ReclaimMethod(ClassificationMethod):
    """Encoder + head + critic + two memory banks; parts ``task`` and ``ans``."""

    def __init__(
        self,
        encoder,
        task,
        num_train: int,
        *,
        lam: float = 0.1,
        k: int = 100,
        negatives: Literal["topk", "in_batch", "random"] = "topk",
        negative_reduction: Literal["half_sum", "mean"] = "half_sum",
        momentum: float = 0.5,
        bank_init: Literal["gaussian", "unit"] = "gaussian",
        random_fraction: float = 0.8,
        search: str = "exact",
        search_options: dict | None = None,
        critic_hidden: int = 64,
        head_dropout: float = 0.1,
    ):
        super().__init__(encoder, task, head_dropout=head_dropout)
        from contrastext.objectives.ans import ANS
        from contrastext.objectives.critic import WassersteinCritic

        width = encoder.hidden_size
        if negatives == "topk" and k >= num_train:
            raise ConfigError(
                f"method_args.k: {k} nearest negatives need more than {k} training examples, "
                f"got {num_train}; lower method_args.k or train on more examples"
            )
        self.ans = ANS(
            WassersteinCritic(width, width, hidden=critic_hidden),
            bank_size=num_train,
            dim_u=width,
            dim_v=width,
            k=k,
            momentum=momentum,
            search=search,
            search_options=search_options,
            mode=negatives,
            random_fraction=random_fraction,
            negative_reduction=negative_reduction,
            bank_init=bank_init,
        )
        self.lam = lam
        self.loss_weights = {"task": 1.0, "ans": lam}
        self._pending: list[tuple[Tensor, Tensor, Tensor]] = []

    def features(self, batch: dict) -> tuple[Tensor, Tensor, Tensor]:
        """``(logits, u, v)``: head output, the ``[CLS]`` vector u and the mean input embedding v."""
        output = self.encode_batch(batch)
        u = output.pooled
        v = mean_pool(output.input_embeddings, batch["attention_mask"])
        return self.head(u), u, v

    def forward(self, batch: dict) -> dict[str, Tensor]:
        indices = batch["indices"]
        if bool((indices < 0).any()):
            raise ValueError("RECLAIM trains on IndexedExample rows (its memory banks are addressed by index)")
        if self.lam == 0:  # nothing reads the critic or the banks: plain fine-tuning's step
            return {"task": self.task_loss(self.head(self.encode_batch(batch).pooled), batch["labels"])}
        logits, u, v = self.features(batch)
        parts = {"task": self.task_loss(logits, batch["labels"]), "ans": self.ans(u, v, indices)}
        if self.training:
            self._pending.append((indices.detach(), u.detach(), v.detach()))
        return parts

    @torch.no_grad()
    def after_step(self) -> None:
        """Momentum update of both banks with the features of every forward since the last step, of every
        process (gathered), so the banks stay identical on all ranks. Nothing to do at λ = 0 (no forward
        queued a row)."""
        for indices, u, v in self._pending:
            self.ans.update(all_gather_rows(indices), all_gather_rows(u), all_gather_rows(v))
        self._pending.clear()
