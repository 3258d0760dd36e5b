"""Data: file readers, the benchmark task registry, views, sampling and collation."""

from contrastext.data.examples import Example
from contrastext.data.readers.lines import ExampleList
from contrastext.data.root import resolve_data_root
from contrastext.data.tasks import get_task, load_task, parse_task_spec, task_names

__all__ = ["Example", "ExampleList", "get_task", "load_task", "parse_task_spec", "resolve_data_root", "task_names"]
