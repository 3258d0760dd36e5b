"""Objectives on embeddings: every contrastive loss of the five works, as torch.nn.Modules."""
