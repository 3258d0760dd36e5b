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
step by ũ ← (1 − ρ)·u + ρ·ũ (Eq. 7, ρ = ``momentum``; the paper gives no value, see ``ReclaimArgs``).

Sign convention. The paper maximises L_ANS: total = L_task − λ·L_ANS (Eq. 8). Our part ``ans`` is the loss
to MINIMISE, ``ans = −L_ANS`` (:class:`contrastext.objectives.ans.ANS`, a CriticNCE loss ≥ 0), so the
trainer's total is ``task + λ·ans`` with ``loss_weights = {"task": 1, "ans": λ}``, λ = 0.1 (§5). Encoder,
head and critic all minimise it (the critic is trained jointly, as in the paper).

Ablations (``method_args.negatives``, §5.4): ``topk`` (ANS, the paper's method), ``in_batch`` (the other
rows of the batch, no banks searched), ``random`` (negatives from a random ``random_fraction`` = 80 % of the
bank instead of the nearest ones).

How a recipe becomes this module (data, the semi-supervised draw ``labelled_fraction``, banks sized to the
training set, evaluator) is :mod:`contrastext.runs.reclaim`.

Example::

    >>> method = ReclaimMethod(encoder, get_task("sst2"), num_train=len(train), args=ReclaimArgs(k=4))
    >>> method(method.collate(train[:8]))          # train: IndexedExample rows
    {'task': tensor(0.70, grad_fn=...), 'ans': tensor(3.47, grad_fn=...)}
"""

from __future__ import annotations

from typing import Literal

import torch
from pydantic import Field, field_validator
from torch import Tensor

from contrastext.errors import ConfigError
from contrastext.methods.classification import ClassificationArgs, ClassificationMethod
from contrastext.models.pooling import mean_pool
from contrastext.negatives.distributed import all_gather_rows
from contrastext.negatives.search import SEARCHES
from contrastext.training.config import registered


class ReclaimArgs(ClassificationArgs):
    """``method_args`` of the ``reclaim`` recipe (the paper's value beside each; docs/methods/reclaim.md)."""

    preset: Literal["paper", "practical"] = Field(
        default="paper",
        description="paper: the recipe's paper settings; practical: settings that learn on your own file in a few "
        "hundred steps (lr 3e-5 with 10 % warmup, head_lr 1e-3, k 10); a key given with --set wins "
        "(docs/methods/reclaim.md)",
    )
    lam: float = Field(default=0.1, ge=0, description="λ: weight of the ans part (loss = task + λ·ans); paper §5: 0.1")
    k: int = Field(
        default=100, gt=0, description="K nearest negatives per example and per bank (topk); paper §5.1: 100, "
        "10 in the semi-supervised setting"
    )
    negative_reduction: Literal["half_sum", "mean"] = Field(
        default="half_sum", description="each side's K negative terms: ½ Σ (paper Eq. 6) or the mean (1/K) Σ"
    )
    momentum: float = Field(
        default=0.5, ge=0, lt=1, description="ρ of the bank update ũ ← (1 − ρ)u + ρũ (Eq. 7); the paper gives no "
        "value, 0.5 is Wu et al. 2018's memory-bank momentum"
    )
    bank_init: Literal["gaussian", "unit"] = Field(
        default="gaussian", description="bank rows start as N(0, I) (paper §3.4) or as unit-norm Gaussian draws"
    )
    negatives: Literal["topk", "in_batch", "random"] = Field(default="topk", description="ablation of ANS (§5.4)")
    random_fraction: float = Field(default=0.8, gt=0, le=1, description="share of the bank for negatives=random")
    search: str = Field(
        default="exact", description="top-K search over the banks, any registered search: exact (chunked matmul), "
        "faiss (IndexFlatIP rebuilt per call) or ivf (approximate faiss IVF index kept across steps, only changed "
        "rows re-indexed)"
    )
    search_nlist: int | None = Field(
        default=None, gt=0, description="search=ivf: inverted lists; None: 4·√N (1,038 at SST-2's 67,349 rows)"
    )
    search_nprobe: int | None = Field(
        default=None, gt=0, description="search=ivf: lists scanned per query; None: 2048/√nlist (64 at 67k "
        "rows, 32 at 1M)"
    )
    critic_hidden: int = Field(default=64, gt=0, description="width of the critic's layers; paper appendix: 64")
    labelled_fraction: float | None = Field(
        default=None, gt=0, le=1, description="semi-supervised setting (§5.1): train on a seeded random share "
        "of the labelled training set (the paper: 0.01, 0.05, 0.1, 0.2, 0.3, 0.5, with k=10); None: all of it"
    )
    labelled_seed: int | None = Field(
        default=None, ge=0, description="seed of the labelled_fraction draw; None: the run's seed"
    )

    @field_validator("search")
    @classmethod
    def _a_registered_search(cls, name: str) -> str:
        return registered(name, SEARCHES)


def search_arguments(args: ReclaimArgs) -> dict[str, int]:
    """The constructor arguments of ``args.search`` given by ``search_nlist`` / ``search_nprobe`` (those set); a
    ConfigError when the search does not take one (only ivf's index has inverted lists)."""
    given = {"nlist": args.search_nlist, "nprobe": args.search_nprobe}
    given = {name: value for name, value in given.items() if value is not None}
    accepted = SEARCHES.accepted_arguments(args.search)
    refused = [name for name in given if name not in accepted]
    if refused:
        raise ConfigError(
            f"method_args.search_{' / search_'.join(refused)}: search {args.search!r} takes no {', '.join(refused)} "
            f"(its arguments: {', '.join(accepted) or 'none'}); these apply to search: ivf"
        )
    return given


class ReclaimMethod(ClassificationMethod):
    """Encoder + head + critic + two memory banks; parts ``task`` and ``ans``."""

    def __init__(self, encoder, task, num_train: int, args: ReclaimArgs):
        super().__init__(encoder, task, head_dropout=args.head_dropout)
        from contrastext.objectives.ans import ANS
        from contrastext.objectives.critic import WassersteinCritic

        width = encoder.hidden_size
        if args.negatives == "topk" and args.k >= num_train:
            raise ConfigError(
                f"method_args.k: {args.k} nearest negatives need more than {args.k} training examples, "
                f"got {num_train}; lower method_args.k or train on more examples"
            )
        search_options = search_arguments(args)
        self.ans = ANS(
            WassersteinCritic(width, width, hidden=args.critic_hidden),
            bank_size=num_train,
            dim_u=width,
            dim_v=width,
            k=args.k,
            momentum=args.momentum,
            search=args.search,
            search_options=search_options,
            mode=args.negatives,
            random_fraction=args.random_fraction,
            negative_reduction=args.negative_reduction,
            bank_init=args.bank_init,
        )
        self.loss_weights = {"task": 1.0, "ans": args.lam}
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
        logits, u, v = self.features(batch)
        parts = {"task": self.task_loss(logits, batch["labels"]), "ans": self.ans(u, v, indices)}
        if self.training:
            self._pending.append((indices.detach(), u.detach(), v.detach()))
        return parts

    @torch.no_grad()
    def after_step(self) -> None:
        """Momentum update of both banks with the features of every forward since the last step, of every
        process (gathered), so the banks stay identical on all ranks."""
        for indices, u, v in self._pending:
            self.ans.update(all_gather_rows(indices), all_gather_rows(u), all_gather_rows(v))
        self._pending.clear()
