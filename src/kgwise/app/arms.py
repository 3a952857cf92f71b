"""The pipeline's arms at run time: one runner per ``[[arms]]`` entry, answering a question with its
usage, and bounding that usage before the call (the router's budget check).

* ``llm`` — :func:`kgwise.llm.get_llm` (or an OpenAI-compatible server at ``base_url``): choices scored
  by :func:`kgwise.llm.answering.answer_by_scoring`, open questions by
  :func:`~kgwise.llm.answering.answer_free_text`;
* ``inject`` — KnowGPT's :class:`kgwise.inject.KnowledgeInjector` over the pipeline's graph: choices
  answered by :meth:`~kgwise.inject.KnowledgeInjector.inject`; an open question gets P_sub's knowledge
  around its concepts rendered by the combination's format, and a free-text answer after it; with
  ``combos``, the combination is the prompt bandit's pick once ``kgwise fit`` has learnt it
  (:class:`PromptArm`);
* ``kgm`` — :class:`kgwise.kgm.predictor.KGMPredictor` (multiple choice only).

Every arm that reads the KG reports its :class:`Knowledge` ranked to the question
(:mod:`kgwise.extract.evidence`): ``paths``, the paths joining a question concept to a choice (an open
question: to a candidate node), best first; ``support``, those that end at the chosen answer, among the
paths the arm read (an inject arm: those its prompt held; a graph KG model: those of the graph it scored
the choices over; a text-only KG model reads no graph and reports none), at most 25 nodes.

Cost of a call (:func:`arm_cost`): ``per_call × calls`` plus the price table's token fees of
``price_model`` (Coke's ``p(a)‖q_a‖``, Eq. 14), or the backend's own reported dollars
(``cost_from_usage``). Usage bounds count an API backend's one call per scored
choice, and bound tokens by characters (a token is never shorter than one character of the prompt).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, cast, runtime_checkable

from kgwise.app.config import ArmConfig
from kgwise.errors import ConfigError
from kgwise.kg.base import KnowledgeGraph
from kgwise.llm.prices import default_prices
from kgwise.types import GenerationSettings, Question, Subgraph, Triple, Usage

if TYPE_CHECKING:
    from kgwise.embed import Encoder
    from kgwise.extract.evidence import RankedEvidence
    from kgwise.inject.bandit import PromptBandit
    from kgwise.kg.grounding import Grounder, Grounding
    from kgwise.kg.label_index import BoundIndex
    from kgwise.kgm.features import QuestionGraph

__all__ = ["ArmOutput", "ArmRunner", "GroundedArm", "Knowledge", "ObservedArm", "PromptArm", "TunableArm",
           "arm_cost", "build_runner", "model_knowledge", "subgraph_knowledge"]

KNOWLEDGE_CHARS = 8_000
"""Characters of rendered knowledge the usage bound allows an inject arm's prompt."""
PROMPT_OVERHEAD_CHARS = 400


@dataclass(frozen=True, slots=True)
class Knowledge:
    """The KG knowledge an arm used: facts and question→answer paths (ranked, best first) as labelled
    triples, the text the LLM read, the (extractor+format) combination that made it, and ``support``: the
    paths the arm read that end at its answer (module docstring)."""

    triples: tuple[Triple, ...] = ()
    paths: tuple[tuple[Triple, ...], ...] = ()
    text: str = ""
    combo: str = ""
    support: tuple[tuple[Triple, ...], ...] = ()


@dataclass(frozen=True, slots=True)
class ArmOutput:
    """One arm's answer: a choice label (multiple choice) or free text, the probabilities over the choice
    labels (empty for free text), the knowledge used, the usage, ``correct`` when the arm knows it
    (a replayed, already graded outcome; ``None``: grade against the gold answer), and ``signals``: the
    arm's scores known with its answer (a KG model's top probability, a replayed GNN's top candidate
    score), of which the first is its signal in a ``question+free`` router context."""

    prediction: str
    probabilities: dict[str, float] = field(default_factory=dict)
    knowledge: Knowledge = field(default_factory=Knowledge)
    usage: Usage = field(default_factory=Usage)
    correct: bool | None = None
    signals: tuple[float, ...] = ()
    finish_reason: str = ""
    """For generated free text, why the generation ended: ``length`` (at the token limit) or ``stop``."""

    @property
    def signal(self) -> float:
        """The first of :attr:`signals` (0 when there is none)."""
        return self.signals[0] if self.signals else 0.0


