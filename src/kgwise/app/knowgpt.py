"""The calibrated KnowGPT answer: one question, answered by the knowledge injector and, when a calibration
(``kgwise calibrate``) is given, with its split-conformal answer set — the one assembly the CLI (``kgwise
answer``) and the server (``POST /v1/answer``) share.

Rules (the same for every caller):

* What is fixed when the app opens — KG, LLM, choice-scoring rule, P_RL policy, prompt bandit — is compared
  with the calibration's ``made_with`` record then; a difference raises ``ConfigError`` unless
  ``allow_mismatch`` (then every set says it carries no guarantee).
* A question asked without a combination is answered with the calibration's combination (so its set keeps
  the guarantee), else with the injector's own choice (the bandit's pick, else ``P_sub+F_s``).
* A question asked with another combination than the calibration's is answered without a set (unless
  ``allow_mismatch``: then with a set that carries no guarantee) and the result names the difference.
* ``alpha`` (the miscoverage of the set) without a calibration raises ``ConfigError``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from kgwise.conformal.provenance import check_same_pipeline
from kgwise.conformal.split import SplitConformal, label_set
from kgwise.errors import ConfigError
from kgwise.files import ResumeLog, file_stamp, short_hash
from kgwise.inject.build import build_injector
from kgwise.inject.calibration import pipeline_of
from kgwise.inject.injector import KnowledgeInjector
from kgwise.types import Answer, Question, Usage

__all__ = ["BatchReport", "CalibratedAnswer", "KnowGPTApp"]


@dataclass(frozen=True, slots=True)
class CalibratedAnswer:
    """One answered question: the injector's ``answer`` (prediction, choice probabilities, combination,
    knowledge, usage), the text of the chosen choice, the calibrated set (``None`` without one) at
    miscoverage ``alpha``, whether the set carries the 1 − α coverage guarantee (``None`` without a
    calibration), every way this answer's pipeline differs from the calibration's, the choice-scoring rule,
    and the grounding + extraction + rendering time."""

    answer: Answer
    choice_text: str
    calibrated_set: tuple[str, ...] | None
    alpha: float | None
    guaranteed: bool | None
    mismatch: tuple[str, ...]
    scoring: str
    prep_ms: float

    @property
    def prediction(self) -> str:
        return self.answer.prediction

    @property
    def probabilities(self) -> Mapping[str, float]:
        return self.answer.probabilities

    @property
    def combination(self) -> str:
        return self.answer.combo

    @property
    def knowledge(self) -> str:
        return self.answer.knowledge

    @property
    def usage(self) -> Usage:
        return self.answer.usage

    def to_dict(self) -> dict[str, Any]:
        """The JSON of ``POST /v1/answer``: the answer's fields (``prediction_set`` only when a set was
        made), ``choice_text``, ``prep_ms``; with a calibration also ``alpha``, ``guaranteed`` and, when
        the pipelines differ, ``calibration_mismatch``."""
        out = self.answer.to_dict()
        if out["prediction_set"] is None:
            del out["prediction_set"]
        if self.guaranteed is not None:
            out["alpha"] = self.alpha
            out["guaranteed"] = self.guaranteed
            if self.mismatch:
                out["calibration_mismatch"] = list(self.mismatch)
        out["choice_text"] = self.choice_text
        out["prep_ms"] = self.prep_ms
        return out


class KnowGPTApp:
    """A knowledge injector with, optionally, a split-conformal calibration loaded from ``calibration``
    (see the module docstring for the rules). ``policy`` and ``bandit``: the files the injector was built
    from (the calibration records their digests); ``option``: the flag that allows a mismatch, named in the
    error that refuses one."""

    def __init__(self, injector: KnowledgeInjector, calibration: str | Path | None = None,
                 policy: str | Path | None = None, bandit: str | Path | None = None,
                 allow_mismatch: bool = False, option: str = "--allow-mismatch") -> None:
        self.injector = injector
        self.policy, self.bandit = policy, bandit
        self.allow_mismatch = allow_mismatch
        self.conformal = SplitConformal.load(calibration) if calibration is not None else None
        self.calibration = Path(calibration) if calibration is not None else None
        self.mismatch: tuple[str, ...] = ()
        self.default_combo: str | None = None  # None: the injector's own choice
        self._calibrated_combo: str | None = None
        if self.conformal is None:
            return
        own = pipeline_of(injector, None, policy, bandit)
        del own["combo"]  # the combination is checked per question (combination_for), the rest here
        made_with = self.conformal.meta.get("made_with")
        self.mismatch = tuple(check_same_pipeline(made_with, own, str(calibration), allow_mismatch, option))
        self._calibrated_combo = (made_with or {}).get("combo")
        if self._calibrated_combo in injector.combos():
            self.default_combo = self._calibrated_combo

    @classmethod
    def build(cls, kg: str | Path, llm: str = "smollm2-135m", policy: str | Path | None = None,
              bandit: str | Path | None = None, scoring: str | None = None,
              calibration: str | Path | None = None, allow_mismatch: bool = False,
              option: str = "--allow-mismatch", index: str | Path | None = None) -> KnowGPTApp:
        """The app over an injector built from files and specs (:func:`kgwise.inject.build.build_injector`;
        ``kg`` a graph file or a SPARQL endpoint, ``index`` its label index)."""
        injector = build_injector(kg, llm, policy, bandit, scoring, index)
        return cls(injector, calibration, policy, bandit, allow_mismatch, option)

    @property
    def calibrated(self) -> bool:
        return self.conformal is not None

    def combination_for(self, combo: str | None) -> str | None:
        """The combination (or ``bandit``) that answers a question asked with ``combo``."""
        fallback = self.injector.config.default_combo
        return combo or self.default_combo or (
            "bandit" if self.injector.bandit is not None else str(fallback) if fallback else None)

    def answer(self, question: Question, combo: str | None = None, alpha: float | None = None
               ) -> CalibratedAnswer:
        """Answer ``question`` with ``combo`` (default: the calibration's, else the injector's choice) and
        attach the calibrated set at miscoverage ``alpha`` (default: the calibration's)."""
        if alpha is not None and self.conformal is None:
            raise ConfigError("alpha sets the miscoverage of a calibrated set: it needs a calibration file "
                              "(from `kgwise calibrate`)")
        if alpha is not None and not 0.0 <= alpha <= 1.0:
            raise ConfigError(f"alpha must be in [0, 1], got {alpha}")
        if not question.choices:
            raise ConfigError(f"{question.ref} has no answer choices: KnowGPT answers multiple-choice "
                              "questions")
        result = self.injector.inject(question, combo or self.default_combo)
        a = result.answer
        choice_text = next(c.text for c in question.choices if c.label == a.prediction)
        level: float | None = None
        guaranteed: bool | None = None
        differs = list(self.mismatch)
        if self.conformal is not None:
            used = self.combination_for(combo)
            if used != self._calibrated_combo:
                differs.append(f"combo: calibrated with {self._calibrated_combo!r}, answering with {used!r}")
            level = self.conformal.config.alpha if alpha is None else alpha
            guaranteed = not differs
            if guaranteed or self.allow_mismatch:
                a = replace(a, prediction_set=label_set(self.conformal, a.probabilities, level))
        return CalibratedAnswer(a, choice_text, a.prediction_set, level, guaranteed, tuple(differs),
                                self.injector.config.scoring, result.prep_ms)


    def answer_many(self, questions: Sequence[Question], out: str | Path, combo: str | None = None,
                    alpha: float | None = None, progress: Callable[[int, int], None] | None = None
                    ) -> BatchReport:
        """Answer every question of ``questions`` (:meth:`answer`), each record appended to ``out`` (a
        :class:`~kgwise.files.ResumeLog` of this app's pipeline, ``combo`` and ``alpha``) as it is made: a
        rerun after a kill answers only the questions not yet there (or whose text or choices changed).
        Records: ``{"id", "text", **CalibratedAnswer.to_dict(), "gold"?, "correct"?}``."""
        made_with = pipeline_of(self.injector, combo, self.policy, self.bandit)
        calibration = file_stamp(self.calibration) if self.calibration is not None else None
        log = ResumeLog(out, short_hash({"made_with": made_with, "calibration": calibration,
                                         "combo": combo, "alpha": alpha,
                                         "allow_mismatch": self.allow_mismatch}))
        resumed = labelled = correct = 0
        usages: list[Usage] = []
        for i, q in enumerate(questions):
            digest = short_hash([q.text, [(c.label, c.text) for c in q.choices], list(q.gold)])
            row = log.get(q.id)
            if row is not None and row.get("digest") == digest:
                resumed += 1
            else:
                r = self.answer(q, combo, alpha)
                row = {"id": q.id, "text": q.text, **r.to_dict(), "digest": digest}
                if q.gold:
                    row["gold"] = list(q.gold)
                    row["correct"] = r.prediction in q.gold
                log.put(q.id, row)
                usages.append(r.usage)
            if "correct" in row:
                labelled += 1
                correct += bool(row["correct"])
            if progress is not None:
                progress(i + 1, len(questions))
        return BatchReport(len(questions), len(questions) - resumed, resumed, labelled, correct, str(out),
                           Usage.total(usages))


@dataclass(frozen=True, slots=True)
class BatchReport:
    """A batch of questions answered into ``out``: how many there are, were ``answered`` in this run and
    ``resumed`` from an earlier one, how many have gold answers (``labelled``) and of those were
    ``correct``, and this run's LLM usage."""

    questions: int
    answered: int
    resumed: int
    labelled: int
    correct: int
    out: str
    usage: Usage

    @property
    def accuracy(self) -> float | None:
        """Share of the labelled questions answered right (``None`` without any)."""
        return self.correct / self.labelled if self.labelled else None

    def to_dict(self) -> dict[str, Any]:
        return {"questions": self.questions, "answered": self.answered, "resumed": self.resumed,
                "labelled": self.labelled, "correct": self.correct, "accuracy": self.accuracy,
                "out": self.out, "usage": self.usage.to_dict()}
