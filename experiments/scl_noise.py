"""SCL under label noise (our substitute for Gunel et al.'s back-translation noise, ICLR 2021, §4.2, §5.3,
Table 5): 0 / 20 / 40 % of the labels of a 2,000-example SST-2 training subset flipped, cross-entropy alone
(CE, ``method_args.lam=0``) vs CE + supervised contrastive loss ((1 − λ)·CE + λ·SupCon, τ 0.3) with λ tuned
on validation per seed from a reduced grid {0.1, 0.5, 0.9}, 5 seeds.

Each run record is one seed of one setting (``"p0/ce"``, ``"p0/ce+scl@0.1"``, ``"p0/ce+scl@0.5"``,
``"p0/ce+scl@0.9"``, ``"p20/ce"``, ...; λ written with ``:g``): the ``scl`` recipe with
``method_args.seeds=[<seed>]``, ``data.few_shot=2000`` (2,000 SST-2 train rows in total, following the label
distribution, drawn by the seed) and ``data.label_noise`` = the flip rate (the flipped rows drawn by the seed
too). So for one seed every setting trains on the same 2,000 sentences, and CE and CE+SCL (every λ) at one flip
rate see the same flipped labels: differences are paired by seed, within a noise level and across noise
levels. The validation (436 rows, checkpoint selection) and test (436 disjoint rows) sets are the recipe's
split of SST-2 dev (split seed 0), clean and the same for every run, as in the paper ("We keep the validation
and test sets same", §4.2).

**λ is tuned, not run** (as in ``scl_few_shot``, whose functions this script uses): per seed and flip rate,
among the λ of ``--lams`` recorded for that seed (all of them, else the seed is left out), the λ with the best
(clean) VALIDATION accuracy, ties → the smaller λ, and its TEST accuracy. The verdicts (per flip rate, and "the
gap grows with noise") use tuned CE+SCL; each fixed λ is shown beside as secondary lines. The first version
ran one point, λ = 0.9, under the setting name ``p<rate>/ce+scl``: at this training length CE+SCL stayed near
chance at every flip rate (the CE part, which trains the classifier head, weighs 1 − λ = 0.1), so its "gap
grows with noise" was a floor effect (CE falling to chance at 40 %), not robustness. Those 30 records are kept
as the λ = 0.9 grid point: renamed ``p<rate>/ce+scl@0.9`` when the store is loaded, and saved back.
Floor-effect guard: settings whose mean test accuracy is within 3 points of the majority-class share of the
test rows (or below) are flagged "at chance", and so is every verdict that involves them.

This is NOT the paper's experiment: the paper augments N = 100 examples 1:3 with back-translated copies
(WMT'18 en-de-en, random sampling at temperature T = 0.3 … 0.9) whose inputs are noisy and whose labels are
kept; flipped labels are label noise on the inputs as they are. Both ask whether SCL makes fine-tuning more
robust to noisy training data.

Defaults (their reference cost on 2 quiet cores, ``experiments/cost.py`` by ``scl_few_shot.run_seconds``, is
stated in the report): 125 steps = 1 epoch of the 2,000 examples at batch 16, validation every 25 steps (5
evaluations); 60 runs (3 flip rates × 4 settings (CE and CE+SCL at 3 λ) × 5 seeds).

Example::

    python experiments/scl_noise.py --data-root ../shared/data --budget-minutes 90
    python experiments/scl_noise.py --report-only
    python experiments/scl_noise.py --noise 0 40 --seeds 2 --lams 0.5 0.9 --steps 4 --eval-every 2 --subset 64 \\
        --results /tmp/scl_noise-smoke --runs /tmp/scl_noise-runs          # a tiny smoke test
"""

from __future__ import annotations

import argparse
import functools
import math
import statistics
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import cost  # noqa: E402
import harness  # noqa: E402
import scl_few_shot as fs  # noqa: E402  (the shared recipe runner, λ grid, tuning, chance level, top-3 figure)

NAME = "scl_noise"
NOISE = (0, 20, 40)  # % of the training labels flipped
SEEDS = 5
SUBSET = 2000
STEPS = 125  # 1 epoch of 2,000 at batch 16
EVAL_EVERY = 25
LAMS = fs.LAMS
CE, TUNED = fs.CE, fs.TUNED
TEST_KEY, VALIDATION_KEY = fs.TEST_KEY, fs.VALIDATION_KEY

