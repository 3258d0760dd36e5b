"""Readers for scored sentence pairs: the STS benchmark release, SentEval's STS12-16 folders, SICK.

Scores are floats on the file's own scale (STS 0-5, SICK relatedness 1-5). Given a ``score_range`` (the
task registry passes its own), a score outside it is a DataFormatError naming the file and line of the score.
A subset without a single scored pair is an error too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from contrastext.data.examples import Example
from contrastext.data.readers.lines import (
    ExampleList,
    PathLike,
    ScoreRange,
    iter_lines,
    log_skipped,
    parse_named_label,
    parse_score,
    require_columns,
    require_file,
    require_folder,
    require_text,
    source,
)
from contrastext.errors import DataFormatError, MissingDataError

STSB_COLUMNS = ["genre", "file", "year", "id", "score", "sentence1", "sentence2"]
SICK_COLUMNS = ["pair_ID", "sentence_A", "sentence_B", "relatedness_score", "entailment_judgment"]
SICK_ENTAILMENT_LABELS = {"ENTAILMENT": 0, "NEUTRAL": 1, "CONTRADICTION": 2}


def read_stsb_csv(path: PathLike, score_range: ScoreRange | None = None) -> ExampleList:
    """The STS benchmark release ``sts-{train,dev,test}.csv`` (also SentEval's ``STSBenchmark`` copy).

    TAB-separated despite the name, with no quoting (sentences contain raw ``"``): genre, file, year,
    id, score, sentence1, sentence2, and on some rows extra source columns, which are ignored.
    """
    examples = ExampleList()
    for line, text in iter_lines(path):
        fields = text.split("\t")
        require_columns(path, line, fields, STSB_COLUMNS, allow_extra=True)
        score = parse_score(path, line, fields[4], "score", score_range)
        pair = (require_text(path, line, fields[5], "sentence1"), require_text(path, line, fields[6], "sentence2"))
        examples.append(Example(texts=pair, label=score, source=source(path, line)))
    return examples


def read_sts_subset(input_path: PathLike, gold_path: PathLike, score_range: ScoreRange | None = None) -> ExampleList:
    """One SentEval STS subset: ``STS.input.<subset>.txt`` (s1 TAB s2) + ``STS.gs.<subset>.txt``.

    Line i of the gold file scores line i of the input. A blank gold line marks an unscored pair: it is
    skipped and recorded in ``skipped_sources`` (SentEval drops them the same way). Extra TAB columns
    after s2 (source names in some releases) and after the gold score are ignored.
    """
    inputs = list(iter_lines(input_path))
    golds = list(iter_lines(gold_path))
    if not inputs:
        raise DataFormatError(input_path, None, "the file is empty: an STS subset needs sentence pairs")
    if len(inputs) != len(golds):
        raise DataFormatError(gold_path, None, f"has {len(golds)} lines but {input_path} has {len(inputs)}")
    examples = ExampleList()
    for (line, text), (_, gold) in zip(inputs, golds, strict=True):
        score_text = gold.split("\t")[0]
        if not score_text.strip():
            examples.skipped_sources.append(f"{source(input_path, line)}: no gold score")
            continue
        fields = text.split("\t")
        require_columns(input_path, line, fields, ["sentence1", "sentence2"], allow_extra=True)
        score = parse_score(gold_path, line, score_text, "score", score_range)
        pair = (
            require_text(input_path, line, fields[0], "sentence1"),
            require_text(input_path, line, fields[1], "sentence2"),
        )
        examples.append(Example(texts=pair, label=score, source=source(input_path, line)))
    if not examples:
        raise DataFormatError(gold_path, None, f"no scored pair: all {len(golds)} gold lines are blank")
    return log_skipped(input_path, examples)


def read_senteval_sts_subsets(folder: PathLike, score_range: ScoreRange | None = None) -> dict[str, ExampleList]:
    """A SentEval STS folder (``STS12-en-test`` ...): ``{subset: examples}`` for every input file present.

    Subsets are the ``<subset>`` of each ``STS.input.<subset>.txt``, sorted by name; each needs its
    ``STS.gs.<subset>.txt``. Releases differ in their subsets (STS13 has no SMT in public copies),
    so the folder decides.
    """
    folder = require_folder(folder)
    inputs = sorted(folder.glob("STS.input.*.txt"))
    if not inputs:
        raise MissingDataError(f"no STS.input.<subset>.txt files in {folder}")
    subsets: dict[str, ExampleList] = {}
    for input_path in inputs:
        name = sts_subset_name(input_path)
        gold_path = folder / f"STS.gs.{name}.txt"
        require_file(gold_path)
        subsets[name] = read_sts_subset(input_path, gold_path, score_range)
    return subsets


def read_senteval_sts(folder: PathLike, score_range: ScoreRange | None = None) -> ExampleList:
    """All subsets of a SentEval STS folder, concatenated in subset-name order."""
    examples = ExampleList()
    for subset in read_senteval_sts_subsets(folder, score_range).values():
        examples.extend_from(subset)
    return examples


def read_sick(
    path: PathLike,
    target: Literal["relatedness", "entailment"] = "relatedness",
    score_range: ScoreRange | None = None,
) -> ExampleList:
    """SICK (``SICK_train.txt``, ``SICK_trial.txt``, ``SICK_test_annotated.txt``), header row first.

    ``target="relatedness"``: label = relatedness_score (float, 1-5), the SICK-R task.
    ``target="entailment"``: label = ENTAILMENT 0, NEUTRAL 1, CONTRADICTION 2 (SICK-E).
    """
    if target not in ("relatedness", "entailment"):
        raise ValueError(f"target must be 'relatedness' or 'entailment', not {target!r}")
    examples = ExampleList()
    for line, text in iter_lines(path):
        fields = text.split("\t")
        if line == 1:
            if fields[0].strip() != "pair_ID":
                raise DataFormatError(path, line, f"expected the SICK header ({', '.join(SICK_COLUMNS)})")
            continue
        require_columns(path, line, fields, SICK_COLUMNS)
        if target == "relatedness":
            label = parse_score(path, line, fields[3], "relatedness_score", score_range)
        else:
            label = parse_named_label(path, line, fields[4], "entailment_judgment", SICK_ENTAILMENT_LABELS)
        pair = (require_text(path, line, fields[1], "sentence_A"), require_text(path, line, fields[2], "sentence_B"))
        examples.append(Example(texts=pair, label=label, source=source(path, line)))
    return examples


def sts_subset_name(input_path: Path) -> str:
    """``STS.input.surprise.OnWN.txt`` -> ``surprise.OnWN``."""
    return input_path.name[len("STS.input.") : -len(".txt")]