class ArmRunner(Protocol):
    """What the pipeline needs of an arm."""

    @property
    def config(self) -> ArmConfig: ...

    def can_answer(self, question: Question) -> bool: ...

    def usage_bound(self, question: Question) -> Usage: ...

    def answer(self, question: Question) -> ArmOutput: ...


@runtime_checkable
class GroundedArm(Protocol):
    """An arm that can answer from the question's grounding made by the pipeline (so a question is
    grounded once per answer)."""

    def answer_grounded(self, question: Question, grounding: Grounding | None, combo: str | None = None
                        ) -> ArmOutput: ...


@runtime_checkable
class TunableArm(Protocol):
    """An arm whose open answers are generated, so that it can apply a caller's generation settings and
    pass the text on as it is generated (``on_text``); ``grounding`` as for :class:`GroundedArm`."""

    def answer_with(self, question: Question, grounding: Grounding | None, settings: GenerationSettings,
                    on_text: Callable[[str], None] | None) -> ArmOutput: ...


class PromptArm(ArmRunner, Protocol):
    """An arm whose prompt ``kgwise fit`` learns (an inject arm with ``combos``): it answers with a given
    combination, embeds questions for its bandit, and takes the bandit learnt."""

    @property
    def combos(self) -> tuple[str, ...]: ...

    @property
    def encoder(self) -> Encoder: ...

    def combos_for(self, question: Question) -> tuple[str, ...]: ...

    def answer(self, question: Question, combo: str | None = None) -> ArmOutput: ...

    def use_bandit(self, bandit: PromptBandit | None) -> None: ...


@dataclass
class ObservedArm:
    """An arm runner that passes every call to ``inner`` and tells ``on_answer`` how many seconds each
    answer took (progress bars and benchmarks watch arms through it); a :class:`PromptArm`'s prompt
    methods pass through too."""

    inner: ArmRunner
    on_answer: Callable[[float], None]

    @property
    def config(self) -> ArmConfig:
        return self.inner.config

    def can_answer(self, question: Question) -> bool:
        return self.inner.can_answer(question)

    def usage_bound(self, question: Question) -> Usage:
        return self.inner.usage_bound(question)

    def answer(self, question: Question, combo: str | None = None) -> ArmOutput:
        t = time.perf_counter()
        out = self.inner.answer(question) if combo is None else self._prompt.answer(question, combo)
        self.on_answer(time.perf_counter() - t)
        return out

    def answer_grounded(self, question: Question, grounding: Grounding | None, combo: str | None = None
                        ) -> ArmOutput:
        if not isinstance(self.inner, GroundedArm):
            return self.answer(question, combo)
        t = time.perf_counter()
        out = self.inner.answer_grounded(question, grounding, combo)
        self.on_answer(time.perf_counter() - t)
        return out

    @property
    def _prompt(self) -> PromptArm:
        return cast(PromptArm, self.inner)

    @property
    def combos(self) -> tuple[str, ...]:
        return self._prompt.combos

    @property
    def encoder(self) -> Encoder:
        return self._prompt.encoder

    def combos_for(self, question: Question) -> tuple[str, ...]:
        return self._prompt.combos_for(question)

    def use_bandit(self, bandit: PromptBandit | None) -> None:
        self._prompt.use_bandit(bandit)


def arm_cost(arm: ArmConfig, usage: Usage) -> float:
    """Cost of ``usage`` on ``arm`` in the budget's unit (Eq. 14's ``p(a)‖q_a‖``); ``UsageError`` for
    usage that cannot be priced (negative or non-whole counts, a non-finite or negative reported cost or
    total)."""
    from kgwise.llm.base import UsageError

    counts = (usage.input_tokens, usage.output_tokens, usage.calls)
    if not all(isinstance(n, int) and n >= 0 for n in counts) or not (
            math.isfinite(usage.cost) and usage.cost >= 0):
        raise UsageError(f"arm {arm.name!r}: reported usage {counts} tokens/calls, cost {usage.cost!r} "
                         "cannot be priced")
    total = arm.per_call * usage.calls
    if arm.cost_from_usage:
        total += usage.cost
    if arm.price_model is not None:
        price = default_prices().require(arm.price_model, f"price_model of arm {arm.name!r}")
        total += price.cost(usage.input_tokens, usage.output_tokens)
    if not (math.isfinite(total) and total >= 0):
        raise UsageError(f"arm {arm.name!r}: its reported usage prices at {total!r}, not a finite amount ≥ 0")
    return total