# Table 5, SST-2 row, RoBERTa-large, N = 100 (+ 1:3 back-translated copies): top 3 of 10 draws, test accuracy.
PAPER_COLUMNS = ("Original", "T=0.3", "T=0.5", "T=0.7", "T=0.9", "Average")
PAPER_SST2 = {
    "ce": ("91.1±1.3", "92.0±1.3", "91.4±1.0", "91.7 ± 1.3", "90.0±0.5", "91.3±1.2"),
    "ce+scl": ("92.8 ± 1.3", "92.6 ± 0.9", "91.5 ± 1.0", "91.2±0.6", "91.5 ± 1.0", "91.7 ± 1.0"),
}
CLAIM = (
    "We observe consistent improvements over the RoBERTa-Large baseline with our proposed objective across all "
    "datasets across all noise levels, with 0.4% improvement on SST-2, 2.5% improvement on QNLI, and 7% "
    "improvement on MNLI on average across augmented training sets. The improvement is particularly significant "
    "for inference tasks (QNLI, MNLI) when the noise levels are higher (higher temperature), leading to 7.7% "
    "improvement on MNLI when T=0.7, and 4.2% improvement on QNLI when T=0.9."
)
# The first sitting (λ = 0.9 only, 30 runs; docs/results/scl_noise.json before the λ grid): test accuracy ×100,
# mean over 5 seeds, at 0 / 20 / 40 % flipped.
FIRST_SITTING = {"ce": (70.4, 63.9, 53.2), "ce+scl@0.9": (53.1, 50.0, 50.3)}


def setting_name(noise: int, loss: str) -> str:
    return f"p{noise}/{loss}"


def parse_setting(setting: str) -> tuple[int, str]:
    """``"p20/ce+scl@0.5"`` -> ``(20, "ce+scl@0.5")``."""
    rate, _, loss = setting.partition("/")
    try:
        if not rate.startswith("p"):
            raise ValueError(rate)
        noise = int(rate[1:])
        fs.loss_lam(loss)
    except ValueError:
        raise ValueError(f"not a setting of {NAME}: {setting!r}") from None
    return noise, loss


def seeds(args: argparse.Namespace) -> list[int]:
    return list(range(1, args.seeds + 1))


def plan(args: argparse.Namespace) -> list[tuple[str, int]]:
    """Seeds outermost (a partial sitting covers every flip rate and λ), then flip rate, then CE, CE+SCL per λ."""
    return [(setting_name(p, loss), seed) for seed in seeds(args) for p in args.noise for loss in fs.losses(args.lams)]


def run_folder(args: argparse.Namespace, setting: str, seed: int) -> Path:
    noise, loss = parse_setting(setting)
    return Path(args.runs) / NAME / f"p{noise}-{loss.replace('+', '-').replace('@', '-')}" / f"seed-{seed}"


def overrides(args: argparse.Namespace, setting: str, seed: int) -> list[str]:
    """The ``--set`` list of one seed of one setting."""
    noise, loss = parse_setting(setting)
    sets = [
        f"output_dir={run_folder(args, setting, seed)}",
        f"method_args.seeds=[{seed}]",
        f"data.few_shot={args.subset}",
        f"data.label_noise={noise / 100:g}",
        f"train.max_steps={args.steps}",
        f"train.eval_every={args.eval_every}",
        f"train.save_every={args.steps}",
        f"train.log_every={max(1, min(10, args.steps))}",
        "train.keep_last=1",
        "train.overwrite=true",
        "train.progress_bar=false",
        "train.report_to=[]",
        "method_args.head=linear",  # the head the recorded runs had (the default is now the paper's dense_tanh)
        *fs.loss_overrides(loss),
    ]
    if args.eval_limit:
        sets.append(f"eval.limit={args.eval_limit}")  # smoke tests only: changes the validation/test split
    return sets


def reference_seconds(args: argparse.Namespace, setting: str) -> float:
    """Seconds of one run on 2 quiet cores by the cost model (every setting trains the same steps)."""
    return fs.run_seconds(args.subset, args.steps, args.eval_every)


