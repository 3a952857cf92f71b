"""Re-price a live run's graded log (``kgwise eval pipeline --live … --out-dir RUN`` writes
``RUN/graded.jsonl``, costed in LLM calls) in **seconds of this machine**, so that ``kgwise eval pipeline
--log`` / ``kgwise eval route --log`` / ``kgwise fit --log`` route under a budget in seconds.

Run: ``PYTHONPATH=src python docs/measurements/seconds_log.py RUN OUT.jsonl``. It prints each arm's mean
seconds and what it could not match.

**Which seconds.** Every answer of the run is logged with its time: the fit questions' in
``RUN/state-fit/fit-log.jsonl`` (``value.usage.latency_s``: the model's own seconds for the answer, all
its scoring calls together), the test questions' in ``RUN/arms.jsonl`` (``value.usage.latency_s`` and
``value.wall_s``, the arm's whole answer: knowledge extraction and prompt rendering too). An LLM arm's cost
here is ``latency_s`` on every question — the one figure both logs hold; the extraction seconds of the
``+kg`` arms, which only the test answers time, are printed beside it (``wall − model``) and not added.
The KG model calls no LLM (``latency_s`` 0): its cost is its ``wall_s`` on each test question and the
mean of those on the fit questions, which the fit log does not time; with ``--free-kgm`` it stays free (0,
as in the run's own unit, calls), so that it can be the free arm a ``predicted`` or ``cascade`` router
context needs, and the budget's "best arm" is the best LLM arm.

**Which row.** Rows are matched to the graded log's answers by arm name and question id; where a run
directory holds answers of several settings of one arm name (an arm retrained or re-prompted), the row
whose choice probabilities equal the graded log's is taken. A question × arm with no such row is an error
naming both: nothing is priced by guess.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kgwise.files import read_jsonl


def _rows(path: Path) -> Iterator[dict[str, Any]]:
    """The ``value`` of each row of a resume log (its first line is the fingerprint)."""
    for lineno, rec in read_jsonl(path, "resume log"):
        if lineno == 1:
            continue
        if "value" not in rec or "key" not in rec:
            raise ValueError(f"{path}:{lineno}: not a resume-log row (no key/value)")
        yield {"key": rec["key"], **rec["value"]}


def logged_seconds(run: Path) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """(arm, question id) → the logged rows of that answer: ``probabilities``, ``model_s`` and, for a test
    answer, ``wall_s``."""
    out: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in _rows(run / "state-fit" / "fit-log.jsonl"):
        out[r["arm"], r["qid"]].append({"probabilities": r.get("probabilities"),
                                        "model_s": float(r["usage"]["latency_s"]), "wall_s": None})
    for r in _rows(run / "arms.jsonl"):
        arm, _fp, qid = r["key"].split("\t")
        out[arm, qid].append({"probabilities": r.get("probabilities"),
                              "model_s": float(r["usage"]["latency_s"]), "wall_s": float(r["wall_s"])})
    return out


def _match(rows: list[dict[str, Any]], probabilities: Any, arm: str, qid: str) -> dict[str, Any]:
    same = [r for r in rows if r["probabilities"] == probabilities]
    if not same:
        raise SystemExit(f"no logged answer of arm {arm!r} on question {qid!r} with the graded log's "
                         f"probabilities ({len(rows)} rows of that arm and question)")
    timed = [r for r in same if r["wall_s"] is not None]  # a test answer: its whole wall time known
    return (timed or same)[-1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", type=Path, help="the live run's --out-dir (holds graded.jsonl)")
    ap.add_argument("out", type=Path, help="the graded log in seconds to write")
    ap.add_argument("--kgm", default="kgm", help="the KG model arm's name")
    ap.add_argument("--free-kgm", action="store_true", help="keep the KG model free (cost 0)")
    args = ap.parse_args(argv)
    logged = logged_seconds(args.run)
    graded = [obj for _, obj in read_jsonl(args.run / "graded.jsonl", "graded log")]
    picked = {(arm, q["id"]): _match(logged[arm, q["id"]], o.get("probabilities"), arm, q["id"])
              for q in graded for arm, o in q["arms"].items()}
    kgm_walls = [r["wall_s"] for (a, _), r in picked.items() if a == args.kgm and r["wall_s"] is not None]
    if not kgm_walls:
        raise SystemExit(f"arm {args.kgm!r}: no timed test answer to price its fit answers by")
    kgm_mean = sum(kgm_walls) / len(kgm_walls)
    per_arm: dict[str, list[float]] = defaultdict(list)
    extraction: dict[str, list[float]] = defaultdict(list)
    with args.out.open("w", encoding="utf-8") as fh:
        for q in graded:
            arms = {}
            for arm, o in q["arms"].items():
                r = picked[arm, q["id"]]
                if arm == args.kgm:
                    seconds = 0.0 if args.free_kgm else r["wall_s"] if r["wall_s"] is not None else kgm_mean
                else:
                    seconds = r["model_s"]
                    if r["wall_s"] is not None:
                        extraction[arm].append(r["wall_s"] - r["model_s"])
                per_arm[arm].append(seconds)
                arms[arm] = {**o, "cost": round(seconds, 4)}
            fh.write(json.dumps({**q, "arms": arms}, ensure_ascii=False) + "\n")
    print(f"{len(graded)} questions → {args.out}; the KG model's fit answers priced at its test mean "
          f"{kgm_mean:.4f} s ({len(kgm_walls)} timed)")
    for arm, v in per_arm.items():
        extra = extraction.get(arm)
        more = f", wall − model on the test answers {sum(extra) / len(extra):.2f} s" if extra else ""
        print(f"  {arm}: {sum(v) / len(v):.2f} s a question (total {sum(v):.0f} s){more}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
