"""What an ordinary chat client sees: the answer explained in the message content, and feedback as a message.

A chat client (the ``openai`` SDK, a chat UI) shows only ``choices[0].message.content``; kgwise's extras
travel in a top-level ``kgwise`` field such clients drop. With the model alias ``<pipeline>:explain`` (or
``kgwise: {"explain": true}`` in the request) the content is Markdown holding the answer, its calibrated
set and what that set promises, a few lines of the evidence, the arm, the cost and the decision id. A user
message ``/feedback DECISION correct`` (or ``wrong``, or ``gold=ANSWER``) is feedback on that decision, so
the router can be taught from the same chat window.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kgwise.server.schemas import KgwiseExtra

__all__ = ["EXPLAIN_SUFFIX", "FeedbackCommand", "answer_head", "feedback_command", "render_explained",
           "split_explain"]

EXPLAIN_SUFFIX = ":explain"
"""A model id ending in this (``kgwise:explain``, ``kgwise/arm:explain``) asks for the explained content."""

EVIDENCE_LINES = 5
"""Evidence lines shown in an explained answer (paths first, then triples)."""

SET_SHOWN = 10
"""Members of an answer set shown in an explained answer."""

_FEEDBACK = re.compile(r"^\s*/feedback\s+(?P<decision>[0-9A-Za-z_.:-]+)\s+(?:(?P<verdict>correct|right|wrong"
                       r"|incorrect)|gold\s*[=:]\s*(?P<gold>.+?))\s*$", re.IGNORECASE | re.DOTALL)


def split_explain(model: str) -> tuple[str, bool]:
    """``("kgwise", True)`` for ``"kgwise:explain"``; the model unchanged and False otherwise."""
    if model.endswith(EXPLAIN_SUFFIX):
        return model[: -len(EXPLAIN_SUFFIX)], True
    return model, False


@dataclass(frozen=True, slots=True)
class FeedbackCommand:
    """``/feedback DECISION correct|wrong|gold=ANSWER`` read from a chat message."""

    decision: str
    correct: bool | None
    gold: str | None


def feedback_command(text: str) -> FeedbackCommand | None:
    """The feedback command ``text`` holds, or None when it is a question."""
    m = _FEEDBACK.match(text)
    if m is None:
        return None
    verdict = m.group("verdict")
    if verdict is not None:
        return FeedbackCommand(m.group("decision"), verdict.lower() in ("correct", "right"), None)
    return FeedbackCommand(m.group("decision"), None, m.group("gold").strip())


def answer_head(extra: KgwiseExtra) -> str:
    """The answer as a message shows it: ``"B) text"`` for a choice, else the text."""
    return extra.answer if extra.choice is None else f"{extra.choice}) {extra.answer}"


def _md(text: str) -> str:
    """``text`` with Markdown's active characters escaped."""
    return re.sub(r"([\\`*_{}\[\]<>#|])", r"\\\1", text)


def _path(nodes: list[str], relations: list[str], inverse: list[bool]) -> str:
    parts = [_md(nodes[0])]
    for node, rel, inv in zip(nodes[1:], relations, inverse, strict=False):
        parts.append(f"←{_md(rel)}—" if inv else f"—{_md(rel)}→")
        parts.append(_md(node))
    return " ".join(parts)


def render_explained(extra: KgwiseExtra, evidence_lines: int = EVIDENCE_LINES) -> str:
    """The answer for a person, in Markdown: answer, set and its promise, evidence, arm, cost, decision."""
    head = answer_head(extra)
    out = [f"**{_md(head)}**", ""]
    s = extra.answer_set
    if s is not None:
        more = len(s.members) - SET_SHOWN
        members = ", ".join(_md(m) for m in s.members[:SET_SHOWN])
        members += f" … and {more} more" if more > 0 else ""
        holds = "holds" if s.guaranteed else "does not hold"
        out += [f"Answer set at α = {s.alpha:g} ({len(s.members)}; guarantee {holds}): {members}",
                f"> {_md(s.guarantee)}", ""]
    ab = extra.abstention
    if ab is not None:
        out += [f"> {_md(ab.promise)}" if ab.abstained else f"Answered: {_md(ab.promise)}", ""]
    ev = extra.evidence
    if ev is not None:
        support = [_path(p.nodes, p.relations, p.inverse) for p in ev.support]  # first: what backs the answer
        lines = [f"{line} (supports the answer)" for line in support]
        lines += [x for x in (_path(p.nodes, p.relations, p.inverse) for p in ev.paths) if x not in support]
        lines += [f"{_md(t.head)} —{_md(t.relation)}→ {_md(t.tail)}" for t in ev.triples]
        if lines:
            shown = lines[:evidence_lines]
            rest = len(lines) - len(shown)
            out += ["Evidence:"] + [f"- {line}" for line in shown]
            out += [f"- … and {rest} more (the `kgwise` field holds all)"] if rest > 0 else []
            out.append("")
    forced = " (named by the model)" if extra.forced else ""
    out.append(f"Arm `{extra.arm}`{forced} · cost {extra.cost:.6g} {extra.cost_unit} · decision "
               f"`{extra.decision_id}`")
    out.append(f"Reply `/feedback {extra.decision_id} correct` (or `wrong`, or `gold=ANSWER`) to teach the "
               "router.")
    return "\n".join(out)
