"""``Pipeline``: one question in, one routed, knowledge-grounded, calibrated answer out — with its cost,
its evidence and a decision id whose feedback teaches the router.

``answer(text, choices)``: ground the question in the KG; run the free arms marked ``observe`` (their
outcome is learnt at feedback) and, with the ``question+free`` router context, the free arms whose
answers and signals join the question embedding as the router's context (:mod:`kgwise.app.router`; a
free arm the router then picks is not run twice); let the Coke router pick an affordable arm (Eq. 2
within the budget, Eq. 14); run it; attach the arm's calibrated set; record the decision in the state
directory. The set's guarantee (multiple choice, :mod:`kgwise.app.calibration`): for a question the
router in its present state sends to this arm, coverage ≥ 1 − α over questions exchangeable with the dev
log, with probability ≥ 1 − δ over the held-out dev questions that the same rule sends to the arm
(``[answer_sets] guarantee = "pac"``, the default; ``"marginal"``: split conformal, on average over
them); for a forced arm, on every held-out question it answered. An open question's set is UAG's,
certified the same way on the held-out open dev questions the rule sends to the arm
(:mod:`kgwise.app.open_sets`); its ``answer_entities`` are the KG entities the answer's text names, those
the question does not name first.
:meth:`Pipeline.status` reports each arm's live coverage with a Clopper–Pearson bound and flags drift.

External arms (models the caller runs, :mod:`kgwise.app.external`): :meth:`Pipeline.route` picks one with
the same router, within the same budget, and holds its cost bound; :meth:`Pipeline.settle` pays what it
cost and teaches the router; :meth:`Pipeline.cancel` calls it off. ``answer`` never picks an external arm,
``route`` only those.

Threads: ``answer``, ``feedback``, ``route``, ``settle`` and ``status`` may be called from several threads
at once. The state and the router are changed under one lock; embedding, grounding, the arms' calls and the
fsync that makes an answer durable run outside it. An in-process arm (a local model, a KG model) answers
one question at a time; an API arm's calls overlap.
"""

from __future__ import annotations

import math
import random
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import numpy.typing as npt

from kgwise.app.abstain import NOT_SURE, Abstention, AbstentionLog, ArmAbstention, answer_confidence, decide
from kgwise.app.arms import (
    ArmOutput,
    ArmRunner,
    GroundedArm,
    Knowledge,
    PromptArm,
    TunableArm,
    arm_cost,
    build_runner,
)
from kgwise.app.calibration import (
    CalibrationSelector,
    arm_set,
    calibrated_threshold,
    choice_set,
    fallback_noun,
    fallback_scores,
    fallback_words,
    guarantee_clause,
    pooled_statement,
    stale,
    too_few,
)
from kgwise.app.config import PipelineConfig, reads_free
from kgwise.app.evidence import Evidence, Labeller, grounder_of, label_path, question_evidence
from kgwise.app.examples import Example, kg_examples
from kgwise.app.external import Decision, Settlement, external_bounds, grade
from kgwise.app.router import context_vector
from kgwise.app.state import (
    PENDING_KEPT,
    Pending,
    Routed,
    StateDir,
    StateReadOnlyError,
    counts_as_right,
    coverage_bounds,
)
from kgwise.app.store import PipelineState, open_state
from kgwise.embed import Encoder
from kgwise.errors import ConfigError, DataError, KgwiseError, SettingError
from kgwise.grading import match_answer
from kgwise.kg.base import KnowledgeGraph
from kgwise.llm.base import UsageError
from kgwise.route.coke import BudgetExceededError
from kgwise.types import CHOICE_LABELS, GenerationSettings, Question, Serialisable, Usage, make_question

if TYPE_CHECKING:
    from kgwise.app.open_sets import OpenSets
    from kgwise.conformal.calibrated import CalibratedUAG
    from kgwise.conformal.evaluator import Generator
    from kgwise.conformal.uag import UAG
    from kgwise.extract.base import Extractor
    from kgwise.kg.grounding import Grounder, Grounding
    from kgwise.kg.label_index import BoundIndex

__all__ = [
    "AnswerSetResult",
    "ArmScore",
    "ArmStatus",
    "BudgetExceededError",
    "CoverageStatus",
    "Decision",
    "FeedbackResult",
    "Pipeline",
    "PipelineResult",
    "PipelineStatus",
    "RoutedCalibration",
    "Settlement",
    "StateReadOnlyError",
    "UnknownDecisionError",
    "default_state_dir",
    "load_graph_of",
]


class UnknownDecisionError(KgwiseError):
    """Feedback, settle or cancel for a decision that is not waiting (never made here, already settled,
    cancelled or expired)."""


def default_state_dir(config_path: str | Path) -> Path:
    """``.kgwise-state/`` beside the config file."""
    return Path(config_path).resolve().parent / ".kgwise-state"


@dataclass(frozen=True, slots=True)
class ArmScore:
    """The router's view of one arm for this question: Eq. 2 with θ at its posterior mean, the cost
    bound, and whether it was affordable (and able to answer)."""

    arm: str
    score: float
    cost_bound: float
    affordable: bool


@dataclass(frozen=True, slots=True)
class AnswerSetResult:
    """A calibrated set: choice labels (and their texts), its α, whether the guarantee holds for this
    answer, the exact statement of what is guaranteed (or why not), the held-out calibration scores its
    threshold is the quantile of (``calibration_size`` of them), and whether its calibration certified it
    (``certified``; ``guarantee`` is that and no live drift); ``pooled``: calibrated on the fallback's
    questions (:func:`kgwise.app.calibration.fallback_scores`) because those the router sends the arm are
    too few (:func:`kgwise.app.calibration.pooled_statement`)."""

    labels: tuple[str, ...]
    texts: tuple[str, ...]
    alpha: float
    guarantee: bool
    statement: str
    calibration_size: int = 0
    calibration_scores: tuple[float, ...] = field(default=(), repr=False)
    certified: bool = True
    pooled: bool = False


def random_id() -> str:
    """A fresh random id (UUID4, hex): unique across replicas sharing one state."""
    return uuid.uuid4().hex


def seeded_ids(seed: int) -> Callable[[], str]:
    """Ids drawn from ``seed``: the same sequence every run (for one evaluation's own pipeline only)."""
    gen = random.Random(seed)
    return lambda: f"{gen.getrandbits(128):032x}"


