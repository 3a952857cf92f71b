"""MedQA's ranked evidence without a model, earlier ranking vs this checkout's: for the first N MedQA test
questions of `kgwise eval knowgpt`'s split, P_sub's subgraph ranked and cut to 48 tokens as an inject
arm's prompt is (`KNOWLEDGE_TOKENS`, 4 characters a token); prints the share whose cut holds a path to the
gold choice, the choices with a path, the question concepts the kept paths start from, the paths found.

    git archive 36612a5 src | tar -x -C /tmp/base
    KGWISE_DATA=../shared/data PYTHONPATH=src \
        python docs/measurements/linking/medqa_evidence_check.py /tmp/base 100
"""

import importlib.util
import os
import statistics
import sys
from pathlib import Path

from kgwise.embed import MiniLM
from kgwise.eval.knowgpt import benchmark_data
from kgwise.extract import evidence as new
from kgwise.extract.registry import ExtractorOptions, make_extractor
from kgwise.kg.grounding import Grounder

spec = importlib.util.spec_from_file_location("old_evidence",
                                              Path(sys.argv[1]) / "src/kgwise/extract/evidence.py")
assert spec is not None and spec.loader is not None
old = importlib.util.module_from_spec(spec)
sys.modules["old_evidence"] = old
spec.loader.exec_module(old)
data = benchmark_data("medqa", Path(os.environ.get("KGWISE_DATA", "../shared/data")))
questions = next(iter(data.tests.values()))[: int(sys.argv[2])]
grounder = Grounder(data.kg, data.grounder)
extractor = make_extractor("P_sub", data.kg, ExtractorOptions(encoder=MiniLM()))
kg = data.kg


def tokens(rp):
    chars = sum(len(kg.label(h)) + len(kg.relation_name(r)) + len(kg.label(t)) + 7
                for h, r, t in rp.path.edges())
    return max(len(rp.path), -(-chars // 4))


def cut_to_tokens(mod, ranked, budget=48):
    """The ranked paths taken in order while their tokens stay within ``budget``."""
    kept, spent = [], 0
    for rp in ranked.paths:
        if spent + tokens(rp) <= budget:
            kept.append(rp)
            spent += tokens(rp)
    return mod.RankedEvidence(tuple(kept), (), ranked.found)


rows = {"earlier": [], "now": []}
for q in questions:
    sub = extractor.extract(q, grounder.ground(q))
    for name, mod in (("earlier", old), ("now", new)):
        ranked = mod.rank_evidence(sub, sub.question_nodes, sub.choice_nodes, mod.EVERY_PATH)
        cut = cut_to_tokens(mod, ranked)
        n = len(q.choices)
        rows[name].append((bool(cut.support(q.gold_index)), sum(bool(cut.support(i)) for i in range(n)),
                           len({p.path.nodes[0] for p in cut.paths}), ranked.found, len(sub.question_nodes),
                           bool(ranked.support(q.gold_index)),
                           sum(bool(ranked.support(i)) for i in range(n))))
for name, r in rows.items():
    m = [statistics.mean(x[k] for x in r) for k in range(7)]
    print(f"{name}: {len(r)} questions; 48-token cut: gold path {m[0]:.3f}, choices with a path {m[1]:.2f}, "
          f"question concepts used {m[2]:.2f} of {m[4]:.1f}; uncut: paths {m[3]:.1f}, gold path {m[5]:.3f}, "
          f"choices with a path {m[6]:.2f}")
