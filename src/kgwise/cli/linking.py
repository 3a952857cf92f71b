"""The grounder the commands build: a graph's names in memory, or a label index on disk, with the
fallback linking of the [linking] config table (and MiniLM label embeddings when the ml extra is there)."""

from __future__ import annotations

from pathlib import Path

from kgwise.errors import ConfigError
from kgwise.kg.base import ArrayGraph, KnowledgeGraph
from kgwise.kg.grounding import Grounder, GrounderConfig, PhraseIndex, embedding_matcher


def make_grounder(kg: KnowledgeGraph, index: Path | None, config: Path | None,
                  embeddings: bool | None = None) -> Grounder:
    """A grounder over ``kg``: names from the label index ``index`` (checked against ``kg``), else from
    ``kg`` itself; linking from ``config``'s [linking] table. Embedding linking (``linking.embedding``,
    or ``embeddings`` when given) needs the names in memory: with an index it is off."""
    from kgwise.kg.label_index import LabelIndex
    from kgwise.settings import configured

    linking = configured("linking", config)
    use_embeddings = linking.embedding if embeddings is None else embeddings
    if index is not None:
        bound = LabelIndex(index).bind(kg)
        from dataclasses import replace

        return Grounder(kg, GrounderConfig(linking=replace(linking, embedding=False)), bound)
    if not isinstance(kg, ArrayGraph):
        raise ConfigError(f"grounding text in {kg.name} needs a label index: "
                          "`kgwise kg index build` it and pass --index")
    names = PhraseIndex(kg)
    embedder = None
    if use_embeddings:
        from kgwise.embed import MiniLM

        embedder = embedding_matcher(names, MiniLM())
    return Grounder(kg, GrounderConfig(linking=linking), names, embedder)
