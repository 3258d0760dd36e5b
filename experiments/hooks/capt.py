"""CAPT's hook (experiments/specs/capt.yaml): the staged pre-training, the seeded fine-tuning and the task average;
the from-scratch block's corpus, its pre-trainings per seed and the mean over its fine-tuning seeds; its read-out
diagnostic: a never pre-trained control encoder (``initialise``), frozen-feature probes (``probe``) and the frozen
embeddings' geometry (``geometry``).

Each variant is pre-trained once (``pretrain/<variant>``, seed 0) through ``run_recipe`` with no fine-tuning stage;
its encoder is kept in ``<runs>/capt/pretrained/<variant>/encoder`` (with ``pretrain.json``, written last) and
loaded by every fine-tuning of the variant, also in a later sitting. A fine-tuning whose variant's encoder is gone
(record present, folder deleted) pre-trains it again; once every planned fine-tuning of a variant but the one
running is recorded, its encoder is deleted after that run.

Why not ``run_recipe`` for the fine-tuning: ``contrastext.runs.capt.run`` always pre-trains first, fine-tunes one
task per run, and its fine-tuning stage forces ``data.few_shot`` off (the same first rows for every seed); here the
run module's pieces (``finetune_config``, ``capt_encoder``, ``FineTuneMethod``, ``run_training``) fine-tune on a
draw of ``train_rows`` rows made with the fine-tuning seed (label distribution kept).
"""

from __future__ import annotations

import json
import math
import shutil
import statistics
from pathlib import Path

import harness
from run import finite, remove

TASKS = ("sst2", "mrpc", "rte")
METRIC = "accuracy"  # §3.2 / Table 5: accuracy for SST-2, MRPC and RTE
# Accuracy of always predicting the dev split's most frequent class (444/872, 279/408, 146/277); MRPC's F1 of always
# predicting "paraphrase": 2·279 / (2·279 + 129).
MAJORITY = {"sst2": 50.92, "mrpc": 68.38, "rte": 52.71, "mrpc_f1": 81.22}
MAJORITY["avg"] = statistics.fmean(MAJORITY[t] for t in TASKS)


QUEUE = 8192  # recipes/capt.yaml's method_args.queue_size: the queued negatives of every CAPT anchor
SCRATCH = "scratch/"  # the from-scratch block (issue 25 item 6): one pre-training per variant AND pre-training seed
CORPUS = "scratch-corpus.txt"  # its pre-training sentences, in <runs>/capt (prepare_corpus)


def _folder(run) -> Path:
    """``<runs>/capt``: the run folder's grandparent (what ``<runs>`` stands for in the spec's overrides)."""
    return run.output_dir.parents[1]


def _key(run) -> str:
    """The pre-trained encoder a run makes or reads: its variant (``pretrain/<variant>``: one pre-training per
    variant), or ``scratch-<variant>-seed-<s>`` (the from-scratch block: the record's seed is the pre-training's)."""
    variant = run.point["variant"]
    return f"scratch-{variant}-seed-{run.seed}" if run.name.startswith(SCRATCH) else variant


def _weights(run, key: str) -> Path:
    return _folder(run) / "pretrained" / key


def _pretraining(run, args):
    """The planned run that pre-trains ``run``'s encoder (same block, variant and, from scratch, seed)."""
    import run as runner  # experiments/run.py

    prefix = SCRATCH if run.name.startswith(SCRATCH) else ""
    return next((r for r in runner.plan(run.spec, args) if r.name == f"{prefix}pretrain/{run.point['variant']}"
                 and (not prefix or r.seed == run.seed)), None)


def _resolved(run) -> list[str]:
    """The run's overrides with ``<runs>/`` as the experiment's runs folder."""
    return [item.replace("=<runs>/", f"={_folder(run)}/", 1) for item in run.overrides]


def prepare_corpus(args):
    """The from-scratch pre-training sentences, ``<runs>/capt/scratch-corpus.txt`` (written when it differs): the
    wiki1m sentences, then SST-2's training sentences (issue 25 item 6). QNLI has no training file in the data root
    (only dev, which a read-out may split), so none of its text is used."""
    from contrastext import load_task

    root = Path(args.data_root)
    sentences = [e.texts[0] for task in ("wiki1m", "sst2:train") for e in load_task(task, root).examples]
    text = "".join(" ".join(s.split()) + "\n" for s in sentences if s.strip())
    target = Path(args.runs) / "capt" / CORPUS
    target.parent.mkdir(parents=True, exist_ok=True)
    if not target.exists() or target.read_text(encoding="utf-8") != text:
        target.write_text(text, encoding="utf-8")
    return args


