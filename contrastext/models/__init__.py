"""Models: the text encoder (backbone, pooling, projection) and task heads."""
