"""Data: file readers, the benchmark task registry, views, sampling and collation."""

from contrastext.data.examples import Example

__all__ = ["Example"]