@dataclass(frozen=True, slots=True)
class PipelineResult:
    """One answered question (see the module docstring)."""

    decision: str
    question: str
    answer: str
    label: str | None
    probabilities: dict[str, float]
    answer_entities: tuple[str, ...]
    question_entities: tuple[str, ...]
    arm: str
    scores: tuple[ArmScore, ...]
    knowledge: Knowledge
    answer_set: AnswerSetResult | None
    usage: Usage
    cost: float
    unit: str
    remaining_budget: float
    notes: tuple[str, ...] = ()
    choice_entities: tuple[tuple[str, ...], ...] = ()
    abstention: Abstention | None = None
    """With ``[answer_sets] abstain``: whether the answer was withheld ("not sure") and what it promises."""
    finish_reason: str = ""
    """For a generated open answer: ``length`` when it stopped at the token limit, else ``stop``."""

    @property
    def abstained(self) -> bool:
        return self.abstention is not None and self.abstention.abstained

    @property
    def evidence(self) -> Evidence:
        """The knowledge the answer read as :class:`~kgwise.app.evidence.Evidence` (paths by label)."""
        k = self.knowledge
        return Evidence(self.question_entities, self.choice_entities, k.triples,
                        tuple(label_path(p) for p in k.paths if p), k.text,
                        tuple(label_path(p) for p in k.support if p))

    def to_dict(self) -> dict[str, Any]:
        """The result as JSON data (without the set's calibration scores)."""
        from dataclasses import asdict

        out = asdict(self)
        if out["answer_set"] is not None:
            del out["answer_set"]["calibration_scores"]
        return out


@dataclass(frozen=True, slots=True)
class FeedbackResult(Serialisable):
    """What a feedback taught: the decision's arm and reward, whether its set covered the truth (None:
    not revealed), the rewards observed for free arms, and the budget after it."""

    decision: str
    arm: str
    reward: float
    covered: bool | None
    observed: dict[str, float]
    spent: float
    remaining_budget: float
    warning: str | None = None

    @property
    def correct(self) -> bool:
        """Whether the feedback said the answer was right (:func:`kgwise.app.state.counts_as_right`)."""
        return counts_as_right(self.reward)


@dataclass(frozen=True, slots=True)
class CoverageStatus:
    """Live coverage of one arm's certified sets: ``covered`` of ``n`` decided, the rate, its one-sided
    Clopper–Pearson bounds at ``1 − δ``, and ``drift`` when the upper bound is below ``target``;
    ``uncertified``: feedback on sets given without guarantee (not counted)."""

    n: int
    covered: int
    undetermined: int
    rate: float | None
    lower: float
    upper: float
    target: float
    drift: bool
    uncertified: int = 0


@dataclass(frozen=True, slots=True)
class RoutedCalibration:
    """What an arm's next sets would be calibrated on, the router as it stands: the held-out
    multiple-choice dev questions it sends the arm and that the arm answered (``questions``), and with
    UAG's open sets the held-out open dev questions it sends there (``open_questions``) and whether they
    certify a λ (``open_certified``; false: its open answers get the uncertified set, without guarantee)."""

    questions: int
    open_questions: int | None = None
    open_certified: bool | None = None


@dataclass(frozen=True, slots=True)
class ArmStatus:
    """One arm in :class:`PipelineStatus`; ``calibration_size``: held-out multiple-choice dev questions it
    answered; ``routed``: its share of them (and of the open ones) now (None without a calibration, or
    one the router cannot use)."""

    name: str
    kind: str
    cluster: str
    pulls: int
    cost: float
    calibration_size: int
    coverage: CoverageStatus
    routed: RoutedCalibration | None = None


@dataclass(frozen=True, slots=True)
class PipelineStatus(Serialisable):
    """Budget and spending (``spent``: every answer made, graded or not; ``reserved``: held by questions
    being answered; ``overrun``: costs above their bounds), questions routed, decisions awaiting feedback
    (``pending``; ``expired``: dropped unanswered, see :data:`~kgwise.app.state.PENDING_KEPT`), per-arm
    state, the cluster posteriors, with ``[answer_sets] uag_llm`` what UAG's sets for open questions rest
    on (``open_sets``), why a prompt-learning arm's saved bandit is not used (``prompt_problems``), and
    the arm the fit pinned (``pinned``: the router answers with it wherever it can); why the state is
    read-only (``read_only``: nothing new is acknowledged until a write succeeds), and what opening it
    found and repaired (``state_warnings``: journal lines set aside, spend kept, a budget change)."""

    config: str
    state_dir: str
    unit: str
    budget: float
    spent: float
    reserved: float
    remaining: float
    overrun: float
    questions: int
    pending: int
    alpha: float
    delta: float
    calibrated: bool
    arms: tuple[ArmStatus, ...]
    cluster_accuracy: dict[str, float] = field(default_factory=dict)
    expired: int = 0
    calibration_problem: str | None = None
    open_sets: str | None = None
    prompt_problems: dict[str, str] = field(default_factory=dict)
    pinned: str | None = None
    read_only: str | None = None
    state_warnings: tuple[str, ...] = ()
    routed: int = 0
    """External arms' decisions awaiting their settle (their bounds are in ``reserved``)."""
    abstention: dict[str, ArmAbstention] = field(default_factory=dict)
    """With ``[answer_sets] abstain``: per arm, the share of questions answered and the accuracy among
    those graded, live."""


def load_graph_of(config: PipelineConfig) -> KnowledgeGraph:
    """The config's KG: a graph file, a source built now, or a SPARQL endpoint."""
    from kgwise.kg.sources import open_graph

    kg = config.kg
    if kg.sparql is not None:
        return open_graph(f"sparql:{kg.sparql}")
    if kg.graph is not None:
        return open_graph(kg.graph)
    from kgwise.kg.loaders import load_graph

    assert kg.source is not None and kg.format is not None
    return load_graph(kg.source, kg.format)


def _question(text: str, choices: Sequence[str] | None) -> Question:
    if not text or not text.strip():
        raise ConfigError("the question text is empty")
    if choices is None:
        return Question("", text.strip())
    return make_question(text, list(choices))


