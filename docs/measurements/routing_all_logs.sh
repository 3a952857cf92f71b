#!/bin/bash
# The commands of docs/routing.md, once each, on every graded log: `kgwise eval route --log` and
# `kgwise eval pipeline --log`, budget 0.6 × the best arm's cost, 5 random halvings (routing alone: --no-sets).
# Writes OUT/*.json, then the per-log table of docs/routing.md (OUT/table.json).
# Usage (from the repository root): docs/measurements/routing_all_logs.sh OUT
set -euo pipefail
OUT=${1:?usage: $0 OUT}
mkdir -p "$OUT"
export KGWISE_CACHE=$(mktemp -d)
K="nice kgwise"
R="--budget-fraction 0.6 --budget-of best --no-slow-baselines --no-sensitivity --no-tune --no-plots --seeds 5 --splits 5"
P="--budget 0.6 --budget-of best --splits 5 --no-sets"
NEW="--arm openbook-overlap:KGM --arm phi4:LLM --arm qwen2.5-32b:LLM --arm qwq-32b:LLM"
CSQA="--arm kgm:KGM --arm smollm2-135m:LLM --arm gemma3-270m:LLM"
LADDER="--arm kgm:KGM --arm smollm2-135m:LLM --arm smollm2-135m+kg:LLM --arm qwen2.5-coder-1.5b:LLM --arm qwen2.5-coder-1.5b+kg:LLM"
OBQA="--arm kgm:KGM --arm smollm2-135m:LLM --arm smollm2-135m+kg:LLM --arm gemma3-270m:LLM --arm gemma3-270m+kg:LLM"
WEB="--arm ReaRev-lmsr:KGM:0.7773 --arm ReaRev-sbert:KGM:0.7639 --arm RoG-GNN:LLM:0.8569 --arm llama2-chat:LLM:0.8679 --arm Qwen3-max-AoG:LLM:0.8185 --arm ChatGPT:LLM:0.6745 --arm text-davinci-003:LLM:0.6359"
$K eval data export --dataset webqsp --log "$OUT/webqsp.jsonl"
# eval pipeline keys questions by text: copies of the OBQA logs keeping each text's first question
for log in obqa-local obqa-ollama-dev; do
  python -c 'import json, sys
seen = set()
for line in open(sys.argv[1]):
    t = json.loads(line)["text"]
    if t not in seen:
        seen.add(t); sys.stdout.write(line)' "tests/data/logs/$log.jsonl" > "$OUT/$log-distinct.jsonl"
done
t() { echo "== $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg): $*"; /usr/bin/time -f "%e s" "$@"; }
t $K eval route --log tests/data/logs/obqa-ollama-dev.jsonl $NEW $R --json "$OUT/route-ollama.json"
t $K eval pipeline --log "$OUT/obqa-ollama-dev-distinct.jsonl" $NEW $P --context predicted --json "$OUT/pipe-ollama.json"
t $K eval route --log tests/data/logs/csqa-local.jsonl $CSQA $R --json "$OUT/route-csqa.json"
t $K eval route --log tests/data/logs/csqa-local-probs-1.5b.jsonl $LADDER $R --json "$OUT/route-ladder.json"
t $K eval route --log tests/data/logs/obqa-local.jsonl $OBQA $R --json "$OUT/route-obqa.json"
t $K eval route --log "$OUT/webqsp.jsonl" $WEB $R --json "$OUT/route-webqsp.json"
t $K eval pipeline --log tests/data/logs/csqa-local.jsonl $CSQA $P --context predicted --json "$OUT/pipe-csqa.json"
t $K eval pipeline --log tests/data/logs/csqa-local-probs-1.5b.jsonl $LADDER $P --context predicted --json "$OUT/pipe-ladder.json"
t $K eval pipeline --log "$OUT/obqa-local-distinct.jsonl" $OBQA $P --context predicted --json "$OUT/pipe-obqa.json"
t $K eval pipeline --log "$OUT/webqsp.jsonl" $WEB $P --context question+free --json "$OUT/pipe-webqsp.json"
python docs/measurements/routing_table.py "$OUT" --json "$OUT/table.json"
