"""``kgwise bench pipeline``: the pipeline's own time per question — ground + route + calibrate + record —
without model time, on the ConceptNet-scale synthetic graph (target: ≤ 10 ms median).

Setup: the synthetic graph (:mod:`kgwise.eval.bench.synthetic`, 1.6 M nodes / 3.4 M edges by default; a
smaller one for tests), three zero-time arms (:class:`InstantArm`: an answer drawn from a hash of the
question, no model behind it — a free KG-model-like arm and two priced LLM-like arms), a
:class:`~kgwise.app.Pipeline` over a fresh state directory (its journal fsync'ed as in production), fitted
with :func:`kgwise.app.fit.fit_questions` on the first CSQA ihdev questions (so the router is
warm-started, its settings cross-fitted when the log is large enough, and half of the log held out as the
sets' calibration). Then each measured question is answered with :meth:`Pipeline.answer` and settled with
:meth:`Pipeline.feedback`.

Per question: ``answer`` — the wall time of :meth:`Pipeline.answer`; ``arms`` — the time spent inside the
arms' answer calls (the free arm run for the context and the routed arm); ``overhead`` = answer − arms,
split into ``embed`` (the question embedding, all-MiniLM-L6-v2 on the CPU, its cache off), ``ground`` (the
question's and choices' concepts in the graph), ``record`` (the state directory's journal: the selection
appended, the answer appended and fsync'ed) and ``route_calibrate`` (the rest: context, Coke's selection,
the calibrated set); ``feedback``; and the ``bare arm call`` — the routed arm's
answer to the same question called directly. Reported as median and p90 (ms), with the ratio of the
pipeline's answer time to the bare arm call.
"""

from __future__ import annotations

import hashlib
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from kgwise.app.arms import ArmOutput, Knowledge, ObservedArm
from kgwise.app.config import (
    PACED_COKE,
    AnswerSetConfig,
    ArmConfig,
    Context,
    KGConfig,
    PipelineConfig,
    RouterConfig,
)
from kgwise.app.fit import fit_questions
from kgwise.app.pipeline import Pipeline
from kgwise.app.state import StateDir
from kgwise.embed import Encoder
from kgwise.errors import ConfigError
from kgwise.kg.csr import CSRGraph
from kgwise.route.coke import CokeConfig
from kgwise.types import Question, Serialisable, Usage

__all__ = ["InstantArm", "PipelineBenchConfig", "PipelineBenchReport", "Timing", "run_pipeline_benchmark",
           "timing"]


@dataclass
class InstantArm:
    """A zero-time arm: picks the gold choice with probability ``skill`` (seeded by the arm's name and the
    question's text), with choice probabilities and its top probability as signal; usage one call."""

    config: ArmConfig
    skill: float

    def can_answer(self, question: Question) -> bool:
        return bool(question.choices)

    def usage_bound(self, question: Question) -> Usage:
        return Usage(calls=1)

    def answer(self, question: Question) -> ArmOutput:
        digest = hashlib.blake2b((self.config.name + "\0" + question.text).encode(), digest_size=8).digest()
        rng = np.random.default_rng(int.from_bytes(digest, "little"))
        n = len(question.choices)
        pick = question.gold_index if question.gold and rng.random() < self.skill else int(rng.integers(n))
        p = rng.dirichlet(np.ones(n)) * 0.5
        p[pick] += 0.5
        labels = [c.label for c in question.choices]
        return ArmOutput(labels[pick], {lab: float(x) for lab, x in zip(labels, p, strict=True)}, Knowledge(),
                         Usage(calls=1), signals=(float(p.max()),))


@dataclass(frozen=True, slots=True)
class Timing:
    """Median and 90th percentile of per-question times, in milliseconds."""

    median_ms: float
    p90_ms: float


def timing(seconds: Sequence[float]) -> Timing:
    """:class:`Timing` of per-question times given in seconds."""
    if not seconds:
        raise ConfigError("no times to summarise")
    ms = np.asarray(seconds, dtype=np.float64) * 1000
    return Timing(float(np.median(ms)), float(np.percentile(ms, 90)))


@dataclass(frozen=True, slots=True)
class PipelineBenchConfig:
    """``fit``: dev questions the pipeline is fitted on; ``questions``: questions measured;
    ``budget_vs_large``: the budget as a fraction of always calling the dear arm on the measured
    questions (paced over them); ``context``: the router context before the fit chooses."""

    fit: int = 200
    questions: int = 300
    budget_vs_large: float = 0.6
    context: Context = "question+free"

    def __post_init__(self) -> None:
        if self.fit < 1 or self.questions < 1:
            raise ConfigError(f"fit and questions must be ≥ 1, got {self.fit}, {self.questions}")
        if not self.budget_vs_large > 0:
            raise ConfigError(f"budget_vs_large must be > 0, got {self.budget_vs_large}")


