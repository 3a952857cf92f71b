"""Draw the options of a blind MedQA → DDB link set: MedQA-USMLE test options at random, seeded.

The pool: every option of the test questions (``medqa/test.jsonl``) whose options all have 1-4 words,
less the questions of the sets given with ``--exclude`` and less any option whose text (case-folded) is a
mention of them; each option text once (its first question). Writes the unlabelled records (``gold``
left ``null``) to standard output, in question order:

    python tests/data/links/draw_medqa_blind.py /work/shared/data > drawn.jsonl      # medqa_ddb_blind
    python tests/data/links/draw_medqa_blind.py /work/shared/data --seed 2027 --draw 120 --split fresh \
        --exclude tests/data/links/medqa_ddb.jsonl tests/data/links/medqa_ddb_blind.jsonl  # medqa_ddb_fresh
    python tests/data/links/draw_medqa_blind.py /work/shared/data --seed 2028 --draw 120 --split fresh2 \
        --exclude tests/data/links/medqa_ddb.jsonl tests/data/links/medqa_ddb_blind.jsonl \
        tests/data/links/medqa_ddb_fresh.jsonl  # medqa_ddb_fresh2
    python tests/data/links/draw_medqa_blind.py /work/shared/data --seed 2029 --draw 120 --split fresh3 \
        --exclude tests/data/links/medqa_ddb.jsonl tests/data/links/medqa_ddb_blind.jsonl \
        tests/data/links/medqa_ddb_fresh.jsonl tests/data/links/medqa_ddb_fresh2.jsonl  # medqa_ddb_fresh3
    python tests/data/links/draw_medqa_blind.py /work/shared/data --seed 2030 --draw 120 --split fresh4 \
        --exclude tests/data/links/medqa_ddb.jsonl tests/data/links/medqa_ddb_blind.jsonl \
        tests/data/links/medqa_ddb_fresh.jsonl tests/data/links/medqa_ddb_fresh2.jsonl \
        tests/data/links/medqa_ddb_fresh3.jsonl  # medqa_ddb_fresh4
    python tests/data/links/draw_medqa_blind.py /work/shared/data --seed 2031 --draw 120 --split fresh5 \
        --exclude tests/data/links/medqa_ddb.jsonl tests/data/links/medqa_ddb_blind.jsonl \
        tests/data/links/medqa_ddb_fresh.jsonl tests/data/links/medqa_ddb_fresh2.jsonl \
        tests/data/links/medqa_ddb_fresh3.jsonl tests/data/links/medqa_ddb_fresh4.jsonl  # medqa_ddb_fresh5
    python tests/data/links/draw_medqa_blind.py /work/shared/data --seed 2032 --draw 100 --split fresh6 \
        --exclude tests/data/links/medqa_ddb.jsonl tests/data/links/medqa_ddb_blind.jsonl \
        tests/data/links/medqa_ddb_fresh.jsonl tests/data/links/medqa_ddb_fresh2.jsonl \
        tests/data/links/medqa_ddb_fresh3.jsonl tests/data/links/medqa_ddb_fresh4.jsonl \
        tests/data/links/medqa_ddb_fresh5.jsonl  # medqa_ddb_fresh6
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

HERE = Path(__file__).parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data", type=Path, help="the data directory (holds medqa/test.jsonl)")
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--draw", type=int, default=160, help="options to draw")
    ap.add_argument("--split", default="blind", help="the records' split, also in their ids")
    ap.add_argument("--exclude", type=Path, nargs="+", default=[HERE / "medqa_ddb.jsonl"],
                    help="link sets whose questions and mention texts the draw leaves out")
    a = ap.parse_args()
    old = [json.loads(line) for f in a.exclude for line in f.open(encoding="utf-8") if line.strip()]
    used_q = {r["question_index"] for r in old}
    used_text = {r["mention"].casefold() for r in old}
    lines = (a.data / "medqa" / "test.jsonl").read_text(encoding="utf-8").splitlines()
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
    print(f"pool: {len({p[0] for p in unique})} questions, {len(unique)} options", file=sys.stderr)
    for i, k, option, last in sorted(random.Random(a.seed).sample(unique, a.draw)):
        print(json.dumps({"id": f"medqa-{a.split}-{i}-{k}", "source": "medqa-test", "kind": "choice",
                          "mention": option, "context": last, "gold": None, "question_index": i,
                          "split": a.split}, ensure_ascii=False))


if __name__ == "__main__":
    main()