def check_settings(question: Question, settings: GenerationSettings | None) -> None:
    """A :class:`SettingError` for a generation setting no arm can apply to ``question``: ``n`` > 1 (one
    decision, so one answer, per question); for multiple choice, ``temperature`` > 0, ``top_p`` < 1 and
    ``stop`` (every arm answers choices by scoring them: the answer is the best-scored choice, nothing is
    sampled or generated). A multiple-choice answer keeps ``max_tokens`` (it generates no token) and any
    ``seed`` (it is the same every time)."""
    if settings is None:
        return
    if settings.n != 1:
        raise SettingError("n", "kgwise makes one decision, with one answer, per question: n must be 1")
    if question.choices:
        why = {"temperature": "only 0 applies", "top_p": "only 1 applies", "stop": "there is no text to stop"}
        refused = [p for p in settings.given() if p in why]
        if refused:
            raise SettingError(refused[0], "a multiple-choice answer is the best-scored choice, neither "
                                           f"sampled nor generated: {why[refused[0]]}")


class Pipeline:
    """The product object: :meth:`answer`, :meth:`feedback`, :meth:`status` over one state directory
    (owned while open: use as a context manager or call :meth:`close`)."""

    def __init__(self, config: PipelineConfig, state_dir: Path, runners: Mapping[str, ArmRunner],
                 encoder: Encoder, kg: KnowledgeGraph | None = None, names: BoundIndex | None = None,
                 uag_generator: Generator | None = None, refit: bool = False,
                 grounder: Grounder | None = None, ids: Callable[[], str] | None = None) -> None:
        """``grounder``: the one the arms ground with (default: :func:`pipeline_grounder`); ``ids``: what
        names a decision or a fit (default: a random UUID; an evaluation passes :func:`seeded_ids` so that
        a split repeats exactly — a decision id's hash draws a held-out question's re-routing)."""
        missing = [a.name for a in config.arms if a.name not in runners and not a.external]
        if missing and runners:
            raise ConfigError(f"no runner for arm(s) {', '.join(missing)}")
        self.config = config
        self.new_id = ids if ids is not None else random_id
        self.runners = dict(runners)
        self.encoder = encoder
        self.kg = kg
        self._examples: dict[int, tuple[Example, ...]] = {}
        self.names = names
        self._grounder = (grounder if grounder is not None
                          else grounder_of(kg, names, config.linking.grounding()))
        self._evidence_extractor: Extractor | None = None
        self.uag_generator = uag_generator
        """What writes Φ(P) for UAG's sets (default: ``[answer_sets] uag_llm``)."""
        self.open_sets: OpenSets | None = None
        self.open_sets_problem: str | None = None  # why a saved UAG calibration is not used
        self.prompt_problems: dict[str, str] = {}  # arm → why its saved prompt bandit is not used
        self.state: PipelineState = open_state(state_dir, config, encoder.dim, refit=refit)
        try:
            self.abstentions = AbstentionLog(self.state.root)
            self._load_fitted()
        except BaseException:
            self.state.close()
            raise
        self._lock = threading.Lock()
        self._arm_locks: dict[str, AbstractContextManager[Any]] = {
            n: nullcontext() if r.config.is_api else threading.Lock() for n, r in runners.items()}
        self._selector: CalibrationSelector | None = None

    def _load_fitted(self) -> None:
        """What ``fit`` left in the state besides router and calibration: each prompt-learning arm's
        bandit, and UAG's calibration for open questions. A broken or mismatched one is named (answers,
        ``status``) and left unused, so that the ``fit`` that replaces it can run."""
        for name, runner in self.runners.items():
            if not runner.config.combos:
                continue
            try:
                if (bandit := self.state.prompt_bandit(name)) is not None:
                    cast(PromptArm, runner).use_bandit(bandit)
            except (ConfigError, DataError) as exc:  # named, left unused: the fit replacing it can run
                self.prompt_problems[name] = f"{exc}; it answers with its first combination until a fit"
        cal = self.state.calibration
        if cal is not None and (why := stale(cal, self.config, self.state.calibration_file)) is not None:
            self.state.calibration_problem = why  # answers and status say so; the fit replacing it runs
        if (self.config.answer_sets.uag_llm is not None and self.kg is not None
                and self.state.uag_file.is_file()):
            from kgwise.app.open_sets import OpenSets

            try:
                self.open_sets = OpenSets.load(self.state.uag_file, self.kg, self.uag_generator)
            except (ConfigError, DataError) as exc:  # answers say so; a fit (not blocked by it) redoes it
                self.open_sets_problem = str(exc)

    @classmethod
    def from_config(cls, path: str | Path, state_dir: str | Path | None = None,
                    encoder: Encoder | None = None, models: bool = True, refit: bool = False) -> Pipeline:
        """Read the config, load the KG and every arm's model, open the state directory (default
        :func:`default_state_dir`). ``models=False`` loads neither KG nor models: enough for
        :meth:`feedback` and :meth:`status`, not for :meth:`answer`. ``refit``: for ``fit``, a state made
        for other arms is opened for the fit to replace its router (keeping its spend)."""
        config = PipelineConfig.load(path)
        kg = load_graph_of(config) if models else None
        names = None
        if kg is not None and (config.kg.index is not None or config.kg.is_endpoint):
            from kgwise.kg.label_index import open_index

            names = open_index(kg, config.kg.index)
        if encoder is None:
            from kgwise.embed import MiniLM

            encoder = MiniLM()
        grounder = grounder_of(kg, names, config.linking.grounding())
        runners = ({a.name: build_runner(a, kg, names, grounder=grounder, encoder=encoder)
                    for a in config.arms if not a.external} if kg is not None else {})
        root = Path(state_dir) if state_dir is not None else default_state_dir(path)
        return cls(config, root, runners, encoder, kg, names, refit=refit, grounder=grounder)

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        """Write the state and release the state directory."""
        if self._selector is not None:
            self._selector.release()
        self.state.close()

    def __enter__(self) -> Pipeline:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ pieces
    def _run(self, arm: str, question: Question, grounding: Grounding | None = None,
             settings: GenerationSettings | None = None, on_text: Callable[[str], None] | None = None
             ) -> ArmOutput:
        """``arm``'s answer (one call at a time for an in-process arm), from the question's ``grounding``
        where the arm grounds questions (so it is grounded once per answer). A caller's ``settings`` and
        ``on_text`` go to an arm that generates (:class:`TunableArm`); an arm that does not apply them
        is a :class:`SettingError` naming the first setting given (``on_text`` alone: it is not called,
        and the caller sends the answer once it is made)."""
        runner = self.runners[arm]
        given = () if settings is None else settings.given()
        with self._arm_locks[arm]:
            if (given or on_text is not None) and isinstance(runner, TunableArm):
                return runner.answer_with(question, grounding, settings or GenerationSettings(), on_text)
            if given:
                raise SettingError(given[0], f"arm {arm!r} ({runner.config.kind}) does not generate its "
                                             "answers: it cannot apply generation settings")
            if grounding is not None and isinstance(runner, GroundedArm):
                return runner.answer_grounded(question, grounding)
            return runner.answer(question)

    def warm(self) -> None:
        """Load now what an answer would load on first use: the question encoder, when there is an arm to
        route to (:meth:`answer` embeds the question then). A server calls it before it listens, so its
        first requests do not wait for the model: the first answers of each ``kgwise bench serve
        --replicas 3`` replica took 56–59 s at load average ≈ 13 (importing sentence-transformers and
        loading MiniLM: 28.8 s of one process at load ≈ 11)."""
        load = getattr(self.encoder, "load", None)
        if len(self.runners) > 1 and callable(load):
            load()

    def embed(self, text: str) -> npt.NDArray[np.float64]:
        return np.asarray(self.encoder.encode([text])[0], dtype=np.float64)

    def topic_entities(self, question: Question) -> tuple[str, ...]:
        """The KG labels of the nodes the question's text is grounded to (UAG's topic entities)."""
        if self._grounder is None or self.kg is None:
            return ()
        return tuple(self.kg.label(n) for n in self._grounder.ground(question).question_nodes)

    def evidence(self, text: str, choices: Sequence[str] | None = None) -> Evidence:
        """The question's KG evidence (:mod:`kgwise.app.evidence`): its grounded concepts and P_sub's
        triples and paths among them — what an inject arm would read, without any LLM call or state
        change. ``ConfigError`` when the pipeline holds no KG it can ground free text in."""
        question = _question(text, choices)
        if self.kg is None or self._grounder is None:
            raise ConfigError("this pipeline cannot ground questions: it was opened without its KG "
                              "(models=False), or its KG is an endpoint without a label index ([kg] index)")
        with self._lock:
            if self._evidence_extractor is None:
                from kgwise.extract.registry import ExtractorOptions, make_extractor

                stats = self.names if self.names is not None and self.names.endpoint is not None else None
                self._evidence_extractor = make_extractor("P_sub", self.kg, ExtractorOptions(
                    encoder=self.encoder, stats=stats))
        return question_evidence(self.kg, self._grounder, self._evidence_extractor, question)

    def examples(self, count: int = 3) -> tuple[Example, ...]:
        """Example questions made from the pipeline's KG (:func:`kgwise.app.examples.kg_examples`); none
        without its KG in memory."""
        if count not in self._examples:  # the KG is fixed for the pipeline's life: made once
            self._examples[count] = () if self.kg is None else kg_examples(self.kg, count)
        return self._examples[count]

    def _entities(self, text: str) -> tuple[str, ...]:
        if self._grounder is None or self.kg is None:
            return ()
        return tuple(self.kg.label(n) for n in self._grounder.ground_text(text))

    def bounds(self, question: Question) -> dict[str, float]:
        """Each arm's cost bound for ``question``; an arm that cannot answer it gets a bound no budget
        affords."""
        out = {}
        for name, runner in self.runners.items():
            if runner.can_answer(question):
                out[name] = arm_cost(runner.config, runner.usage_bound(question))
            else:
                out[name] = self.state.router.unreachable()
        out.update((a.name, self.state.router.unreachable()) for a in self.config.arms if a.external)
        return out

    def _calibration_group(self, decision: str) -> npt.NDArray[np.int64] | None:
        """Under the lock, before the question's own pull: the arm the router would send each held-out
        calibration question to now (:meth:`CalibrationSelector.group`); ``None`` without a calibration."""
        cal = self.state.calibration
        if cal is None:
            return None
        if self._selector is None or self._selector.calibration is not cal:  # a fit replaced it
            if self._selector is not None:
                self._selector.release()
            self._selector = CalibrationSelector(cal)
        return self._selector.group(self.state.router.router, decision)

    def answer_set(self, arm: str, output: ArmOutput, question: Question,
                   group: npt.NDArray[np.int64] | None, forced: bool = False, topics: tuple[str, ...] = ()
                   ) -> tuple[AnswerSetResult | None, str | None]:
        """The arm's calibrated set for a multiple-choice answer from the calibration questions ``group``
        sends to it (every one it answered when ``forced``), or ``(None, why not)``; an open question's
        is UAG's from its grounded ``topics`` (:meth:`open_set`)."""
        sets = self.config.answer_sets
        if not question.choices:
            return self.open_set(arm, question, topics, group, forced)
        cal = self.state.calibration
        if self.state.calibration_problem is not None:
            return None, f"no answer set: {self.state.calibration_problem}"
        if cal is None or cal.size(arm) == 0 or not output.probabilities:
            return None, f"no answer set: arm {arm!r} has no calibration (run `kgwise fit`)"
        labels = [c.label for c in question.choices]
        texts = {c.label: c.text for c in question.choices}
        arms = len(self.config.arms)
        if sets.calibrate_on == "arm":  # every graded dev question the arm answered, ties split by a coin
            got = arm_set(cal, arm, output.probabilities, labels, question.text, sets, arms)
            drift = self._drift(arm) if got.finite else ""  # every choice covers trivially, as below
            return AnswerSetResult(got.labels, tuple(texts[x] for x in got.labels), sets.alpha, not drift,
                                   got.statement + drift, len(got.scores), tuple(got.scores.tolist())), None
        assert forced or group is not None  # re-selected before the pull
        scores = fallback_scores(cal, arm, sets) if forced else cal.arm_scores(arm, group)
        who = (f"any question answered by arm {arm!r} (forced: split conformal on the {len(scores)} "
               f"{fallback_words(sets)}" if forced else
               f"a question the router, as it stands, sends to arm {arm!r} (split conformal on the "
               f"{len(scores)} of {cal.scored} held-out dev questions it sends there now, which it never "
               "learnt from")
        base = (f"P(truth ∈ set) ≥ {1 - sets.alpha:g} for {who}; {guarantee_clause(sets, arms)}), over "
                "questions exchangeable with the dev log")
        threshold = calibrated_threshold(scores.tolist(), sets, arms)
        pooled = math.isinf(threshold) and not forced
        if pooled:  # too few routed: every question of the fallback ([answer_sets] fallback) it answered
            everyone = fallback_scores(cal, arm, sets)
            base = pooled_statement(arm, len(everyone), len(scores), sets, arms)
            scores, threshold = everyone, calibrated_threshold(everyone.tolist(), sets, arms)
        if math.isinf(threshold):
            where = f"{fallback_noun(sets)} questions arm {arm!r} answered"
            statement = (f"every choice: {too_few(len(scores), sets, arms, where)}; the set covers the truth "
                         "trivially")
            return AnswerSetResult(tuple(labels), tuple(texts[x] for x in labels), sets.alpha, True,
                                   statement, len(scores), tuple(scores.tolist()), pooled=pooled), None
        chosen = choice_set(output.probabilities, labels, cal.kind, threshold)
        drift = self._drift(arm)
        return AnswerSetResult(tuple(chosen), tuple(texts[x] for x in chosen), sets.alpha, not drift,
                               base + drift, len(scores), tuple(scores.tolist()), pooled=pooled), None

    def _drift(self, arm: str) -> str:
        """``""``, or what to add to a set's statement when ``arm``'s live coverage is below 1 − α beyond
        noise (its guarantee is then not taken to hold)."""
        sets = self.config.answer_sets
        _, _, upper, drift = coverage_bounds(self.state.coverage[arm], sets.alpha, sets.delta)
        return (f"; live coverage of this arm's sets is below target beyond noise (upper bound {upper:.3f} "
                f"< {1 - sets.alpha:g}): drift") if drift else ""

    def open_set(self, arm: str, question: Question, topics: tuple[str, ...],
                 group: npt.NDArray[np.int64] | None = None, forced: bool = False
                 ) -> tuple[AnswerSetResult | None, str | None]:
        """UAG's set of an open question answered by ``arm`` from its grounded ``topics``
        (:meth:`topic_entities`; :mod:`kgwise.app.open_sets`), or ``(None, why not)``: calibrated on the
        held-out open questions ``group`` sends to ``arm`` when they certify a λ; else, without guarantee,
        what ``[answer_sets] open_uncertified`` names (UAG's largest set, or the set certified on all
        held-out open questions); a ``forced`` arm gets the latter with its guarantee (over all open
        questions). Flagged (``guarantee`` false) when the arm's live coverage is below target beyond
        noise."""
        sets = self.config.answer_sets
        if sets.uag_llm is None:
            return None, "no answer set: open questions get UAG's sets when [answer_sets] uag_llm is set"
        if self.open_sets_problem is not None:
            return None, f"no answer set: {self.open_sets_problem}"
        open_sets = self.open_sets
        if open_sets is None:
            from kgwise.app.open_sets import uncalibrated_reason

            return None, f"no answer set for open questions: {uncalibrated_reason(self.state.root)}"
        if not topics:
            return None, "no answer set: the question names no entity of the KG"
        n, u = open_sets.size, open_sets.calibration
        chosen: UAG | None = None
        rows: npt.NDArray[np.int64] | None = None
        why = ""
        if not forced:
            cal = self.state.calibration
            if group is None or cal is None or cal.meta.get("fit") != open_sets.fit:
                why = "the held-out calibration is not the one UAG's was made with (run `kgwise fit`)"
            else:
                chosen, rows = open_sets.for_arm(group, self.config.names.index(arm))
                why = (f"the {rows.size} of {n} held-out open dev questions the router, as it stands, "
                       f"sends to arm {arm!r} certify no λ at α = {sets.alpha:g}, δ = {sets.delta:g}")
        certified = forced or chosen is not None
        largest = not certified and sets.open_uncertified == "largest" and u.groups is not None
        if largest:
            assert u.groups is not None
            chosen = u.groups.largest()
        found = open_sets.answer_set(replace(question, topic_entities=topics), chosen)
        if found is None:
            return None, "no answer set: the question names no entity of the KG"
        made = f"topic entities {', '.join(topics)}; Φ(P) by {u.summary.get('generator')}"
        level = f"P(miss rate ≤ {found.alpha:g}) ≥ {1 - found.delta:g}"
        k = n
        if certified and not forced:
            assert rows is not None
            k = rows.size
            statement = (f"{level} over open questions the router, as it stands, sends to arm {arm!r} "
                         f"(Learn-then-Test on the {k} of {n} held-out open dev questions it sends there "
                         f"now, which it never learnt from; {made})")
        elif largest:
            assert u.groups is not None and chosen is not None
            missed = ("" if rows is None or not rows.size else
                      f"; this set misses {u.groups.miss_rate(rows, chosen):.3f} of them")
            k = n if rows is None else rows.size
            statement = (f"UAG's largest set, every candidate its retrieval keeps ({made}), without "
                         f"guarantee: {why}{missed}")
        else:
            statement = (f"{level} over open questions like the {n} held-out open dev questions UAG was "
                         f"calibrated on ({made}), whichever arm answers: over all of them"
                         + ("" if forced else f", not over those routed to arm {arm!r} alone; {why}: no "
                            "guarantee over the questions routed to it"))
        drift = self._drift(arm)
        answers = tuple(found.answers)
        return AnswerSetResult(answers, answers, found.alpha, certified and not drift, statement + drift,
                               k, certified=certified), None

    # ------------------------------------------------------------------ answer
    def answer(self, text: str, choices: Sequence[str] | None = None, arm: str | None = None,
               settings: GenerationSettings | None = None, on_text: Callable[[str], None] | None = None
               ) -> PipelineResult:
        """Answer one question (see the module docstring); ``arm`` forces that arm instead of the router's
        pick (its bound is held as usual; the router learns from its feedback). ``BudgetExceededError``
        when no arm (or not the forced one) is affordable; :class:`StateReadOnlyError` while the state
        cannot be written (nothing is run or charged then). Reported usage priced above the arm's bound is
        charged at the bound and flagged; usage that cannot be priced (``UsageError``: missing, negative,
        non-finite, absurd) is an upstream error, charged at the bound (the call was made).

        ``settings``: how an arm that generates an open answer decodes it (:func:`check_settings` says
        which apply; a :class:`SettingError` before anything is run or charged for one that cannot);
        ``on_text``: called with the open answer's text as it is generated (not for an answer a free arm
        made before routing, which is used as it is, nor a non-generating arm's). An exception ``on_text``
        raises (its client has gone) stops the generation: the decision is called off, nothing is charged
        or recorded, and the exception propagates."""
        question = _question(text, choices)
        check_settings(question, settings)
        if all(a.external for a in self.config.arms):
            raise ConfigError("every arm of this pipeline is external (the caller runs it): use route() and "
                              "settle()")
        self.state.check_writable()
        if not self.runners:
            raise ConfigError("this pipeline was opened without its models (models=False): it cannot answer")
        if arm is not None and arm not in self.runners:
            raise ConfigError(f"no arm {arm!r} (arms: {', '.join(self.runners)})")
        forced = arm
        # one arm: nothing to route, so no question embedding (a zero context leaves LinUCB's sums as they
        # are) and no sentence encoder needed (the core install answers without the 'ml' extra)
        embedding = self.embed(question.text) if len(self.runners) > 1 else np.zeros(self.encoder.dim)
        qnodes: tuple[str, ...] = ()
        cnodes: tuple[tuple[str, ...], ...] = ()
        g: Grounding | None = None
        if self._grounder is not None and self.kg is not None:
            g = self._grounder.ground(question)
            names = Labeller(self.kg)
            qnodes = names.nodes(g.question_nodes)
            cnodes = tuple(names.nodes(c) for c in g.choice_nodes)
        bounds = self.bounds(question)
        held = bounds if forced is None else {  # a forced arm: every other arm is out of reach
            n: b if n == forced else self.state.router.unreachable() for n, b in bounds.items()}
        context = self.state.context
        observe = self.config.router.observe_free
        ran: dict[str, ArmOutput] = {}  # free arms asked before routing: for the context or to observe
        for name, runner in self.runners.items():
            cfg = runner.config
            wanted = (reads_free(context) and cfg.free) or (observe and cfg.observe)
            if wanted and bounds[name] == 0.0 and runner.can_answer(question):
                ran[name] = self._run(name, question, g)
        observed = {n: o for n, o in ran.items() if observe and self.runners[n].config.observe}
        free = {n: (o.prediction, o.signals) for n, o in ran.items() if self.runners[n].config.free}
        x = context_vector(self.config, context, embedding, free, question.text, self.state.router.predicted)
        decision = self.new_id()
        with self._lock:
            router = self.state.router
            scores = router.scores(x)
            affordable = router.affordable(bounds)
            group = self._calibration_group(decision) if forced is None else None
            arm = self.state.select(decision, x.tolist(), held)
            if arm is None:
                prefix = "" if forced is None else f"arm {forced!r} is forced: "
                raise BudgetExceededError(
                    prefix + f"no arm's cost bound fits in what the budget leaves: {router.remaining:g} "
                    f"{self.config.router.unit} ({router.spent:g} spent, {router.reserved:g} held by "
                    f"questions being answered); cheapest bound {min(held.values()):g}")
        runner = self.runners[arm]
        tuned = settings is not None and bool(settings.given())  # a free arm asked before routing: again
        try:
            output = ran[arm] if arm in ran and not tuned else self._run(arm, question, g, settings, on_text)
            cost = arm_cost(runner.config, output.usage)
        except BaseException as exc:
            with self._lock:
                self.state.cancel(decision, bounds[arm] if isinstance(exc, UsageError) else 0.0)
            self.state.sync()
            raise
        answer_set, why = self.answer_set(arm, output, question, group, forced is not None, qnodes)
        abstention = self.abstention(arm, output, question, group, {n: o.prediction for n, o in ran.items()})
        notes = [why] if why else []
        if arm in self.prompt_problems:
            notes.append(f"arm {arm!r}: {self.prompt_problems[arm]}")
        if cost > bounds[arm] and not runner.config.cost_from_usage:
            notes.append(f"reported usage costs {cost:g}, above the arm's bound {bounds[arm]:g} (its usage "
                         "bound at its price): charged at the bound")
            cost = bounds[arm]
        elif cost > bounds[arm]:  # a recorded arm's cost is the recording's, which bounds no call before it
            notes.append(f"cost {cost:g} (as recorded) above its bound {bounds[arm]:g}")
        label: str | None = None
        answer_text = output.prediction
        entities: tuple[str, ...] = ()
        if abstention is not None and abstention.abstained:
            answer_text = NOT_SURE
        elif question.choices:
            label = output.prediction
            answer_text = next((c.text for c in question.choices if c.label == label), label)
        else:  # the KG entities the answer names, those the question does not first (a stable sort)
            entities = tuple(sorted(self._entities(output.prediction), key=lambda e: e in qnodes))
        pending = Pending(decision, question.text, list(question.choice_texts), arm, bounds[arm], cost,
                          x.tolist(), output.prediction,
                          None if answer_set is None else list(answer_set.labels),
                          {n: o.prediction for n, o in observed.items() if n != arm},
                          answer_set is None or answer_set.certified)
        with self._lock:
            self.state.record(pending)
            if abstention is not None:
                self.abstentions.record(decision, arm, abstention.abstained)
            remaining = router.remaining
        self.state.sync()  # durable before it is acknowledged
        arm_scores = tuple(ArmScore(n, scores[n], bounds[n], affordable[n]) for n in router.names)
        return PipelineResult(decision, question.text, answer_text, label, dict(output.probabilities),
                              entities, qnodes, arm, arm_scores, output.knowledge, answer_set,
                              output.usage, cost, self.config.router.unit, remaining, tuple(notes), cnodes,
                              abstention, output.finish_reason)

    def abstention(self, arm: str, output: ArmOutput, question: Question,
                   group: npt.NDArray[np.int64] | None, others: Mapping[str, str] | None = None
                   ) -> Abstention | None:
        """With ``[answer_sets] abstain``, whether ``arm``'s multiple-choice answer is given or "not sure"
        (:mod:`kgwise.app.abstain`; ``group``: the held-out questions' routing, ``None`` when forced;
        ``others``: what the arms asked before routing answered)."""
        sets = self.config.answer_sets
        if not sets.abstain or not question.choices or not output.probabilities:
            return None
        cal = self.state.calibration
        if cal is None or self.state.calibration_problem is not None:
            why = self.state.calibration_problem or ("no held-out calibration: run `kgwise fit` with graded "
                                                     "multiple-choice questions")
            return Abstention(True, f"not sure: {why}",
                              answer_confidence(output.probabilities, output.prediction), None, 0)
        return decide(cal, arm, group, sets, output.probabilities, output.prediction, others)

    # ------------------------------------------------------------------ feedback
    def feedback(self, decision: str, correct: bool | None = None, gold: str | Sequence[str] | None = None,
                 observed: Mapping[str, bool] | None = None) -> FeedbackResult:
        """Teach the router a decision's outcome, once: ``correct`` (the answer was right or wrong) or
        ``gold`` (the true choice label or text, or the true answer names). The arms observed on the
        question learn their outcome where the feedback reveals it, or as ``observed`` says (graded by
        the caller). Unknown or settled decisions, and bad feedback, raise with the state unchanged."""
        if (correct is None) == (gold is None):
            raise ConfigError("give exactly one of correct=… or gold=…")
        self.state.check_writable()
        with self._lock:
            p = self.state.pending.get(decision)
            if p is None:
                why = ("already settled" if decision in self.state.settled else "not made with this state"
                       + (f", or dropped unanswered: only the newest {PENDING_KEPT} wait"
                          if self.state.expired else ""))
                raise UnknownDecisionError(f"unknown decision {decision!r} ({why})")
            reward, covered, seen = _grade(p, correct, gold)
            for name, ok in (observed or {}).items():
                if name not in p.observed:
                    raise ConfigError(f"arm {name!r} did not answer decision {decision!r} as an observed "
                                      f"arm (observed: {', '.join(p.observed) or 'none'})")
                seen[name] = float(bool(ok))
            router = self.state.router
            self.state.feedback(decision, reward, seen, covered)
            if p.choices:
                self.abstentions.settle(decision, reward > 0)
            warning = f"cost {p.cost:g} was above its bound {p.bound:g}" if p.cost > p.bound else None
            result = FeedbackResult(decision, p.arm, reward, covered, seen, router.spent, router.remaining,
                                    warning)
        self.state.sync()  # durable before it is acknowledged
        return result

    # ------------------------------------------------------------------ external arms
    def route(self, question: str, costs: Mapping[str, float] | None = None) -> Decision:
        """Pick the external arm for ``question`` (grounded in the KG; Coke's Eq. 2 within the budget,
        Eq. 14) and hold its cost bound — its ``price``, or the lower bound ``costs`` declares for it — until
        :meth:`settle` or :meth:`cancel` (:mod:`kgwise.app.external`); journaled before it returns.
        ``BudgetExceededError`` (nothing held) when no external arm's bound fits in what the budget leaves.
        With a router context that reads the free arms, they count as silent: no arm is run here."""
        q = _question(question, None)
        self.state.check_writable()
        bounds = external_bounds(self.config, costs, self.state.router.unreachable())
        x = context_vector(self.config, self.state.context, self.embed(q.text), {}, q.text,
                           self.state.router.predicted)
        entities = self.topic_entities(q)
        decision = self.new_id()
        with self._lock:
            self._expire()
            router = self.state.router
            folder = self._folder()
            arm = folder.route(decision, x.tolist(), bounds, q.text, folder.clock())
            remaining = router.remaining
            if arm is None:
                cheapest = min(bounds[a.name] for a in self.config.arms if a.external)
                raise BudgetExceededError(
                    f"no external arm's cost bound fits in what the budget leaves: {remaining:g} "
                    f"{self.config.router.unit} ({router.spent:g} spent, {router.reserved:g} held by "
                    f"decisions awaiting their outcome); cheapest bound {cheapest:g}")
        self.state.sync()  # durable before it is acknowledged
        return Decision(decision, q.text, arm, self.config.arm(arm).cluster, bounds[arm],
                        self.config.router.unit, remaining, entities, self.config.router.external_ttl_s)

    def settle(self, decision: str, correct: float, cost: float, observed: Mapping[str, float] | None = None
               ) -> Settlement:
        """Report what an external decision's arm got (``correct``: true/false, or a grade in [0, 1]) and
        what it really cost, once: the cost is paid (``BudgetExceededError`` above the decision's bound,
        nothing changed: the decision still waits) and the router learns the outcome (Eq. 5, 11, 14).
        ``observed``: the grades of other external arms the caller ran on the same question, learnt at no
        cost to the budget. Journaled before it returns."""
        reward, paid = grade(correct, cost)
        self.state.check_writable()
        with self._lock:
            self._expire()
            r = self._routed(decision)
            seen: dict[str, float] = {}
            for name, value in (observed or {}).items():
                if name == r.arm or name not in self.config.names or not self.config.arm(name).external:
                    raise ConfigError(f"observed.{name}: not another external arm of this decision (its arm "
                                      f"is {r.arm!r}; external arms: "
                                      f"{', '.join(a.name for a in self.config.arms if a.external)})")
                if not 0.0 <= float(value) <= 1.0:
                    raise ConfigError(f"observed.{name}: must be true, false or a grade in [0, 1], got "
                                      f"{value!r}")
                seen[name] = float(value)
            self._folder().settle_routed(decision, reward, paid, seen)
            router = self.state.router
            result = Settlement(decision, r.arm, "settled", reward, paid, r.bound, router.spent,
                                router.remaining, seen)
        self.state.sync()
        return result

    def cancel(self, decision: str) -> Settlement:
        """Call off an external decision whose arm will not be run: its bound returns to the budget."""
        self.state.check_writable()
        with self._lock:
            self._expire()
            r = self._routed(decision)
            self._folder().end_routed(decision, "cancelled")
            router = self.state.router
            result = Settlement(decision, r.arm, "cancelled", None, 0.0, r.bound, router.spent,
                                router.remaining, {})
        self.state.sync()
        return result

    def _folder(self) -> StateDir:
        """The state folder that keeps external decisions (a ``[state] url`` database does not)."""
        if not isinstance(self.state, StateDir):
            raise ConfigError("external arms keep their decisions in the state folder; this pipeline's "
                              "[state] url does not hold them: serve external arms without [state] url")
        return self.state

    def _routed(self, decision: str) -> Routed:
        """Under the lock: the external decision awaiting its settle, or ``UnknownDecisionError`` saying
        how it ended."""
        r = self.state.routed.get(decision)
        if r is None:
            how = self._folder().ended.get(decision, "not made with this state, or ended long ago")
            raise UnknownDecisionError(f"decision: {decision[:64]!r} does not wait for a settle ({how}; "
                                       f"{self.state.root})")
        return r

    def _expire(self) -> None:
        """Under the lock: call off the external decisions older than ``[router] external_ttl_s``."""
        ttl = self.config.router.external_ttl_s
        if ttl is not None and self.state.routed:
            self._folder().expire(ttl)

    # ------------------------------------------------------------------ status
    def pending(self, last: int | None = None) -> list[Pending]:
        """The decisions awaiting feedback, oldest first (``last``: only the newest that many; a database
        state then reads only those rows, not up to PENDING_KEPT)."""
        with self._lock:
            newest = getattr(self.state.pending, "newest", None)
            if last is not None and newest is not None:
                return list(newest(last))
            found = list(self.state.pending.values())
            return found if last is None else found[max(len(found) - last, 0):]

    def spend(self) -> float:
        """The budget spent so far, as :meth:`status` gives it, without the rest of a status: nothing is read
        from a database state (no count of the decisions awaiting feedback, no catch-up for the live
        coverage), so there it is as of this replica's last transaction: its own answers, and every
        replica's payments up to its last routing decision. The server samples it after answers, up to
        twice a second per replica."""
        with self._lock:
            return float(self.state.router.spent)

    def status(self) -> PipelineStatus:
        """Budget, spending, decisions and each arm's pulls, cost, calibration size and live coverage."""
        sets = self.config.answer_sets
        with self._lock:
            self._expire()
            r = self.state.router
            pulls, costs = r.pulls(), r.arm_cost()
            cal = self.state.calibration
            routed = self._routed_calibration()
            arms = []
            for j, a in enumerate(self.config.arms):
                count = self.state.coverage[a.name]
                rate, lower, upper, drift = coverage_bounds(count, sets.alpha, sets.delta)
                arms.append(ArmStatus(a.name, a.kind, a.cluster, pulls[a.name], costs[a.name],
                                      0 if cal is None else cal.size(a.name),
                                      CoverageStatus(count.n, count.covered, count.undetermined, rate, lower,
                                                     upper, 1 - sets.alpha, drift, count.uncertified),
                                      None if routed is None else routed[j]))
            return PipelineStatus(str(self.config.path), str(self.state.root), self.config.router.unit,
                                  r.budget, r.spent, r.reserved, r.remaining, r.overrun, r.questions,
                                  len(self.state.pending), sets.alpha, sets.delta,
                                  cal is not None, tuple(arms), r.cluster_accuracy(),
                                  self.state.expired, self.state.calibration_problem,
                                  self._open_sets_status(), dict(self.prompt_problems), r.pinned,
                                  self.state.read_only, tuple(self.state.warnings), len(self.state.routed),
                                  {a.name: self.abstentions.status(a.name) for a in self.config.arms}
                                  if sets.abstain else {})

    def _routed_calibration(self) -> list[RoutedCalibration] | None:
        """Under the lock: per arm, :class:`RoutedCalibration` from one draw of the router's rule (seeded,
        so two status calls agree); ``None`` without a calibration or with one made for other arms."""
        cal = self.state.calibration
        if cal is None or self.state.calibration_problem is not None:
            return None
        try:
            group = self._calibration_group("status")
        except DataError:
            return None
        if group is None:
            return None
        from kgwise.app.open_sets import routed_to

        uag, _ = self._open_calibration()
        if uag is not None and (uag.summary.get("held_out") or {}).get("fit") != cal.meta.get("fit"):
            uag = None
        out = []
        for j, name in enumerate(self.config.names):
            questions = int(cal.arm_scores(name, group).size)
            if uag is None:
                out.append(RoutedCalibration(questions))
                continue
            try:
                certified, rows = routed_to(uag, group, j)
            except DataError:
                out.append(RoutedCalibration(questions))
                continue
            out.append(RoutedCalibration(questions, int(rows.size), certified is not None))
        return out

    def _open_calibration(self) -> tuple[CalibratedUAG | None, str | None]:
        """UAG's calibration for open questions (loaded, or read from the state) or why there is none."""
        if self.config.answer_sets.uag_llm is None:
            return None, None
        if self.open_sets_problem is not None:
            return None, f"not used: {self.open_sets_problem}"
        if self.open_sets is not None:
            return self.open_sets.calibration, None
        if not self.state.uag_file.is_file():
            from kgwise.app.open_sets import uncalibrated_reason

            return None, uncalibrated_reason(self.state.root)
        from kgwise.conformal.calibrated import CalibratedUAG

        try:
            return CalibratedUAG.load(self.state.uag_file), None
        except (ConfigError, DataError) as exc:
            return None, f"not used: {exc}"

    def _open_sets_status(self) -> str | None:
        uag, problem = self._open_calibration()
        return problem if uag is None else str(uag.summary.get("note", "calibrated"))