def run_one(args: argparse.Namespace) -> Callable[[str, int], tuple[dict, dict]]:
    def one(setting: str, seed: int) -> tuple[dict, dict]:
        noise, loss = parse_setting(setting)
        record, metrics = fs.run_scl(args, NAME, overrides(args, setting, seed), seed, run_folder(args, setting, seed))
        expected = round(noise / 100 * args.subset)
        flipped = metrics.get("labels_flipped") or 0
        if noise and abs(flipped - expected) > max(2, 0.01 * args.subset):
            raise RuntimeError(f"{setting} seed {seed}: {flipped} labels flipped, expected about {expected}")
        record.update(noise=noise / 100, loss=loss, lam=fs.loss_lam(loss), temperature=fs.TEMPERATURE,
                      subset=args.subset, max_steps=args.steps, eval_every=args.eval_every)
        return record, metrics

    return one


def majority_share(args: argparse.Namespace) -> tuple[float | None, str]:
    """Chance level of the test rows (the same clean rows at every flip rate): :func:`scl_few_shot.majority_share`."""
    return fs.majority_share(args)


# --------------------------------------------------------------------------------------------- statistics


def comparisons(store: harness.RecordStore, noise: Sequence[int],
                lams: Sequence[float] = LAMS) -> dict[int, harness.Comparison]:
    """Tuned CE+SCL vs CE per flip rate, paired by seed (seeds with every λ recorded)."""
    read = fs.values_reader(store, lams)
    return {
        p: harness.compare(store, setting_name(p, TUNED), setting_name(p, CE), TEST_KEY, 1, values=read)
        for p in noise
    }


def lam_comparisons(store: harness.RecordStore, noise: Sequence[int],
                    lams: Sequence[float] = LAMS) -> dict[int, dict[float, harness.Comparison]]:
    """Each fixed λ vs CE per flip rate (secondary)."""
    return {
        p: {lam: harness.compare(store, setting_name(p, fs.scl_loss(lam)), setting_name(p, CE), TEST_KEY, 1)
            for lam in lams}
        for p in noise
    }


def gap_values(store: harness.RecordStore, noise: int, lams: Sequence[float] = LAMS,
               loss: str = TUNED) -> dict[int, float]:
    """``seed -> test accuracy(CE+SCL) − test accuracy(CE)`` at one flip rate (``loss``: tuned or one λ)."""
    read = fs.values_reader(store, lams)
    scl = read(setting_name(noise, loss), TEST_KEY)
    ce = read(setting_name(noise, CE), TEST_KEY)
    return {s: scl[s] - ce[s] for s in sorted(set(scl) & set(ce))}


def gap_growth(store: harness.RecordStore, low: int, high: int, lams: Sequence[float] = LAMS,
               loss: str = TUNED) -> harness.Comparison:
    """Does the gap grow with noise? Gap at ``high`` vs gap at ``low``, paired by seed (same 2,000 rows)."""

    def values(setting: str, _key: str) -> dict[int, float]:
        return gap_values(store, int(setting.removeprefix("gap@p")), lams, loss)

    return harness.compare(store, f"gap@p{high}", f"gap@p{low}", TEST_KEY, 1, values=values)


def floor_in_growth(store: harness.RecordStore, low: int, high: int, share: float | None,
                    lams: Sequence[float] = LAMS, loss: str = TUNED) -> str:
    """``"CE is at chance at 40 %"`` (settings of the gap-growth comparison at chance), or ``""``."""
    where: dict[str, list[int]] = {}
    for p in (low, high):
        for name in fs.chance_losses(store, [setting_name(p, CE), setting_name(p, loss)], share, lams):
            where.setdefault(name, []).append(p)
    return " and ".join(
        f"{name} is at chance at {' and '.join(f'{p} %' for p in rates)}" for name, rates in where.items()
    )


def growth_text(growth: harness.Comparison, low: int, high: int, floor: str) -> str:
    """The numbers of a gap-growth comparison, and its floor-effect caveat."""
    if len(growth.seeds) < 2:
        return f"not enough seeds ({len(growth.seeds)} paired)"
    text = (
        f"gap at {high} % {statistics.fmean(growth.treatment_values):+.2f} vs at {low} % "
        f"{statistics.fmean(growth.baseline_values):+.2f} (n = {len(growth.seeds)}, paired by seed): "
        f"growth = {growth.mean_difference:+.2f}, 95 % CI [{growth.low:+.2f}, {growth.high:+.2f}] → "
        f"{growth.verdict}"
    )
    if floor and growth.reproduced:
        return f"{text}, but {floor}: a floor effect, not robustness"
    return f"{text}; {floor}" if floor else text


# ---------------------------------------------------------------------------------------------- report


