"""contrastext: robust and efficient contrastive learning of text representations."""

__version__ = "0.1.0"
