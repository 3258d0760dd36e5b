"""A tiny self-contained Method for the engine's tests: a 2-layer, 32-wide random BERT with the MiniLM
vocabulary, SimCSE-style in-batch InfoNCE written inline, a tied head, a buffer updated in after_step
and a substitution view drawn from the method's generator. Also runnable as a script (for the
kill-and-resume test): ``python _tiny_training.py OUTPUT_DIR MAX_STEPS [--resume] [--pause-at STEP]``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from transformers import AutoTokenizer, BertConfig, BertModel

from contrastext.data.examples import Example
from contrastext.training.config import TrainConfig
from contrastext.training.method import Method

WORDS = [
    "the",
    "a",
    "cat",
    "dog",
    "runs",
    "sleeps",
    "under",
    "over",
    "green",
    "blue",
    "house",
    "river",
    "quickly",
    "slowly",
    "big",
    "small",
]


def sentences(count: int = 40) -> list[Example]:
    """Deterministic synthetic sentences of varying length."""
    result = []
    for index in range(count):
        words = [WORDS[(index * 7 + offset * 3) % len(WORDS)] for offset in range(3 + index % 6)]
        result.append(Example(texts=(" ".join(words),), source=f"synthetic:{index + 1}"))
    return result


class TinyEncoder(nn.Module):
    def __init__(self, tokenizer) -> None:
        super().__init__()
        config = BertConfig(
            vocab_size=tokenizer.vocab_size,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=64,
            max_position_embeddings=64,
            hidden_dropout_prob=0.1,
        )
        self.backbone = BertModel(config, add_pooling_layer=False)
        self.tokenizer = tokenizer

    def forward(self, input_ids, attention_mask, token_type_ids=None):
        hidden = self.backbone(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
        return (hidden * mask).sum(1) / mask.sum(1).clamp_min(1)

    def save(self, path) -> None:
        Path(path).mkdir(parents=True, exist_ok=True)
        self.backbone.save_pretrained(path)
        self.tokenizer.save_pretrained(path)


class TinyMethod(Method):
    def __init__(self, tokenizer, temperature: float = 0.05, pause_at: int | None = None, output_dir=None):
        super().__init__()
        self.encoder = TinyEncoder(tokenizer)
        self.head = nn.Linear(32, tokenizer.vocab_size, bias=False)
        self.head.weight = self.encoder.backbone.embeddings.word_embeddings.weight  # tied
        self.register_buffer("center", torch.zeros(32))
        self.temperature = temperature
        self.loss_weights = {"center": 0.1}
        self._last = None
        self.pause_at, self.output_dir = pause_at, output_dir

    def collate(self, examples):
        self._maybe_pause()
        tokens = self.encoder.tokenizer(
            [e.texts[0] for e in examples], padding=True, truncation=True, max_length=16, return_tensors="pt"
        )
        noisy = tokens["input_ids"].clone()
        chosen = torch.rand(noisy.shape, generator=self.generator) < 0.1
        noisy[chosen & (tokens["attention_mask"] == 1)] = 1000
        return {"ids": tokens["input_ids"], "noisy": noisy, "mask": tokens["attention_mask"]}

    def forward(self, batch):
        z1 = self.encoder(batch["ids"], batch["mask"])
        z2 = self.encoder(batch["noisy"], batch["mask"])
        scores = F.cosine_similarity(z1[:, None], z2[None], dim=-1) / self.temperature
        infonce = F.cross_entropy(scores, torch.arange(len(z1), device=z1.device))
        self._last = z1.detach().mean(0)
        logits = self.head(z1)
        return {
            "infonce": infonce,
            "center": ((z1 - self.center) ** 2).mean(),
            "tied": logits.logsumexp(-1).mean() * 0,
        }

    def after_step(self):
        self.center.mul_(0.9).add_(0.1 * self._last)

    def _maybe_pause(self):
        """Kill-test hook: once checkpoint `pause_at` is complete, say so and hang until killed."""
        if self.pause_at is None:
            return
        latest = Path(self.output_dir) / "checkpoints" / "latest"
        if latest.is_file() and latest.read_text().strip() == f"step-{self.pause_at:06d}":
            (Path(self.output_dir) / "PAUSED").write_text("paused\n")
            time.sleep(600)


def make_config(output_dir, **train) -> TrainConfig:
    settings = {
        "max_steps": 12,
        "batch_size": 8,
        "lr": 1e-3,
        "log_every": 1,
        "save_every": 2,
        "grad_accumulation": 2,
        "warmup_steps": 2,
        "progress_bar": False,
        "mixed_precision": "no",
    }
    settings.update(train)
    return TrainConfig(method="tiny", model="tiny", output_dir=str(output_dir), seed=3, train=settings)


def build(tokenizer_path, init_seed: int = 0, **kwargs) -> TinyMethod:
    torch.manual_seed(init_seed)
    return TinyMethod(AutoTokenizer.from_pretrained(tokenizer_path), **kwargs)


if __name__ == "__main__":
    from contrastext.training.trainer import Trainer

    torch.set_num_threads(1)
    output, steps, tokenizer_path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    pause = int(sys.argv[sys.argv.index("--pause-at") + 1]) if "--pause-at" in sys.argv else None
    method = build(tokenizer_path, pause_at=pause, output_dir=output)
    Trainer(method, sentences(), make_config(output, max_steps=steps)).train(resume="--resume" in sys.argv)
