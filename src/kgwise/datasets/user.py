"""A user's own data: labelled questions and graded logs as JSON Lines (schemas in ``kgwise/data/schemas``).

Questions, one object per line::

    {"id": "q1", "text": "Which drug …?", "choices": ["aspirin", "insulin"] | {"A": "aspirin", …}
     | [{"label": "A", "text": "aspirin"}, …],
     "gold": ["A"] | "answer": "A" | "aspirin",          # optional; a choice's label or its text
     "topic_entities": ["Aspirin"]}                      # optional, open questions

Without ``choices`` a question is open: ``gold`` / ``answer`` hold answer names (aliases included).

A graded log, one object per question: what each arm answered, whether that was right and what it cost::

    {"id": "q1", "text": "…", "arms": {"gpt-4": {"answer": "A", "correct": true, "cost": 0.002},
                                       "gnn": {"answer": "B", "correct": false,
                                               "usage": {"input_tokens": 0, "calls": 1},
                                               "signals": [0.91, 0.05]}}}

``cost`` (dollars or calls, as the router counts; 0 on every question: a free arm) or ``usage`` (tokens and
calls, priced by the arm's exact name); ``signals``: optional numbers, the arm's confidence — a free arm's
``answer`` and ``signals[0]`` make the router's free context, every value feeds the success predictor, and
a paid arm's (known once it answered) the cascade (``kgwise.eval.route.logs``; ``docs/graded-logs.md``).

Recorded LLM answers (``eval uag --generations``)::

    {"id": "q1", "answer": "aspirin"}

A scored retriever's candidates (``eval uag --candidates``; ``gold``: the candidate ids that are right, when
they are ids rather than the gold names)::

    {"id": "q1", "candidates": [["aspirin", 0.93], ["ibuprofen", 0.41]], "gold": ["aspirin"]}

Every reader names the file, the line and the field of a bad record.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from kgwise.errors import ConfigError, DataError, listed
from kgwise.files import read_jsonl, write_text_atomic
from kgwise.types import CHOICE_LABELS, Choice, Question, Usage

__all__ = [
    "ArmOutcome",
    "Candidates",
    "GradedLog",
    "GradedQuestion",
    "question_record",
    "read_candidates",
    "read_generations",
    "read_graded_log",
    "read_labelled_mc",
    "read_questions",
    "schema",
    "write_candidates",
    "write_generations",
    "write_graded_log",
    "write_questions",
]

_QUESTION_KEYS = {"id", "text", "choices", "gold", "answer", "topic_entities", "context", "concept"}


def schema(name: str) -> dict[str, Any]:
    """The JSON schema ``questions``, ``graded_log``, ``generations`` or ``candidates`` of the package."""
    text = resources.files("kgwise").joinpath(f"data/schemas/{name}.schema.json").read_text("utf-8")
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def _strings(value: Any, key: str, path: Path, line: int) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise DataError(f"field {key!r} must be a string or a list of non-empty strings, got {value!r}",
                        path, line)
    return tuple(value)


def _choices(raw: Any, path: Path, line: int) -> tuple[Choice, ...]:
    if isinstance(raw, dict):
        pairs = list(raw.items())
    elif isinstance(raw, list) and all(isinstance(c, str) for c in raw):
        if len(raw) > len(CHOICE_LABELS):
            raise DataError(f"field 'choices': at most {len(CHOICE_LABELS)} unlabelled choices", path, line)
        pairs = list(zip(CHOICE_LABELS, raw, strict=False))
    elif isinstance(raw, list) and all(isinstance(c, dict) for c in raw):
        pairs = [(c.get("label"), c.get("text")) for c in raw]
    else:
        raise DataError("field 'choices' must be a list of texts, a {label: text} object or a list of "
                        "{label, text} objects", path, line)
    out = []
    for label, text in pairs:
        if not isinstance(label, str) or not label.strip() or not isinstance(text, str) or not text.strip():
            raise DataError(f"field 'choices': a choice needs a non-empty label and text, got "
                            f"{label!r}: {text!r}", path, line)
        out.append(Choice(label.strip(), text.strip()))
    if len(out) < 2:
        raise DataError("field 'choices': a multiple-choice question needs at least two choices", path, line)
    labels = [c.label for c in out]
    if len(set(labels)) != len(labels):
        raise DataError(f"field 'choices': duplicate labels {labels}", path, line)
    return tuple(out)


def _gold_labels(given: tuple[str, ...], choices: tuple[Choice, ...], key: str, path: Path,
                 line: int) -> tuple[str, ...]:
    """Gold given as labels or as choice texts (case-insensitive) → labels."""
    by_label = {c.label: c.label for c in choices}
    by_text = {c.text.casefold(): c.label for c in choices}
    out = []
    for g in given:
        label = by_label.get(g.strip()) or by_text.get(g.strip().casefold())
        if label is None:
            raise DataError(f"field {key!r}: {g!r} is neither a choice label ({', '.join(by_label)}) nor a "
                            "choice's text", path, line)
        out.append(label)
    return tuple(dict.fromkeys(out))


def _record_id(obj: Mapping[str, Any], fields: Sequence[str], what: str, path: Path, line: int) -> str:
    """A record's ``id`` (a whole number as its digits), after refusing any field not among ``fields``
    (``what``: the record's name in the message); ``DataError`` naming file and line."""
    unknown = sorted(set(obj) - set(fields))
    if unknown:
        raise DataError(f"unknown field(s) {', '.join(unknown)}; {what} has {', '.join(fields)}", path, line)
    qid = obj.get("id")
    if isinstance(qid, int) and not isinstance(qid, bool):
        qid = str(qid)
    if not isinstance(qid, str) or not qid.strip():
        raise DataError("field 'id' missing or not a non-empty string", path, line)
    return qid


def _once(seen: dict[str, int], qid: str, path: Path, line: int) -> None:
    """Refuse an id already ``seen`` (id → its line) in the file; else remember it."""
    if qid in seen:
        raise DataError(f"id {qid!r} is given twice (first on line {seen[qid]})", path, line)
    seen[qid] = line


def _write_jsonl(path: str | Path, records: Iterable[Mapping[str, Any]]) -> int:
    """Write ``records`` one JSON object a line (atomically); returns how many."""
    lines = [json.dumps(r, ensure_ascii=False) for r in records]
    write_text_atomic(Path(path), "".join(line + "\n" for line in lines))
    return len(lines)


def question_record(obj: Mapping[str, Any], path: Path, line: int) -> Question:
    """One questions-file record as a ``Question`` (``DataError`` naming file, line and field)."""
    qid = _record_id(obj, sorted(_QUESTION_KEYS), "a question", path, line)
    text = obj.get("text")
    if not isinstance(text, str) or not text.strip():
        raise DataError("field 'text' missing or not a non-empty string", path, line)
    if "gold" in obj and "answer" in obj:
        raise DataError("give 'gold' or 'answer', not both", path, line)
    key = "gold" if "gold" in obj else "answer"
    gold = _strings(obj[key], key, path, line) if key in obj else ()
    choices = _choices(obj["choices"], path, line) if obj.get("choices") is not None else ()
    if choices and gold:
        gold = _gold_labels(gold, choices, key, path, line)
    raw_topics = obj.get("topic_entities")
    topics = _strings(raw_topics, "topic_entities", path, line) if raw_topics else ()
    extra = {k: obj[k] for k in ("context", "concept") if isinstance(obj.get(k), str)}
    try:
        return Question(qid.strip(), text.strip(), choices, gold, topics, **extra)
    except ValueError as exc:
        raise DataError(str(exc), path, line) from exc


def read_questions(path: str | Path, require_gold: bool = False) -> list[Question]:
    """Every question of a questions file (ids must be unique; with ``require_gold``, each with its gold
    answer, as a pipeline's dev questions need)."""
    p = Path(path)
    out: list[Question] = []
    seen: dict[str, int] = {}
    for line, obj in read_jsonl(p, "questions file"):
        q = question_record(obj, p, line)
        if require_gold and not q.gold:
            raise DataError("field 'gold' missing: a dev question needs its gold answer ('gold' or 'answer')",
                            p, line)
        _once(seen, q.id, p, line)
        out.append(q)
    if not out:
        raise DataError("questions file holds no questions", p)
    return out


def read_labelled_mc(path: str | Path, purpose: str) -> list[Question]:
    """The questions of ``path``, each with choices and a gold answer: ``ConfigError`` naming the file, how
    many lack them, the first ids, and ``purpose`` (what needs them)."""
    qs = read_questions(path)
    bad = [q.ref for q in qs if not q.choices or q.gold_index is None]
    if bad:
        raise ConfigError(f"{path}: {len(bad)} question(s) without choices or a gold answer ({listed(bad)}); "
                          f"{purpose}")
    return qs


def _question_json(q: Question) -> dict[str, Any]:
    rec: dict[str, Any] = {"id": q.id, "text": q.text}
    if q.choices:
        rec["choices"] = {c.label: c.text for c in q.choices}
    if q.gold:
        rec["gold"] = list(q.gold)
    if q.topic_entities:
        rec["topic_entities"] = list(q.topic_entities)
    return rec


def write_questions(path: str | Path, questions: Iterable[Question]) -> int:
    """Write ``questions`` as a questions file (atomically); returns how many."""
    return _write_jsonl(path, map(_question_json, questions))


@dataclass(frozen=True, slots=True)
class ArmOutcome:
    """What one arm did on one question: its answer, whether it was right, and its cost or usage."""

    answer: str
    correct: bool
    cost: float | None = None
    usage: Usage | None = None
    signals: tuple[float, ...] = ()
    probabilities: Mapping[str, float] | None = None
    """A multiple-choice arm's probability of each choice label (what its answer set is made from)."""

    def to_dict(self) -> dict[str, Any]:
        rec: dict[str, Any] = {"answer": self.answer, "correct": self.correct}
        if self.cost is not None:
            rec["cost"] = self.cost
        if self.usage is not None:
            u = self.usage
            rec["usage"] = {"input_tokens": u.input_tokens, "output_tokens": u.output_tokens,
                            "calls": u.calls}
        if self.signals:
            rec["signals"] = list(self.signals)
        if self.probabilities is not None:
            rec["probabilities"] = dict(self.probabilities)
        return rec


@dataclass(frozen=True, slots=True)
class GradedQuestion:
    """One line of a graded log: the question and each arm's outcome on it."""

    id: str
    text: str
    arms: Mapping[str, ArmOutcome]
    gold: str | None = None
    """A multiple-choice question's right choice label (optional; needed to score answer sets where no
    arm was right)."""
    line: int = field(default=0, compare=False)
    """Its line in the file it was read from (0: not read from a file), for errors found after reading."""


@dataclass(frozen=True)
class GradedLog:
    """A graded log: questions in file order and the arms that appear in it (first-seen order)."""

    questions: tuple[GradedQuestion, ...]
    arms: tuple[str, ...] = field(default=())

    def outcome(self, arm: str) -> list[ArmOutcome | None]:
        """``arm``'s outcome on every question (``None`` where the log does not grade it)."""
        return [q.arms.get(arm) for q in self.questions]


def _number(value: Any, what: str, path: Path, line: int, *, integer: bool = False) -> float:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    ok = ok and value >= 0
    if not ok or (integer and int(value) != value):
        kind = "a whole number" if integer else "a finite number"
        raise DataError(f"{what} must be {kind} ≥ 0, got {value!r}", path, line)
    return float(value)


def _arm_outcome(name: str, obj: Any, path: Path, line: int) -> ArmOutcome:
    where = f"arms.{name}"
    if not isinstance(obj, dict):
        raise DataError(f"{where} must be an object {{answer, correct, cost | usage}}", path, line)
    unknown = sorted(set(obj) - {"answer", "correct", "cost", "usage", "signals", "probabilities"})
    if unknown:
        raise DataError(f"{where}: unknown field(s) {', '.join(unknown)}", path, line)
    answer = obj.get("answer", "")
    if not isinstance(answer, str):
        raise DataError(f"{where}.answer must be a string, got {answer!r}", path, line)
    correct = obj.get("correct")
    if isinstance(correct, int | float) and not isinstance(correct, bool) and correct in (0, 1):
        correct = bool(correct)
    if not isinstance(correct, bool):
        raise DataError(f"{where}.correct must be true or false, got {correct!r}", path, line)
    if ("cost" in obj) == ("usage" in obj):
        raise DataError(f"{where} needs exactly one of 'cost' and 'usage'", path, line)
    cost = _number(obj["cost"], f"{where}.cost", path, line) if "cost" in obj else None
    usage = None
    if "usage" in obj:
        u = obj["usage"]
        if not isinstance(u, dict) or set(u) - {"input_tokens", "output_tokens", "calls"}:
            raise DataError(f"{where}.usage must be {{input_tokens, output_tokens, calls}}", path, line)
        n = {k: int(_number(u.get(k, 0), f"{where}.usage.{k}", path, line, integer=True))
             for k in ("input_tokens", "output_tokens")}
        calls = int(_number(u.get("calls", 1), f"{where}.usage.calls", path, line, integer=True))
        usage = Usage(n["input_tokens"], n["output_tokens"], calls)
    signals = obj.get("signals", [])
    if not isinstance(signals, list) or not all(
            isinstance(s, int | float) and not isinstance(s, bool) and math.isfinite(s) for s in signals):
        raise DataError(f"{where}.signals must be a list of finite numbers", path, line)
    probs = _choice_probabilities(obj["probabilities"], answer, where, path, line) if "probabilities" in obj \
        else None
    return ArmOutcome(answer, correct, cost, usage, tuple(float(s) for s in signals), probs)


PROBABILITY_SUM_TOLERANCE = 0.01
"""How far from 1 a recorded choice distribution may sum (rounding in the recorder)."""


def _choice_probabilities(raw: Any, answer: str, where: str, path: Path, line: int) -> dict[str, float]:
    """``arms.NAME.probabilities``: ``{CHOICE_LABEL: p}`` over at least two choices, each ``p`` in [0, 1],
    summing to 1 (± :data:`PROBABILITY_SUM_TOLERANCE`), the arm's answer among the labels."""
    field_ = f"{where}.probabilities"
    if not isinstance(raw, dict) or len(raw) < 2:
        raise DataError(f"{field_} must be an object {{CHOICE_LABEL: probability}} over at least two choices",
                        path, line)
    out: dict[str, float] = {}
    for label, p in raw.items():
        if not label.strip():
            raise DataError(f"{field_}: a choice label is empty", path, line)
        if isinstance(p, bool) or not isinstance(p, int | float) or not 0.0 <= p <= 1.0:
            raise DataError(f"{field_}.{label} must be a probability in [0, 1], got {p!r}", path, line)
        out[label] = float(p)
    total = sum(out.values())
    if abs(total - 1.0) > PROBABILITY_SUM_TOLERANCE:
        raise DataError(f"{field_} sums to {total:.4f}, not 1 (± {PROBABILITY_SUM_TOLERANCE})", path, line)
    if answer and answer not in out:
        raise DataError(f"{where}.answer {answer!r} is not one of the choices of {field_} "
                        f"({', '.join(out)})", path, line)
    return out


def _gold_choice(gold: Any, outcomes: Mapping[str, ArmOutcome], path: Path, line: int) -> str | None:
    """The question's ``gold`` choice label, checked against the arms: every arm that gives
    ``probabilities`` gives them over the same labels, ``gold`` is one of them, and an arm's ``correct``
    says whether its answer is ``gold``."""
    labelled = {name: o.probabilities for name, o in outcomes.items() if o.probabilities is not None}
    labels = {frozenset(p) for p in labelled.values()}
    if len(labels) > 1:
        raise DataError("the arms' probabilities name different choices: " + "; ".join(
            f"{name}: {', '.join(p)}" for name, p in labelled.items()), path, line)
    if gold is None:
        return None
    if not isinstance(gold, str) or not gold.strip():
        raise DataError(f"field 'gold' must be a non-empty choice label, got {gold!r}", path, line)
    if labels and gold not in next(iter(labels)):
        raise DataError(f"gold {gold!r} is not one of the choices the arms' probabilities name", path, line)
    for name, o in outcomes.items():
        if o.answer and o.correct != (o.answer == gold):
            raise DataError(f"arms.{name}.correct is {str(o.correct).lower()} but its answer {o.answer!r} "
                            f"{'is not' if o.correct else 'is'} the gold choice {gold!r}", path, line)
    return gold


def read_graded_log(path: str | Path, arms: Sequence[str] | None = None) -> GradedLog:
    """A graded log; with ``arms``, an arm the log names that is not among them is an error."""
    p = Path(path)
    known = set(arms) if arms is not None else None
    out: list[GradedQuestion] = []
    seen: dict[str, int] = {}
    order: dict[str, None] = {}
    for line, obj in read_jsonl(p, "graded log"):
        qid = _record_id(obj, ("id", "text", "arms", "gold"), "a graded question", p, line)
        text, graded = obj.get("text", ""), obj.get("arms")
        if not isinstance(text, str):
            raise DataError("field 'text' must be a string", p, line)
        if not isinstance(graded, dict) or not graded:
            raise DataError("field 'arms' must be an object {ARM: {answer, correct, cost | usage}} with at "
                            "least one arm", p, line)
        _once(seen, qid, p, line)
        outcomes = {}
        for name, rec in graded.items():
            if known is not None and name not in known:
                raise DataError(f"unknown arm {name!r}; the arms are {', '.join(arms or ())}", p, line)
            outcomes[name] = _arm_outcome(name, rec, p, line)
            order[name] = None
        gold = _gold_choice(obj.get("gold"), outcomes, p, line)
        out.append(GradedQuestion(qid, text, outcomes, gold, line))
    if not out:
        raise DataError("graded log holds no questions", p)
    return GradedLog(tuple(out), tuple(order))


def write_graded_log(path: str | Path, log: GradedLog) -> int:
    """Write ``log`` as a graded log (atomically); returns how many questions."""
    return _write_jsonl(path, ({"id": q.id, "text": q.text,
                                "arms": {a: o.to_dict() for a, o in q.arms.items()},
                                **({} if q.gold is None else {"gold": q.gold})} for q in log.questions))


# ------------------------------------------------------------------------------ generations, candidates
def read_generations(path: str | Path) -> dict[str, str]:
    """Recorded LLM answers ``Φ(P)``, one ``{"id", "answer"}`` a line (ids unique; schema ``generations``)."""
    p = Path(path)
    out: dict[str, str] = {}
    lines: dict[str, int] = {}
    for line, obj in read_jsonl(p, "generations file"):
        qid, answer = _record_id(obj, ("id", "answer"), "a generation", p, line).strip(), obj.get("answer")
        if not isinstance(answer, str):
            raise DataError(f"field 'answer' missing or not a string, got {answer!r}", p, line)
        _once(lines, qid, p, line)
        out[qid] = answer
    if not out:
        raise DataError("generations file holds no answers", p)
    return out


def write_generations(path: str | Path, generations: Mapping[str, str]) -> int:
    """Write ``{id: answer}`` as a generations file (atomically, in the mapping's order); returns how many."""
    return _write_jsonl(path, ({"id": k, "answer": v} for k, v in generations.items()))


@dataclass(frozen=True, slots=True)
class Candidates:
    """A scored retriever's candidates for one question, best first after sorting by score (higher is
    better), and optionally which candidate ids are gold (else a candidate is gold when its name matches
    one of the question's gold names)."""

    id: str
    candidates: tuple[tuple[str, float], ...]
    gold: tuple[str, ...] | None = None

    def to_dict(self) -> dict[str, Any]:
        rec: dict[str, Any] = {"id": self.id, "candidates": [[c, s] for c, s in self.candidates]}
        if self.gold is not None:
            rec["gold"] = list(self.gold)
        return rec


def read_candidates(path: str | Path) -> dict[str, Candidates]:
    """A candidates file, one ``{"id", "candidates": [[name_or_id, score], …], "gold"?: [ids]}`` per line
    (schema ``candidates``), by id."""
    p = Path(path)
    out: dict[str, Candidates] = {}
    lines: dict[str, int] = {}
    for line, obj in read_jsonl(p, "candidates file"):
        qid = _record_id(obj, ("id", "candidates", "gold"), "a record", p, line).strip()
        raw = obj.get("candidates")
        if not isinstance(raw, list):
            raise DataError("field 'candidates' must be a list of [name_or_id, score] pairs", p, line)
        pairs = []
        for k, c in enumerate(raw):
            ok = isinstance(c, list) and len(c) == 2 and isinstance(c[0], str) and bool(c[0].strip())
            ok = ok and isinstance(c[1], int | float) and not isinstance(c[1], bool) and math.isfinite(c[1])
            if not ok:
                raise DataError(f"candidates[{k}] must be [name_or_id, finite score], got {c!r}", p, line)
            pairs.append((c[0], float(c[1])))
        gold = _strings(obj["gold"], "gold", p, line) if obj.get("gold") is not None else None
        _once(lines, qid, p, line)
        out[qid] = Candidates(qid, tuple(pairs), gold)
    if not out:
        raise DataError("candidates file holds no records", p)
    return out


def write_candidates(path: str | Path, records: Iterable[Candidates]) -> int:
    """Write candidates records (atomically); returns how many."""
    return _write_jsonl(path, (r.to_dict() for r in records))
