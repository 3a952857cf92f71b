"""Convert the answers of phi4, qwen2.5:32b and qwq on OpenBookQA (``predictions/obqa_katulevskiy_ollama``)
into a graded log (``docs/graded-logs.md``), with a free lexical open-book arm beside them.

Run: ``PYTHONPATH=src python docs/measurements/obqa_ollama_log.py --data /work/shared/data
--out tests/data/logs/obqa-ollama-dev.jsonl``. It prints what it matched and what it could not.

**Which questions.** ``results_matrix.json`` holds, per model, 500 answer indices (0–3, ``null`` where the
model's answer was not parsed) and ``expected_answers``, the 500 gold indices, with no ids or texts. The
data README calls them OBQA *test*; they are OBQA **dev**: the gold sequence equals ``obqa/Main/dev.jsonl``'s
answer keys in file order at all 500 positions (against test.jsonl's at 141, about chance: 1/4), and the
folder's other files (``knowledge_graph_facts.json``) are keyed by dev ids in the same order. Row ``k`` is
therefore dev question ``k``; the script refuses to write unless the two gold sequences agree everywhere.
A null answer is written as the empty answer, graded wrong, and counted per arm.

**Prices** (the recording gives no token counts and no times). Each answer costs the model's serverless
price per 1M tokens at Together AI's size tiers (https://www.together.ai/pricing, "chat, language and
code" models, the table ``kgwise/data/prices.toml`` already cites for Llama-2: 8.1B–21B $0.30, 21.1B–41B
$0.80 per 1M tokens, input = output): phi4 (14.7B) 0.30, qwen2.5:32b (32.5B) 0.80, qwq (32.5B) 0.80. The
unit is therefore "US $ per million tokens of one answer", the same token count assumed for every arm: the
ratio between arms is the price ratio. qwq is a reasoning model that writes many more tokens than the
other two, so its cost here is a lower bound.

**The free arm** ``openbook-overlap`` (no language model; computed here, not tuned on these questions:
the rule was written once, before its accuracy was seen): each choice is scored by its best open-book
fact (``obqa/Main/openbook.txt``), ``score(c) = max_f idf(T(q) ∩ T(f)) · idf(T(c) ∩ T(f))`` (content
words: lower-cased alphabetic tokens of 3+ letters, a short stop list removed; ``idf(S) = Σ_{w∈S}
ln(N / df_w)`` over the N facts), its answer the top choice (ties: the first), its signals the softmax
of the scores' top probability, margin over the second and entropy — what a free arm's signals are in
``eval pipeline --live``'s logs (``docs/graded-logs.md``) — and that softmax per choice as its
``probabilities``. Each question carries dev's ``gold`` label, so ``eval pipeline --log`` replays its
multiple-choice sets (the three LLM arms, which give answers only, as letter replies:
``kgwise.eval.pipeline_mc``).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections import Counter
from pathlib import Path

from kgwise.datasets import load_openbook_facts
from kgwise.datasets.obqa import load_obqa
from kgwise.types import Question

SOURCE = "predictions/obqa_katulevskiy_ollama/results_matrix.json"
ARMS = {"phi4:latest": ("phi4", 0.30), "qwen2.5:32b": ("qwen2.5-32b", 0.80), "qwq:latest": ("qwq-32b", 0.80)}
"""Recorded model → (arm name in the log, US $ per 1M tokens: Together AI's size tier, module docstring)."""
FREE = "openbook-overlap"
STOP = frozenset(["the", "and", "are", "for", "that", "with", "this", "from", "which", "what", "when",
                  "where", "who", "how", "can", "does", "will", "into", "than", "then", "they", "them",
                  "their", "there", "these", "those", "its", "has", "have", "had", "was", "were", "been",
                  "being", "not", "but", "all", "any", "most", "more", "some", "such", "only", "also", "use",
                  "used", "uses", "using", "would", "could", "should"])


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z]+", text.lower()) if len(w) >= 3 and w not in STOP}