def report(store: harness.RecordStore, args: argparse.Namespace) -> str:
    fs.migrate(store)  # records of the first version, if the store was not loaded with fs.load_store
    noise, lams = list(args.noise), list(args.lams)
    share, chance_text = majority_share(args)
    found = comparisons(store, noise, lams)
    per_lam = lam_comparisons(store, noise, lams)
    epochs = args.steps / math.ceil(args.subset / fs.BATCH_SIZE)
    first = FIRST_SITTING
    lines = [
        "## SCL (Gunel et al., ICLR 2021): robustness to noisy training data (label flips on SST-2)",
        "",
        f"**Claim** (§5.3, Table 5): “{CLAIM}” And the abstract: “We also demonstrate that the new objective "
        "leads to models that are more robust to different levels of noise in the training data”.",
        "",
        "**Paper's numbers** (Table 5, SST-2 row, RoBERTa-large; N = 100 plus back-translated copies 1:3, the "
        "noise level being the back-translation temperature T; top 3 of 10 draws by validation):",
        "",
        harness.markdown_table(
            ["loss", *PAPER_COLUMNS],
            [["CE", *PAPER_SST2["ce"]], ["CE + SCL", *PAPER_SST2["ce+scl"]]],
        ),
        "On SST-2 the paper's gain is small (+0.4 on average) and not monotone in T (at T = 0.7 CE + SCL is "
        "below CE, 91.2 vs 91.7); its “larger gain at higher noise” is said of QNLI and MNLI.",
        "",
        "**Protocol and sizes, ours vs the paper's.** Our substitute for the paper's back-translation noise: "
        f"**label flips** — {', '.join(f'{p} %' for p in noise)} of the labels of a {args.subset:,}-example SST-2 "
        "training subset flipped to the other class (`data.label_noise`), where the paper adds noisy *inputs* "
        "with their labels kept. Flipped labels are a harsher, different kind of noise (a wrong target, not a "
        "paraphrase); no translation model runs here.",
        "",
        harness.markdown_table(
            ["", "paper (§4.2, §5.3)", "ours"],
            [
                ["encoder", "RoBERTa-large", "all-MiniLM-L6-v2, [CLS] + dropout 0.1 + linear head"],
                ["training data", "N = 100 + 300 back-translated copies (T = 0.3, 0.5, 0.7, 0.9)",
                 f"{args.subset:,} SST-2 train rows (following the label distribution, drawn by the seed), "
                 f"{', '.join(str(p) for p in noise)} % labels flipped (same rows, seeded flips)"],
                ["draws / seeds", "10 draws, top 3 by validation", f"{args.seeds} seeds (each its own subset and "
                 "flips, shared by CE and every CE + SCL λ and by every flip rate); all seeds reported, top 3 "
                 "beside"],
                ["validation / test", "the few-shot ones (~500 / half of dev), clean",
                 "436 / 436 disjoint rows of SST-2 dev (split seed 0), clean, the same for every run"],
                ["optimiser", "Adam, lr 1e-5, batch 16, dropout 0.1", "same (constant lr, no warmup, no clipping)"],
                ["training length", "not given", f"{args.steps} steps ({epochs:.1f} epoch(s)), validation every "
                 f"{args.eval_every} steps; the best checkpoint on validation is scored on test"],
                ["λ", "tuned per task (§2), not reported",
                 f"tuned on validation per seed (and flip rate) from {fs.lam_grid(lams)} (the paper tunes λ per "
                 "task; grid not given): per seed the λ with the best clean validation accuracy (ties → the "
                 "smaller), its test accuracy; CE is λ = 0"],
                ["τ", "tuned, not reported", f"{fs.TEMPERATURE:g} (the recipe's), fixed"],
            ],
        ),
        "all-MiniLM-L6-v2 is already sentence-tuned (contrastive training on ~1B sentence pairs, with mean "
        "pooling; the head here reads its [CLS] vector, as the paper's Φ): its embedding space already groups "
        "sentences by meaning, so SupCon has less structure left to add than on RoBERTa-large. With about one "
        "epoch each flipped label is seen once, and checkpoints are selected on clean validation labels, so "
        "neither loss has much chance to memorise the flips: the regime where a robustness difference would show "
        "most is not reached at this size. Numbers are not comparable with the paper's.",
        "",
        "**Why λ is tuned.** The first sitting ran one point, λ = 0.9 (the recipe's default), 30 runs: CE + SCL "
        f"stayed near chance at every flip rate ({', '.join(f'{v:.1f}' for v in first['ce+scl@0.9'])} % test "
        f"accuracy at 0 / 20 / 40 % flipped) while CE reached {first['ce'][0]:.1f} % on clean labels. At λ = 0.9 "
        "the cross-entropy part, the only one that trains the classifier head, weighs 1 − λ = 0.1, and at lr 1e-5 "
        f"over {STEPS} steps the head barely trains. The mechanical verdict of that sitting, “the gap grows with "
        f"noise → reproduced”, came from CE falling towards chance at 40 % ({first['ce'][2]:.1f} %): a floor "
        "effect, not robustness. Those runs are kept as the λ = 0.9 point of the grid; the verdicts below use "
        "λ tuned on validation, as the paper does.",
        "",
        "**Our results** (test accuracy ×100 on the 436 test rows, checkpoint selected on the clean validation "
        "set):",
        "",
        chance_text,
        "",
        _results_table(store, noise, lams, share),
    ]
    for p in noise:
        c = found[p]
        if len(c.seeds) >= 2:
            names = fs.chance_losses(store, [setting_name(p, TUNED), setting_name(p, CE)], share, lams)
            text = c.text(digits=2) + fs.chance_note(names, share)
        else:
            text = f"not enough seeds ({len(c.seeds)} paired with every λ of {fs.lam_grid(lams)} recorded)"
        lines += [f"**Verdict:** {p} % flipped (CE + SCL with λ tuned on validation per seed): {text}.", ""]
    lines += ["Per λ (fixed; secondary, not verdicts):", ""]
    for p in noise:
        for lam in lams:
            setting = setting_name(p, fs.scl_loss(lam))
            c_lam = per_lam[p][lam]
            if len(c_lam.seeds) >= 2:
                names = fs.chance_losses(store, [setting, setting_name(p, CE)], share, lams)
                body = c_lam.text(digits=2) + fs.chance_note(names, share)
            else:
                body = f"not enough seeds ({len(c_lam.seeds)} paired)"
            lines.append(
                f"- {p} % flipped, λ = {lam:g}: {body}; top 3 by validation "
                f"{fs.fmt_top(fs.top_k(store, setting, lams=lams))} vs CE "
                f"{fs.fmt_top(fs.top_k(store, setting_name(p, CE), lams=lams))}."
            )
    lines.append("")
    if len(noise) >= 2:
        low, high = min(noise), max(noise)
        growth = gap_growth(store, low, high, lams)
        text = growth_text(growth, low, high, floor_in_growth(store, low, high, share, lams))
        lines += [f"**Verdict:** the gap grows with noise ({low} % → {high} %, λ tuned): {text}.", ""]
        lines += ["Per λ (fixed; secondary):", ""]
        for lam in lams:
            loss = fs.scl_loss(lam)
            fixed = gap_growth(store, low, high, lams, loss)
            floor = floor_in_growth(store, low, high, share, lams, loss)
            lines.append(f"- λ = {lam:g}: {growth_text(fixed, low, high, floor)}.")
        lines.append("")
    lines += [
        f"![SST-2 test accuracy vs flip rate, CE and CE + SCL]({NAME}.png)",
        "",
        f"Command: `{harness.command(NAME, args, _extra(args))}` (resumable). Planned: {len(plan(args))} runs "
        f"({len(noise)} flip rates × (CE + {len(lams)} λ) × {args.seeds} seeds), "
        f"≈ {cost.plan_minutes(reference_seconds, args, plan(args)):.0f} min "
        f"on 2 quiet cores; recorded: {_recorded(store, args)}.",
        "",
    ]
    return "\n".join(lines)