def _cached(run, variant: str, overrides: list[str]) -> dict | None:
    """The stored summary of the variant's encoder when it is there and was made with these overrides."""
    folder = _weights(run, variant)
    if not (folder / "pretrain.json").is_file() or not (folder / "encoder").is_dir():
        return None
    stored = json.loads((folder / "pretrain.json").read_text(encoding="utf-8"))
    return stored if stored.get("overrides") == overrides else None


def _last_losses(log_path: Path, count: int = 3) -> dict:
    """Mean of the last ``count`` logged values of loss/mlm, loss/capt and grad_norm; with train.part_grad_norms,
    also each part's gradient norm (``grad_norm_mlm``, ``grad_norm_capt``) and their curve over the logged steps
    (``grad_parts``: [step, mlm, capt] rows): the loss balance of issue 25 item 6."""
    from contrastext import read_log

    records = [r for r in read_log(log_path) if "loss" in r]
    found: dict = {}
    for key, name in (("loss/mlm", "loss_mlm"), ("loss/capt", "loss_capt"), ("grad_norm", "grad_norm"),
                      ("grad_norm/mlm", "grad_norm_mlm"), ("grad_norm/capt", "grad_norm_capt")):
        values = [finite(r[key]) for r in records[-count:] if r.get(key) is not None]
        found[name] = statistics.fmean(values) if values and None not in values else None
    parts = [[r["step"], finite(r["grad_norm/mlm"]), finite(r.get("grad_norm/capt"))] for r in records if "grad_norm/mlm" in r]
    if parts:
        found["grad_parts"] = parts
    else:  # records made before the part norms were logged
        found = {key: value for key, value in found.items() if key not in ("grad_norm_mlm", "grad_norm_capt")}
    return found


def _pretrain(run, args) -> dict:
    """Pre-train ``run``'s variant and keep its encoder; returns the stored summary."""
    from contrastext import load_config, recipe_path, run_recipe

    variant = run.point["variant"]
    config = load_config(recipe_path(run.recipe), _resolved(run))
    summary = run_recipe(config, data_root=Path(args.data_root))
    stage = summary["pretrain"]
    final = Path(stage["final_model_dir"])
    if not final.is_dir():
        raise RuntimeError(f"pre-training {variant}: no final encoder in {final}")
    metrics = {"stsb_dev_spearman_start": finite(stage.get("start_metrics", {}).get("stsb_dev_spearman")),
               "stsb_dev_spearman": finite(stage["metrics"].get("stsb_dev_spearman")),
               "steps": float(stage["last_step"]), **_last_losses(Path(stage["log_path"]))}
    inputs = _inputs(run.output_dir / "pretrain", args, config)  # the recipe's pre-training stage folder
    folder = _weights(run, _key(run))
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    shutil.move(str(final), str(folder / "encoder"))
    stored = {"overrides": run.comparable(), "metrics": metrics, "inputs": inputs}
    (folder / "pretrain.json").write_text(json.dumps(stored, indent=1) + "\n", encoding="utf-8")  # written last
    remove(run.output_dir)  # checkpoints with the optimiser state
    return stored


def _initialise(run, args) -> dict:
    """Keep the random small BERT of ``run``'s overrides with no pre-training step (the read-outs' control), in the
    layout of a pre-trained encoder; returns the stored summary."""
    from contrastext import get_recipe, load_config, recipe_path, set_seed
    from contrastext.runs.capt import capt_encoder
    from contrastext.runs.registry import parse_method_args

    config = load_config(recipe_path(run.recipe), _resolved(run))
    set_seed(config.seed)
    encoder = capt_encoder(config, parse_method_args(get_recipe(config.method), config))
    folder = _weights(run, _key(run))
    shutil.rmtree(folder, ignore_errors=True)
    encoder.save(folder / "encoder")
    stored = {"overrides": run.comparable(), "metrics": {"steps": 0.0},
              "inputs": {"resolved_config": config.model_dump(mode="json")}}
    (folder / "pretrain.json").write_text(json.dumps(stored, indent=1) + "\n", encoding="utf-8")  # written last
    return stored


