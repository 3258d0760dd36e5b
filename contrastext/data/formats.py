"""File readers for every benchmark format, one function per format: ``read_xxx(path, ...) -> list[Example]``.

The readers live in :mod:`contrastext.data.readers` (one module per family); this module is the
stable import path. Every reader returns an :class:`ExampleList` (a ``list[Example]`` that also
records the rows it skipped on purpose), sets ``Example.source = "path:line"``, raises
``DataFormatError(path, line, reason)`` for a malformed row and ``MissingDataError`` for a missing file.

| format | reader |
|---|---|
| STS benchmark release ``sts-*.csv`` (TAB, no quoting) | ``read_stsb_csv`` |
| SentEval STS12-16 folder / one subset | ``read_senteval_sts``, ``read_senteval_sts_subsets``, ``read_sts_subset`` |
| SICK ``SICK_*.txt`` | ``read_sick`` |
| GLUE STS-B, SST-2, MRPC, CoLA, RTE, QNLI, QQP ``*.tsv`` | ``read_glue_stsb`` ... ``read_glue_qqp`` |
| SentEval SST binary/fine, MRPC, SNLI | ``read_senteval_sst``, ``read_senteval_mrpc``, ``read_senteval_snli`` |
| SimCSE one-sentence-a-line txt / ``sent0,sent1[,hard_neg]`` csv | ``read_sentences``, ``read_simcse_csv`` |
| minBERT ids-sst / sts / quora csv | ``read_minbert_sst``, ``read_minbert_sts``, ``read_minbert_quora`` |
| any CSV / TSV / JSONL with a column mapping | ``read_table`` |
"""

from contrastext.data.readers import *  # noqa: F403  (this module is the stable import path)
from contrastext.data.readers import __all__  # noqa: F401
