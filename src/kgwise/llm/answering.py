"""Answering questions with an ``LLM``: multiple choice by letter or by scoring, free text for KGQA.

* ``answer_by_letter``: prompt with lettered options, parse the reply robustly (``B``, ``(B)``,
  ``Answer: B``, ``the answer is b.``, or the option's text) — for capable models.
* ``answer_by_scoring``: log P(choice text | question) per choice, ranked by a :data:`SCORING_RULES`
  rule (plain sum, per-token mean, or PMI against the choice's prior), softmax over the choices — for
  small models that cannot follow the letter format.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from kgwise.errors import ConfigError, SettingError
from kgwise.grading import normalize_answer
from kgwise.llm.base import LLM, ChoiceScores, Message, ScoringRule, gives_top_logprobs, tunable
from kgwise.types import Answer, Choice, GenerationSettings, Question

__all__ = [
    "LETTER_TOP_LOGPROBS",
    "METHODS",
    "METHOD_OF_RULE",
    "PRIOR_CONTEXT",
    "RULE_OF_METHOD",
    "LetterReply",
    "MCConfig",
    "answer_by_letter",
    "answer_by_scoring",
    "answer_free_text",
    "answer_mc",
    "choice_prior",
    "free_text_reply",
    "letter_answer",
    "letter_prompt",
    "letter_reply",
    "letter_reply_probabilities",
    "parse_choice",
    "require_logprobs",
    "score_choices_after",
    "scored_answer",
    "scoring_context",
]

Method = Literal["letter", "score", "score-mean", "score-pmi"]
METHODS: tuple[Method, ...] = ("score", "score-mean", "score-pmi", "letter")
METHOD_OF_RULE: dict[ScoringRule, Method] = {"sum": "score", "mean": "score-mean", "pmi": "score-pmi"}
RULE_OF_METHOD: dict[str, ScoringRule] = {method: rule for rule, method in METHOD_OF_RULE.items()}
PRIOR_CONTEXT = "Answer:"
"""The context-free prompt whose continuation probabilities are a choice's prior in PMI scoring: the last
line of every scoring prompt, without the question."""


@dataclass(frozen=True, slots=True)
class MCConfig:
    """How to answer multiple choice: ``method`` ``letter`` (generate and parse), ``score`` (sum of choice
    token log-probabilities), ``score-mean`` (per-token mean) or ``score-pmi`` (the sum minus the choice's
    log-probability after :data:`PRIOR_CONTEXT`); ``max_tokens`` for the letter reply."""

    method: Method = "score"
    max_tokens: int = 16
    system: str = "You answer multiple-choice questions. Reply with the letter of the correct option."


# --- multiple choice by letter -----------------------------------------------------------------------


def _preamble(question: Question, knowledge: str) -> list[str]:
    """The prompt lines before the question: the knowledge block and the question's own context."""
    parts = [f"Knowledge:\n{knowledge.strip()}\n"] if knowledge else []
    if question.context:
        parts.append(question.context.strip())
    return parts


def letter_prompt(question: Question, knowledge: str = "") -> str:
    """The question, optional knowledge, and the options as ``A. text`` lines."""
    parts = _preamble(question, knowledge)
    parts.append(f"Question: {question.text.strip()}")
    parts.append("Options:")
    parts.extend(f"{c.label}. {c.text}" for c in question.choices)
    parts.append("Answer with the letter of the correct option.")
    return "\n".join(parts)


def _letter_patterns(labels: Sequence[str]) -> list[re.Pattern[str]]:
    alt = "|".join(re.escape(x) for x in labels)
    return [
        re.compile(rf"^\s*\(?({alt})\)?\s*[.]?\s*$", re.IGNORECASE),  # the whole reply is the letter
        re.compile(rf"(?i:answer|option|choice)\s*(?:is|:|=)?\s*(?i:option|choice)?\s*[\(\[]?({alt})[\)\]]?(?![\w])"),
        re.compile(rf"^\s*[\(\[]({alt})[\)\]]"),  # (B) …
        re.compile(rf"^\s*({alt})\s*[.:)\-]"),  # B. … / B) … / B: …
        re.compile(rf"^\s*\**\s*({alt})\s*\**\s*$", re.MULTILINE),  # **B** on its own line
    ]


