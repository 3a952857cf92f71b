#!/bin/bash
# The live pipeline with the local ladder's arms — the KG model, SmolLM2-135M and Qwen2.5-Coder-1.5B, each
# LLM plain and with KnowGPT's knowledge (P_sub + F_t, PMI scoring) — then its graded log replayed under a
# budget of 0.6 × the best arm's cost, cross-fitted by `fit` on random halvings, in three units: LLM calls
# (the run's own), seconds of this machine with the KG model free, and seconds with the KG model priced at
# its own seconds (docs/measurements/seconds_log.py). Writes OUT/*.json; RUN keeps every answer, so a rerun
# (or a larger FIT / TEST in the same RUN) calls no model twice for a logged answer.
# Usage (from the repository root, KGWISE_DATA set):
#   docs/measurements/live_ladder.sh DATASET KGM_MODEL FIT TEST RUN OUT
set -euo pipefail
D=${1:?dataset}; KGM=${2:?kgm model}; FIT=${3:?fit n}; TEST=${4:?test n}; RUN=${5:?run dir}; OUT=${6:?out dir}
mkdir -p "$OUT"
export KGWISE_LLM_THREADS=${KGWISE_LLM_THREADS:-1}
K="nice -n 10 kgwise"
t() { echo "== $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg): $*"; /usr/bin/time -f "%e s" "$@"; }
t $K eval pipeline --live "$D" --kgm-model "$KGM" --llm smollm2-135m --llm qwen2.5-coder-1.5b \
  --fit-n "$FIT" --test-n "$TEST" --splits 10 --alphas 0.2 --out-dir "$RUN" --json "$OUT/$D-live.json"
python docs/measurements/seconds_log.py "$RUN" "$OUT/$D-seconds.jsonl"
python docs/measurements/seconds_log.py "$RUN" "$OUT/$D-seconds-free-kgm.jsonl" --free-kgm
# the replays read no model: a fresh response cache keeps their figures independent of earlier runs
export KGWISE_CACHE=$(mktemp -d)
A="--arm kgm:KGM --arm smollm2-135m:LLM --arm smollm2-135m+kg:LLM --arm qwen2.5-coder-1.5b:LLM --arm qwen2.5-coder-1.5b+kg:LLM"
P="--budget 0.6 --budget-of best --splits 10 --alphas 0.2"
R="--budget-fraction 0.6 --budget-of best --no-slow-baselines --no-sensitivity --no-tune --no-plots --seeds 5 --splits 5"
for unit in calls seconds-free-kgm seconds; do
  log="$OUT/$D-$unit.jsonl"
  [ "$unit" = calls ] && log="$RUN/graded.jsonl"
  ctx="--context predicted"  # the learned predictor needs a free arm: not with the KG model priced
  [ "$unit" = seconds ] && ctx=""
  t $K eval pipeline --log "$log" $A $P $ctx --json "$OUT/$D-pipe-$unit.json"
  t $K eval route --log "$log" $A $R --json "$OUT/$D-route-$unit.json"
done
