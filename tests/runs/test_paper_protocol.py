"""A recipe's paper protocol on a user's file (issue 22, item 7): the block that says which paper settings are
in force, ``method_args.preset`` (paper: the recipe as its paper has it; practical: a small documented set of
keys that learns on a user's file), and evaluation keys named after ``data.eval_path``."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

import contrastext.cli.config_command  # noqa: F401  (registers the command)
import contrastext.cli.train_command  # noqa: F401  (registers the command)
from contrastext.errors import ConfigError
from contrastext.runs.protocol import protocol_lines
from contrastext.runs.registry import get_recipe, parse_method_args, resolve_preset
from contrastext.training.config import load_config
from tests.cli.cli_runs import run
from tests.runs.recipe_runs import RECIPES
from tests.runs.test_own_data import QUIET, write_pairs, write_reviews


@pytest.fixture(autouse=True)
def no_data_root(monkeypatch):
    monkeypatch.delenv("CONTRASTEXT_DATA", raising=False)


def block(recipe: str, *overrides: str) -> list[str]:
    """The protocol block ``run_recipe`` prints for ``recipes/<recipe>.yaml`` with ``overrides``."""
    config = load_config(RECIPES / f"{recipe}.yaml", list(overrides))
    spec = get_recipe(config.method)  # capt-continued.yaml is method capt
    config, applied = resolve_preset(spec, config)
    return protocol_lines(spec.name, spec.protocol, config, parse_method_args(spec, config), applied)


def test_scl_on_a_user_file_prints_the_paper_settings_in_force_before_the_model_loads(
    tmp_path, tiny_bert_path, capsys, monkeypatch
):
    """`--set data.path=FILE` on recipes/scl.yaml: one block naming each paper setting in force with its value and
    its place in the paper, and how to change them; printed before any model loads (here: loading fails)."""
    import contrastext.runs.scl as scl

    def no_model(*_args, **_kwargs):
        raise ConfigError("stop: the model would load here")

    monkeypatch.setattr(scl, "classifier_encoder", no_model)
    path = write_reviews(tmp_path / "reviews.csv")
    argv = ["train", "scl", "--output", str(tmp_path / "o"), "--set", f"model={tiny_bert_path}",
            "--set", f"data.path={path}", *[item for override in QUIET for item in ("--set", override)]]
    code, stdout, stderr = run(argv, capsys)
    assert code == 2 and "stop: the model would load here" in stderr
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("scl on your data (data.path) keeps"))
    assert "Gunel et al., ICLR 2021" in lines[start] and "method_args.preset=paper" in lines[start]
    body = "\n".join(lines[start:])
    for setting in ("data.few_shot=20  ", "method_args.seeds=[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]", "train.lr=1.0e-05",
                    "train.schedule=constant", "method_args.lam=0.1", "method_args.supcon_reduction=sum",
                    "method_args.protocol=validation_test"):
        assert setting in body, setting
    assert "(paper §4.1)" in body and "(paper §2: tuned per task, value not given)" in body
    assert "train.schedule=constant                            (not given by the paper)" in body
    last = lines[start + 8]
    assert last.startswith("override with --set KEY=VALUE; --set method_args.preset=practical sets ")
    assert "data.few_shot=null" in last and "train.lr=3.0e-05" in last and last.endswith("(docs/methods/scl.md)")
    assert "train.max_steps=2" not in body  # the run's own --set keys are not paper settings


# Every recipe whose paper settings matter on a user's data, and the kind of file it trains on. multitask has
# no Protocol: it trains on registry data.tasks only and refuses data.path / data.dataset.
PROTOCOL_RECIPES = {
    "scl": "reviews", "reclaim": "reviews", "simcse-unsup": "sentences", "simcse-sup": "pairs", "mnrl": "pairs",
    "gd": "sentences", "capt": "sentences", "capt-continued": "sentences",
}


def user_file(folder: Path, kind: str) -> Path:
    if kind == "reviews":
        return write_reviews(folder / "reviews.csv")
    if kind == "pairs":
        return write_pairs(folder, ".csv")
    path = folder / "sentences.txt"
    path.write_text("".join(f"sentence number {i}\n" for i in range(12)), encoding="utf-8")
    return path


@pytest.mark.parametrize("recipe", sorted(PROTOCOL_RECIPES))
def test_every_recipe_with_a_protocol_prints_it_on_a_user_file_before_the_model_loads(recipe, tmp_path, capsys):
    """`contrastext train <recipe> --set data.path=FILE` prints the block (the recipe's Protocol, each setting with
    its source) after the plan; the model (a missing folder here) is loaded only after it."""
    path = user_file(tmp_path, PROTOCOL_RECIPES[recipe])
    overrides = [f"model={tmp_path / 'no-model'}", f"data.path={path}"]
    if PROTOCOL_RECIPES[recipe] != "reviews":
        overrides.append("eval.tasks=[]")  # no data root: STS-B dev is not read
    if recipe == "gd":
        overrides.append("method_args.geometry=false")  # its geometry diagnostics read STS-B dev too
    argv = ["train", recipe, "--output", str(tmp_path / "o"), *[item for o in overrides for item in ("--set", o)]]
    code, stdout, stderr = run(argv, capsys)
    assert code == 2 and "no-model: no such file or folder" in stderr, stderr
    expected = block(recipe, *overrides)
    spec = get_recipe(load_config(RECIPES / f"{recipe}.yaml", []).method)
    assert expected[0] == f"{spec.name} on your data (data.path) keeps the paper's protocol ({spec.protocol.paper}), " \
        "method_args.preset=paper:"
    assert len(expected) == len(spec.protocol.settings) + 2 and expected[-1].endswith(f"({spec.protocol.docs})")
    lines = stdout.splitlines()
    start = lines.index(expected[0])
    assert lines[start:start + len(expected)] == expected
    assert lines[0].startswith(f"training {spec.name} from ") and lines[1].startswith("plan: ")  # the plan first
    assert block(recipe) == []  # the recipe's own benchmark data: nothing to say


@pytest.mark.parametrize("recipe", sorted(PROTOCOL_RECIPES))
def test_every_paper_setting_is_a_key_of_the_recipes_config_with_its_source(recipe):
    """A misspelt key would print nothing (or fail at run time): each one names a field of its section (method_args:
    of the recipe's args model), appears once, and says where its value comes from."""
    config = load_config(RECIPES / f"{recipe}.yaml", [])
    spec = get_recipe(config.method)
    assert spec.protocol is not None
    assert (RECIPES.parent / spec.protocol.docs).is_file()
    keys = [setting.key for setting in spec.protocol.settings]
    assert len(keys) == len(set(keys)) and 1 <= len(keys) <= 8
    for setting in spec.protocol.settings:
        section, _, field = setting.key.partition(".")
        model = spec.args_model if section == "method_args" else type(getattr(config, section))
        assert field in model.model_fields, setting.key
        assert setting.where.strip(), setting.key


def test_multitask_has_no_protocol_since_it_refuses_a_users_file():
    assert get_recipe("multitask").protocol is None


def test_the_block_leaves_out_keys_given_with_set_and_is_absent_on_the_benchmark(tmp_path):
    lines = block("scl", "data.path=reviews.csv", "train.lr=4e-5", "method_args.seeds=[1]")
    assert not any("train.lr=" in line or "method_args.seeds=" in line for line in lines[1:-1])
    assert any(line.strip().startswith("data.few_shot=20") for line in lines)
    assert block("scl") == [] and block("reclaim") == []  # the recipe's own benchmark task under its paper's settings
    reclaim = block("reclaim", "data.dataset=some/folder")
    assert reclaim[0].startswith("reclaim on your data (data.dataset) keeps the paper's protocol")
    assert any(line.strip().startswith("method_args.k=100") and "§5.1" in line for line in reclaim)
    assert any(line.strip().startswith("train.epochs=3") and "appendix C" in line for line in reclaim)


def test_every_recipe_at_its_defaults_is_its_papers_method():
    for recipe in ("scl", "reclaim"):
        config = load_config(RECIPES / f"{recipe}.yaml", [])
        args = parse_method_args(get_recipe(recipe), config)
        assert args.preset == "paper"
        resolved, applied = resolve_preset(get_recipe(recipe), config)
        assert applied == {} and resolved is config


def test_the_practical_preset_sets_its_keys_and_set_wins(tmp_path):
    spec = get_recipe("scl")
    config = load_config(RECIPES / "scl.yaml", ["method_args.preset=practical", "train.lr=4e-5"])
    resolved, applied = resolve_preset(spec, config)
    practical = spec.protocol.presets["practical"]
    assert {key: value for key, (_, value) in applied.items()} == {k: v for k, v in practical.items() if k != "train.lr"}
    assert practical["train.lr"] == 3e-5 and practical["data.few_shot"] is None and practical["method_args.seeds"] is None
    assert applied["train.schedule"] == ("constant", "linear") and applied["method_args.lam"] == (0.1, 0.3)
    assert resolved.train.lr == 4e-5 and resolved.train.schedule == "linear" and resolved.train.head_lr == 1e-3
    assert resolved.data.few_shot is None and config.data.few_shot == 20  # a copy: the given config is unchanged
    args = parse_method_args(spec, resolved)
    assert args.seeds is None and args.lam == 0.3 and args.supcon_reduction == "mean" and args.preset == "practical"
    lines = protocol_lines("scl", spec.protocol, resolved, args, applied)
    assert lines[0] == "scl: method_args.preset=practical replaces the paper's protocol (Gunel et al., ICLR 2021):"
    assert any(line.strip().startswith("train.schedule=linear") and "(instead of constant: not given by the paper)" in line
               for line in lines)
    assert any(line.strip().startswith("train.head_lr=0.001") and "(instead of the recipe's null)" in line for line in lines)
    assert "  kept from --set: train.lr" in lines

    reclaim = get_recipe("reclaim")
    config = load_config(RECIPES / "reclaim.yaml", ["method_args.preset=practical"])
    resolved, applied = resolve_preset(reclaim, config)
    assert set(applied) == set(reclaim.protocol.presets["practical"])
    assert parse_method_args(reclaim, resolved).k == 10 and resolved.train.warmup_ratio == 0.1
    with pytest.raises(ConfigError, match="method_args.preset"):
        resolve_preset(reclaim, load_config(RECIPES / "reclaim.yaml", ["method_args.preset=fast"]))


def test_config_show_marks_the_presets_keys(capsys):
    code, stdout, stderr = run(
        ["config", "show", "scl", "--set", "method_args.preset=practical", "--set", "train.lr=4e-5"], capsys
    )
    assert code == 0, stderr
    origins = {line.split(":")[0].strip(): line.rsplit("# ", 1)[-1] for line in stdout.splitlines() if "# " in line}
    assert origins["schedule"] == "preset practical" and origins["head_lr"] == "preset practical"
    assert origins["few_shot"] == "preset practical" and origins["lam"] == "preset practical"
    assert origins["lr"] == "--set" and origins["preset"] == "--set"
    assert "  schedule: linear" in stdout and "  lam: 0.3" in stdout


def test_scl_keys_on_an_evaluation_file_are_named_after_it(tmp_path, tiny_bert_path, capsys):
    """`data.eval_path=reviews_dev.csv`: validation and test keys read reviews_dev_*, not the training file's."""
    train_path = write_reviews(tmp_path / "reviews_train.csv", rows=24)
    dev_path = write_reviews(tmp_path / "reviews_dev.csv", rows=12, offset=100)
    output = tmp_path / "scl"
    overrides = [*QUIET, f"model={tiny_bert_path}", f"data.path={train_path}", f"data.eval_path={dev_path}",
                 "method_args.seeds=[1]", "data.few_shot=null"]
    argv = ["train", "scl", "--output", str(output), *[item for o in overrides for item in ("--set", o)]]
    code, stdout, stderr = run(argv, capsys)
    assert code == 0, stderr
    draw = json.loads((output / "seed-1" / "metrics.json").read_text())
    assert "reviews_dev_validation_accuracy" in draw["metrics"]
    assert "reviews_dev_test_accuracy" in draw["report"]["test_metrics"]
    assert not any(key.startswith("reviews_train_") for key in draw["metrics"])
    summary = json.loads((output / "summary.json").read_text())
    assert summary["paper_figure"]["metric"] == "reviews_dev_test_accuracy"
    assert draw["report"]["task"] == "reviews_train"  # the classifier's task keeps the training file's name


@pytest.mark.slow
def test_the_practical_preset_learns_on_a_small_real_labelled_file(tmp_path, minilm_path, data_root, capsys):
    """400 SST-2 training rows and 200 others written as a user's CSV; `method_args.preset=practical`, 50 steps
    of all-MiniLM-L6-v2: test accuracy well above the majority class (measured: 74 % after 50 steps, 83 % after
    100; majority of the 200 rows 51.5 %; ~20 s on two CPU threads)."""
    rows = [line.rstrip("\n").split("\t") for line in (data_root / "glue" / "SST-2" / "train.tsv").open()][1:]
    rows = rows[:600]

    def write(path: Path, part: list[list[str]]) -> Path:
        with path.open("w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow(["text", "label"])
            writer.writerows([text, "positive" if label == "1" else "negative"] for text, label in part)
        return path

    train_path, dev_path = write(tmp_path / "reviews.csv", rows[:400]), write(tmp_path / "reviews_dev.csv", rows[400:])
    dev_labels = [label for _, label in rows[400:]]
    majority = 100 * max(dev_labels.count("0"), dev_labels.count("1")) / len(dev_labels)
    output = tmp_path / "scl"
    overrides = [f"model={minilm_path}", f"data.path={train_path}", f"data.eval_path={dev_path}",
                 "method_args.preset=practical", "train.max_steps=50", "train.eval_every=25",
                 "train.save_every=null", "train.progress_bar=false", "train.report_to=none"]
    argv = ["train", "scl", "--output", str(output), *[item for o in overrides for item in ("--set", o)]]
    code, stdout, stderr = run(argv, capsys)
    assert code == 0, stderr
    assert "scl on your data (data.path): method_args.preset=practical replaces the paper's protocol" in stdout
    summary = json.loads((output / "summary.json").read_text())
    assert summary["seeds"] == [42] and summary["paper_figure"]["metric"] == "reviews_dev_test_accuracy"
    assert summary["paper_figure"]["mean"] > majority + 10, (summary["paper_figure"], majority)


def test_the_plan_names_the_rows_a_classifier_on_a_user_file_is_evaluated_on():
    """The recipe's eval.tasks [sst2:dev] go with the data.task that --set data.path replaced: the plan says so."""
    from contrastext.runs.plan import plan_lines

    def plan(recipe: str, *overrides: str) -> list[str]:
        spec = get_recipe(recipe)
        config = load_config(RECIPES / f"{recipe}.yaml", list(overrides))
        return plan_lines(spec.plan(config, parse_method_args(spec, config)))

    scl = plan("scl", "data.path=reviews.csv", "data.eval_path=reviews_dev.csv", "eval.limit=64")
    assert "eval reviews_dev.csv (first 64), split into validation and test" in scl[1] and "sst2" not in scl[1]
    assert "eval a 20% holdout of the training rows (seed 0)" in plan("reclaim", "data.path=reviews.csv")[1]
    assert "eval folder[validation]" in plan("reclaim", "data.dataset=folder", "data.eval_split=validation")[1]
    assert "eval sst2:dev" in plan("scl")[1] and "eval sst2:dev" in plan("reclaim")[1]  # the benchmark: unchanged
