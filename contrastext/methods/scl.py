"""SCL: fine-tuning with cross-entropy plus a supervised contrastive term (Gunel et al., ICLR 2021).

Gunel, Du, Conneau, Stoyanov, "Supervised Contrastive Learning for Pre-trained Language Model
Fine-tuning", ICLR 2021, Eq. 1–3. With Φ(x) the encoder's last-layer ``[CLS]`` vector (L2-normalised
inside SupCon), a classification head on it and a batch of N labelled examples:

    L      = (1 − λ) · L_CE + λ · L_SCL                                                          (Eq. 1)
    L_SCL  = Σ_{i=1}^{N} −1/(N_{y_i} − 1) Σ_{j≠i, y_j=y_i} log exp(Φ_i·Φ_j/τ) / Σ_{k≠i} exp(Φ_i·Φ_k/τ)   (Eq. 3)

N_{y_i} is the number of examples in the batch labelled y_i (:class:`contrastext.objectives.supcon.SupCon`).
Eq. 3 sums over the batch (``supcon_reduction: sum``, the default); ``supcon_reduction: mean`` averages over
the anchors that have a positive (Khosla et al.'s released code, pytorch-metric-learning), which is the
sum / N when every anchor has one. The method returns the UNWEIGHTED parts ``ce`` and ``supcon``;
``loss_weights = {"ce": 1 − λ, "supcon": λ}``. The paper tunes λ and τ per task (§2, §4.1) and the supplied
text reports neither a grid nor the chosen values: λ = 0.1, τ = 0.3 are our defaults (docs/methods/scl.md).

The paper's protocol (validation / test split of the GLUE dev set, 10 few-shot draws, the top 3 draws by
validation accuracy) is :mod:`contrastext.runs.scl`; the keys that set it are its ``SCLArgs`` (``method_args``)
and ``data.few_shot`` / ``data.few_shot_sampling`` / ``data.label_noise``. This module holds the Method.

The head on Φ(x) (``head``): ``dense_tanh`` (the default), the paper's: it fine-tunes RoBERTa-large with fairseq, whose
``RobertaClassificationHead`` is dropout → dense(hidden, hidden) → tanh → dropout → out_proj
(:class:`~contrastext.models.heads.DenseTanhHead`; Hugging Face's RobertaClassificationHead is the same);
``linear`` is dropout → linear (:class:`~contrastext.models.heads.ClassificationHead`), this method's head before
the option existed. A dense_tanh classifier on a BERT backbone exports as BertForSequenceClassification (its
pooler is the head's dense+tanh; :mod:`contrastext.models.hf_export`).

Regression tasks (STS-B): SupCon needs classes, so ``lam > 0`` is a :class:`ConfigError`; ``lam: 0``
is the documented fallback, plain MSE fine-tuning (the part is then called ``mse``).

Example::

    >>> method = SCLMethod(encoder, get_task("sst2"), lam=0.1, temperature=0.3)
    >>> method(method.collate(examples[:16]))
    {'ce': tensor(0.69, grad_fn=...), 'supcon': tensor(43.1, grad_fn=...)}
"""

from __future__ import annotations

from torch import Tensor

from contrastext.errors import ConfigError
from contrastext.methods.classification import ClassificationMethod
from contrastext.models.heads import SCL_HEADS, DenseTanhHead
from contrastext.objectives.supcon import CEPlusSupCon, SupCon


class SCLMethod(ClassificationMethod):
    """Encoder + head on ``[CLS]``; parts ``ce`` and ``supcon`` (or ``mse`` for regression with λ = 0)."""

    def __init__(
        self,
        encoder,
        task,
        lam: float = 0.1,
        temperature: float = 0.3,
        head_dropout: float = 0.1,
        supcon_reduction: str = "sum",
        head: str = "dense_tanh",
    ):
        super().__init__(encoder, task, head_dropout=head_dropout)
        if head not in SCL_HEADS:
            raise ConfigError(f"method_args.head: unknown head {head!r}; expected one of: {', '.join(SCL_HEADS)}")
        self.head_kind = head
        if head == "dense_tanh":  # the paper's (fairseq's RobertaClassificationHead); 'linear' keeps the base's
            outputs = 1 if self.is_regression else task.num_labels
            self.head = DenseTanhHead(encoder.hidden_size, outputs, dropout=head_dropout, squeeze=self.is_regression)
        if self.is_regression and lam > 0:
            raise ConfigError(
                f"method_args.lam: SupCon needs classes and {task.name} is a regression task; "
                "set method_args.lam=0 for plain MSE fine-tuning"
            )
        self.objective = CEPlusSupCon(lam=lam, temperature=temperature)
        # Eq. 3 sums over the batch; CEPlusSupCon's own SupCon averages (the peers' convention).
        self.objective.supcon = SupCon(temperature, reduction=supcon_reduction)
        self.loss_weights = {"mse": 1.0} if self.is_regression else dict(self.objective.weights)

    def forward(self, batch: dict) -> dict[str, Tensor]:
        cls = self.encode_batch(batch).pooled
        logits = self.head(cls)
        if self.is_regression:
            return {"mse": self.task_loss(logits, batch["labels"])}
        return self.objective.parts(logits, cls, batch["labels"])

    def export_classifier(self, folder, label_names=None, card: dict | None = None):
        """As :meth:`ClassificationMethod.export_classifier`; a dense_tanh head exports its ``dense`` as BERT's
        pooler and its ``out_proj`` as the classifier (a ConfigError, nothing written, on another backbone)."""
        if not isinstance(self.head, DenseTanhHead):
            return super().export_classifier(folder, label_names=label_names, card=card)
        from contrastext.models.hf_export import export_classifier

        names = None
        if not self.is_regression:
            names = [str(name) for name in (label_names or self.label_names or range(self.num_labels))]
        return export_classifier(
            self.encoder,
            self.head.out_proj,
            folder,
            label_names=names,
            regression=self.is_regression,
            text_pair=self.task_kind != "single",
            task=self.task_name,
            task_kind=self.task_kind,
            max_length=getattr(self.encoder, "train_max_length", None) or self.encoder.max_seq_length,
            card=card,
            dense=self.head.dense,
        )