def parse_choice(text: str, choices: Sequence[Choice]) -> int | None:
    """Index of the option a free-form reply names, or ``None`` when it names none unambiguously.

    Tried in order: the bare label (``B``, ``(B)``), "answer is B"/"Answer: (B)", a leading ``B.``/``B)``,
    the option's text (exact, then a unique option text contained in the reply), then a unique stand-alone
    capital label in the reply.
    """
    if not choices:
        return None
    labels = [c.label for c in choices]
    upper = [x.upper() for x in labels]
    stripped = text.strip().strip("*").strip()
    for pat in _letter_patterns(labels + ([u for u in upper if u not in labels])):
        m = pat.search(stripped)
        if m:
            lab = m.group(1)
            return upper.index(lab.upper()) if lab.upper() in upper else None
    norm = normalize_answer(stripped)
    if norm:
        texts = [normalize_answer(c.text) for c in choices]
        exact = [i for i, t in enumerate(texts) if t and t == norm]
        if len(exact) == 1:
            return exact[0]
        contained = [i for i, t in enumerate(texts) if t and f" {t} " in f" {norm} "]
        if len(contained) == 1:
            return contained[0]
        if len(contained) > 1:  # prefer the longest, if it contains the others ("red" vs "dark red")
            longest = max(contained, key=lambda i: len(texts[i]))
            if all(texts[i] in texts[longest] for i in contained):
                return longest
    found = {m.group(1) for m in re.finditer(rf"(?<![\w'])({'|'.join(map(re.escape, labels))})(?![\w'])",
                                              stripped)}
    if "A" in found and len(found) > 1:  # "A" is also an article
        found.discard("A")
    if len(found) == 1:
        return labels.index(found.pop())
    return None


LETTER_TOP_LOGPROBS = 20
"""How many of the reply's likeliest first tokens a backend that offers them is asked for: enough that every
option's letter is among them whenever the model means to reply with a letter."""
LetterSource = Literal["logprobs", "reply", "none"]


@dataclass(frozen=True, slots=True)
class LetterReply:
    """A reply to a lettered prompt: ``scores`` (``method="letter"``; each option's log-probability, ``-inf``
    for none), the ``prediction`` (a label, ``""`` when the reply named none), the reply ``text`` and
    ``source``: ``logprobs`` when the greedy first token is an option's letter and the probabilities are
    that token's top log-probabilities (over the options' letters among them, normalised), ``reply`` when
    they are all mass on the option the reply's text names (no top log-probabilities, a first token that is
    no letter, or a reply that names another option than its first token), ``none`` when the reply names
    no option (uniform probabilities; the prediction is empty, never a guess)."""

    scores: ChoiceScores
    prediction: str
    text: str
    source: LetterSource


def letter_reply(llm: LLM, question: Question, knowledge: str = "", config: MCConfig | None = None
                 ) -> LetterReply:
    """Ask for a letter (:func:`letter_prompt` as the user message of the model's chat, ``config.system``
    the system message) and read it: the first token's top log-probabilities where the backend gives them
    (:data:`LETTER_TOP_LOGPROBS`), else the parsed reply (:class:`LetterReply`)."""
    cfg = config or MCConfig(method="letter")
    prompt = [Message("system", cfg.system), Message("user", letter_prompt(question, knowledge))]
    extra: dict[str, Any] = {"top_logprobs": LETTER_TOP_LOGPROBS} if gives_top_logprobs(llm) else {}
    generate: Any = llm.generate  # a backend that gives top log-probabilities takes ``top_logprobs``
    gen = generate(prompt, max_tokens=cfg.max_tokens, temperature=0.0, **extra)
    idx = parse_choice(gen.text, question.choices)
    labels = [c.label for c in question.choices]
    top = gen.top_logprobs[0] if gen.top_logprobs else {}
    first = _letter_of(max(top, key=top.__getitem__), labels) if top else None  # the greedy first token
    from_top = _letter_probabilities(top, labels) if first is not None else None
    source: LetterSource
    if from_top is not None and (idx is None or first == labels[idx]):
        probs, source = from_top, "logprobs"
    else:
        probs = letter_reply_probabilities(labels, labels[idx] if idx is not None else "")
        source = "reply" if idx is not None else "none"
    logs = tuple(math.log(probs[lab]) if probs[lab] > 0 else -math.inf for lab in labels)
    prediction = "" if source == "none" else max(labels, key=lambda k: probs[k])
    ones = tuple(1 for _ in labels)
    return LetterReply(ChoiceScores(logs, logs, gen.usage, ones, method="letter"), prediction, gen.text,
                       source)


def answer_by_letter(
    llm: LLM, question: Question, knowledge: str = "", config: MCConfig | None = None
) -> Answer:
    """Ask for a letter and parse it (:func:`letter_reply`): probabilities from the first token's top
    log-probabilities when the backend offers them, else all mass on the parsed option (uniform when
    nothing could be parsed)."""
    reply = letter_reply(llm, question, knowledge, config)
    return letter_answer(question, reply, usage=reply.scores.usage, arm=llm.name)


