"""The link-set part of ``kgwise bench grounding`` run by an older checkout of kgwise over set files it
does not list: its own ``_links`` over every set named here (its ``LINK_SETS`` and the ones added since),
written as the bench writes its ``links`` part. So the rules of a previous commit are scored on a set drawn
after it, in the same run as this checkout's bench:

    git archive a8901a6 src | tar -x -C /tmp/base
    PYTHONPATH=/tmp/base/src python docs/measurements/linking/links_of_checkout.py previous.json
    kgwise bench grounding --parts links --json now.json        # this checkout
"""

import json
import os
import sys
from pathlib import Path

import kgwise.eval.bench.grounding as bench
from kgwise.embed import MiniLM

FRESH = ("fresh", "fresh2", "fresh3", "fresh4", "fresh5", "fresh6")
SETS = {**bench.LINK_SETS, **{f"medqa_ddb_{s}": f"medqa_ddb_{s}.jsonl" for s in FRESH}}
bench.LINK_SETS.update(SETS)
links = Path(__file__).resolve().parents[3] / "tests" / "data" / "links"
report = {"code": bench.__file__,
          "links": bench._links(Path(os.environ.get("KGWISE_DATA", "../shared/data")), links, MiniLM(),
                                lambda m: print(m, file=sys.stderr, flush=True), sets=tuple(SETS))}
report["targets"] = bench._targets(report)
Path(sys.argv[1]).write_text(json.dumps(report, indent=1, ensure_ascii=False), encoding="utf-8")
for name, row in report["links"].items():
    a = row["after"]
    print(f"{name}: precision {a['precision']:.3f}, recall {a['recall']:.3f}, in KG {a['in_kg_share']:.3f}")