def subgraph_knowledge(kg: KnowledgeGraph, sub: Subgraph, text: str, combo: str,
                       ranked: RankedEvidence | None = None, support: RankedEvidence | None = None
                       ) -> Knowledge:
    """``sub`` (KG ids) as labelled triples, with ``ranked``'s paths (default: the subgraph's own) and
    ``support``'s, each distinct node and relation labelled once."""
    from kgwise.app.evidence import Labeller

    names = Labeller(kg)
    paths = [rp.path for rp in ranked.paths] if ranked is not None else list(sub.paths)
    backing = [rp.path for rp in support.paths] if support is not None else []
    return Knowledge(names.triples(sub.edges), tuple(names.triples(p.edges()) for p in paths), text, combo,
                     tuple(names.triples(p.edges()) for p in backing))


def _answer_candidates(kg: KnowledgeGraph, ranked: RankedEvidence, answer: str) -> tuple[int, ...]:
    """The candidates (:func:`kgwise.extract.evidence.open_candidates`, in ranked order) that an open
    answer names: those whose node label, three characters or more, is in the answer's text (case
    folded) — the ones whose paths support it."""
    text = answer.casefold()
    out: dict[int, None] = {}
    for rp in ranked.paths:
        label = kg.label(rp.path.nodes[-1]).casefold().strip()
        if len(label) >= 3 and label in text:
            out.setdefault(rp.choice, None)
    return tuple(out)


def _prompt_chars(question: Question) -> int:
    return len(question.text) + len(question.context) + sum(len(c.text) + 8 for c in question.choices)


def _llm(cfg: ArmConfig) -> object:
    from kgwise.llm import get_llm

    assert cfg.spec is not None
    if cfg.base_url is None:
        return get_llm(cfg.spec)
    from kgwise.llm.openai_compat import OpenAICompatible, OpenAIConfig

    key = os.environ.get(cfg.api_key_env) if cfg.api_key_env else None
    if cfg.api_key_env and key is None:
        raise ConfigError(f"arm {cfg.name!r}: ${cfg.api_key_env} (its api_key_env) is not set")
    return OpenAICompatible(OpenAIConfig(model=cfg.spec.removeprefix("openai:"), base_url=cfg.base_url,
                                         api_key=key or "none"))


class LLMArm:
    """A plain LLM: no KG knowledge."""

    def __init__(self, config: ArmConfig) -> None:
        from kgwise.llm import LLM

        self._config = config
        llm = _llm(config)
        assert isinstance(llm, LLM)
        self.llm = llm

    @property
    def config(self) -> ArmConfig:
        return self._config

    def can_answer(self, question: Question) -> bool:
        return True

    def _calls(self, question: Question, extra: int = 0) -> int:
        if not question.choices:
            return 1 + extra
        per = len(question.choices) if self._config.is_api else 1
        return per * (2 if self._config.scoring == "pmi" else 1) + extra

    def usage_bound(self, question: Question, knowledge_chars: int = 0, extra_calls: int = 0) -> Usage:
        calls = self._calls(question, extra_calls)
        chars = _prompt_chars(question) + knowledge_chars + PROMPT_OVERHEAD_CHARS
        out = self._config.max_tokens * (1 if not question.choices else 0) + extra_calls * 512
        return Usage(input_tokens=calls * chars, output_tokens=out + calls, calls=calls)

    def answer(self, question: Question) -> ArmOutput:
        return self.answer_with(question, None, GenerationSettings(), None)

    def answer_with(self, question: Question, grounding: Grounding | None, settings: GenerationSettings,
                    on_text: Callable[[str], None] | None) -> ArmOutput:
        """Choices scored (``settings`` do not apply: the pipeline refuses those that would change a
        scored answer), an open question answered by generation under ``settings``."""
        from kgwise.llm.answering import answer_by_scoring, free_text_reply

        if question.choices:
            ans, _ = answer_by_scoring(self.llm, question, rule=self._config.scoring)  # type: ignore[arg-type]
            return ArmOutput(ans.prediction, dict(ans.probabilities), Knowledge(), ans.usage)
        ans, finish = free_text_reply(self.llm, question, max_tokens=self._config.max_tokens,
                                      settings=settings, on_text=on_text)
        return ArmOutput(ans.prediction, {}, Knowledge(), ans.usage, finish_reason=finish)