def letter_answer(question: Question, reply: LetterReply, **fields: Any) -> Answer:
    """The :class:`Answer` of a letter ``reply``: its prediction, its probabilities and its text as ``raw``;
    ``fields`` (``usage``, ``arm``, ``knowledge``, ``combo``) are the Answer's own."""
    labels = [c.label for c in question.choices]
    probs = dict(zip(labels, reply.scores.ranked_probabilities(), strict=True))
    return Answer(question.id, reply.prediction, probs, raw=reply.text, **fields)


def letter_reply_probabilities(labels: Sequence[str], answer: str) -> dict[str, float]:
    """The probabilities of a reply that names a choice and gives no log-probabilities: all mass on the
    named choice ``answer``, uniform over ``labels`` when it named none (``""``). Their LAC score is 0 for
    the answer and 1 for every other choice (0.75 each with four choices and no answer), so a calibrated
    set of such replies is the answer alone or every choice."""
    if answer and answer not in labels:
        raise ValueError(f"answer {answer!r} is not one of the choices {list(labels)}")
    return {lab: (1.0 if lab == answer else 0.0) if answer else 1.0 / len(labels) for lab in labels}


def _letter_of(token: str, labels: Sequence[str]) -> str | None:
    """The option letter a token writes (``B``, `` B``, ``(B``, ``B.``; case kept, so the article ``a`` is
    no ``A``), else None."""
    t = token.strip().strip("()[].:*")
    return t if t in labels else None


def _letter_probabilities(top: dict[str, float], labels: Sequence[str]) -> dict[str, float] | None:
    mass: dict[str, float] = {}
    for tok, lp in top.items():
        if (t := _letter_of(tok, labels)) is not None:
            mass[t] = mass.get(t, 0.0) + math.exp(lp)
    total = sum(mass.values())
    if total <= 0:
        return None
    return {lab: mass.get(lab, 0.0) / total for lab in labels}


# --- multiple choice by scoring ----------------------------------------------------------------------


def scoring_context(question: Question, knowledge: str = "") -> str:
    """Context whose continuation is the answer text: ``[Knowledge …] Question: … Answer:``."""
    parts = _preamble(question, knowledge)
    parts.append(f"Question: {question.text.strip()}\nAnswer:")
    return "\n".join(parts)


def require_logprobs(llm: LLM, scores: ChoiceScores) -> None:
    """PMI scoring needs token log-probabilities: ``ConfigError`` when ``llm`` answered by letter."""
    if scores.method != "logprob":
        raise ConfigError(f"PMI scoring needs token log-probabilities, but {llm.name} answered by "
                          f"{scores.method} (no prompt log-probabilities from its server); use sum scoring")


def score_choices_after(llm: LLM, question: Question, context: str) -> ChoiceScores:
    """log P(" " + choice text | ``context``) for every choice of ``question``: the one continuation format
    of every scored prompt, so that PMI's prior scores exactly what the question's prompt scores."""
    return llm.score_choices(context, [" " + c.text for c in question.choices])


def choice_prior(llm: LLM, question: Question) -> ChoiceScores:
    """The choices' scores after :data:`PRIOR_CONTEXT`: the denominator of PMI scoring."""
    return score_choices_after(llm, question, PRIOR_CONTEXT)


def scored_answer(question: Question, scores: ChoiceScores, rule: ScoringRule = "sum",
                  prior: ChoiceScores | None = None, **fields: Any) -> Answer:
    """The :class:`Answer` that ``scores`` give under ``rule``: the best choice's label and the softmax
    over the choices; ``fields`` (``usage``, ``arm``, ``knowledge``, ``combo``, …) are the Answer's own."""
    labels = [c.label for c in question.choices]
    probs = scores.ranked_probabilities(rule, prior)
    return Answer(question.id, labels[scores.best(rule, prior)], dict(zip(labels, probs, strict=True)),
                  **fields)


def answer_by_scoring(
    llm: LLM, question: Question, knowledge: str = "", *, rule: ScoringRule = "sum",
    prior: ChoiceScores | None = None,
) -> tuple[Answer, ChoiceScores]:
    """Score ``" " + choice text`` after ``scoring_context``; softmax over the choices of their values
    under ``rule``. ``pmi`` uses ``prior`` or, when not given, makes one more call (:func:`choice_prior`,
    counted in the answer's usage). Returns the answer and the conditional scores."""
    scores = score_choices_after(llm, question, scoring_context(question, knowledge))
    usage = scores.usage
    if rule == "pmi" and prior is None:
        require_logprobs(llm, scores)
        prior = choice_prior(llm, question)
        usage = usage + prior.usage
    return scored_answer(question, scores, rule, prior, usage=usage, arm=llm.name), scores