def _done(store: harness.RecordStore, args: argparse.Namespace) -> tuple[int, int]:
    planned = plan(args)
    return sum(store.has(s, seed) for s, seed in planned), len(planned)


def _recorded(store: harness.RecordStore, args: argparse.Namespace) -> str:
    done, planned = _done(store, args)
    complete = ", ".join(
        f"{p} %: {len(fs.tuned_draws(store, f'p{p}', args.lams))}/{args.seeds}" for p in args.noise
    )
    return f"{done}/{planned} runs; seeds with every λ recorded (those tuned CE + SCL uses): {complete}"


def _extra(args: argparse.Namespace) -> str:
    parts = []
    if list(args.noise) != list(NOISE):
        parts.append("--noise " + " ".join(str(p) for p in args.noise))
    if list(args.lams) != list(LAMS):
        parts.append("--lams " + " ".join(f"{lam:g}" for lam in args.lams))
    for option, value, default in (
        ("--seeds", args.seeds, SEEDS), ("--subset", args.subset, SUBSET), ("--steps", args.steps, STEPS),
        ("--eval-every", args.eval_every, EVAL_EVERY),
    ):
        if value != default:
            parts.append(f"{option} {value}")
    if args.eval_limit:
        parts.append(f"--eval-limit {args.eval_limit}")
    return " ".join(parts)


