"""``KnowledgeInjector``: KnowGPT's pipeline for a black-box LLM — ground → extract → render → answer.

For a question the injector grounds its text and choices in the KG, lets the prompt bandit pick an
(extractor × format) combination (or uses the one asked for), extracts the knowledge with that extractor
(P_sub or P_RL), renders it in that format (F_t, F_s, F_g), and asks the LLM to score every choice's text
after the knowledge prompt (:func:`kgwise.render.answer_prompt`), ranked by the configured
:data:`kgwise.llm.SCORING_RULES` rule (``pmi`` also scores the choices once per question after the
context-free :data:`kgwise.llm.answering.PRIOR_CONTEXT`).

The knowledge is ranked to the question (:mod:`kgwise.extract.evidence`): the subgraph's paths that join a
question concept to a choice (an open question: to any other node, a candidate answer) are scored and,
with ``InjectorConfig.knowledge_tokens`` set, only the best of them within the question's budget are
rendered (``None``: the whole subgraph, as the format selects from it). The budget is
``knowledge_tokens`` tokens, and with ``knowledge_ratio`` set at most that many tokens of knowledge per
token of the question (never below :data:`KNOWLEDGE_TOKENS_MIN`): a short question gets short knowledge,
so the knowledge does not make most of its prompt. Tokens are those of the knowledge as the arm's format
renders the kept paths (F_g's, which an LLM writes, as F_t renders them), and of the question's text,
both :data:`CHARS_PER_TOKEN` characters a token; paths are taken best first while they fit. The returned
:class:`kgwise.types.Answer` carries the knowledge text, the combination and the usage; ``prep_ms`` in
:class:`Injection` is the grounding + extraction + rendering time with LLM time excluded.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from kgwise.embed import Encoder
from kgwise.errors import ConfigError
from kgwise.extract.base import Extractor
from kgwise.extract.evidence import EVERY_PATH, RankedEvidence, RankedPath, open_candidates, rank_evidence
from kgwise.inject.bandit import PromptBandit
from kgwise.inject.combination import Combination
from kgwise.kg.base import KnowledgeGraph
from kgwise.kg.grounding import Grounder, Grounding
from kgwise.llm.answering import (
    LetterReply,
    choice_prior,
    letter_answer,
    letter_prompt,
    letter_reply,
    require_logprobs,
    score_choices_after,
    scored_answer,
)
from kgwise.llm.base import ScoringRule, scoring_rule
from kgwise.render.formats import (
    Format,
    FormatConfig,
    GraphDescriptionFormat,
    Rendered,
    TripleFormat,
    select_edges,
)
from kgwise.render.prompts import answer_prompt
from kgwise.types import Answer, Question, Subgraph, Usage

if TYPE_CHECKING:
    from kgwise.llm import LLM, ChoiceScores

__all__ = ["CHARS_PER_TOKEN", "KNOWLEDGE_RATIO", "KNOWLEDGE_TOKENS", "KNOWLEDGE_TOKENS_MIN", "WITHOUT_KG",
           "Injection", "InjectorConfig", "KnowledgeInjector"]

WITHOUT_KG = "w/o KG"
CHARS_PER_TOKEN = 4
"""Characters of English text per token, the usual rule of thumb of BPE tokenizers (GPT-2's, SmolLM2's)."""
KNOWLEDGE_TOKENS = 48
"""Default cap on the ranked knowledge in a prompt, in tokens: about half of what the formats' cap of 8 facts
renders from a whole P_sub. Measured with SmolLM2-135M (``kgwise eval knowgpt --evidence ranked --against``
a ``--evidence full`` run, docs/measurements/knowgpt.md, "Ranked evidence"): 51–98 % fewer knowledge
characters on OBQA, CSQA and MedQA; accuracy +2 to +10 points on OBQA and CSQA, −3 to −5 on MedQA (± 3)."""
KNOWLEDGE_RATIO = 2.0
"""Default tokens of ranked knowledge per token of the question: the knowledge at most twice as long as the
question. CSQA's questions (~17 tokens) and MedQA's vignettes (~200) differ tenfold; under the cap alone
the knowledge was most of a CSQA prompt. Measured with Qwen2.5-Coder-1.5B (its tokenizer; ``kgwise eval
knowgpt --evidence ranked --knowledge-ratio R --against`` a ``--evidence full`` run, 100 questions each,
PMI scoring; docs/measurements/knowgpt.md, "A budget that follows the question"): the whole prompt 51 /
29 / 63 % fewer tokens than with the full P_sub on CSQA / MedQA / OBQA (cap alone: 40 / 29 / 63 %),
accuracy − full +4.0 ± 4.7 points on CSQA and not lower under ``sum`` or ``mean`` either. Ratio 1.0 gave
59 % fewer on CSQA at +2.0 ± 5.3 under PMI but 6 and 3 points below full under ``sum`` and ``mean``; 2.0
was chosen between the two on those same test questions."""
KNOWLEDGE_TOKENS_MIN = 12
"""The smallest budget a question gets under ``knowledge_ratio``: room for one listed fact (``X is found
at A, B and C.``)."""
NO_PATHS = RankedEvidence((), (), 0)


def _cap(fmt: Format) -> int:
    """The most facts ``fmt`` renders."""
    return getattr(fmt, "config", FormatConfig()).max_triples


def _evidence(paths: Sequence[RankedPath], found: int) -> RankedEvidence:
    """``paths`` as ranked evidence: their nodes in order, ``found`` paths ranked in all."""
    return RankedEvidence(tuple(paths), tuple(dict.fromkeys(v for rp in paths for v in rp.path.nodes)), found)


@dataclass(frozen=True)
class InjectorConfig:
    """``scoring``: how the LLM's choice scores are ranked, one of :data:`kgwise.llm.SCORING_RULES`;
    ``default_combo``: the combination used when no bandit is given (``None``: a combination must be
    passed); ``knowledge_tokens``: the token budget of the ranked knowledge rendered into a prompt
    (``None``: the whole extracted subgraph, the formats' own cap only); ``knowledge_ratio``: at most this
    many knowledge tokens per token of the question, never below :data:`KNOWLEDGE_TOKENS_MIN` (``None``:
    ``knowledge_tokens`` alone); ``by_letter``: answer instead with every option lettered in one chat prompt,
    the knowledge above the question (:func:`kgwise.llm.answering.letter_reply`: one call a question,
    ``scoring`` unused)."""

    scoring: ScoringRule = "sum"
    default_combo: Combination | None = None
    knowledge_tokens: int | None = KNOWLEDGE_TOKENS
    knowledge_ratio: float | None = KNOWLEDGE_RATIO
    by_letter: bool = False

    def __post_init__(self) -> None:
        scoring_rule(self.scoring)
        if self.knowledge_tokens is not None and self.knowledge_tokens < 1:
            raise ConfigError(f"knowledge_tokens must be ≥ 1 (or None: the whole subgraph), got "
                              f"{self.knowledge_tokens!r}")
        if self.knowledge_ratio is not None and not self.knowledge_ratio > 0:
            raise ConfigError(f"knowledge_ratio must be > 0 (or None: knowledge_tokens alone), got "
                              f"{self.knowledge_ratio!r}")

    def budget(self, question: str) -> int | None:
        """The knowledge tokens a prompt for ``question`` may hold (``None``: the whole subgraph)."""
        if self.knowledge_tokens is None or self.knowledge_ratio is None:
            return self.knowledge_tokens
        own = self.knowledge_ratio * len(question.strip()) / CHARS_PER_TOKEN
        return min(self.knowledge_tokens, max(KNOWLEDGE_TOKENS_MIN, int(own)))


@dataclass(frozen=True)
class Injection:
    """One answered question: the answer, the per-choice scores, the extracted subgraph, its paths ranked
    to the question (``ranked``: every path found, best first; ``given``: those whose every fact the prompt
    holds) and the time spent outside the LLM; ``letter``: the reply, when the injector answers by letter."""

    answer: Answer
    scores: ChoiceScores
    subgraph: Subgraph = field(default_factory=Subgraph)
    ranked: RankedEvidence = field(default_factory=lambda: NO_PATHS)
    given: RankedEvidence = field(default_factory=lambda: NO_PATHS)
    prompt_chars: int = 0
    prep_ms: float = 0.0
    timings_ms: Mapping[str, float] = field(default_factory=dict)
    letter: LetterReply | None = None


class KnowledgeInjector:
    """Composes a grounder, extractors (by name: ``P_sub``, ``P_RL``), formats (``F_t``, ``F_s``,
    ``F_g``), an LLM and, optionally, a trained :class:`PromptBandit` with its sentence encoder.

    ``evidence`` adds dataset-given text to every knowledge prompt (e.g. OBQA's retrieved open-book
    facts).
    """

    def __init__(
        self,
        kg: KnowledgeGraph,
        grounder: Grounder,
        extractors: Mapping[str, Extractor],
        formats: Mapping[str, Format],
        llm: LLM,
        bandit: PromptBandit | None = None,
        encoder: Encoder | None = None,
        config: InjectorConfig | None = None,
        evidence: Callable[[Question], str] | None = None,
    ) -> None:
        if bandit is not None and encoder is None:
            raise ConfigError("a prompt bandit needs the sentence encoder that embeds its contexts")
        self.kg, self.grounder, self.llm = kg, grounder, llm
        self.extractors = dict(extractors)
        self.formats = dict(formats)
        self.bandit, self.encoder = bandit, encoder
        self.config = config or InjectorConfig()
        self.evidence = evidence
        self._subgraphs: dict[tuple[object, ...], tuple[Subgraph, float]] = {}
        self._priors: dict[tuple[str, ...], ChoiceScores] = {}

    # ----------------------------------------------------------------------------------- pieces
    def combos(self) -> list[str]:
        """Every ``extractor+format`` this injector can build."""
        return [str(Combination(p, f)) for p in self.extractors for f in self.formats]

    def choose(self, question: Question) -> Combination:
        """The bandit's combination for ``question`` (Eq. 6), else ``config.default_combo``."""
        if self.bandit is None or self.encoder is None:
            if self.config.default_combo is not None:
                return self.config.default_combo
            raise ConfigError("no prompt bandit: pass combo=… or give the injector a trained bandit")
        return Combination.parse(self.bandit.pull(self.encoder.encode([question.text])[0]))

    def _split(self, combo: str | Combination) -> Combination:
        """``combo`` as a :class:`Combination` this injector holds, else ``ConfigError`` naming those."""
        try:
            c = Combination.parse(combo)
        except ConfigError as exc:
            raise ConfigError(f"unknown combination {str(combo)!r} ({exc}); available: "
                              f"{', '.join(self.combos())}") from exc
        if c.extractor == "P_RL" and c.extractor not in self.extractors and c.format in self.formats:
            raise ConfigError(f"{str(c)!r} needs a trained P_RL policy (--policy path_policy.pt, from "
                              f"`kgwise eval knowgpt --out-dir`); available: {', '.join(self.combos())}")
        if c.extractor not in self.extractors or c.format not in self.formats:
            raise ConfigError(f"unknown combination {str(c)!r}; available: {', '.join(self.combos())}")
        return c

    def subgraph(self, question: Question, grounding: Grounding, extractor: str) -> tuple[Subgraph, float]:
        """The extractor's subgraph (memoised per question, so a question's combinations share it) and the
        milliseconds it took."""
        key = (question.id, question.text, question.choice_texts, question.topic_entities, extractor)
        found = self._subgraphs.get(key)
        if found is None:
            t0 = time.perf_counter()
            sub = self.extractors[extractor].extract(question, grounding)
            found = (sub, (time.perf_counter() - t0) * 1e3)
            if len(self._subgraphs) > 20_000:
                self._subgraphs.clear()
            self._subgraphs[key] = found
        return found

    def ranked(self, question: Question, sub: Subgraph) -> RankedEvidence:
        """Every path of ``sub`` from a question concept to a choice (an open question: to a candidate,
        :func:`~kgwise.extract.evidence.open_candidates`), best first (no cut)."""
        targets = sub.choice_nodes if question.choices else open_candidates(sub, sub.question_nodes)
        return rank_evidence(sub, sub.question_nodes, targets, EVERY_PATH)

    def _measure(self, fmt: Format) -> Format:
        """The format whose rendering a budget is measured on: ``fmt`` itself, or F_t for F_g (an LLM writes
        F_g's text from the triples F_t lists)."""
        if isinstance(fmt, GraphDescriptionFormat):
            return TripleFormat(fmt.config)
        return fmt

    def knowledge_tokens(self, paths: Sequence[RankedPath], sub: Subgraph, fmt: Format) -> int:
        """The tokens of ``paths`` as ``fmt`` renders them (:meth:`_measure`), :data:`CHARS_PER_TOKEN`
        characters a token."""
        kept = RankedEvidence(tuple(paths), (), len(paths)).as_subgraph(sub.question_nodes, sub.choice_nodes)
        return -(-len(self._measure(fmt).render(self.kg, kept).text) // CHARS_PER_TOKEN)

    def prompt_knowledge(self, question: Question, sub: Subgraph, fmt: Format
                         ) -> tuple[Subgraph, RankedEvidence, RankedEvidence]:
        """What a prompt renders of ``sub`` in ``fmt``: the ranked paths that fit the question's budget
        (:meth:`InjectorConfig.budget`), taken best first, as a subgraph (``None``: ``sub`` whole); the
        whole ranking; and the ranked paths the prompt holds (the cut, or the whole ranking). A path fits
        while the kept paths render within the budget and their facts within the format's cap."""
        ranked = self.ranked(question, sub)
        budget = self.config.budget(question.text)
        if budget is None:
            return sub, ranked, ranked
        cap, measure = _cap(fmt), self._measure(fmt)
        kept: list[RankedPath] = []
        facts: set[tuple[int, int, int]] = set()
        for rp in ranked.paths:
            more = facts | set(rp.path.edges())
            if len(more) <= cap and self.knowledge_tokens([*kept, rp], sub, measure) <= budget:
                kept.append(rp)
                facts = more
        cut = _evidence(kept, ranked.found)
        return cut.as_subgraph(sub.question_nodes, sub.choice_nodes), ranked, cut

    def _whole_paths_shown(self, ranked: RankedEvidence, sub: Subgraph, fmt: Format) -> RankedEvidence:
        """The ranked paths all of whose facts a format renders from the whole ``sub`` (it selects at most
        its ``max_triples`` facts, :func:`kgwise.render.formats.select_edges`)."""
        shown = set(select_edges(sub, _cap(fmt), self.kg))
        whole = [rp for rp in ranked.paths if all(e in shown for e in rp.path.edges())]
        return _evidence(whole, ranked.found)

    def knowledge(self, question: Question, combo: str | Combination, grounding: Grounding | None = None
                  ) -> tuple[Rendered, Subgraph, RankedEvidence, RankedEvidence, dict[str, float]]:
        """Rendered knowledge for ``question`` with ``combo`` (ranked and cut, :meth:`prompt_knowledge`),
        the extracted subgraph, the whole ranking, the ranked paths the prompt holds, and the times (ms) of
        grounding, extraction and ranking + rendering (without the LLM's own time for F_g).
        ``grounding``: the question's, when the caller grounded it already (with this injector's
        grounder's rules); ``None``: grounded here."""
        c = self._split(combo)
        p, f = c.extractor, c.format
        t0 = time.perf_counter()
        if grounding is None:
            grounding = self.grounder.ground(question)
        ground_ms = (time.perf_counter() - t0) * 1e3
        sub, extract_ms = self.subgraph(question, grounding, p)
        t1 = time.perf_counter()
        shown, ranked, given = self.prompt_knowledge(question, sub, self.formats[f])
        if self.config.knowledge_tokens is None:
            given = self._whole_paths_shown(ranked, sub, self.formats[f])
        rendered = self.formats[f].render(self.kg, shown, question)
        render_ms = (time.perf_counter() - t1) * 1e3 - rendered.usage.latency_s * 1e3
        return rendered, sub, ranked, given, {"ground": ground_ms, "extract": extract_ms,
                                              "render": max(render_ms, 0.0)}

    def _reply(self, question: Question, knowledge: str, evidence: str
               ) -> tuple[ChoiceScores, LetterReply | None, int]:
        """The choices' scores after the question with ``evidence`` and ``knowledge``, the letter reply
        they came from when the injector answers by letter, and the prompt's characters."""
        if self.config.by_letter:
            text = "\n".join(x for x in (evidence, knowledge) if x)
            reply = letter_reply(self.llm, question, text)
            return reply.scores, reply, len(letter_prompt(question, text))
        prompt = answer_prompt(question.text, knowledge, evidence)
        return score_choices_after(self.llm, question, prompt), None, len(prompt)

    def prior(self, question: Question) -> ChoiceScores:
        """The choices' scores after the context-free prompt (PMI's denominator), memoised by the choice
        texts; a memo hit reports no usage."""
        key = tuple(c.text for c in question.choices)
        found = self._priors.get(key)
        if found is not None:
            return replace(found, usage=Usage())
        scores = choice_prior(self.llm, question)
        if len(self._priors) > 20_000:
            self._priors.clear()
        self._priors[key] = scores
        return scores

    def _answer(self, question: Question, scores: ChoiceScores, knowledge: str, combo: str,
                usage: Usage, letter: LetterReply | None = None) -> Answer:
        if letter is not None:
            return letter_answer(question, letter, knowledge=knowledge, arm=self.llm.name, combo=combo,
                                 usage=usage + scores.usage)
        rule = self.config.scoring
        prior = None
        if rule == "pmi":
            require_logprobs(self.llm, scores)
            prior = self.prior(question)
            usage = usage + prior.usage
        return scored_answer(question, scores, rule, prior, knowledge=knowledge, arm=self.llm.name,
                             combo=combo, usage=usage + scores.usage)

    # ----------------------------------------------------------------------------------- answering
    def inject(self, question: Question, combo: str | Combination | None = None,
               grounding: Grounding | None = None) -> Injection:
        """Answer ``question`` with ``combo`` (default: the bandit's choice) and report the details;
        ``grounding``: see :meth:`knowledge`."""
        if not question.choices:
            raise ConfigError(f"{question.ref} has no answer choices")
        chosen = self._split(combo) if combo else self.choose(question)
        t0 = time.perf_counter()
        evidence = self.evidence(question) if self.evidence is not None else ""
        evidence_ms = (time.perf_counter() - t0) * 1e3
        rendered, sub, ranked, given, timings = self.knowledge(question, chosen, grounding)
        timings["evidence"] = evidence_ms
        scores, letter, prompt_chars = self._reply(question, rendered.text, evidence)
        knowledge = "\n".join(x for x in (evidence, rendered.text) if x)
        answer = self._answer(question, scores, knowledge, str(chosen), rendered.usage, letter)
        return Injection(answer, scores, sub, ranked, given, prompt_chars, sum(timings.values()), timings,
                         letter)

    def answer(self, question: Question, combo: str | Combination | None = None) -> Answer:
        """The :class:`Answer` of :meth:`inject`."""
        return self.inject(question, combo).answer

    def answer_without_knowledge(self, question: Question) -> Injection:
        """The "w/o KG" baseline: the same prompt template and scoring with no knowledge at all."""
        scores, letter, _ = self._reply(question, "", "")
        return Injection(self._answer(question, scores, "", WITHOUT_KG, Usage(), letter), scores,
                         letter=letter)

    def answer_with_evidence_only(self, question: Question) -> Injection:
        """The dataset's own evidence (e.g. OBQA facts) and no KG knowledge."""
        evidence = self.evidence(question) if self.evidence is not None else ""
        scores, letter, _ = self._reply(question, "", evidence)
        return Injection(self._answer(question, scores, evidence, "evidence only", Usage(), letter), scores,
                         letter=letter)
