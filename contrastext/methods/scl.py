"""SCL: fine-tuning with cross-entropy plus a supervised contrastive term (Gunel et al., ICLR 2021).

Gunel, Du, Conneau, Stoyanov, "Supervised Contrastive Learning for Pre-trained Language Model
Fine-tuning", ICLR 2021, Eq. 1–3. With Φ(x) the encoder's last-layer ``[CLS]`` vector (L2-normalised
inside SupCon), a classification head on it and a batch of N labelled examples:

    L = (1 − λ) · L_CE + λ · L_SCL
    L_SCL = mean_i  −1/|P(i)| Σ_{p∈P(i)} log  exp(Φ_i·Φ_p / τ) / Σ_{a≠i} exp(Φ_i·Φ_a / τ)

with P(i) the other examples of i's class (:class:`contrastext.objectives.supcon.CEPlusSupCon`).
The method returns the UNWEIGHTED parts ``ce`` and ``supcon``; ``loss_weights = {"ce": 1 − λ,
"supcon": λ}`` (λ = 0.9, τ = 0.3: the paper's best few-shot setting).

The paper's protocol is several draws: ``method_args.seeds: [1, 2, ...]`` runs one training per seed
(:mod:`contrastext.runs.scl`).

Regression tasks (STS-B): SupCon needs classes, so ``lam > 0`` is a :class:`ConfigError`; ``lam: 0``
is the documented fallback, plain MSE fine-tuning (the part is then called ``mse``).

Example::

    >>> method = SCLMethod(encoder, get_task("sst2"), lam=0.9, temperature=0.3)
    >>> method(method.collate(examples[:16]))
    {'ce': tensor(0.69, grad_fn=...), 'supcon': tensor(2.7, grad_fn=...)}
"""

from __future__ import annotations

from pydantic import Field
from torch import Tensor

from contrastext.errors import ConfigError
from contrastext.methods.classification import ClassificationArgs, ClassificationMethod
from contrastext.objectives.supcon import CEPlusSupCon


class SCLArgs(ClassificationArgs):
    """``method_args`` of the ``scl`` recipe."""

    lam: float = Field(default=0.9, ge=0, le=1, description="λ: weight of SupCon; CE weighs 1 − λ")
    temperature: float = Field(default=0.3, gt=0, description="τ of SupCon")
    seeds: list[int] | None = Field(
        default=None, description="one run per seed (few-shot draw, label noise, training); default: [seed]"
    )


class SCLMethod(ClassificationMethod):
    """Encoder + head on ``[CLS]``; parts ``ce`` and ``supcon`` (or ``mse`` for regression with λ = 0)."""

    def __init__(self, encoder, task, lam: float = 0.9, temperature: float = 0.3, head_dropout: float = 0.1):
        super().__init__(encoder, task, head_dropout=head_dropout)
        if self.is_regression and lam > 0:
            raise ConfigError(
                f"method_args.lam: SupCon needs classes and {task.name} is a regression task; "
                "set method_args.lam=0 for plain MSE fine-tuning"
            )
        self.objective = CEPlusSupCon(lam=lam, temperature=temperature)
        self.loss_weights = {"mse": 1.0} if self.is_regression else dict(self.objective.weights)

    def forward(self, batch: dict) -> dict[str, Tensor]:
        cls = self.encode_batch(batch).pooled
        logits = self.head(cls)
        if self.is_regression:
            return {"mse": self.task_loss(logits, batch["labels"])}
        return self.objective.parts(logits, cls, batch["labels"])
