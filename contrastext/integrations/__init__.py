"""Bridges to other libraries' training loops: :mod:`contrastext.integrations.sentence_transformers`
(any contrastext objective as the ``loss`` of ``SentenceTransformerTrainer``)."""

from contrastext.integrations.sentence_transformers import ContrastextLoss

__all__ = ["ContrastextLoss"]
