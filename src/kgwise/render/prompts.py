"""Prompt templates of the knowledge-injection pipeline (KnowGPT §3.2).

Small local models answer by scoring each choice's text after the prompt (``LLM.score_choices``), so the
answer prompt ends with ``"Answer:"`` and the choices are *not* enumerated in it; chat-capable models see
the same text. The graph-description prompt asks the LLM itself to describe the extracted subgraph
(format F_g), highlighting its central entity.
"""

from __future__ import annotations

__all__ = ["answer_prompt", "graph_description_prompt"]

_KNOWLEDGE_HEADER = "Background knowledge:"


def answer_prompt(question: str, knowledge: str = "", context: str = "") -> str:
    """The prompt whose continuation is scored for each choice.

    ``knowledge`` is the rendered KG knowledge (any format), ``context`` extra evidence the dataset
    brings (e.g. OBQA's open-book facts). Without both this is the plain "w/o KG" prompt.
    """
    parts: list[str] = []
    evidence = "\n".join(x.strip() for x in (context, knowledge) if x.strip())
    if evidence:
        parts.append(f"{_KNOWLEDGE_HEADER}\n{evidence}\n")
    parts.append(f"Question: {question.strip()}\nAnswer:")
    return "\n".join(parts)


def graph_description_prompt(triples: str, center: str) -> str:
    """Ask the LLM to describe a knowledge graph given as triple lines, centred on ``center`` (F_g)."""
    return (
        "Here is a small knowledge graph, one fact per line as (head, relation, tail):\n"
        f"{triples.strip()}\n\n"
        f"Describe this graph in two or three plain sentences. Start with the central entity "
        f"\"{center}\" and say how the other entities are connected to it.\n"
        "Description:"
    )
