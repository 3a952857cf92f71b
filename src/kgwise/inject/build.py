"""Assemble a :class:`KnowledgeInjector` from files and specs (for the CLI and the server)."""

from __future__ import annotations

from pathlib import Path

from kgwise.errors import ConfigError
from kgwise.extract.base import Extractor
from kgwise.extract.registry import ExtractorOptions, make_extractor
from kgwise.inject.bandit import PromptBandit
from kgwise.inject.combination import Combination
from kgwise.inject.injector import InjectorConfig, KnowledgeInjector
from kgwise.kg.base import KnowledgeGraph
from kgwise.kg.sources import is_endpoint
from kgwise.llm.base import scoring_rule

__all__ = ["DEFAULT_COMBO", "build_injector"]

DEFAULT_COMBO = Combination("P_sub", "F_s")


def build_injector(
    kg: str | Path,
    llm: str = "smollm2-135m",
    policy: str | Path | None = None,
    bandit: str | Path | None = None,
    scoring: str | None = None,
    index: str | Path | None = None,
) -> KnowledgeInjector:
    """KnowGPT over the graph file or SPARQL endpoint ``kg`` with the LLM ``llm`` (a ``kgwise.llm.get_llm``
    spec, behind the response cache), P_sub always, P_RL when a trained ``policy`` is given (graph files
    only), and the trained prompt ``bandit`` when given (a bandit pick of P_RL without ``policy`` raises
    ``ConfigError`` when asked); without a bandit it answers with :data:`DEFAULT_COMBO` unless told
    otherwise. ``scoring``: rank the choices by one of :data:`kgwise.llm.SCORING_RULES`; default: the rule
    the bandit was trained with, else ``sum``. A rule other than the bandit's raises ``ConfigError``.

    ``index``: a label index of ``kg`` (``kgwise kg index build``, content-checked against ``kg``). Free text
    is grounded over it instead of over labels held in memory; an endpoint without one gets the index
    cached for its URL (:func:`kgwise.kg.label_index.open_index`). An index built from the graph file the
    endpoint was loaded from also holds P_sub's degrees and hub lists, so P_sub reads only short edge
    lists from the endpoint."""
    if scoring is not None:
        scoring_rule(scoring)  # refuses an unknown rule before the models load
    from kgwise.embed import MiniLM
    from kgwise.kg.grounding import Grounder
    from kgwise.kg.label_index import BoundIndex, open_index
    from kgwise.llm import get_llm
    from kgwise.render import FORMATS, make_format

    graph: KnowledgeGraph
    bound: BoundIndex | None = None
    if is_endpoint(str(kg)):
        if policy is not None:
            raise ConfigError(f"{kg}: P_RL (--policy) walks a graph held in memory; over an endpoint "
                              "KnowGPT extracts with P_sub only")
        from kgwise.kg.sparql import SPARQLGraph

        graph = SPARQLGraph(str(kg).removeprefix("sparql:"))
        bound = open_index(graph, index)
    else:
        from kgwise.kg.loaders import open_graph_file

        graph = open_graph_file(kg)
        bound = open_index(graph, index) if index is not None else None
    model = get_llm(llm, cache=True)
    encoder = MiniLM()
    options = ExtractorOptions(Path(policy) if policy is not None else None, encoder,
                               bound if bound is not None and bound.endpoint is not None else None)
    extractors: dict[str, Extractor] = {"P_sub": make_extractor("P_sub", graph, options)}
    if policy is not None:
        extractors["P_RL"] = make_extractor("P_RL", graph, options)
    formats = {n: make_format(n, model) for n in FORMATS}
    trained = PromptBandit.load(bandit) if bandit is not None else None
    if trained is not None and trained.scoring is not None:
        if scoring not in (None, trained.scoring):
            raise ConfigError(f"the bandit {bandit} was trained with {trained.scoring!r} choice scoring; "
                              f"use that rule (or leave scoring unset), not {scoring!r}")
        scoring = trained.scoring
    return KnowledgeInjector(graph, Grounder(graph, index=bound), extractors, formats, model, trained,
                             encoder, InjectorConfig(scoring_rule(scoring or "sum"), DEFAULT_COMBO))
