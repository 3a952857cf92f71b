"""Letter against PMI on the same dev questions, from the per-question records of `kgwise eval llm --out`
(``--method letter`` and ``--method score-pmi``): each data set's accuracies, the paired difference
± its standard error, where the letters came from, and every question's correctness under both.

    python docs/measurements/knowgpt-local/letter_dev.py OUT.json obqa=LETTER.jsonl,PMI.jsonl csqa=...
"""

from __future__ import annotations

import json
import math
import sys
from collections import Counter
from pathlib import Path
from typing import Any


def records(path: str) -> dict[str, dict[str, Any]]:
    lines = Path(path).read_text(encoding="utf-8").splitlines()[1:]  # the first line: the file's fingerprint
    return {r["key"]: r["value"]["result"] for r in map(json.loads, lines) if r["value"].get("ok")}


def paired(d: list[int]) -> tuple[float, float]:
    m = sum(d) / len(d)
    return m, math.sqrt(sum((x - m) ** 2 for x in d) / (len(d) - 1) / len(d))


def main(out: str, sets: list[str]) -> None:
    report: dict[str, Any] = {}
    pooled: list[int] = []
    for item in sets:
        name, files = item.split("=")
        letter, pmi = map(records, files.split(","))
        both = [k for k in letter if k in pmi]
        right = {k: [int(bool(letter[k]["correct"])), int(pmi[k]["pred_pmi"] in pmi[k]["gold"])]
                 for k in both}
        d = [a - b for a, b in right.values()]
        pooled += d
        m, se = paired(d)
        accuracy = sum(bool(r["correct"]) for r in letter.values()) / len(letter)
        sources = dict(Counter(r["letter_from"] for r in letter.values()))
        report[name] = {"letter": {"n": len(letter), "accuracy": accuracy, "letter_from": sources},
                        "paired": {"n": len(both), "letter": sum(a for a, _ in right.values()) / len(both),
                                   "pmi": sum(b for _, b in right.values()) / len(both),
                                   "letter_minus_pmi": m, "se": se},
                        "questions": right}
    m, se = paired(pooled)
    report["pooled"] = {"n": len(pooled), "letter_minus_pmi": m, "se": se}
    Path(out).write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    print(json.dumps({k: v if k == "pooled" else {"letter": v["letter"], "paired": v["paired"]}
                      for k, v in report.items()}, indent=1))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
