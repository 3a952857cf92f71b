"""A markdown row per `kgwise eval knowgpt --scoring letter` report: no KG and KnowGPT accuracy, the paired
gap ± its standard error, the LLM seconds a question per setting, the load and where the letters came from.

    python docs/measurements/knowgpt-local/letter_table.py REPORT.json ...
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def row(path: Path) -> str:
    rep = json.loads(path.read_text(encoding="utf-8"))
    (split, sr), = rep["splits"].items()
    plain, (combo, known) = sr["without_kg"], next(iter(sr["combos"].items()))
    t = sr["targets"]
    gap, se = 100 * t["full_minus_without_kg"], 100 * t["full_minus_without_kg_se"]
    low, high = (100 * x for x in t["full_minus_without_kg_95"])
    loads = [s["load_1min"] for s in (plain, known) if s["load_1min"]]
    load = f"{min(x['min'] for x in loads):.0f}–{max(x['max'] for x in loads):.0f}" if loads else "–"

    def secs(s: dict) -> str:
        v = s["llm_s_per_question"]
        return "–" if v is None else f"{v:.1f} ({s['score_s_timed']})"

    def letters(s: dict) -> str:
        return ", ".join(f"{k} {v}" for k, v in sorted(s.get("letter_from", {}).items()))

    return (f"| {rep['llm']} | {rep['dataset']} {split} | {sr['n']} | {plain['accuracy']:.3f} | "
            f"{sr['full']['accuracy']:.3f} ({combo}) | {gap:+.1f} ± {se:.1f} "
            f"[{low:+.1f}, {high:+.1f}] | "
            f"{secs(plain)} / {secs(known)} | {load} | {letters(plain)} / {letters(known)} |")


if __name__ == "__main__":
    print("| model | data set | n | no KG | KnowGPT | KnowGPT − no KG, points ± SE [95 %] | "
          "s a question: no KG / KnowGPT (calls timed) | load | letter from: no KG / KnowGPT |")
    print("|---|---|---|---|---|---|---|---|---|")
    for p in sys.argv[1:]:
        print(row(Path(p)))
