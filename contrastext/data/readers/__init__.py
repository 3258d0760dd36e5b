"""File readers, one per benchmark file format; each returns an ExampleList (a list of Example)."""

from contrastext.data.readers.glue import (
    read_glue_cola,
    read_glue_mrpc,
    read_glue_qnli,
    read_glue_qqp,
    read_glue_rte,
    read_glue_sst2,
    read_glue_stsb,
)
from contrastext.data.readers.lines import ExampleList
from contrastext.data.readers.minbert import read_minbert_quora, read_minbert_sst, read_minbert_sts
from contrastext.data.readers.senteval import read_senteval_mrpc, read_senteval_snli, read_senteval_sst
from contrastext.data.readers.simcse import read_sentences, read_simcse_csv
from contrastext.data.readers.sts import (
    read_senteval_sts,
    read_senteval_sts_subsets,
    read_sick,
    read_sts_subset,
    read_stsb_csv,
)
from contrastext.data.readers.table import read_table

__all__ = [
    "ExampleList",
    "read_glue_cola",
    "read_glue_mrpc",
    "read_glue_qnli",
    "read_glue_qqp",
    "read_glue_rte",
    "read_glue_sst2",
    "read_glue_stsb",
    "read_minbert_quora",
    "read_minbert_sts",
    "read_minbert_sst",
    "read_senteval_mrpc",
    "read_senteval_snli",
    "read_senteval_sst",
    "read_senteval_sts",
    "read_senteval_sts_subsets",
    "read_sentences",
    "read_sick",
    "read_simcse_csv",
    "read_sts_subset",
    "read_stsb_csv",
    "read_table",
]