def initialise(run, args) -> tuple[dict, dict]:
    """The ``scratch/pretrain/none`` record: the kept random encoder's summary, made when it is not there."""
    stored = _cached(run, _key(run), run.comparable()) or _initialise(run, args)
    return dict(stored["metrics"]), dict(stored["inputs"])


def _inputs(stage_dir: Path, args, config) -> dict:
    """The stage folder's resolved config and data hashes (the config given, when the folder has none)."""
    import run as runner  # experiments/run.py

    inputs = runner.run_folder_record(stage_dir, Path(args.data_root))
    inputs["resolved_config"] = inputs.get("resolved_config") or config.model_dump(mode="json")
    return inputs


def pretrain(run, args) -> tuple[dict, dict]:
    """The ``pretrain/<variant>`` record: the cached encoder's summary when it is there, else a pre-training."""
    stored = _cached(run, _key(run), run.comparable())
    reused = stored is not None
    stored = stored or _pretrain(run, args)
    return dict(stored["metrics"]), {**stored["inputs"], "reused_cached_weights": reused}


def finetune(run, args) -> tuple[dict, dict]:
    """One ``<variant>/<task>`` fine-tuning with the run's seed (from scratch: ``fseed``): the capt run module's
    fine-tuning stage on a seeded draw of ``train_rows`` (``scratch_train_rows``) rows."""
    from contrastext import get_recipe, load_config, recipe_path, set_seed
    from contrastext.methods.classification import FineTuneMethod
    from contrastext.runs.capt import capt_encoder, finetune_config
    from contrastext.runs.classification import ClassificationArgs, head_evaluator
    from contrastext.runs.data import load_classification_data
    from contrastext.runs.registry import parse_method_args
    from contrastext.runs.stages import MethodBundle, run_training, stage_config

    # from scratch, the record's seed is the pre-training's and the grid's ``fseed`` the fine-tuning's
    task, seed, key = run.point["task"], run.point.get("fseed", run.seed), _key(run)
    rows = run.sizes["scratch_train_rows" if run.name.startswith(SCRATCH) else "train_rows"]
    pretraining, again = _encoder_ready(run, args)
    config = load_config(recipe_path(run.recipe), _resolved(run))
    method_args = parse_method_args(get_recipe(config.method), config)
    stage = stage_config(finetune_config(config, method_args, seed), data={"few_shot": rows})
    encoder = capt_encoder(config, method_args)
    data = load_classification_data(stage, ClassificationArgs(pooling=encoder.pooling), Path(args.data_root),
                                    seed=seed, few_shot_sampling="label_distribution")
    set_seed(stage.train_seed)  # the fresh head's initialisation, as contrastext.runs.capt.finetune
    description = dict(data.description)
    bundle = MethodBundle(FineTuneMethod(encoder, data.task), list(data.train), head_evaluator(stage, data),
                          final_report=lambda _m: description)
    found = run_training(stage, bundle)["metrics"]
    inputs = _inputs(Path(stage.output_dir), args, stage)
    remove(run.output_dir)
    metrics = {name: finite(found.get(f"{task}_dev_{name}")) for name in ("accuracy", "f1", "mcc")}
    if metrics[METRIC] is None:
        raise RuntimeError(f"{run.name} seed {seed}: no {task}_dev_{METRIC} in {sorted(found)}")
    metrics.update(n_train=float(description["n_train"]), n_eval=float(description["n_eval"]))
    inputs.update(stage_data={"few_shot": rows, "few_shot_sampling": "label_distribution", "draw_seed": seed},
                  train_label_counts=description.get("train_label_counts"), pretrained_again=again)
    if pretraining is not None:
        _clean(run, args, key)
    return metrics, inputs


def _encoder_ready(run, args):
    """``(the planned pre-training of run's encoder, whether it was pre-trained again)``: an encoder whose record is
    there but whose folder was deleted (or made with other overrides) is pre-trained again first."""
    pretraining = _pretraining(run, args)
    again = pretraining is not None and _cached(run, _key(run), pretraining.comparable()) is None
    if again:
        (_initialise if pretraining.setting.run == "initialise" else _pretrain)(pretraining, args)
    return pretraining, again


