"""The shared data's recordings as named replay sources (``replay:NAME``, :mod:`kgwise.llm.replay`)."""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from pathlib import Path

from kgwise.eval.recorded import Outcome, aog, gnn_rag, gpt_family
from kgwise.eval.recorded import estimate_tokens as est
from kgwise.llm.replay import ReplaySource, register_source

__all__ = ["WEBQSP_SOURCES"]


def _gnn_rag(variant: str | None, root: Path) -> list[Outcome]:
    """GNN-RAG's detailed results joined with the prompts of its predictions file (``None``: plain
    llama2-chat, which has no prompts); input tokens estimated from the prompt."""
    if variant is None:
        detailed = root / gnn_rag.LLAMA2_CHAT_DETAILED
        prompts: dict[str, tuple[str, str]] = {}
    else:
        detailed = root / gnn_rag.ROG_GNN_DETAILED[variant]
        pred_file = root / gnn_rag.ROG_GNN_PREDICTIONS[variant]
        prompts = ({r.qid: (r.question, r.prompt) for r in gnn_rag.read_rog_predictions(pred_file)}
                   if pred_file.is_file() else {})
    out = []
    for o in gnn_rag.read_detailed_eval(detailed):
        question, prompt = prompts.get(o.qid, ("", ""))
        out.append(replace(o, question=question, input_tokens=est(prompt), calls=1, tokens_estimated=True))
    return out


def _gnn_rag_file(path: Path) -> list[Outcome]:
    """A user's GNN-RAG ``detailed_eval_result.jsonl`` (no prompts: input tokens unknown, 0)."""
    return [replace(o, calls=1, tokens_estimated=True) for o in gnn_rag.read_detailed_eval(path)]


def _gpt_file(path: Path) -> list[Outcome]:
    """A GPT-family answers file (``idx<TAB>question<TAB>answer``), tokens estimated from the texts."""
    return [Outcome("", r.question, False, r.answer, est(r.question), est(r.answer), 1, True)
            for r in gpt_family.read_answers(path)]


def _gpt(name: str, root: Path) -> list[Outcome]:
    return _gpt_file(root / gpt_family.GPT_FILES[name])


def _aog(root: Path) -> list[Outcome]:
    return aog.read_aog(root / aog.AOG_WEBQSP)


_GPT = {
    "chatgpt": ("ChatGPT (March 2023) on WebQSP", "gpt-3.5-turbo"),
    "chatgpt-feb": ("ChatGPT (February 2023) on WebQSP", "gpt-3.5-turbo"),
    "text-davinci-003": ("text-davinci-003 on WebQSP", "text-davinci-003"),
    "text-davinci-002": ("text-davinci-002 on WebQSP", "text-davinci-002"),
    "text-davinci-001": ("text-davinci-001 on WebQSP", "text-davinci-001"),
    "flan-t5-xxl": ("FLAN-T5-XXL on WebQSP", "flan-t5-xxl"),
    "gpt-4": ("GPT-4 on 499 WebQSP questions", "gpt-4"),
}

WEBQSP_SOURCES: tuple[ReplaySource, ...] = (
    ReplaySource("aog-qwen3-max", "AoG agent with Qwen3-max on WebQSP test", _aog, "qwen3-max",
                 aog.read_aog),
    ReplaySource("rog-rearev-sbert", "RoG (LLaMA2-7B) with ReaRev+SBERT retrieval (GNN-RAG) on WebQSP test",
                 partial(_gnn_rag, "rearev-sbert"), "llama-2-7b", _gnn_rag_file),
    ReplaySource("rog-rearev-lmsr", "RoG (LLaMA2-7B) with ReaRev+LMSR retrieval (GNN-RAG) on WebQSP test",
                 partial(_gnn_rag, "rearev-lmsr"), "llama-2-7b", _gnn_rag_file),
    ReplaySource("llama2-chat", "plain llama2-chat-7B (no KG) on WebQSP test", partial(_gnn_rag, None),
                 "llama-2-7b", _gnn_rag_file),
    *(ReplaySource(name, desc, partial(_gpt, name), price, _gpt_file)
      for name, (desc, price) in _GPT.items()),
)

for _source in WEBQSP_SOURCES:
    register_source(_source)
