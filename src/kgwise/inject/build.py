"""Assemble a :class:`KnowledgeInjector` from files and specs (for the CLI and the server)."""

from __future__ import annotations

from pathlib import Path

from kgwise.errors import ConfigError
from kgwise.extract.base import Extractor
from kgwise.extract.registry import ExtractorOptions, make_extractor
from kgwise.inject.bandit import PromptBandit
from kgwise.inject.combination import Combination
from kgwise.inject.injector import InjectorConfig, KnowledgeInjector
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
) -> KnowledgeInjector:
    """KnowGPT over the graph file ``kg`` with the LLM ``llm`` (a ``kgwise.llm.get_llm`` spec, behind the
    response cache), P_sub always, P_RL when a trained ``policy`` is given, and the trained prompt
    ``bandit`` when given (a bandit pick of P_RL without ``policy`` raises ``ConfigError`` when asked);
    without a bandit it answers with :data:`DEFAULT_COMBO` unless told otherwise. ``scoring``: rank the
    choices by one of :data:`kgwise.llm.SCORING_RULES`; default: the rule the bandit was trained with,
    else ``sum``. A rule other than the bandit's raises ``ConfigError``."""
    if scoring is not None:
        scoring_rule(scoring)  # refuses an unknown rule before the models load
    if is_endpoint(str(kg)):
        raise ConfigError(f"{kg}: KnowGPT grounds free text against every node label, which a SPARQL "
                          "endpoint does not list; build a local graph (`kgwise kg build`) from an export")
    from kgwise.embed import MiniLM
    from kgwise.kg.grounding import Grounder
    from kgwise.kg.loaders import open_graph_file
    from kgwise.llm import get_llm
    from kgwise.render import FORMATS, make_format

    graph = open_graph_file(kg)
    model = get_llm(llm, cache=True)
    encoder = MiniLM()
    options = ExtractorOptions(Path(policy) if policy is not None else None, encoder)
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
    return KnowledgeInjector(graph, Grounder(graph), extractors, formats, model, trained, encoder,
                             InjectorConfig(scoring_rule(scoring or "sum"), DEFAULT_COMBO))
