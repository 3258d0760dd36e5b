"""Retrieval with the four commands (mine -> train -> eval ir -> encode): nDCG@10 before and after training,
with in-batch negatives only or with mined hard negatives (issue 23, item 7).

The data: ``experiments/retrieval_data.py`` builds a BEIR folder from the shared SNLI triplets (premise ->
the hypotheses it entails, among all 11,380 hypotheses of the file; a seeded split of the premises into test,
dev and training queries) and the training pairs ``(premise, entailed hypothesis)``. The commands, exactly as
docs/RETRIEVAL.md gives them to a user:

1. ``contrastext mine``: one hard negative per training pair, mined among the training positives with
   all-MiniLM-L6-v2 and sentence-transformers' documented filter (range 10..50, max score 0.8, relative margin
   0.05, random sampling);
2. ``contrastext train retrieval``: the retrieval recipe (MNRL, no-duplicates batches), one epoch, each arm
   with ``--seeds`` (1..5):
   - ``in-batch``: the pairs, in-batch negatives only;
   - ``mined``: the mined triplets (offline hard negatives);
   - ``bank``: the pairs with online hard negatives from a kept bank (``negatives.source=bank``, k = 8,
     relative margin 0.05, momentum refresh: issue 24, item 2);
   - ``contradictions``: the training premises with the file's own hard negative, the contradicted hypothesis
     (``train_triplets.csv``, SimCSE's supervised triplets). **Added after the first in-batch and mined runs**
     had lowered test nDCG@10 (a post-hoc arm, said wherever it is shown): the test's close distractors are
     contradictions, which neither the in-batch nor the mined negatives (other premises' hypotheses) are;
3. ``contrastext eval --tasks ir:FOLDER@test --json``: the test qrels, all of ST's IR metrics;
4. ``contrastext encode``: the corpus with the trained model (once, for the last run: the workflow's last step).

Settings (``setting``, ``seed``): ``before`` (seed 0: the starting model, evaluated once: evaluation is
deterministic), ``mined-negatives`` (seed 0: the mining, recorded for its time and counts), the three arms x
seeds. One epoch is one evaluation candidate, so the runs evaluate no dev set (``eval.tasks=[]``): their final
weights are scored on test.

The comparisons, declared here before the runs (committed first): test nDCG@10 (cosine), paired by seed,
``mined − in-batch``, ``bank − in-batch``, ``bank − mined``, each with Δ, a 95 % t-interval, the t-test p and
the exact sign-flip permutation p (experiments/significance.py). They are exploratory (not among issue 25's
seven primaries): intervals and p values, no verdict word. Each run's wall time is recorded beside them (the
cost per run; the runs are not a speed benchmark).

Example::

    .venv/bin/python experiments/retrieval.py --data-root ../shared/data
    .venv/bin/python experiments/retrieval.py --report-only
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import yaml

from contrastext.runtime.provenance import provenance

sys.path.insert(0, str(Path(__file__).resolve().parent))

import cost  # noqa: E402
import harness  # noqa: E402
import retrieval_data  # noqa: E402
import significance  # noqa: E402

NAME = "retrieval"
MODEL = "bundled:all-MiniLM-L6-v2"
METRICS = ("cosine_ndcg@10", "cosine_mrr@10", "cosine_recall@100", "cosine_map@100")
HEADLINE = "cosine_ndcg@10"
MINE_OPTIONS = (
    "--num-negatives", "1", "--range-min", "10", "--range-max", "50", "--max-score", "0.8",
    "--relative-margin", "0.05", "--sampling-strategy", "random",
)
BANK_OPTIONS = ("negatives.source=bank", "negatives.k=8", "negatives.relative_margin=0.05")
ARMS = ("in-batch", "mined", "bank", "contradictions")
COMPARISONS = (("mined", "in-batch"), ("bank", "in-batch"), ("bank", "mined"), ("contradictions", "in-batch"))
POST_HOC = {"contradictions"}
DEFAULTS = {"seeds": [1, 2, 3, 4, 5], "epochs": 1, "batch_size": 64}
CONTRASTEXT = [sys.executable, "-m", "contrastext"]


def run_command(arguments: list[str]) -> None:
    """One contrastext command; its output goes to the terminal; a failure stops the experiment."""
    print("$ contrastext " + " ".join(arguments), flush=True)
    subprocess.run([*CONTRASTEXT, *arguments], check=True, cwd=harness.REPO)


def evaluate(model: str, folder: Path, json_path: Path) -> dict:
    """``contrastext eval --tasks ir:FOLDER@test --json``: the test metrics (x100, as eval writes them)."""
    run_command(["eval", "-m", model, "--tasks", f"ir:{folder}@test", "--json", str(json_path)])
    payload = json.loads(json_path.read_text(encoding="utf-8"))
    scores = payload["tasks"][folder.name]
    return {key: scores[key] for key in METRICS} | {"n": scores["n"], "corpus": scores["corpus"]}


def train(data_path: Path, seed: int, sizes: dict, output: Path, extra: tuple[str, ...] = ()) -> dict:
    """``contrastext train retrieval`` on ``data_path`` (``extra``: more ``--set`` items); returns the resolved
    config the run saved."""
    if output.exists():
        shutil.rmtree(output)  # a run folder of an interrupted sitting: not a record, started again
    run_command([
        "train", "retrieval", "-o", str(output),
        "--set", f"data.path={data_path}", "--set", f"seed={seed}", "--set", "eval.tasks=[]",
        "--set", f"train.epochs={sizes['epochs']}", "--set", f"train.batch_size={sizes['batch_size']}",
        "--set", "train.progress_bar=false", *(part for item in extra for part in ("--set", item)),
    ])
    return {"resolved_config": (output / "config.yaml").read_text(encoding="utf-8")}


def report(store: harness.RecordStore, args) -> str:
    """The markdown section: the table of every setting, the paired difference, the workflow's commands."""
    manifest = next((r["metrics"] for r in store.records if r["setting"] == "data"), {})
    rows = []
    for setting in ("before", *ARMS):
        values = {key: list(store.values(setting, key).values()) for key in (*METRICS, "s_per_step")}
        if values[HEADLINE]:
            step = f"{statistics.fmean(values['s_per_step']):.2f}" if values["s_per_step"] else "–"
            rows.append([setting + (" (post hoc)" if setting in POST_HOC else ""), len(values[HEADLINE])] + [harness.fmt_mean_std(values[k]) for k in METRICS]
                        + [step])
    headers = ["setting", "runs", *(k.replace("cosine_", "") for k in METRICS), "s / training step"]
    table = harness.markdown_table(headers, rows)
    lines = [
        "## Retrieval: before and after; in-batch, mined and online bank negatives (issues 23, 24)", "",
        f"Data: {manifest.get('source', 'nli/snli_devtest_for_simcse.csv')} as a BEIR folder "
        f"(`experiments/retrieval_data.py`): {manifest.get('corpus', '?')} documents (every hypothesis), "
        f"{manifest.get('queries', {}).get('test', '?')} test queries (premises; a seeded split, ours), "
        f"{manifest.get('train_pairs', '?')} training pairs. Model {MODEL}; scores ×100, mean ± sample std (runs); "
        "seconds per training step: the median logged throughput of each run, averaged over its seeds (the bank "
        "arm's one-off fill of the bank before the first step is not in it: see its records).",
        "", table, "",
    ]
    for treatment, baseline in tuple((arm, "before") for arm in ARMS) + COMPARISONS:
        if baseline == "before":
            before = store.values("before", HEADLINE)
            after = list(store.values(treatment, HEADLINE).values())
            if before and after:
                lines.append(f"- {treatment} − before, nDCG@10: {statistics.fmean(after) - next(iter(before.values())):+.2f} "
                             f"(the start is one deterministic evaluation)")
            continue
        result = significance.paired(store.values(treatment, HEADLINE), store.values(baseline, HEADLINE))
        if result.n >= 2:
            lines.append(
                f"- {treatment} − {baseline}, nDCG@10, paired by seed (n = {result.n}): Δ {result.delta:+.2f}, "
                f"95 % t-interval [{result.low:+.2f}, {result.high:+.2f}], t-test p = {result.t_p:.3g}, sign-flip "
                f"permutation p = {result.permutation_p:.3g}. Exploratory ("
                + ("a post-hoc arm, added after the first runs" if treatment in POST_HOC else
                   "declared before the runs in the module docstring")
                + ", not one of the seven primaries): no verdict word."
            )
    mining = store.get("mined-negatives", 0)
    if mining:
        lines.append(f"- mining: {mining['metrics'].get('rows', '?')} triplets written in {mining['wall_s']:.0f} s.")
    seeds = " ".join(str(seed) for seed in sorted({r["seed"] for r in store.records if r["setting"] in ARMS}))
    lines += ["", f"Reproduce: `python experiments/{NAME}.py --data-root ../shared/data --seeds {seeds}` (resumable: "
              "recorded runs are skipped; `--report-only` rewrites this section)."]
    return "\n".join(lines)