def _results_table(store: harness.RecordStore, noise: Sequence[int], lams: Sequence[float],
                   share: float | None) -> str:
    read = fs.values_reader(store, lams)
    rows = []
    for p in noise:
        for loss in [*fs.losses(lams), TUNED]:
            setting = setting_name(p, loss)
            test = list(read(setting, TEST_KEY).values())
            validation = list(read(setting, VALIDATION_KEY).values())
            notes = []
            if loss == TUNED and test:
                notes.append(fs.picks(fs.tuned_draws(store, f"p{p}", lams)))
            if fs.at_chance(test, share):
                notes.append("**at chance**")
            rows.append([
                f"{p} %",
                fs.loss_label(loss),
                harness.fmt_mean_std(test, digits=1),
                fs.fmt_top(fs.top_k(store, setting, lams=lams)),
                harness.fmt_mean_std(validation, digits=1),
                "; ".join(notes),
            ])
        gaps = list(gap_values(store, p, lams).values())
        rows.append([f"{p} %", "Δ (CE + SCL, λ tuned − CE)", harness.fmt_mean_std(gaps, digits=2), "", "", ""])
    return harness.markdown_table(
        ["flipped", "loss", "test acc, all seeds (n)", "top 3 by validation", "validation acc", "note"], rows
    )


def summary(store: harness.RecordStore, args: argparse.Namespace | None = None) -> dict:
    args = args or parse_args([])
    fs.migrate(store)
    done, planned = _done(store, args)
    found = comparisons(store, args.noise, args.lams)
    reproduced = [p for p in args.noise if found[p].verdict == "reproduced"]
    if done < planned:
        complete = ", ".join(f"{p} % {len(found[p].seeds)}/{args.seeds}" for p in args.noise)
        verdict = f"partial: {done}/{planned} runs (seeds with every λ: {complete})"
    elif len(reproduced) == len(args.noise):
        verdict = "reproduced (label flips, our substitute)"
    elif not reproduced:
        verdict = "not reproduced at this scale"
    else:
        verdict = "partly: " + ", ".join(
            f"{p} % {'✓' if p in reproduced else '✗'}" for p in args.noise
        )
    numbers = "; ".join(
        f"{p}%: Δ {found[p].mean_difference:+.1f} [{found[p].low:+.1f}, {found[p].high:+.1f}] (n={len(found[p].seeds)})"
        if len(found[p].seeds) >= 2 else f"{p}%: –"
        for p in args.noise
    )
    share, _ = majority_share(args)
    if len(args.noise) >= 2:
        low, high = min(args.noise), max(args.noise)
        growth = gap_growth(store, low, high, args.lams)
        if len(growth.seeds) >= 2:
            floor = floor_in_growth(store, low, high, share, args.lams)
            numbers += (
                f"; gap growth {low}→{high}%: {growth.mean_difference:+.1f} [{growth.low:+.1f}, {growth.high:+.1f}]"
                f" → {growth.verdict}" + (f" ({floor}: floor effect)" if floor else "")
            )
    return {
        "paper": "Gunel et al., ICLR 2021 (SCL), noise robustness",
        "claim": "CE+SCL beats CE on noisy training data (back-translation; ours: label flips), more so with more noise",
        "verdict": verdict,
        "numbers": f"test acc CE+SCL (λ tuned per seed from {fs.lam_grid(args.lams)}) − CE: " + numbers,
    }


# ------------------------------------------------------------------------------------------------- plot