def _gold_label(p: Pending, gold: str | Sequence[str]) -> str:
    """A multiple-choice decision's gold label from a label (``B``) or a choice's text."""
    if not isinstance(gold, str):
        if len(gold) != 1:
            raise ConfigError("a multiple-choice question has one gold choice; give one label or text")
        gold = gold[0]
    labels = list(CHOICE_LABELS[: len(p.choices)])
    g = gold.strip()
    if g in labels:
        return g
    folded = [c.casefold() for c in p.choices]
    if g.casefold() in folded:
        return labels[folded.index(g.casefold())]
    raise ConfigError(f"gold {gold!r} is neither a choice label ({', '.join(labels)}) nor a choice's text")


def _grade(p: Pending, correct: bool | None, gold: str | Sequence[str] | None
           ) -> tuple[float, bool | None, dict[str, float]]:
    """``(reward, covered, observed rewards)`` of a decision from its feedback (see
    :meth:`Pipeline.feedback`); coverage and observed arms only where the feedback reveals them."""
    observed: dict[str, float] = {}
    if p.choices:
        labels = list(CHOICE_LABELS[: len(p.choices)])
        truth: str | None = None
        if gold is not None:
            truth = _gold_label(p, gold)
        elif correct:
            truth = p.prediction
        elif len(labels) == 2:
            truth = next(x for x in labels if x != p.prediction)
        reward = float(truth == p.prediction) if truth is not None else float(bool(correct))
        covered: bool | None = None
        if p.answer_set is not None:
            if truth is not None:
                covered = truth in p.answer_set
            elif set(p.answer_set) <= {p.prediction}:
                covered = False
            elif set(p.answer_set) == set(labels):
                covered = True
        for name, pred in p.observed.items():
            if truth is not None:
                observed[name] = float(pred == truth)
            elif pred == p.prediction:
                observed[name] = 0.0
        return reward, covered, observed
    if gold is not None:
        names = [gold] if isinstance(gold, str) else list(gold)
        if not names or not all(isinstance(n, str) and n.strip() for n in names):
            raise ConfigError("gold must name at least one answer")
        reward = float(match_answer(p.prediction, names))
        for name, pred in p.observed.items():
            observed[name] = float(match_answer(pred, names))
        covered = None if p.answer_set is None else any(match_answer(a, names) for a in p.answer_set)
        return reward, covered, observed
    return float(bool(correct)), None, observed