def probe(run, args) -> tuple[dict, dict]:
    """The frozen encoder's dev accuracy under the library's linear probe (``contrastext eval``'s: logistic
    regression on ``scratch_train_rows`` seeded training rows, C by 5-fold cross-validation), pooled by the grid's
    ``pooling`` (else the encoder's own): whether the encoder carries the task's signal apart from any fine-tuning
    lr (the read-out diagnostic)."""
    from contrastext.evaluation.suite import evaluate_task
    from contrastext.models.encoder import TextEncoder

    pretraining, again = _encoder_ready(run, args)
    key, task = _key(run), run.point["task"]
    encoder = TextEncoder.load(_weights(run, key) / "encoder")
    encoder.pooling = run.point.get("pooling", encoder.pooling)
    _, found = evaluate_task(encoder, f"{task}:dev", args.data_root, max_train=run.sizes["scratch_train_rows"])
    metrics = {name: finite(found.get(name)) for name in ("accuracy", "f1", "mcc")}
    if pretraining is not None:
        _clean(run, args, key)
    about = {name: found[name] for name in ("C", "c_selection", "n", "n_train") if name in found}
    return metrics, {"probe": about, "pooling": encoder.pooling, "pretrained_again": again}


def geometry(run, args) -> tuple[dict, dict]:
    """Mean pairwise cosine and uniformity (Wang & Isola, t = 2; 0 when every sentence has one embedding) of the
    frozen encoder's embeddings of the task's dev sentences, pooled by the mean and by [CLS]."""
    import numpy as np

    from contrastext import load_task
    from contrastext.evaluation.geometry import uniformity
    from contrastext.models.encoder import TextEncoder

    pretraining, again = _encoder_ready(run, args)
    key, task = _key(run), run.point["task"]
    encoder = TextEncoder.load(_weights(run, key) / "encoder")
    texts = list(dict.fromkeys(e.texts[0] for e in load_task(f"{task}:dev", Path(args.data_root)).examples))
    metrics = {}
    for pooling in ("mean", "cls"):
        encoder.pooling = pooling
        found = np.asarray(encoder.encode(texts, batch_size=64), dtype=np.float64)
        unit = found / np.linalg.norm(found, axis=1, keepdims=True)
        cosines = unit @ unit.T
        metrics[f"cosine_{pooling}"] = float((cosines.sum() - len(texts)) / (len(texts) * (len(texts) - 1)))
        metrics[f"uniformity_{pooling}"] = float(uniformity(found))
    if pretraining is not None:
        _clean(run, args, key)
    return metrics, {"sentences": len(texts), "pretrained_again": again}


def _clean(run, args, key: str) -> None:
    """Delete an encoder once every planned fine-tuning of it but this one is recorded."""
    import run as runner

    store = harness.RecordStore(run.spec.name, args.results)
    others = [r for r in runner.plan(run.spec, args) if "task" in r.point and _key(r) == key
              and (r.name, r.seed) != (run.name, run.seed)]
    if all(store.has(r.name, r.seed) for r in others):
        shutil.rmtree(_weights(run, key), ignore_errors=True)


# ---------------------------------------------------------------------------------------------- reading


def task_average(spec, store, values):
    """``values`` plus ``<variant>/avg``: the mean over the tasks of a seed that has all of them; and
    ``scratch/<variant>/<task>``: per pre-training seed, the mean over the fine-tunings ``…@f<k>`` of the spec's
    grid, for a seed that has all of them."""
    from spec import render  # experiments/spec.py

    names = [render(s.name, {**point, "seed": 0}) for s in spec.settings for point in s.points()]

    def read(setting: str, key: str) -> dict[int, float]:
        draws = [name for name in names if name.startswith(f"{setting}@f")]
        if setting.startswith(SCRATCH) and draws:
            found = [values(name, key) for name in draws]
            common = set.intersection(*(set(f) for f in found))
            return {seed: statistics.fmean(f[seed] for f in found) for seed in sorted(common)}
        variant, _, task = setting.partition("/")
        if task != "avg":
            return values(setting, key)
        per_task = [values(f"{variant}/{t}", key) for t in TASKS]
        if not all(per_task):
            return {}
        common = set.intersection(*(set(found) for found in per_task))
        return {seed: statistics.fmean(found[seed] for found in per_task) for seed in sorted(common)}

    return read