def answer_mc(llm: LLM, question: Question, knowledge: str = "", config: MCConfig | None = None) -> Answer:
    """Answer a multiple-choice question with ``config.method``."""
    cfg = config or MCConfig()
    if not question.choices:
        raise ValueError(f"{question.ref} has no choices")
    if cfg.method == "letter":
        return answer_by_letter(llm, question, knowledge, cfg)
    if cfg.method not in RULE_OF_METHOD:
        raise ValueError(f"unknown answering method {cfg.method!r}; use {', '.join(METHODS)}")
    return answer_by_scoring(llm, question, knowledge, rule=RULE_OF_METHOD[cfg.method])[0]


def answer_free_text(llm: LLM, question: Question, knowledge: str = "", *, max_tokens: int = 64) -> Answer:
    """Generate a short free-text answer (KGQA) greedily: :func:`free_text_reply` with the arm's defaults."""
    return free_text_reply(llm, question, knowledge, max_tokens=max_tokens)[0]


def free_text_reply(llm: LLM, question: Question, knowledge: str = "", *, max_tokens: int = 64,
                    settings: GenerationSettings | None = None, on_text: Callable[[str], None] | None = None
                    ) -> tuple[Answer, str]:
    """A short free-text answer (KGQA) and why its generation ended (``length``: at the token limit,
    ``stop``: anything else). ``Answer.prediction`` is the first line of the reply; the prompt ends in
    ``Answer:`` so that base models (no chat template) complete it as well.

    ``settings`` (a caller's): ``max_tokens`` at most ``max_tokens`` (the arm's limit, which bounds its cost
    before the call), ``temperature``, ``top_p``, ``seed``, and ``stop`` strings besides the prompt's own;
    ``on_text`` gets the prediction's text as it is generated (the reply's first line: what
    ``Answer.prediction`` ends up holding, up to trailing spaces), a piece per piece of the reply (empty
    where none of it is that line's). A backend that cannot apply them
    (:func:`~kgwise.llm.base.tunable`: a recording) is a :class:`SettingError` naming the first one given;
    without ``settings``, it streams its whole reply to ``on_text`` as one piece."""
    s = settings or GenerationSettings()
    parts = ["Answer the question with the name(s) of the answer entity only."]
    if knowledge:
        parts.append(f"Knowledge:\n{knowledge.strip()}")
    parts.append(f"Question: {question.text.strip()}\nAnswer:")
    limit = max_tokens if s.max_tokens is None else min(s.max_tokens, max_tokens)
    stop = ["\nQuestion:", *s.stop]
    line = _FirstLine(on_text) if on_text is not None else None
    tuned = tunable(llm)
    if s.given() and not tuned:
        raise SettingError(s.given()[0], f"{llm.name} gives recorded replies: it cannot apply generation "
                                         "settings")
    # only what asks for something, so that a default call (and its response-cache key) is as it always was
    top_p = s.top_p if s.top_p is not None and s.top_p < 1.0 else None
    wanted = (("top_p", top_p), ("seed", s.seed), ("on_text", None if line is None else line.feed))
    extra: dict[str, Any] = {k: v for k, v in wanted if v is not None and tuned}
    generate: Any = llm.generate  # a tunable backend's takes ``extra`` too
    gen = generate("\n".join(parts), max_tokens=limit, temperature=s.temperature or 0.0, stop=stop, **extra)
    if line is not None and not tuned:
        line.feed(gen.text)
    lines = [ln.strip() for ln in gen.text.strip().splitlines() if ln.strip()]
    pred = lines[0] if lines else ""
    finish = "length" if gen.finish_reason == "length" and len(lines) <= 1 else "stop"
    return Answer(question.id, pred, raw=gen.text, usage=gen.usage, arm=llm.name), finish


class _FirstLine:
    """Passes the first non-empty line of a reply fed in pieces on to ``out`` (leading whitespace dropped,
    nothing after its line break): the part of a streamed reply that becomes the prediction. Every piece
    reaches ``out``, emptied where it holds none of that line, so that ``out`` may stop the generation
    (by raising) at any piece."""

    def __init__(self, out: Callable[[str], None]) -> None:
        self.out = out
        self.started = False
        self.done = False

    def feed(self, piece: str) -> None:
        if self.done:
            self.out("")
            return
        if not self.started:
            piece = piece.lstrip()
            self.started = bool(piece)
        head, newline, _ = piece.partition("\n")
        self.done = bool(newline)
        self.out(head)