def plot(store: harness.RecordStore, args: argparse.Namespace, path: Path) -> Path:
    """Test accuracy vs flip rate: mean ± std over seeds (filled) of CE, each λ and tuned CE + SCL; top 3 by
    validation (hollow) of CE and tuned CE + SCL; chance level."""
    lams = list(args.lams)
    read = fs.values_reader(store, lams)
    share, _ = majority_share(args)
    plt = harness.pyplot()
    figure, ax = plt.subplots(figsize=(6.4, 5.4))
    for loss in [*fs.losses(lams), TUNED]:
        colour, shift = fs.series_style(loss, lams)
        headline = loss in (CE, TUNED)
        label = fs.loss_label(loss) + (f", τ {fs.TEMPERATURE:g}" if loss != CE else "")
        points, tops = [], []
        for index, p in enumerate(args.noise):
            values = list(read(setting_name(p, loss), TEST_KEY).values())
            if values:
                points.append((index + shift, *harness.mean_std(values)))
            figure_ = fs.top_k(store, setting_name(p, loss), lams=lams) if headline else None
            if figure_:
                tops.append((index + shift + 0.03, figure_["mean"], figure_["std"]))
        if points:
            ax.errorbar([x for x, _, _ in points], [m for _, m, _ in points], yerr=[s for _, _, s in points],
                        color=colour, marker="o", capsize=3, alpha=1.0 if headline else 0.6,
                        label=f"{label}: all seeds")
        if tops:
            ax.errorbar([x for x, _, _ in tops], [m for _, m, _ in tops], yerr=[s for _, _, s in tops],
                        color=colour, marker="D", markerfacecolor="white", linestyle=":", capsize=3,
                        label=f"{label}: top 3 by validation")
    if share is not None:
        ax.axhline(share, color="grey", linestyle=":", linewidth=1, label=f"majority class (chance), {share:.1f}")
    ax.set_xticks(range(len(args.noise)))
    ax.set_xticklabels([f"{p} %" for p in args.noise])
    ax.set_xlim(-0.5, len(args.noise) - 0.5)
    ax.set_xlabel(f"training labels flipped ({args.subset:,}-example SST-2 subset)")
    ax.set_ylabel("SST-2 test accuracy ×100")
    ax.set_title("SCL under label noise (all-MiniLM-L6-v2), mean ± std over seeds", fontsize="medium")
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize="xx-small", loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=80)
    plt.close(figure)
    return path


# ---------------------------------------------------------------------------------------- command line


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = harness.parser(__doc__.split("\n\n")[0])
    p.add_argument("--noise", type=int, nargs="+", default=list(NOISE), help="%% of labels flipped (default %(default)s)")
    p.add_argument("--seeds", type=int, default=SEEDS, help="seeds 1..S (default %(default)s)")
    p.add_argument("--lams", type=float, nargs="+", default=list(LAMS),
                   help="the λ grid of CE+SCL, tuned on validation per seed in the report (default %(default)s)")
    p.add_argument("--subset", type=int, default=SUBSET, help="training examples in total (default %(default)s)")
    p.add_argument("--steps", type=int, default=STEPS, help="max_steps (default %(default)s = 1 epoch)")
    p.add_argument("--eval-every", type=int, default=EVAL_EVERY, help="validation every k steps (default %(default)s)")
    p.add_argument("--eval-limit", type=int, default=None,
                   help="smoke tests only: first rows of SST-2 dev (changes the validation/test split)")
    p.add_argument("--keep-runs", action="store_true", help="keep each run folder (weights, ~600 MB)")
    args = p.parse_args(argv)
    if args.seeds < 1 or any(not 0 <= x < 100 for x in args.noise):
        raise SystemExit("--seeds must be ≥ 1 and --noise values in [0, 100)")
    args.lams = fs.parse_lams(args.lams)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    store = fs.load_store(NAME, args.results)
    left = 0
    if not args.report_only:
        print(
            f"[{NAME}] plan: {len(plan(args))} runs ({len(args.noise)} flip rates × (CE + CE+SCL at λ "
            f"{fs.lam_grid(args.lams)}) × {args.seeds} seeds), "
            f"≈ {cost.plan_minutes(reference_seconds, args, plan(args)):.0f} min on 2 quiet cores",
            flush=True,
        )
        reference = functools.partial(reference_seconds, args)
        left = harness.run_plan(store, plan(args), run_one(args), harness.Budget(args.budget_minutes), reference)
    path = harness.write_report(store, report(store, args))
    png = plot(store, args, Path(args.results) / f"{NAME}.png")
    print(f"[{NAME}] wrote {path} and {png}; {left} run(s) left", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