class InjectArm(LLMArm):
    """An LLM with KnowGPT's knowledge injection over the pipeline's graph, grounded by the pipeline's
    ``grounder`` and embedding with its ``encoder`` (one of each per pipeline)."""

    def __init__(self, config: ArmConfig, kg: KnowledgeGraph, grounder: Grounder, encoder: Encoder,
                 names: BoundIndex | None = None) -> None:
        super().__init__(config)
        from kgwise.inject.bandit import PromptBandit
        from kgwise.inject.build import DEFAULT_COMBO, build_injector
        from kgwise.inject.combination import Combination

        first = config.combos[0] if config.combos and config.combos != ("all",) else None
        self.kg = kg
        self.encoder: Encoder = encoder
        self.injector = build_injector(
            kg, self.llm, grounder, encoder, scoring=config.scoring,
            default_combo=Combination.parse(config.combo or first or DEFAULT_COMBO), policy=config.policy,
            stats=names if names is not None and names.endpoint is not None else None,
            bandit=PromptBandit.load(config.bandit) if config.bandit is not None else None,
            knowledge_tokens=config.knowledge_tokens, knowledge_ratio=config.knowledge_ratio,
            name=f"arm {config.name!r}")
        available = self.injector.combos()
        self.combos: tuple[str, ...] = tuple(available) if config.combos == ("all",) else config.combos
        """The combinations ``kgwise fit`` learns this arm's prompt bandit over (empty: not learnt)."""
        for c in (*([config.combo] if config.combo else []), *self.combos):
            if c not in available:
                raise ConfigError(f"arm {config.name!r}: unknown combination {c!r}; available: "
                                  f"{', '.join(available)}")
        if len(self.combos) == 1:
            raise ConfigError(f"arm {config.name!r}: combos = \"all\" leaves one combination "
                              f"({self.combos[0]}); a bandit needs two")

    def usage_bound(self, question: Question, knowledge_chars: int = 0, extra_calls: int = 0) -> Usage:
        # one more call where it may render with F_g, which asks the LLM to describe the graph first
        return super().usage_bound(question, KNOWLEDGE_CHARS, int(self._may_describe()))

    def _may_describe(self) -> bool:
        """Whether a combination this arm may answer with (its bandit's, else its default; during a fit
        each of :attr:`combos`) renders with F_g."""
        bandit = self.injector.bandit
        used = [*self.combos, *(bandit.arms if bandit is not None else [self.injector.config.default_combo])]
        return any(c is not None and str(c).endswith("+F_g") for c in used)

    def use_bandit(self, bandit: PromptBandit | None) -> None:
        """Choose each question's combination with ``bandit`` (fitted over :attr:`combos` by ``kgwise
        fit``; ``None``: the first combination)."""
        if bandit is not None and sorted(bandit.arms) != sorted(self.combos):
            raise ConfigError(f"arm {self._config.name!r}: the prompt bandit chooses among "
                              f"{', '.join(bandit.arms)}, the config's combos are {', '.join(self.combos)}: "
                              "run `kgwise fit` again")
        self.injector.bandit = bandit

    def combos_for(self, question: Question) -> tuple[str, ...]:
        """The combinations of :attr:`combos` that can answer ``question`` (P_RL needs answer choices)."""
        return self.combos if question.choices else tuple(c for c in self.combos if c.startswith("P_sub+"))

    def answer(self, question: Question, combo: str | None = None) -> ArmOutput:
        """The answer with ``combo`` (default: the configured ``combo``, else the bandit's choice, else the
        first of the configured ``combos``, ``P_sub+F_s`` for ``"all"``)."""
        return self.answer_grounded(question, None, combo)

    def answer_grounded(self, question: Question, grounding: Grounding | None, combo: str | None = None
                        ) -> ArmOutput:
        """:meth:`answer` from the question's ``grounding`` when the caller has it (``None``: grounded
        here)."""
        return self._answer(question, grounding, combo, GenerationSettings(), None)

    def answer_with(self, question: Question, grounding: Grounding | None, settings: GenerationSettings,
                    on_text: Callable[[str], None] | None) -> ArmOutput:
        """:meth:`answer_grounded` with the combination chosen as usual; an open question's answer (not
        the graph description F_g may ask for first) generated under ``settings``."""
        return self._answer(question, grounding, None, settings, on_text)

    def _answer(self, question: Question, grounding: Grounding | None, combo: str | None,
                settings: GenerationSettings, on_text: Callable[[str], None] | None) -> ArmOutput:
        from kgwise.inject.combination import Combination
        from kgwise.llm.answering import free_text_reply

        combo = combo or self._config.combo
        if question.choices:
            inj = self.injector.inject(question, combo, grounding)
            a = inj.answer
            chosen_index = [c.label for c in question.choices].index(a.prediction)
            return ArmOutput(a.prediction, dict(a.probabilities),
                             subgraph_knowledge(self.kg, inj.subgraph, a.knowledge, a.combo, inj.ranked,
                                                inj.given.supporting(chosen_index)), a.usage)
        chosen = Combination.parse(combo) if combo else self.injector.choose(question)
        if chosen.extractor != "P_sub":  # P_RL needs answer-choice targets
            chosen = Combination("P_sub", chosen.format)
        rendered, sub, ranked, given, _ = self.injector.knowledge(question, chosen, grounding)
        a, finish = free_text_reply(self.llm, question, rendered.text, max_tokens=self._config.max_tokens,
                                    settings=settings, on_text=on_text)
        support = given.supporting(*_answer_candidates(self.kg, given, a.prediction))
        knowledge = subgraph_knowledge(self.kg, sub, rendered.text, str(chosen), ranked, support)
        return ArmOutput(a.prediction, {}, knowledge, rendered.usage + a.usage, finish_reason=finish)


