"""A contrastext objective as the ``loss`` of ``SentenceTransformerTrainer`` (issue 9, item 8).

The model is the tiny BERT of tests/conftest.py (a sentence-transformers folder), loaded by
sentence-transformers itself; dropout is switched off so the loss the trainer computes can be checked
against our objective on the model's own embeddings.
"""

from __future__ import annotations

import datasets
import pytest
import sentence_transformers  # the dev extra installs it
import torch

from contrastext.errors import ConfigError
from contrastext.integrations import ContrastextLoss
from contrastext.objectives import make_objective

ANCHORS = ["a man is eating food.", "a woman plays the violin.", "the cat sleeps on the sofa.", "it rains in paris."]
POSITIVES = ["someone eats a meal.", "a lady is playing music.", "a kitten naps on a couch.", "paris gets wet weather."]
NEGATIVES = ["nobody is eating.", "the violin is silent.", "the dog is awake.", "the sun shines in rome."]


@pytest.fixture
def st_model(tiny_bert_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    model = sentence_transformers.SentenceTransformer(tiny_bert_path, device="cpu")
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
    return model


def encode(model, texts):
    return model.encode(texts, convert_to_tensor=True, batch_size=len(texts))


def tokenize(model, texts):
    """A column as the trainer's collator gives it (``preprocess`` from sentence-transformers 6 on)."""
    return (getattr(model, "preprocess", None) or model.tokenize)(texts)


def mnrl_class():
    try:  # sentence-transformers >= 6
        from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss
    except ImportError:
        from sentence_transformers.losses import MultipleNegativesRankingLoss
    return MultipleNegativesRankingLoss


class Recording(ContrastextLoss):
    """Keeps the value of every call, to compare with a computation of our own."""

    def __init__(self, *args):
        super().__init__(*args)
        self.values: list[float] = []

    def forward(self, sentence_features, labels=None):
        loss = super().forward(sentence_features, labels)
        self.values.append(float(loss.detach()))
        return loss


def test_trainer_trains_with_a_contrastext_objective_and_its_loss_is_ours(st_model, tmp_path):
    """2 steps of SentenceTransformerTrainer with DCL: the first step's loss is DCL on the model's embeddings
    (the whole 4-row dataset is the batch: DCL does not depend on the rows' order), and the weights move."""
    objective = make_objective("dcl", temperature=0.05)
    with torch.no_grad():
        expected = float(objective(encode(st_model, ANCHORS), encode(st_model, POSITIVES)))
    before = [parameter.detach().clone() for parameter in st_model.parameters()]
    loss = Recording(st_model, objective)
    arguments = sentence_transformers.SentenceTransformerTrainingArguments(
        output_dir=str(tmp_path / "st"),
        max_steps=2,
        per_device_train_batch_size=4,
        learning_rate=1e-3,
        report_to="none",
        save_strategy="no",
        logging_steps=1,
        use_cpu=True,
        seed=0,
    )
    trainer = sentence_transformers.SentenceTransformerTrainer(
        model=st_model,
        args=arguments,
        train_dataset=datasets.Dataset.from_dict({"anchor": ANCHORS, "positive": POSITIVES}),
        loss=loss,
    )
    trainer.train()
    assert len(loss.values) == 2
    assert loss.values[0] == pytest.approx(expected, abs=1e-4)
    assert any(not torch.equal(old, new) for old, new in zip(before, st_model.parameters(), strict=True))
    st_model.save(str(tmp_path / "saved"))
    card = (tmp_path / "saved" / "README.md").read_text(encoding="utf-8")
    assert '"objective": "dcl"' in card and '"temperature": 0.05' in card  # sentence-transformers' loss config


def test_the_loss_config_holds_the_objectives_name_and_settings(st_model):
    """sentence-transformers writes ``get_config_dict()`` into the model card (as MultipleNegativesRankingLoss's
    ``{"scale": 20.0, ...}``): the objective's registry name and every constructor setting, the temperature
    included."""
    assert ContrastextLoss(st_model, make_objective("dcl", temperature=0.05)).get_config_dict() == {
        "objective": "dcl", "temperature": 0.05}
    infonce = ContrastextLoss(st_model, make_objective("infonce", temperature=0.1, symmetric=True)).get_config_dict()
    assert infonce == {"objective": "infonce", "temperature": 0.1, "similarity": "cos", "symmetric": True,
                       "hard_negative_weight": 0.0, "mask_duplicate_positives": False}
    triplet = ContrastextLoss(st_model, make_objective("triplet", margin=0.3)).get_config_dict()
    assert triplet == {"objective": "triplet", "margin": 0.3, "distance": "euclidean"}


def test_infonce_with_a_negative_column_equals_multiple_negatives_ranking(st_model):
    """Anchor, positive, negative columns: our InfoNCE(τ) is sentence-transformers' MNRL(scale=1/τ)."""
    features = [tokenize(st_model, texts) for texts in (ANCHORS, POSITIVES, NEGATIVES)]
    st_model.eval()
    with torch.no_grad():
        ours = ContrastextLoss(st_model, make_objective("infonce", temperature=0.05))(features, None)
        theirs = mnrl_class()(st_model, scale=20.0)(features, None)
    assert float(ours) == pytest.approx(float(theirs), abs=1e-5)


def test_supcon_reads_the_label_column_and_triplet_three_columns(st_model):
    st_model.eval()
    texts = ANCHORS
    labels = torch.tensor([0, 1, 0, 1])
    features = [tokenize(st_model, texts)]
    with torch.no_grad():
        loss = ContrastextLoss(st_model, make_objective("supcon", temperature=0.1))(features, labels)
        expected = make_objective("supcon", temperature=0.1)(encode(st_model, texts), labels)
    assert float(loss) == pytest.approx(float(expected), abs=1e-5)
    triplet = ContrastextLoss(st_model, make_objective("triplet", margin=0.5))
    with pytest.raises(ValueError, match="needs 3 columns"):
        triplet([tokenize(st_model, ANCHORS), tokenize(st_model, POSITIVES)], None)
    with pytest.raises(ValueError, match="needs a 'label' column"):
        ContrastextLoss(st_model, make_objective("supcon"))(features, None)


def test_objectives_that_cannot_work_on_embeddings_alone_are_refused(st_model):
    with pytest.raises(ConfigError, match="ce_supcon needs a classifier's logits"):
        ContrastextLoss(st_model, make_objective("ce_supcon"))
    with pytest.raises(ConfigError, match="must be a contrastext Objective"):
        ContrastextLoss(st_model, torch.nn.MSELoss())
    with pytest.raises(ValueError, match="takes 2 columns"):
        ContrastextLoss(st_model, make_objective("dcl"))([tokenize(st_model, t) for t in (ANCHORS, POSITIVES, NEGATIVES)])
