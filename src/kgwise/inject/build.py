"""The one assembly of a :class:`KnowledgeInjector` — for the pipeline's ``inject`` arms
(:mod:`kgwise.app.arms`) and for the KnowGPT evaluation (:mod:`kgwise.eval.knowgpt`).

Rules (the same for every caller):

* P_sub always, built by name (:func:`kgwise.extract.make_extractor`; with ``stats``, a bound label index
  of an endpoint, it reads only short edge lists); P_RL when a trained ``policy`` file is given (loaded
  with the shared ``encoder``), or an already trained agent (``agent``); P_RL over an endpoint raises
  ``ConfigError`` (it walks a graph held in memory).
* Every registered format (F_t, F_s, F_g: :data:`kgwise.render.FORMAT_NAMES`), F_g describing the graph
  through ``llm``.
* Choices ranked by ``scoring`` (:data:`kgwise.llm.SCORING_RULES`); a ``bandit`` trained with another rule
  raises ``ConfigError`` (a bandit learnt on one rule's rewards does not transfer to another's).
* The knowledge a prompt renders is ranked to the question and cut to ``knowledge_tokens``
  (:class:`~kgwise.inject.injector.InjectorConfig`; ``None``: the whole extracted subgraph).
* The LLM is the caller's: whether it sits behind the response cache is the caller's choice.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from kgwise.embed import Encoder
from kgwise.errors import ConfigError
from kgwise.extract.base import Extractor
from kgwise.extract.neighbourhood import HubStats
from kgwise.extract.registry import ExtractorOptions, make_extractor
from kgwise.inject.bandit import PromptBandit
from kgwise.inject.combination import Combination
from kgwise.inject.injector import KNOWLEDGE_RATIO, KNOWLEDGE_TOKENS, InjectorConfig, KnowledgeInjector
from kgwise.kg.base import KnowledgeGraph
from kgwise.kg.csr import CSRGraph
from kgwise.kg.grounding import Grounder
from kgwise.llm.base import LLM, scoring_rule
from kgwise.render.formats import FORMAT_NAMES, FormatConfig, make_format
from kgwise.types import Question

__all__ = ["DEFAULT_COMBO", "build_injector"]

DEFAULT_COMBO = Combination("P_sub", "F_s")
"""The combination an injector without a prompt bandit answers with unless told otherwise."""


def build_injector(
    kg: KnowledgeGraph,
    llm: LLM,
    grounder: Grounder,
    encoder: Encoder,
    *,
    scoring: str = "sum",
    default_combo: Combination | None = DEFAULT_COMBO,
    policy: str | Path | None = None,
    agent: Extractor | None = None,
    stats: HubStats | None = None,
    bandit: PromptBandit | None = None,
    formats: FormatConfig | None = None,
    evidence: Callable[[Question], str] | None = None,
    knowledge_tokens: int | None = KNOWLEDGE_TOKENS,
    knowledge_ratio: float | None = KNOWLEDGE_RATIO,
    name: str = "the injector",
) -> KnowledgeInjector:
    """KnowGPT over ``kg`` answering with ``llm`` (see the module docstring for the rules); ``name`` is how
    errors name the injector (an arm: ``arm 'x'``); ``scoring="letter"``: answer by letter
    (``InjectorConfig.by_letter``) instead of scoring the choices."""
    by_letter = scoring == "letter"
    rule = scoring_rule("sum" if by_letter else scoring)
    if policy is not None and agent is not None:
        raise ConfigError(f"{name}: give a P_RL policy file or a trained agent, not both")
    if (policy is not None or agent is not None) and not isinstance(kg, CSRGraph):
        raise ConfigError(f"{name}: P_RL (policy) walks a graph held in memory; over an endpoint knowledge "
                          "injection extracts with P_sub only")
    if bandit is not None and bandit.scoring is not None and bandit.scoring != rule:
        raise ConfigError(f"{name}: its prompt bandit was trained with {bandit.scoring!r} choice scoring; "
                          f"set scoring = {bandit.scoring!r}")
    extractors: dict[str, Extractor] = {
        "P_sub": make_extractor("P_sub", kg, ExtractorOptions(encoder=encoder, stats=stats))}
    if policy is not None:
        extractors["P_RL"] = make_extractor("P_RL", kg, ExtractorOptions(Path(policy), encoder))
    elif agent is not None:
        extractors["P_RL"] = agent
    made = {n: make_format(n, llm, formats) for n in FORMAT_NAMES}
    config = InjectorConfig(rule, default_combo, knowledge_tokens, knowledge_ratio, by_letter=by_letter)
    return KnowledgeInjector(kg, grounder, extractors, made, llm, bandit, encoder, config, evidence)