@dataclass(frozen=True, slots=True)
class PipelineBenchReport(Serialisable):
    """Per-question times (module docstring), the setup's sizes and one-off times (s), and the target."""

    graph: dict[str, Any]
    questions: int
    fit_questions: int
    answer: Timing
    arms: Timing
    overhead: Timing
    embed: Timing
    ground: Timing
    record: Timing
    route_calibrate: Timing
    overhead_without_embed: Timing
    feedback: Timing
    bare_arm_call: Timing
    answer_over_bare_arm_call: float
    setup_s: dict[str, float]
    router: dict[str, Any]
    routed: dict[str, int]
    target_overhead_median_ms: float = 10.0
    met: bool = False
    notes: tuple[str, ...] = field(default_factory=tuple)


class _Clock:
    """Seconds accumulated by the wrapped calls since the last :meth:`take`."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def take(self) -> float:
        s, self.seconds = self.seconds, 0.0
        return s

    def add(self, seconds: float) -> None:
        self.seconds += seconds


class _TimedEncoder:
    def __init__(self, inner: Encoder, clock: _Clock) -> None:
        self.inner, self.clock = inner, clock

    @property
    def dim(self) -> int:
        return self.inner.dim

    def encode(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        t = time.perf_counter()
        try:
            return np.asarray(self.inner.encode(texts), dtype=np.float32)
        finally:
            self.clock.seconds += time.perf_counter() - t


class _TimedGrounder:
    def __init__(self, inner: Any, clock: _Clock) -> None:
        self.inner, self.clock = inner, clock

    def ground(self, question: Question) -> Any:
        t = time.perf_counter()
        try:
            return self.inner.ground(question)
        finally:
            self.clock.seconds += time.perf_counter() - t

    def ground_text(self, text: str) -> Any:
        t = time.perf_counter()
        try:
            return self.inner.ground_text(text)
        finally:
            self.clock.seconds += time.perf_counter() - t


def _arms() -> dict[str, InstantArm]:
    specs = [("kgm", "kgm", "KGM", 0.0, True, 0.55), ("small", "llm", "LLM", 0.001, False, 0.6),
             ("large", "llm", "LLM", 0.01, False, 0.8)]
    return {name: InstantArm(ArmConfig(name=name, kind=kind, cluster=cluster,  # type: ignore[arg-type]
                                       spec=None if kind == "kgm" else f"instant:{name}", per_call=price,
                                       observe=observe), skill)
            for name, kind, cluster, price, observe, skill in specs}


def run_pipeline_benchmark(graph: CSRGraph, questions: Sequence[Question], encoder: Encoder,
                           cfg: PipelineBenchConfig, work: Path | None = None,
                           progress: Callable[[str], None] = lambda _: None,
                           setup_s: dict[str, float] | None = None) -> PipelineBenchReport:
    """Fit a pipeline over ``graph`` on the first ``cfg.fit`` of ``questions`` (multiple choice, with gold)
    and time the next ``cfg.questions`` (module docstring); ``setup_s``: one-off times measured by the
    caller (e.g. building the graph), reported with the pipeline's."""
    need = cfg.fit + cfg.questions
    usable = [q for q in questions  # the pipeline refuses a choice given twice (a few CSQA questions)
              if q.choices and q.gold
              and len({c.text.strip().casefold() for c in q.choices}) == len(q.choices)]
    if len(usable) < need:
        raise ConfigError(f"the benchmark needs {need} multiple-choice questions with gold answers and "
                          f"distinct choices, got {len(usable)}")
    fit_q, test_q = usable[: cfg.fit], usable[cfg.fit: need]
    arms = _arms()
    budget = cfg.budget_vs_large * arms["large"].config.per_call * len(test_q)
    config = PipelineConfig(Path("bench-pipeline.toml"), KGConfig(), tuple(a.config for a in arms.values()),
                            RouterConfig(budget, "usd", len(test_q), 0, True, CokeConfig(**PACED_COKE),
                                         cfg.context), AnswerSetConfig())
    arm_clock, embed_clock, ground_clock, record_clock = _Clock(), _Clock(), _Clock(), _Clock()
    runners = {n: ObservedArm(a, arm_clock.add) for n, a in arms.items()}
    times = dict(setup_s or {})
    own = Path(tempfile.mkdtemp(prefix="kgwise-bench-pipeline-")) if work is None else work
    t = time.perf_counter()
    pipe = Pipeline(config, own / "state", runners, _TimedEncoder(encoder, embed_clock), graph)
    times["pipeline_open_s"] = time.perf_counter() - t  # the grounder's name index over every node
    if pipe._grounder is None:
        raise ConfigError("the pipeline built no grounder over the graph")
    pipe._grounder = _TimedGrounder(pipe._grounder, ground_clock)  # type: ignore[assignment]  # a timing wrapper
    state = pipe.state
    if not isinstance(state, StateDir):
        raise ConfigError("this benchmark times the state folder's journal; its config sets [state] url")
    log, sync = state._log, state.sync

    def timed_log(event: dict[str, Any], encoded: tuple[str, str] | None = None) -> None:
        t = time.perf_counter()
        try:
            log(event, encoded)
        finally:
            record_clock.seconds += time.perf_counter() - t

    def timed_sync() -> None:
        t = time.perf_counter()
        try:
            sync()
        finally:
            record_clock.seconds += time.perf_counter() - t

    state._log = timed_log  # type: ignore[method-assign]
    state.sync = timed_sync  # type: ignore[method-assign]
    try:
        progress(f"fitting on {len(fit_q)} questions")
        t = time.perf_counter()
        report = fit_questions(pipe, fit_q, max_spend=1e9, echo=lambda _: None)
        times["fit_s"] = time.perf_counter() - t
        encoder.encode([fit_q[0].text + " (warm-up)"])  # the model is loaded; its first call pays setup
        rows: dict[str, list[float]] = {k: [] for k in ("answer", "arms", "embed", "ground", "record",
                                                        "feedback", "bare")}
        routed: dict[str, int] = {n: 0 for n in arms}
        progress(f"answering {len(test_q)} questions")
        for clock in (arm_clock, embed_clock, ground_clock, record_clock):
            clock.take()
        for q in test_q:
            t = time.perf_counter()
            r = pipe.answer(q.text, list(q.choice_texts))
            rows["answer"].append(time.perf_counter() - t)
            rows["arms"].append(arm_clock.take())
            rows["embed"].append(embed_clock.take())
            rows["ground"].append(ground_clock.take())
            rows["record"].append(record_clock.take())
            routed[r.arm] += 1
            t = time.perf_counter()
            pipe.feedback(r.decision, gold=q.gold[0])
            rows["feedback"].append(time.perf_counter() - t)
            record_clock.take()
            t = time.perf_counter()
            arms[r.arm].answer(q)
            rows["bare"].append(time.perf_counter() - t)
        router = {"context": pipe.state.context, "dim": pipe.state.router.dim,
                  "selection": None if report.router_selection is None else {
                      k: v for k, v in report.router_selection.to_dict().items() if k != "cross_fit"},
                  "budget": budget, "spent": pipe.state.router.spent}
    finally:
        pipe.close()
    overhead = [a - b for a, b in zip(rows["answer"], rows["arms"], strict=True)]
    rest = [o - e - g - r for o, e, g, r in zip(overhead, rows["embed"], rows["ground"], rows["record"],
                                                 strict=True)]
    bare = timing(rows["bare"])
    answer = timing(rows["answer"])
    over = timing(overhead)
    return PipelineBenchReport(
        graph={"nodes": graph.num_nodes, "edges": graph.num_edges, "name": graph.name},
        questions=len(test_q), fit_questions=len(fit_q), answer=answer, arms=timing(rows["arms"]),
        overhead=over, embed=timing(rows["embed"]), ground=timing(rows["ground"]),
        record=timing(rows["record"]), route_calibrate=timing(rest),
        overhead_without_embed=timing([o - e for o, e in zip(overhead, rows["embed"], strict=True)]),
        feedback=timing(rows["feedback"]), bare_arm_call=bare,
        answer_over_bare_arm_call=answer.median_ms / bare.median_ms if bare.median_ms > 0 else float("inf"),
        setup_s=times, router=router, routed=routed, met=over.median_ms <= 10.0,
        notes=("times are wall-clock on a shared machine: see the load average reported with them",
               "the bare arm call is a zero-time arm, so the ratio measures the pipeline against an arm "
               "that does no work; a real model call (milliseconds to seconds) dwarfs it"))
