"""Readers for SentEval's classification files: SST (binary / fine), SNLI (s1/s2/labels).

SentEval's MRPC files (``msr_paraphrase_{train,test}.txt``) share GLUE MRPC's columns:
:func:`read_senteval_mrpc` is :func:`~contrastext.data.readers.glue.read_glue_mrpc`.
"""

from __future__ import annotations

from pathlib import Path

from contrastext.data.examples import Example
from contrastext.data.readers.glue import read_glue_mrpc
from contrastext.data.readers.lines import (
    ExampleList,
    PathLike,
    iter_lines,
    parse_int_label,
    parse_named_label,
    require_text,
    source,
)
from contrastext.errors import DataFormatError

SNLI_LABELS = {"entailment": 0, "neutral": 1, "contradiction": 2}

read_senteval_mrpc = read_glue_mrpc


def read_senteval_sst(path: PathLike, num_labels: int | None = None) -> ExampleList:
    """SentEval SST ``sentiment-{train,dev,test}``, in either of its two layouts, told apart per line:

    - ``binary/``: ``sentence<TAB>label`` (0/1), as SentEval's SSTEval reads it;
    - ``fine/``: ``label sentence`` (label 0-4 first, then one space).

    ``num_labels`` (2 or 5), when given, rejects labels outside ``0..num_labels-1``.
    """
    examples = ExampleList()
    for line, text in iter_lines(path):
        if "\t" in text:
            sentence, _, label_text = text.rpartition("\t")
        else:
            label_text, _, sentence = text.partition(" ")
        if not label_text.strip() or not sentence.strip():
            raise DataFormatError(path, line, "expected 'sentence<TAB>label' or 'label sentence'")
        label = parse_int_label(path, line, label_text, "label", num_labels)
        sentence = require_text(path, line, sentence, "sentence")
        examples.append(Example(texts=(sentence,), label=label, source=source(path, line)))
    return examples


def read_senteval_snli(path: PathLike) -> ExampleList:
    """SentEval SNLI: ``path`` is the ``s1.<split>`` file; ``s2.<split>`` and ``labels.<split>`` sit beside it.

    Line i of the three files is one example: texts (premise, hypothesis), label entailment 0,
    neutral 1, contradiction 2 (SentEval's order). The three files must have the same number of lines.
    """
    s1_path = Path(path)
    split = s1_path.name.removeprefix("s1.")
    if split == s1_path.name:
        raise ValueError(f"expected the s1.<split> file of SentEval SNLI, got {s1_path}")
    s2_path = s1_path.with_name(f"s2.{split}")
    labels_path = s1_path.with_name(f"labels.{split}")
    premises = list(iter_lines(s1_path))
    hypotheses = list(iter_lines(s2_path))
    labels = list(iter_lines(labels_path))
    if not len(premises) == len(hypotheses) == len(labels):
        raise DataFormatError(
            labels_path,
            None,
            f"line counts differ: {s1_path.name} {len(premises)}, {s2_path.name} {len(hypotheses)}, "
            f"{labels_path.name} {len(labels)}",
        )
    examples = ExampleList()
    for (line, premise), (_, hypothesis), (_, label_text) in zip(premises, hypotheses, labels, strict=True):
        label = parse_named_label(labels_path, line, label_text, "label", SNLI_LABELS)
        pair = (require_text(s1_path, line, premise, "s1"), require_text(s2_path, line, hypothesis, "s2"))
        examples.append(Example(texts=pair, label=label, source=source(s1_path, line)))
    return examples
