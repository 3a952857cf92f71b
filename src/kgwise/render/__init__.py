"""Knowledge formats (triples F_t, sentences F_s, graph description F_g) and prompt templates."""

from kgwise.render.formats import (
    FORMAT_NAMES,
    FORMATS,
    Format,
    FormatConfig,
    GraphDescriptionFormat,
    Rendered,
    SentenceFormat,
    TripleFormat,
    make_format,
    register_format,
    select_edges,
)
from kgwise.render.prompts import answer_prompt, graph_description_prompt
from kgwise.render.templates import clause, clean_label, relation_phrase

__all__ = [
    "FORMATS",
    "FORMAT_NAMES",
    "Format",
    "FormatConfig",
    "GraphDescriptionFormat",
    "Rendered",
    "SentenceFormat",
    "TripleFormat",
    "answer_prompt",
    "clause",
    "clean_label",
    "graph_description_prompt",
    "make_format",
    "register_format",
    "relation_phrase",
    "select_edges",
]
