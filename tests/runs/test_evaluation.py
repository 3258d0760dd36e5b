"""A recipe's ``eval.tasks`` with an ``ir:`` folder: the evaluator's keys, ``eval.limit``, and a training run that
evaluates it and selects its best checkpoint by ``<folder>_test_cosine_ndcg@10``."""

from __future__ import annotations

import json

import numpy as np
import pytest

from contrastext.data.readers.beir import read_beir
from contrastext.evaluation.evaluators import make_evaluator
from contrastext.evaluation.information_retrieval import information_retrieval_metrics
from contrastext.evaluation.ir_keys import IR_METRIC_NAMES
from contrastext.runs.evaluation import eval_sets
from tests.cli.cli_runs import run
from tests.evaluation.test_task_specs import beir_folder

pytestmark = pytest.mark.usefixtures("single_torch_thread")


class TableModel:
    """A model whose encoder answers from a table of vectors (what the evaluators call)."""

    def __init__(self, table: dict[str, np.ndarray]):
        self.encoder = self
        self.table = table

    def encode(self, texts, batch_size=64, **kwargs):
        return np.stack([self.table[text] for text in texts])


def test_an_ir_set_is_keyed_by_its_folder_split_and_st_metric_names(tmp_path):
    folder = beir_folder(tmp_path / "myset")
    data = read_beir(folder)
    generator = np.random.default_rng(0)
    texts = [*data.queries.values(), *data.corpus.values()]
    table = {text: generator.normal(size=8).astype(np.float32) for text in texts}
    sets = eval_sets([f"ir:{folder}"], None)
    assert sets[0].retrieval.queries == data.queries and sets[0].headline == "cosine_ndcg@10"
    metrics = make_evaluator(sets)(TableModel(table))
    queries = ["q1", "q2"]  # q3 has no relevant document: left out, as ST leaves it out
    expected = information_retrieval_metrics(np.stack([table[data.queries[q]] for q in queries]),
                                             np.stack([table[text] for text in data.corpus.values()]), queries,
                                             list(data.corpus), data.relevant_docs)  # fmt: skip
    assert set(metrics) == {f"myset_test_{name}" for name in IR_METRIC_NAMES} | {"myset_test_score", "score"}
    for name, value in expected.items():
        assert metrics[f"myset_test_{name}"] == pytest.approx(value * 100, abs=1e-9)
    assert metrics["score"] == metrics["myset_test_score"] == metrics["myset_test_cosine_ndcg@10"]
    limited = eval_sets([f"ir:{folder}"], None, limit=1)[0].retrieval  # eval.limit: the first judged queries
    assert list(limited.queries) == ["q1"] and limited.corpus == data.corpus


def test_training_evaluates_an_ir_folder_and_selects_by_its_ndcg(tmp_path, capsys, tiny_bert_path):
    folder = beir_folder(tmp_path / "myset")
    pairs = tmp_path / "pairs.csv"
    pairs.write_text("anchor,positive\n" + "".join(f"about {t},a text on {t}\n" for t in
                                                   ["cats", "rain", "tea", "chess", "rome", "bikes", "coffee", "rivers"]))  # fmt: skip
    output = tmp_path / "run"
    sets = [
        f"model={tiny_bert_path}", f"data.path={pairs}", f"output_dir={output}", "train.max_steps=2",
        "train.epochs=null", "train.batch_size=4", "train.eval_every=1", "train.save_every=null",
        "train.progress_bar=false", "train.report_to=none", f"eval.tasks=[ir:{folder}]",
        "train.metric_for_best=myset_test_cosine_ndcg@10",
    ]  # fmt: skip
    code, stdout, stderr = run(["train", "mnrl", *[part for item in sets for part in ("--set", item)]], capsys)
    assert code == 0, stderr
    assert "myset_test_cosine_ndcg@10" in stdout
    result = json.loads((output / "metrics.json").read_text())
    assert result["metric_for_best"] == "myset_test_cosine_ndcg@10"
    assert {f"myset_test_{name}" for name in IR_METRIC_NAMES} <= set(result["metrics"])
    assert result["metrics"]["score"] == result["metrics"]["myset_test_cosine_ndcg@10"]
    assert (output / "best" / "encoder" / "modules.json").is_file()