def context(page: dict) -> dict:
    """The page's CAPT functions: ``pretrained(variant, key)``, the majority figures, ``on_floor(task)`` (the
    variants within 3 points of the majority), the measured minutes per stage and whether the STS-B and GLUE
    rankings agree."""
    store = page["store"]
    variants = ["none", "mlm", "mask", "shuffle", "mask-fixed"]

    def pretrained(variant: str, key: str):
        record = store.get(f"pretrain/{variant}", 0)
        return None if record is None else record["metrics"].get(key)

    minutes: dict[str, float] = {}  # measured run time per stage
    for record in store.records:
        head, _, tail = record["setting"].removeprefix(SCRATCH).partition("/")
        key = "pre-training" if head == "pretrain" else f"{tail.partition('@')[0]} fine-tuning"
        key = "read-out diagnostic" if head == "diag" else key
        key = f"from scratch: {key}" if record["setting"].startswith(SCRATCH) else key
        minutes[key] = minutes.get(key, 0.0) + record["wall_s"] / 60
    def mlm_share(variant: str) -> list[float]:
        """Per pre-training seed of ``scratch/pretrain/<variant>``: the mean over its logged steps of
        ‖g_mlm‖ / (‖g_mlm‖ + ‖g_capt‖) ×100 (train.part_grad_norms)."""
        shares = []
        for record in store.records:
            rows = record["metrics"].get("grad_parts") if record["setting"] == f"{SCRATCH}pretrain/{variant}" else None
            rows = [(mlm, capt) for _, mlm, capt in rows or [] if mlm is not None and capt is not None and mlm + capt > 0]
            if rows:
                shares.append(100 * statistics.fmean(mlm / (mlm + capt) for mlm, capt in rows))
        return shares

    def readouts_at_majority(variant: str) -> tuple[int, int]:
        """(read-outs of ``scratch/<variant>/sst2@f…`` whose accuracy is SST-2's majority rate, read-outs)."""
        found = [r["metrics"]["accuracy"] for r in store.records if r["setting"].startswith(f"{SCRATCH}{variant}/sst2@f")]
        return sum(abs(value - MAJORITY["sst2"]) < 0.01 for value in found), len(found)

    def diag(variant: str, suffix: str, key: str = METRIC):
        """The read-out diagnostic's value of ``scratch/diag/<variant>/sst2@<suffix>`` (pre-training seed 1)."""
        return store.values(f"{SCRATCH}diag/{variant}/sst2@{suffix}", key).get(1)

    def diag_finetunes(variant: str) -> list[float]:
        """The diagnostic's fine-tuned accuracies of one encoder: every pooling and lr recorded."""
        return [r["metrics"][METRIC] for r in store.records
                if r["setting"].startswith(f"{SCRATCH}diag/{variant}/sst2@") and "-lr" in r["setting"]]

    sts = {v: pretrained(v, "stsb_dev_spearman") for v in variants[1:]}
    glue = {v: page["mean"](f"{v}/avg", METRIC) for v in variants[1:]}
    same_rank = None not in sts.values() and sorted(sts, key=sts.get) == sorted(glue, key=glue.get)
    return {"variants": variants, "majority": MAJORITY, "pretrained": pretrained, "minutes": minutes,
            "mlm_share": mlm_share, "readouts_at_majority": readouts_at_majority, "diag": diag,
            "diag_finetunes": diag_finetunes, "fmt_values": lambda found, digits=2: harness.fmt_mean_std(found, digits=digits),
            "limit_minutes": harness.DEFAULT_BUDGET_MINUTES,
            "same_rank": same_rank,
            # Eq. 4 with a uniform guess: two directions, each over 2B − 1 in-batch and QUEUE queued candidates
            "uniform_capt_loss": 2 * math.log(2 * page["scratch_batch_size"] - 1 + QUEUE),
            "on_floor": lambda task: [v for v in variants if page["mean"](f"{v}/{task}", METRIC) < MAJORITY[task] + 3]}
