"""UAG's calibrated answer set of a KG question (``kgwise uag calibrate`` output) — the one assembly the CLI
(``kgwise uag answer``) and the server (``POST /v1/answer-set``) share.

The app loads the calibration, the KG (the one given, else the one the calibration names) and the LLM that
writes Φ(P) (the one given, else the one calibrated with). Another KG or another live LLM than the
calibration's raises ``ConfigError`` unless ``allow_mismatch``; an answer then says it carries no
guarantee. A generator other than the calibrated one (allowed without a flag when the calibration used
recorded answers, whose generator cannot be compared) also voids the guarantee, and the result says so.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kgwise.conformal.calibrated import AnswerSet, CalibratedUAG
from kgwise.conformal.evaluator import LLMGenerator
from kgwise.errors import ConfigError
from kgwise.types import Question

__all__ = ["AnswerSetResult", "UAGApp", "UAGStatus"]


@dataclass(frozen=True, slots=True)
class AnswerSetResult:
    """One question's calibrated set (``answer_set``: answers, generation, α, δ, unknown topic entities),
    the calibration's λ and evaluator score, whether Φ(P) came from the calibrated generator, whether the
    set carries the guarantee, and how the pipeline differs from the calibration's."""

    answer_set: AnswerSet
    lambda_: tuple[float, ...]
    evaluator_score: str
    same_generator: bool
    guaranteed: bool
    mismatch: tuple[str, ...]

    @property
    def answers(self) -> list[str]:
        return self.answer_set.answers

    def to_dict(self) -> dict[str, Any]:
        """The JSON of ``POST /v1/answer-set`` and ``kgwise uag answer --json``."""
        return {**asdict(self.answer_set), "lambda": list(self.lambda_),
                "evaluator_score": self.evaluator_score,
                "same_generator_as_calibration": self.same_generator, "guaranteed": self.guaranteed,
                "calibration_mismatch": list(self.mismatch), "topic_entities_proposed": []}


@dataclass(frozen=True, slots=True)
class UAGStatus:
    """What the app serves: KG file, LLM spec, the guarantee (α, δ), λ, and the mismatch."""

    kg: str
    llm: str
    alpha: float
    delta: float
    lambda_: tuple[float, ...]
    same_generator: bool
    mismatch: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"kg": self.kg, "llm": self.llm, "alpha": self.alpha, "delta": self.delta,
                "lambda": list(self.lambda_), "same_generator_as_calibration": self.same_generator,
                "calibration_mismatch": list(self.mismatch)}


class UAGApp:
    """A calibrated UAG with its KG and LLM (see the module docstring); ``option``: the flag that allows a
    mismatch, named in the error that refuses one; ``kg_option``: the flag that gives a KG."""

    def __init__(self, calibration: str | Path, kg: str | Path | None = None, llm: str | None = None,
                 allow_mismatch: bool = False, option: str = "--allow-mismatch", kg_option: str = "--kg"
                 ) -> None:
        from kgwise.kg.sources import open_graph
        from kgwise.llm import get_llm

        self.calibrated = CalibratedUAG.load(calibration)
        kg_file = kg or self.calibrated.summary.get("kg")
        if kg_file is None:
            raise ConfigError(f"{calibration} names no KG: pass one ({kg_option})")
        self.kg_file = str(kg_file)
        self.kg = open_graph(kg_file)
        self.llm_spec, mismatch = self.calibrated.check_pipeline(self.kg, llm, calibration, allow_mismatch,
                                                                 option)
        self.mismatch = tuple(mismatch)
        self.same_generator = self.calibrated.generator_spec(llm)[1]
        self.generator = LLMGenerator(get_llm(self.llm_spec, cache=True))
        self.scorer = self.calibrated.settings.scorer()

    @property
    def guaranteed(self) -> bool:
        """Whether every set carries the calibration's guarantee."""
        return self.same_generator and not self.mismatch

    @property
    def calibrated_generator(self) -> str:
        """What wrote Φ(P) at calibration."""
        return str(self.calibrated.summary.get("generator") or "an unknown generator")

    def status(self) -> UAGStatus:
        u = self.calibrated.uag
        assert u.lambda_ is not None  # a CalibratedUAG never abstains
        return UAGStatus(self.kg_file, self.llm_spec, u.config.alpha, u.config.ltt.delta, tuple(u.lambda_),
                         self.same_generator, self.mismatch)

    def answer(self, question: str, topic_entities: list[str] | tuple[str, ...], qid: str = ""
               ) -> AnswerSetResult:
        """The calibrated answer set of ``question`` retrieved from ``topic_entities`` (named as in the
        KG). ``ConfigError`` for an empty question or no topic entity; ``DataError`` when none of them is
        in the KG."""
        if not question.strip():
            raise ConfigError("the question text is empty")
        topics = tuple(t for t in (t.strip() for t in topic_entities) if t)
        if not topics:
            raise ConfigError("a UAG question needs at least one topic entity")
        q = Question(id=qid, text=question, topic_entities=topics)
        result = self.calibrated.answer(q, self.kg, self.generator, self.scorer)
        u = self.calibrated.uag
        assert u.lambda_ is not None and u.evaluator_score_ is not None
        return AnswerSetResult(result, tuple(u.lambda_), u.evaluator_score_, self.same_generator,
                               self.guaranteed, self.mismatch)
