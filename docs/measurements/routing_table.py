"""The per-log table of docs/routing.md from the JSON reports that `routing_all_logs.sh OUT` writes:
`eval route --log` (its learned routers: the selection now and before `predicted-free`, the learned
cascade, the best arm, the budgeted oracle and the oracle) and `eval pipeline --log`, mean ± std over
the splits. With --before DIR, also `eval pipeline --log`'s figures from DIR's pipe-*.json (a run of the
code before the `predicted-free` context). Usage:
python docs/measurements/routing_table.py OUT [--before DIR] [--json FILE]"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

LOGS = (("webqsp", "WebQSP, 1,578 × 7 (tuned on)"), ("obqa", "OBQA local, 300 × 5 (tuned on)"),
        ("csqa", "CSQA local, 180 × 3 (report-only)"),
        ("ladder", "CSQA local ladder 1.5B, 200 × 5 (report-only)"),
        ("ollama", "OBQA dev Ollama, 500 × 4 (report-only)"))


def _ms(d: dict[str, float] | None, scale: float = 1.0, signed: bool = False) -> str:
    if d is None:
        return "—"
    fmt = "{:+.1f} ± {:.1f}" if signed else "{:.3f} ± {:.3f}"
    return fmt.format(d["mean"] * scale, d["std"] * scale)


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{x:+.0%}"


def pooled(acc: float, best: float, ceiling: float) -> float | None:
    """The mean gain over the mean head-room (as the reports' "head-room closed, pooled")."""
    return (acc - best) / (ceiling - best) if ceiling - best > 1e-12 else None


def pipeline(pipe_file: Path) -> dict[str, Any] | None:
    if not pipe_file.exists():
        return None
    p = json.loads(pipe_file.read_text())
    s = p["summary"]
    best = sum(x["arms"][x["best_arm"]]["accuracy"] for x in p["runs"]) / len(p["runs"])
    return {"accuracy": s["accuracy"], "minus_best": s["accuracy_minus_best"],
            "splits_ge_best": p["targets"]["accuracy >= best single arm"],
            "spent": s["spent_over_budget"], "cost_over_best": s["cost_over_best"],
            "budgeted_oracle": s["budgeted_oracle_accuracy"],
            "budgeted_headroom_closed": s["budgeted_headroom_closed"],
            "budgeted_headroom_closed_pooled": pooled(s["accuracy"]["mean"], best,
                                                      s["budgeted_oracle_accuracy"]["mean"]),
            "pinned": {a: k for a, k in s["splits_pinned"].items() if k},
            "contexts": [(x["router_selection"] or {}).get("context") for x in p["runs"]],
            "context": p["config"]["context"]}


def _pipe(p: dict[str, Any] | None) -> str:
    return "—" if p is None else (
        f"{_ms(p['accuracy'])}, {_ms(p['minus_best'], 100, True)} ({p['splits_ge_best'].split()[0]}), "
        f"{p['spent']['mean']:.2f}, {_pct(p['budgeted_headroom_closed_pooled'])}")


def row(out: Path, key: str, before: Path | None) -> dict[str, Any] | None:
    route_file = out / f"route-{key}.json"
    if not route_file.exists():
        return None
    learned = json.loads(route_file.read_text())["learned"]
    sel, runs = learned["selected"], learned["runs"]
    n = len(runs)
    r: dict[str, Any] = {
        "best_arm": learned["best_arm_accuracy"],
        "router": sel["selected_accuracy"], "router_minus_best": sel["selected_minus_best"],
        "router_splits_ge_best": sum(x["selected_minus_best"] >= 0 for x in runs),
        "router_spent": sel["selected_spent_over_budget"], "router_cost_over_budget_arm": sel[
            "selected_cost_over_budget_arm"],
        "router_budgeted_headroom_closed": sel["budgeted_headroom_closed"],
        "router_oracle_headroom_closed": sel["headroom_closed"],
        "router_ge_cascade": sum(x["selected_minus_cascade"] >= 0 for x in runs),
        "selections": learned["selections"],
        "before": sel["selected_before_accuracy"], "before_minus_best": sel["selected_before_minus_best"],
        "before_splits_ge_best": sum(x["selected_before_minus_best"] >= 0 for x in runs),
        "before_spent": sel["selected_before_spent_over_budget"],
        "before_budgeted_headroom_closed": sel["selected_before_budgeted_headroom_closed"],
        "selections_before": learned["selections_before"],
        "predicted_free": learned["summary"]["predicted-free"]["accuracy"],
        "predicted": learned["summary"]["predicted"]["accuracy"],
        "cascade": learned["summary"]["cascade"]["accuracy"],
        "budgeted_oracle": learned["budgeted_oracle_accuracy"], "oracle": learned["oracle_accuracy"],
        "budgeted_oracle_splits_ge_best": sum(x["reference"]["budgeted_oracle_accuracy"]
                                              >= x["reference"]["best_arm_accuracy"] for x in runs),
        "splits": n}
    for who, acc in (("router", r["router"]), ("before", r["before"])):
        r[f"{who}_budgeted_headroom_closed_pooled"] = pooled(acc["mean"], r["best_arm"]["mean"],
                                                             r["budgeted_oracle"]["mean"])
        r[f"{who}_oracle_headroom_closed_pooled"] = pooled(acc["mean"], r["best_arm"]["mean"],
                                                           r["oracle"]["mean"])
    r["pipeline"] = pipeline(out / f"pipe-{key}.json")
    r["pipeline_before"] = None if before is None else pipeline(before / f"pipe-{key}.json")
    return r


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--before", type=Path)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    rows = {key: r for key, _ in LOGS if (r := row(args.out, key, args.before)) is not None}
    print("| log | best arm | `eval route` selected (now): acc, − best, splits ≥ | before "
          "`predicted-free` | `predicted-free` | learned cascade (splits sel. ≥) | spent / budget | "
          "budgeted oracle (splits ≥ best) | oracle | budgeted head-room closed, pooled (now / before) | "
          "`eval pipeline --log`: acc, − best, splits ≥, spent, budgeted head-room closed, pooled | "
          "the same before `predicted-free` |")
    print("|" + "---|" * 12)
    for key, label in LOGS:
        if key not in rows:
            continue
        r = rows[key]
        print(f"| {label} | {_ms(r['best_arm'])} | {_ms(r['router'])}, "
              f"{_ms(r['router_minus_best'], 100, True)} ({r['router_splits_ge_best']}/{r['splits']}) | "
              f"{_ms(r['before'])}, "
              f"{_ms(r['before_minus_best'], 100, True)} ({r['before_splits_ge_best']}/{r['splits']}) | "
              f"{_ms(r['predicted_free'])} | {_ms(r['cascade'])} ({r['router_ge_cascade']}/{r['splits']}) | "
              f"{r['router_spent']['mean']:.2f} (before {r['before_spent']['mean']:.2f}) | "
              f"{_ms(r['budgeted_oracle'])} ({r['budgeted_oracle_splits_ge_best']}/{r['splits']}) | "
              f"{_ms(r['oracle'])} | {_pct(r['router_budgeted_headroom_closed_pooled'])} / "
              f"{_pct(r['before_budgeted_headroom_closed_pooled'])} | {_pipe(r['pipeline'])} | "
              f"{_pipe(r['pipeline_before'])} |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
