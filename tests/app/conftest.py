"""Shared pieces of the app tests: a small drug/disease KG and question file written in ``tmp_path``, a
config writer, and the test doubles of the pipeline's unit tests (``StubArm``, ``FakeEncoder``)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from kgwise.app.arms import ArmOutput
from kgwise.app.config import ArmConfig
from kgwise.types import Question, Usage

TRIPLES = [
    ("aspirin", "treats", "headache"), ("aspirin", "treats", "fever"),
    ("ibuprofen", "treats", "inflammation"), ("ibuprofen", "treats", "headache"),
    ("metformin", "treats", "diabetes"), ("insulin", "treats", "diabetes"),
    ("penicillin", "treats", "infection"), ("amoxicillin", "treats", "infection"),
    ("diabetes", "has symptom", "thirst"), ("infection", "has symptom", "fever"),
    ("inflammation", "has symptom", "swelling"), ("headache", "is a", "pain"),
]
TREATS: dict[str, list[str]] = {}
for _h, _r, _t in TRIPLES:
    if _r == "treats":
        TREATS.setdefault(_h, []).append(_t)
DISEASES = ["headache", "fever", "inflammation", "diabetes", "infection"]


def write_kg(tmp: Path) -> Path:
    path = tmp / "kg.tsv"
    path.write_text("".join(f"{h}\t{r}\t{t}\n" for h, r, t in TRIPLES), encoding="utf-8")
    return path


def dev_rows(n_rounds: int = 1) -> list[dict[str, Any]]:
    """Multiple-choice questions "What does DRUG treat?" with the KG's answer among three diseases."""
    rng = np.random.default_rng(0)
    rows: list[dict[str, Any]] = []
    for k in range(n_rounds):
        for drug, cured in TREATS.items():
            for disease in cured:
                others = [d for d in DISEASES if d not in cured]
                choices = [disease, *rng.choice(others, 2, replace=False).tolist()]
                rng.shuffle(choices)
                rows.append({"id": f"q{len(rows)}", "text": f"What does {drug} treat{'?' * (k + 1)}",
                             "choices": choices, "answer": disease})
    return rows


def write_questions(tmp: Path, rows: Sequence[Mapping[str, object]], name: str = "dev.jsonl") -> Path:
    path = tmp / name
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def write_config(tmp: Path, body: str, name: str = "kgwise.toml") -> Path:
    path = tmp / name
    path.write_text(body, encoding="utf-8")
    return path


STUB_CONFIG = """\
[kg]
graph = "kg.tsv"

[[arms]]
name = "cheap"
kind = "llm"
spec = "smollm2-135m"
price = {cheap}

[[arms]]
name = "dear"
kind = "inject"
spec = "smollm2-135m"
price = {dear}

[[arms]]
name = "free"
kind = "llm"
spec = "smollm2-135m"
price = 0
observe = true

[router]
budget_usd = {budget}
seed = {seed}

[answer_sets]
alpha = 0.2
"""


class FakeEncoder:
    """Test double of :class:`kgwise.embed.Encoder`: a unit vector from the text's hash (8-d)."""

    dim = 8

    def encode(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        out = []
        for t in texts:
            seed = int.from_bytes(hashlib.sha1(t.encode()).digest()[:4], "little")
            v = np.random.default_rng(seed).normal(size=self.dim)
            out.append(v / np.linalg.norm(v))
        return np.asarray(out, dtype=np.float32)


@dataclass
class StubArm:
    """Test double of an arm runner: picks the gold choice with probability ``skill`` (seeded per
    question text), bounds its usage by ``calls`` calls, reports ``calls + extra_calls`` and records
    the questions it answered."""

    config: ArmConfig
    skill: float = 0.7
    calls: int = 1
    open_questions: bool = True
    extra_calls: int = 0
    answered: list[str] = field(default_factory=list)

    def can_answer(self, question: Question) -> bool:
        return bool(question.choices) or self.open_questions

    def usage_bound(self, question: Question) -> Usage:
        return Usage(calls=self.calls)

    def answer(self, question: Question) -> ArmOutput:
        self.answered.append(question.text)
        digest = hashlib.sha1((self.config.name + question.text).encode()).digest()
        seed = int.from_bytes(digest[:4], "little")
        rng = np.random.default_rng(seed)
        if not question.choices:
            return ArmOutput("aspirin" if rng.random() < self.skill else "water", {}, usage=Usage(calls=1))
        n = len(question.choices)
        truth = _truth(question)
        pick = truth if rng.random() < self.skill else int(rng.integers(n))
        p = rng.dirichlet(np.ones(n)) * 0.5
        p[pick] += 0.5
        labels = [c.label for c in question.choices]
        return ArmOutput(labels[pick], {lab: float(x) for lab, x in zip(labels, p, strict=True)},
                         usage=Usage(calls=self.calls + self.extra_calls))


def _truth(question: Question) -> int:
    """The KG's answer among the choices of "What does DRUG treat?" (0 when there is none)."""
    drug = next((w for w in question.text.rstrip("?").split() if w in TREATS), None)
    for i, c in enumerate(question.choices):
        if drug is not None and c.text in TREATS[drug]:
            return i
    return 0





@dataclass
class StubPromptArm(StubArm):
    """Test double of an inject arm with ``combos``: :class:`StubArm` whose skill is ``skills[combo]``;
    answers with the given combination, else its bandit's pick, else the first; records the bandit it is
    given."""

    combos: tuple[str, ...] = ("P_sub+F_t", "P_sub+F_s")
    skills: dict[str, float] = field(default_factory=lambda: {"P_sub+F_t": 0.9, "P_sub+F_s": 0.3})
    encoder: FakeEncoder = field(default_factory=FakeEncoder)
    bandit: object = None
    combos_used: list[str] = field(default_factory=list)

    def combos_for(self, question: Question) -> tuple[str, ...]:
        return self.combos

    def use_bandit(self, bandit: object) -> None:
        from kgwise.errors import ConfigError
        from kgwise.inject.bandit import PromptBandit

        if isinstance(bandit, PromptBandit) and sorted(bandit.arms) != sorted(self.combos):
            raise ConfigError(f"the prompt bandit chooses among {', '.join(bandit.arms)}")
        self.bandit = bandit

    def answer(self, question: Question, combo: str | None = None) -> ArmOutput:
        if combo is None:
            from kgwise.inject.bandit import PromptBandit

            combo = (self.bandit.pull(self.encoder.encode([question.text])[0])
                     if isinstance(self.bandit, PromptBandit) else self.combos[0])
        self.combos_used.append(combo)
        inner = StubArm(replace(self.config, name=f"{self.config.name}:{combo}"), self.skills[combo],
                        self.calls)
        return inner.answer(question)
