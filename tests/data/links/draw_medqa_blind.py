"""Draw the options of ``medqa_ddb_blind.jsonl``: 160 MedQA-USMLE test options at random (seed 2026).

The pool: every option of the test questions (``medqa/test.jsonl``) whose options all have 1-4 words,
less the questions of ``medqa_ddb.jsonl`` and less any option whose text (case-folded) is a mention of
that set. Writes the unlabelled records (``gold`` left ``null``) to standard output, in question order:

    python tests/data/links/draw_medqa_blind.py /work/shared/data > drawn.jsonl
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

SEED = 2026
DRAW = 160


def main(data: Path) -> None:
    here = Path(__file__).parent
    old = [json.loads(line) for line in (here / "medqa_ddb.jsonl").open(encoding="utf-8")]
    used_q = {r["question_index"] for r in old}
    used_text = {r["mention"].casefold() for r in old}
    lines = (data / "medqa" / "test.jsonl").read_text(encoding="utf-8").splitlines()
    pool: list[tuple[int, str, str, str]] = []
    for i, line in enumerate(lines):
        q = json.loads(line)
        opts = q["options"]
        if i in used_q or not all(1 <= len(o.split()) <= 4 for o in opts.values()):
            continue
        last = q["question"].strip().split(". ")[-1]
        pool += [(i, k, o, last) for k, o in sorted(opts.items()) if o.casefold() not in used_text]
    first: dict[str, tuple[int, str, str, str]] = {}
    for p in pool:  # the first occurrence of each option text, in the pool's order
        first.setdefault(p[2].casefold(), p)
    unique = list(first.values())
    for i, k, option, last in sorted(random.Random(SEED).sample(unique, DRAW)):
        print(json.dumps({"id": f"medqa-blind-{i}-{k}", "source": "medqa-test", "kind": "choice",
                          "mention": option, "context": last, "gold": None, "question_index": i,
                          "split": "blind"}, ensure_ascii=False))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