def triplets(folder: Path, manifest: dict, data_root: str) -> Path:
    """``train_triplets.csv`` of ``folder``, written from the same build when a folder made before it lacks it."""
    path = folder / "train_triplets.csv"
    if not path.exists():
        built = retrieval_data.build(Path(data_root), manifest["seed"], manifest["queries"]["test"],
                                     manifest["queries"]["dev"])
        retrieval_data.write_table(path, ("anchor", "positive", "negative"), built["triplets"])
    return path


def training_cost(output: Path) -> dict:
    """Seconds per optimiser step (the median of the logged throughputs, the batch over samples/s) and what the
    run reported of its negatives (the bank's fill and refresh times)."""
    log = [json.loads(line) for line in (output / "train_log.jsonl").read_text(encoding="utf-8").splitlines()]
    config = yaml.safe_load((output / "config.yaml").read_text(encoding="utf-8"))
    rates = sorted(record["samples_per_s"] for record in log if record.get("samples_per_s"))
    report = json.loads((output / "metrics.json").read_text(encoding="utf-8")).get("report", {})
    measured = {"steps": max((record["step"] for record in log if "step" in record), default=0)}
    if rates:
        measured["s_per_step"] = config["train"]["batch_size"] / rates[len(rates) // 2]
    if "negatives" in report:
        measured["negatives_report"] = report["negatives"]
    return measured


def summary(store: harness.RecordStore, args=None) -> dict:
    """The line of the README / RESULTS summary table: test nDCG@10 of each setting and the paired differences."""
    cells = []
    for setting in ("before", *ARMS):
        found = list(store.values(setting, HEADLINE).values())
        label = setting + (" (post hoc)" if setting in POST_HOC else "")
        cells.append(f"{label} {statistics.fmean(found):.2f}" if found else f"{label} –")
    differences = []
    for treatment, baseline in COMPARISONS:
        result = significance.paired(store.values(treatment, HEADLINE), store.values(baseline, HEADLINE))
        if result.n >= 2:
            differences.append(f"{treatment}−{baseline} Δ {result.delta:+.2f} [{result.low:+.2f}, {result.high:+.2f}]"
                               f" p {result.permutation_p:.2g}")
    return {
        "paper": "Henderson et al. 2017 (MNRL); sentence-transformers' retrieval workflow (issues 23, 24)",
        "claim": "training on (query, positive) pairs raises nDCG@10; mined / online hard negatives beat in-batch",
        "verdict": "exploratory: intervals, no verdict word (not a declared primary)",
        "numbers": "test nDCG@10 " + ", ".join(cells) + ("; " + "; ".join(differences) if differences else ""),
    }


def main(argv: list[str] | None = None) -> int:
    parser = harness.parser(__doc__.split("\n\n")[0], budget_minutes=60)
    parser.add_argument("--seeds", type=int, nargs="+", default=DEFAULTS["seeds"])
    parser.add_argument("--epochs", type=float, default=DEFAULTS["epochs"])
    parser.add_argument("--batch-size", type=int, default=DEFAULTS["batch_size"])
    args = parser.parse_args(argv)
    store = harness.RecordStore(NAME, args.results)
    if not args.report_only:
        sizes = {"epochs": args.epochs, "batch_size": args.batch_size}
        runs = Path(args.runs) / NAME
        folder = runs / "nli-retrieval"
        if not (folder / "manifest.json").exists():
            retrieval_data.main(["--data-root", args.data_root, "--output", str(folder)])
        manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
        machine = provenance()
        if not store.has("data", 0):
            store.add("data", 0, {}, manifest, harness.RunTiming(), provenance=machine)
        mined = folder / "train_mined.csv"

        def run_one(setting: str, seed: int) -> tuple[dict, dict]:
            if setting == "before":
                return {"model": MODEL}, evaluate(MODEL, folder, runs / "before.json")
            if setting == "mined-negatives":
                if mined.exists():
                    mined.unlink()
                run_command(["mine", "-m", MODEL, "-i", str(folder / "train_pairs.csv"), "-o", str(mined),
                             *MINE_OPTIONS])
                return {"options": list(MINE_OPTIONS)}, {"rows": sum(1 for _ in mined.open(encoding="utf-8")) - 1}
            output = runs / f"{setting}-{seed}"
            data = {"mined": mined, "contradictions": triplets(folder, manifest, args.data_root)}.get(
                setting, folder / "train_pairs.csv")
            extra = BANK_OPTIONS if setting == "bank" else ()
            config = train(data, seed, sizes, output, extra) | {"sizes": sizes, "data": str(data), "set": list(extra)}
            metrics = evaluate(str(output / "final" / "encoder"), folder, output / "test.json") | training_cost(output)
            if seed == args.seeds[-1] and setting == "mined":
                run_command(["encode", "-m", str(output / "final" / "encoder"), "-i", str(folder / "corpus.txt"),
                             "-o", str(runs / "corpus_embeddings.npy")])
            shutil.rmtree(output)
            return config | {"provenance": machine}, metrics

        plan = [("before", 0), ("mined-negatives", 0)] + [
            (setting, seed) for seed in args.seeds for setting in ARMS
        ]
        harness.run_plan(store, plan, run_one, harness.Budget(args.budget_minutes), cost.RETRIEVAL_RUN_S)
    path = harness.write_report(store, report(store, args))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
