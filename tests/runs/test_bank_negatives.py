"""``negatives.source: bank`` through the recipes (runs/bank_negatives.py): ``train mnrl`` with bank negatives trains
and resumes to the uninterrupted run's weights and bank; ``source: none`` leaves the method as it was; simcse-sup
takes the section too; every bad setting is one error line naming its key, before any model loads."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from contrastext.errors import ConfigError
from contrastext.runs.registry import get_recipe, run_recipe
from contrastext.training.trainer import check_resume_matches
from tests.runs.recipe_runs import read_log, recipe_config, train_overrides

pytestmark = pytest.mark.usefixtures("single_torch_thread")

TOPICS = ["cats", "pizza", "rome", "guitars", "rain", "trains", "coffee", "chess", "gardens", "rivers", "bikes", "tea"]


def triplets(tmp_path: Path) -> Path:
    path = tmp_path / "pairs.csv"
    rows = [f"what about {t},a short text on {t},a text on {TOPICS[i - 1]}\n" for i, t in enumerate(TOPICS)]
    path.write_text("anchor,positive,negative\n" + "".join(rows))
    return path


def config(tmp_path: Path, model: str, output: str = "run", recipe: str = "mnrl", *sets: str):
    return recipe_config(
        recipe, tmp_path / output, model, f"data.path={triplets(tmp_path)}", "eval.tasks=[]",
        *train_overrides(max_steps=4, epochs=None, batch_size=4, lr=1e-3, schedule="constant", warmup_ratio=0.0,
                         save_every=2, mixed_precision="no"),
        "negatives.source=bank", "negatives.k=3", *sets,
    )  # fmt: skip


def final_weights(folder: Path) -> dict[str, torch.Tensor]:
    return load_file(str(next((folder / "final" / "encoder").rglob("*.safetensors"))))


def bank_of(folder: Path) -> torch.Tensor:
    checkpoint = sorted((folder / "checkpoints").iterdir())[-1]
    return load_file(str(checkpoint / "method.safetensors"))["negatives.bank.bank"]


def test_mnrl_with_bank_negatives_trains_and_a_resume_ends_where_the_straight_run_does(tmp_path, make_st_model,
                                                                                         capsys):  # fmt: skip
    model = make_st_model()
    run_recipe(config(tmp_path, model, "straight"))
    out = capsys.readouterr().out
    assert "negatives: a bank of 24 texts (128 bytes a row), k=3 per anchor" in out
    assert [record["step"] for record in read_log(tmp_path / "straight")] == [1, 2, 3, 4]

    run_recipe(config(tmp_path, model, "resumed", "mnrl", "train.max_steps=2"))
    resumed = config(tmp_path, model, "resumed")
    check_resume_matches(resumed)  # max_steps may change, nothing else did
    run_recipe(resumed, resume=True)
    straight, again = final_weights(tmp_path / "straight"), final_weights(tmp_path / "resumed")
    for name, value in straight.items():
        assert torch.equal(value, again[name]), name
    assert torch.equal(bank_of(tmp_path / "straight"), bank_of(tmp_path / "resumed"))
    initial = bank_of(tmp_path / "straight")
    assert initial.abs().sum() > 0


def test_a_resume_with_other_negatives_settings_is_refused_naming_the_key(tmp_path, make_st_model):
    model = make_st_model()
    run_recipe(config(tmp_path, model, "run", "mnrl", "train.max_steps=2"))
    with pytest.raises(ConfigError, match=r"negatives\.k \(3 -> 5\)"):
        check_resume_matches(config(tmp_path, model, "run", "mnrl", "negatives.k=5"))


def test_source_none_leaves_the_method_and_its_loss_as_they_were(tmp_path, make_st_model, data_root):
    cfg = config(tmp_path, make_st_model(), "run", "mnrl", "negatives.source=none")
    spec = get_recipe("mnrl")
    bundle = spec.build(cfg, cfg.method_args_as(spec.args_model), data_root)
    method = bundle.method
    assert not hasattr(method, "negatives") and not any("negatives" in name for name in method.state_dict())
    batch = method.collate(bundle.train_examples[:4])
    assert "indices" not in batch
    torch.manual_seed(0)
    anchors, positives, negatives = method.embed(batch)
    torch.manual_seed(0)
    assert torch.equal(method(batch)["infonce"], method.loss(anchors, positives, negatives))


def test_simcse_sup_takes_bank_negatives(tmp_path, make_st_model, data_root):
    cfg = config(tmp_path, make_st_model(), "run", "simcse-sup")
    spec = get_recipe("simcse-sup")
    bundle = spec.build(cfg, cfg.method_args_as(spec.args_model), data_root)
    method = bundle.method
    method.on_train_start(4)
    assert bool(method.negatives.filled)
    batch = method.collate(bundle.train_examples[:4])
    assert batch["indices"].tolist() == [0, 1, 2, 3]
    loss = method(batch)["infonce"]
    loss.backward()
    assert torch.isfinite(loss) and len(method._pending) == 1
    before = method.negatives.bank.bank.clone()
    method.after_step()
    assert not torch.equal(before, method.negatives.bank.bank) and int(method.negatives.steps) == 1


@pytest.fixture
def st_model(make_st_model) -> str:
    """The model folder, built before ``no_model_loads`` patches the loaders (a test asks for it first)."""
    return make_st_model()


@pytest.mark.parametrize(
    ("recipe", "sets", "message"),
    [
        ("mnrl", ["negatives.kk=3"], r"negatives\.kk: unknown key"),
        ("mnrl", ["negatives.source=queue"], r"negatives\.source: Input should be 'none' or 'bank'"),
        ("mnrl", ["negatives.momentum=1"], r"negatives\.momentum: Input should be less than 1"),
        ("mnrl", ["negatives.search=annoy"], r"negatives\.search: unknown search 'annoy'; known searches: exact"),
        ("mnrl", ["negatives.search_nprobe=8"], r"negatives\.search_nprobe: search 'exact' takes no nprobe"),
        ("mnrl", ["negatives.search_nlist=0"], r"negatives\.search_nlist: Input should be greater than 0"),
        ("mnrl", ["negatives.k=24"], r"negatives\.k=24: the bank holds 24 distinct texts"),
        ("mnrl", ["method_args.loss=triplet"], r"negatives\.source=bank appends bank rows to the candidates of InfoNCE"),
        ("mnrl", ["negatives.corpus=more.csv"], r"negatives\.corpus='more\.csv': give a \.txt file"),
        ("gd", [], r"negatives\.source=bank: gd takes no bank negatives; the recipes that do: mnrl, simcse-sup"),
    ],
)
def test_bad_settings_are_one_error_line_naming_the_key(recipe, sets, message, tmp_path, st_model,
                                                        no_model_loads):  # fmt: skip
    with pytest.raises(ConfigError, match=message) as error:
        run_recipe(config(tmp_path, st_model, "run", recipe, *sets))
    assert "\n" not in str(error.value)


def test_cached_gradient_chunks_give_the_whole_batch_loss_with_bank_negatives(tmp_path, make_st_model, data_root):
    """train.cache_chunk: the chunks' embeddings and the whole batch's ``indices`` give forward's loss (eval mode: no
    dropout, so the two are the same numbers)."""
    cfg = config(tmp_path, make_st_model(), "run", "mnrl", "train.cache_chunk=2")
    spec = get_recipe("mnrl")
    method = spec.build(cfg, cfg.method_args_as(spec.args_model), data_root).method
    examples = spec.build(cfg, cfg.method_args_as(spec.args_model), data_root).train_examples
    method.on_train_start(4)
    method.eval()
    batch = method.collate(examples[:4])
    chunks = [method.embed(chunk) for chunk in method.split_batch(batch, 2)]
    views = [torch.cat(parts) for parts in zip(*chunks, strict=True)]
    torch.testing.assert_close(method.loss_from_embeddings(views, batch)["infonce"], method(batch)["infonce"])


def test_the_kept_index_takes_its_lists_and_probes_from_the_section(tmp_path, make_st_model, data_root):
    cfg = config(tmp_path, make_st_model(), "run", "mnrl", "negatives.search=ivf", "negatives.search_nlist=4",
                 "negatives.search_nprobe=2")
    spec = get_recipe("mnrl")
    search = spec.build(cfg, cfg.method_args_as(spec.args_model), data_root).method.negatives.search
    assert (search.options["nlist"], search.options["nprobe"]) == (4, 2)