class OpenBookOverlap:
    """The free arm (module docstring)."""

    def __init__(self, facts: list[str]) -> None:
        self.facts = [_words(f) for f in facts]
        df = Counter(w for f in self.facts for w in f)
        self.idf = {w: math.log(len(self.facts) / n) for w, n in df.items()}

    def _weight(self, words: set[str]) -> float:
        return sum(self.idf.get(w, 0.0) for w in sorted(words))  # sorted: the same sum in every run

    def answer(self, q: Question) -> tuple[str, list[float], dict[str, float]]:
        """The top choice, the signals, and the softmax of the scores per choice label."""
        qw = _words(q.text)
        scores = [max(self._weight(qw & f) * self._weight(_words(c.text) & f) for f in self.facts)
                  for c in q.choices]
        top = max(scores)
        e = [math.exp(s - top) for s in scores]
        probs = {c.label: x / sum(e) for c, x in zip(q.choices, e, strict=True)}
        p = sorted(probs.values(), reverse=True)
        entropy = -sum(x * math.log(x) for x in p if x > 0)
        return q.choices[scores.index(top)].label, [p[0], p[0] - p[1], entropy], probs


def convert(data: Path) -> tuple[list[dict[str, object]], dict[str, object]]:
    raw = json.loads((data / SOURCE).read_text(encoding="utf-8"))
    models, matrix, expected = raw["models"], raw["results_matrix"], raw["expected_answers"]
    dev, test = load_obqa(data, "dev"), load_obqa(data, "test")
    if set(models) != set(ARMS) or any(len(row) != len(expected) for row in matrix):
        sys.exit(f"{SOURCE}: models {models} and row lengths {[len(r) for r in matrix]} are not the expected "
                 f"{sorted(ARMS)} × {len(expected)}")

    def gold_index(q: Question) -> int:
        return [c.label for c in q.choices].index(q.gold[0])

    dev_match = sum(e == gold_index(q) for e, q in zip(expected, dev, strict=False))
    test_match = sum(e == gold_index(q) for e, q in zip(expected, test, strict=False))
    if len(dev) != len(expected) or dev_match != len(expected):
        sys.exit(f"{SOURCE}: the gold indices agree with OBQA dev's at {dev_match} of {len(expected)} "
                 "positions (not all): the rows cannot be matched to questions")
    free = OpenBookOverlap(load_openbook_facts(data))
    nulls: dict[str, list[str]] = {ARMS[m][0]: [] for m in models}
    out: list[dict[str, object]] = []
    for k, q in enumerate(dev):
        labels = [c.label for c in q.choices]
        ans, signals, probs = free.answer(q)
        arms: dict[str, dict[str, object]] = {
            FREE: {"answer": ans, "correct": ans == q.gold[0], "cost": 0.0, "signals": signals,
                   "probabilities": probs}}
        for m, row in zip(models, matrix, strict=True):
            name, price = ARMS[m]
            if row[k] is None:
                nulls[name].append(q.id)
            answer = "" if row[k] is None else labels[int(row[k])]
            arms[name] = {"answer": answer, "correct": answer == q.gold[0], "cost": price}
        out.append({"id": q.id, "text": q.text, "gold": q.gold[0], "arms": arms})
    report = {"source": SOURCE, "questions": len(out), "matched_to": "obqa/Main/dev.jsonl (file order)",
              "gold_agrees_with_dev": f"{dev_match}/{len(expected)}",
              "gold_agrees_with_test": f"{test_match}/{len(expected)}",
              "unparsed_answers_graded_wrong": {a: {"count": len(v), "ids": v} for a, v in nulls.items()},
              "accuracy": {a: sum(bool(r["arms"][a]["correct"]) for r in out) / len(out)  # type: ignore[index]
                           for a in [FREE, *(ARMS[m][0] for m in models)]}}
    return out, report


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    rows, report = convert(args.data)
    args.out.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