class KGMArm:
    """A trained KG model (multiple choice only; one local call per question)."""

    def __init__(self, config: ArmConfig, encoder: Encoder | None = None) -> None:
        """``encoder``: the pipeline's, shared when it is the MiniLM the model's features were made
        with (another one would feed the model vectors it was not trained on)."""
        from kgwise.embed import MiniLM
        from kgwise.kgm.predictor import KGMPredictor

        assert config.model is not None
        self._config = config
        self.predictor = KGMPredictor.load(config.model, data=config.data, name=config.name,
                                           encoder=encoder if isinstance(encoder, MiniLM) else None)

    @property
    def config(self) -> ArmConfig:
        return self._config

    def can_answer(self, question: Question) -> bool:
        return bool(question.choices)

    def usage_bound(self, question: Question) -> Usage:
        return Usage(calls=1)

    def answer(self, question: Question) -> ArmOutput:
        """The model's answer and, for a graph model, the graph it read ranked to the question (module
        docstring)."""
        from kgwise.kgm.model import GraphQA

        graph = self.predictor.builder.build(question)
        a = self.predictor.answer(question, graph)
        top = max(a.probabilities.values(), default=0.0)
        knowledge = Knowledge()
        if isinstance(self.predictor.model, GraphQA):
            knowledge = model_knowledge(self.predictor.builder.kg, graph,
                                         [c.label for c in question.choices].index(a.prediction))
        return ArmOutput(a.prediction, dict(a.probabilities), knowledge, a.usage, signals=(float(top),))


def model_knowledge(kg: KnowledgeGraph, graph: QuestionGraph, chosen: int) -> Knowledge:
    """A KG model's input graph (its nodes, edges and the question's and choices' concepts, as KG ids)
    as knowledge ranked to the question, with the paths to the ``chosen`` choice as support."""
    from kgwise.extract.evidence import EVERY_PATH, rank_evidence

    nodes = graph.nodes.tolist()
    edges = tuple((nodes[h], r, nodes[t]) for h, r, t in graph.edges.tolist())
    question_nodes = tuple(v for v, q in zip(nodes, graph.question_mask.tolist(), strict=True) if q)
    choice_nodes = tuple(tuple(v for v, c in zip(nodes, row, strict=True) if c)
                         for row in graph.choice_mask.tolist())
    sub = Subgraph(tuple(nodes), edges, question_nodes, choice_nodes)
    ranked = rank_evidence(sub, question_nodes, choice_nodes, EVERY_PATH)
    return subgraph_knowledge(kg, sub, "", "", ranked, ranked.supporting(chosen))


def build_runner(config: ArmConfig, kg: KnowledgeGraph, names: BoundIndex | None = None, *,
                 grounder: Grounder | None = None, encoder: Encoder | None = None) -> ArmRunner:
    """The runner of one configured arm (models load here) over the pipeline's ``kg`` and ``names``, the
    KG's bound label index; ``grounder`` and ``encoder``: the pipeline's, shared by its arms (default: a
    grounder of :func:`kgwise.app.evidence.grounder_of`, a MiniLM)."""
    if encoder is None:
        from kgwise.embed import MiniLM

        encoder = MiniLM()
    if config.kind == "kgm":
        return KGMArm(config, encoder)
    if config.kind == "inject":
        if grounder is None:
            from kgwise.app.evidence import grounder_of

            grounder = grounder_of(kg, names)
        if grounder is None:
            raise ConfigError(f"arm {config.name!r}: knowledge injection grounds text against every node "
                              "label, which a SPARQL endpoint does not list: give [kg] a label index")
        return InjectArm(config, kg, grounder, encoder, names)
    return LLMArm(config)
