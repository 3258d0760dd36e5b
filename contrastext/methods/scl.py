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
(each with its own few-shot draw ``data.few_shot``, label flips ``data.label_noise`` and training
randomness) under ``<output_dir>/seed-<s>/`` and writes ``<output_dir>/summary.json`` with every
evaluation metric's per-seed values, mean and standard deviation (sample std, ddof = 1; 0 for one seed).

Regression tasks (STS-B): SupCon needs classes, so ``lam > 0`` is a :class:`ConfigError`; ``lam: 0``
is the documented fallback, plain MSE fine-tuning (the part is then called ``mse``).

Example::

    >>> config = load_config("recipes/scl.yaml", ["train.max_steps=3", "data.few_shot=10"])
    >>> summary = run_recipe(config, data_root=Path("../shared/data"))
    >>> summary["summary"]["score"]["mean"], summary["summary"]["score"]["std"]
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from pydantic import Field
from torch import Tensor

from contrastext.errors import ConfigError
from contrastext.methods.classification_common import (
    ClassificationArgs,
    ClassificationMethod,
    build_encoder,
    load_classification_data,
    make_evaluator,
)
from contrastext.methods.registry import MethodBundle, MethodSpec, run_training, seeded_build
from contrastext.objectives.supcon import CEPlusSupCon

SUMMARY_FILE = "summary.json"


class SCLArgs(ClassificationArgs):
    """``method_args`` of the ``scl`` recipe."""

    lam: float = Field(default=0.9, ge=0, le=1, description="λ: weight of SupCon; CE weighs 1 − λ")
    temperature: float = Field(default=0.3, gt=0, description="τ of SupCon")
    seeds: list[int] | None = Field(
        default=None, description="one run per seed (few-shot draw, label noise, training); default: [seed]"
    )


class SCLMethod(ClassificationMethod):
    """Encoder + head on ``[CLS]``; parts ``ce`` and ``supcon`` (or ``mse`` for regression with λ = 0)."""

    def __init__(self, encoder, task, max_length: int, lam: float = 0.9, temperature: float = 0.3, head_dropout=0.1):
        super().__init__(encoder, task, max_length, head_dropout=head_dropout)
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


def build(config, args: SCLArgs, data_root: Path | None) -> MethodBundle:
    """One SCL run with ``config.seed`` as the seed of the few-shot draw and the label noise."""
    data = load_classification_data(config, args, data_root, seed=config.seed)
    method = SCLMethod(
        build_encoder(config, args),
        data.task,
        max_length=config.data.max_length,
        lam=args.lam,
        temperature=args.temperature,
        head_dropout=args.head_dropout,
    )
    evaluator = make_evaluator(data.eval, data.task, batch_size=config.eval.batch_size)
    description = dict(data.description)
    return MethodBundle(method, list(data.train), evaluator, final_report=lambda _method: description)


def seed_config(config, seed: int):
    """A copy of ``config`` for one seed: top-level and training seed ``seed``, output in ``seed-<seed>/``."""
    train = config.train.model_copy(update={"seed": seed})
    output_dir = str(Path(config.output_dir) / f"seed-{seed}")
    return config.model_copy(update={"seed": seed, "train": train, "output_dir": output_dir})


def summarize(per_seed: dict[int, dict[str, float]]) -> dict[str, dict]:
    """``{metric: {"mean", "std", "values": {seed: value}, "text": "m ± s"}}`` over the seeds' metrics."""
    names = sorted({name for metrics in per_seed.values() for name in metrics})
    summary = {}
    for name in names:
        values = {seed: float(metrics[name]) for seed, metrics in per_seed.items() if name in metrics}
        numbers = list(values.values())
        mean = statistics.fmean(numbers)
        std = statistics.stdev(numbers) if len(numbers) > 1 else 0.0
        summary[name] = {"mean": mean, "std": std, "values": values, "text": f"{mean:.2f} ± {std:.2f}"}
    return summary


def run(config, args: SCLArgs, data_root: Path | None, resume: bool = False) -> dict:
    """Train once per seed of ``method_args.seeds`` and write ``summary.json`` (mean ± std per metric).

    With ``resume``, a seed whose ``metrics.json`` exists is not trained again; the others resume from
    their last checkpoint.
    """
    seeds = args.seeds or [config.seed]
    if len(set(seeds)) != len(seeds):
        raise ConfigError(f"{config.source or '<config>'}: method_args.seeds: repeated seeds in {seeds}")
    runs: dict[int, dict] = {}
    for seed in seeds:
        run_config = seed_config(config, seed)
        finished = Path(run_config.output_dir) / "metrics.json"
        if resume and finished.is_file():
            runs[seed] = json.loads(finished.read_text(encoding="utf-8"))
            continue
        runs[seed] = run_training(run_config, seeded_build(build, run_config, args, data_root), resume=resume)
    summary = summarize({seed: result["metrics"] for seed, result in runs.items()})
    payload = {
        "method": config.method,
        "task": config.data.task,
        "seeds": seeds,
        "output_dir": str(config.output_dir),
        "metrics": {name: entry["mean"] for name, entry in summary.items()},
        "metrics_std": {name: entry["std"] for name, entry in summary.items()},
        "summary": summary,
        "runs": {str(seed): result for seed, result in runs.items()},
    }
    path = Path(config.output_dir) / SUMMARY_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2, sort_keys=True, default=str) + "\n", encoding="utf-8")
    payload["summary_file"] = str(path)
    return payload


SPEC = MethodSpec(name="scl", args_model=SCLArgs, build=build, run=run)
