"""Prompt tokens of KnowGPT's prompts in Qwen2.5-Coder-1.5B's own tokenizer, no LLM call.

For the first N test questions of a data set it renders, with the code on ``PYTHONPATH``, the prompt w/o KG
(question and template; OBQA: with its two open-book facts, which every KnowGPT prompt holds too), the
prompt with the whole P_sub subgraph (``knowledge_tokens=None``) and with the default ranked knowledge
(P_sub × F_s), and counts their tokens as the scoring call does (the GGUF's vocabulary only, BOS added).
Run it once per checkout to compare code versions (docs/measurements/knowgpt.md, "Ranked evidence"):

    PYTHONPATH=src KGWISE_DATA=/work/shared/data python docs/measurements/evidence/prompt_tokens.py \\
        csqa ihdev 100 prompt-tokens-csqa.json
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from llama_cpp import Llama

from kgwise.config import data_dir
from kgwise.embed import MiniLM
from kgwise.eval.knowgpt import FactRetriever, KnowGPTExperimentConfig, benchmark_data, questions_to_test
from kgwise.inject.build import build_injector
from kgwise.kg.grounding import Grounder
from kgwise.llm.llamacpp import resolve_model_path
from kgwise.render.prompts import answer_prompt


def main(dataset: str, split: str, limit: int, out: str) -> dict[str, Any]:
    gguf = resolve_model_path("qwen2.5-coder-1.5b")[1]
    vocab = Llama(model_path=str(gguf), vocab_only=True, verbose=False)

    def tokens(text: str, bos: bool = True) -> int:
        return len(vocab.tokenize(text.encode("utf-8"), add_bos=bos, special=False)) if text else 0

    inputs = benchmark_data(dataset, data_dir(None))
    cfg = replace(KnowGPTExperimentConfig(limit=limit), splits=(split,))
    qs = questions_to_test(dataset, inputs.tests, cfg)[split]
    encoder = MiniLM()
    facts = FactRetriever(inputs.facts, encoder, 2) if inputs.facts is not None else None
    # F_s renders without an LLM; F_g is never asked for here
    injector = build_injector(inputs.kg, object(), Grounder(inputs.kg, inputs.grounder), encoder)  # type: ignore[arg-type]
    default = injector.config
    rows: dict[str, list[int]] = {}
    for q in qs:
        evidence = facts(q) if facts is not None else ""
        rows.setdefault("without_kg", []).append(tokens(answer_prompt(q.text, "", evidence)))
        for name, config in (("full", replace(default, knowledge_tokens=None)), ("ranked", default)):
            injector.config = config
            rendered = injector.knowledge(q, "P_sub+F_s")[0].text
            rows.setdefault(name, []).append(tokens(answer_prompt(q.text, rendered, evidence)))
            rows.setdefault(f"{name}_kg", []).append(tokens(rendered, bos=False))
    report = {"dataset": dataset, "split": split, "n": len(qs), "tokenizer": gguf.name,
              "knowledge_tokens": default.knowledge_tokens,
              "knowledge_ratio": getattr(default, "knowledge_ratio", None),
              "mean": {k: float(np.mean(v)) for k, v in rows.items()}, "per_question": rows}
    Path(out).write_text(json.dumps(report, indent=1), encoding="utf-8")
    print(json.dumps({k: round(v, 1) for k, v in report["mean"].items()}))
    return report


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4])
