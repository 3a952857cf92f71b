"""Shared by the server tests: ``FakePipeline`` (a test double of the served ``kgwise.app.Pipeline`` that
satisfies ``kgwise.server.contract.PipelineLike`` with the pipeline's own result types and no model time),
the real pipeline, and a real uvicorn on 127.0.0.1 serving either."""

from __future__ import annotations

import contextlib
import hashlib
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from kgwise.app import AnswerSetResult, FeedbackResult, PipelineResult, UnknownDecisionError
from kgwise.app.arms import Knowledge
from kgwise.app.pipeline import ArmScore
from kgwise.eval.bench.net import free_port
from kgwise.server import ServerSettings, create_app
from kgwise.server.contract import PipelineLike
from kgwise.server.openai_api import PipelineHub
from kgwise.server.schemas import ArmStatusOut, PendingOut, PipelineStatusOut
from kgwise.types import CHOICE_LABELS, GenerationSettings, Triple, Usage, make_question

ARMS = ("kgm", "smollm2", "gemma3")
PRICES = {"kgm": 0.0, "smollm2": 0.001, "gemma3": 0.004}


@dataclass
class FakeArmCounts:
    """The test double's live counts of one arm."""

    name: str
    selections: int = 0
    graded: int = 0
    correct: int = 0
    covered: int = 0
    coverage_n: int = 0


@dataclass
class _Decision:
    arm: str
    question: str
    choices: list[str] | None
    choice: str | None
    answer: str
    members: tuple[str, ...]


@dataclass
class FakePipeline:
    """A deterministic stand-in for ``kgwise.app.Pipeline``: concepts are the question's long words, each
    linked to every choice by a triple and a two-hop path; the "router" scores arms by a hash of the text
    and picks the best affordable; the set is the answer and the next choice, at α = 0.1. Thread-safe, as
    the contract asks: what calls share is guarded by ``lock``."""

    budget: float | None = 1.0
    alpha: float | None = 0.1
    arm_names: tuple[str, ...] = ARMS
    cost_unit: str = "usd"
    spent: float = 0.0
    arms: dict[str, FakeArmCounts] = field(default_factory=lambda: {a: FakeArmCounts(a) for a in ARMS})
    decisions: dict[str, _Decision] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def answer(self, text: str, choices: Sequence[str] | None = None, arm: str | None = None,
               settings: GenerationSettings | None = None, on_text: Callable[[str], None] | None = None
               ) -> PipelineResult:
        """``settings`` checked as the pipeline does (:func:`kgwise.app.pipeline.check_settings`), and an
        open question's refused (a test double generates nothing); an open answer reaches ``on_text`` word
        by word."""
        from kgwise.app import BudgetExceededError
        from kgwise.app.pipeline import check_settings
        from kgwise.errors import ConfigError, SettingError

        if choices is not None and len(choices) >= 2:
            check_settings(make_question(text, list(choices)), settings)
        elif choices is None and settings is not None and settings.given():
            raise SettingError(settings.given()[0], "the test double generates nothing")

        if choices is not None and len(choices) < 2:
            raise ConfigError(f"a question needs 2 to 26 non-empty choices, got {len(choices)}")
        digest = hashlib.sha256(text.encode()).digest()
        scores = {a: round(digest[i] / 255, 4) for i, a in enumerate(self.arm_names)}
        with self.lock:
            affordable = [a for a in self.arm_names
                          if self.budget is None or self.spent + PRICES[a] <= self.budget + 1e-12]
            if arm is None:
                if not affordable:
                    raise BudgetExceededError(f"budget {self.budget} spent: no arm is affordable")
                arm = max(affordable, key=lambda a: scores[a])
            elif arm not in affordable:
                raise BudgetExceededError(f"budget {self.budget} spent: arm {arm!r} is not affordable")
            self.spent += PRICES[arm]
        words = [w.strip("?.,!").lower() for w in text.split()]
        concepts = tuple(dict.fromkeys(w for w in words if len(w) > 5))[:3] or (words[0],)
        if choices is not None:
            i = len(text) % len(choices)
            label, answer = CHOICE_LABELS[i], choices[i]
            members: tuple[str, ...] = (label, CHOICE_LABELS[(i + 1) % len(choices)])
            texts = tuple(choices[CHOICE_LABELS.index(m)] for m in members)
            choice_concepts = tuple((c.lower(),) for c in choices)
            triples = tuple(Triple(concepts[0], "related_to", c.lower()) for c in choices)
            paths = tuple((Triple(concepts[-1], "is_a", "treatment"),  # concept -is_a-> treatment
                           Triple(c.lower(), "used_for", "treatment")) for c in choices[:2])  # <-used_for- c
        else:
            label, answer = None, f"answer about {concepts[0]}"
            members, texts = (), (answer,)
            choice_concepts, triples = (), (Triple(concepts[0], "related_to", "answer"),)
            paths = ()
        text_kg = "\n".join(f"({t.head}, {t.relation}, {t.tail})" for t in triples)
        support = paths[i:i + 1] if choices is not None and i < len(paths) else ()  # the chosen choice's
        aset = None if self.alpha is None else AnswerSetResult(
            members, texts, self.alpha, True, f"covers the right answer at rate ≥ {1 - self.alpha:.0%} over "
            f"the questions routed to {arm}")
        cost = PRICES[arm]
        decision = uuid.uuid4().hex[:16]
        with self.lock:
            self.decisions[decision] = _Decision(arm, text, list(choices) if choices else None, label,
                                                 answer, members or texts)
            self.arms[arm].selections += 1
            remaining = float("inf") if self.budget is None else self.budget - self.spent
        usage = Usage(input_tokens=10 + 2 * len(words), output_tokens=1, calls=1, latency_s=0.0, cost=cost)
        if on_text is not None and choices is None:
            for i, word in enumerate(answer.split(" ")):
                on_text(word if i == 0 else " " + word)
        return PipelineResult(
            decision, text, answer, label, {}, (), concepts, arm,
            tuple(ArmScore(a, scores[a], PRICES[a], a in affordable) for a in self.arm_names),
            Knowledge(triples, paths, text_kg, support=support), aset, usage, cost, self.cost_unit, remaining,
            choice_entities=choice_concepts)

    def feedback(self, decision_id: str, correct: bool | None = None, gold: str | None = None
                 ) -> FeedbackResult:
        with self.lock:
            return self._feedback(decision_id, correct, gold)

    def _feedback(self, decision_id: str, correct: bool | None, gold: str | None) -> FeedbackResult:
        d = self.decisions.get(decision_id)
        if d is None:
            raise UnknownDecisionError(f"no decision {decision_id!r} is waiting for feedback")
        del self.decisions[decision_id]
        st = self.arms[d.arm]
        if gold is not None:
            gold_label = gold
            if d.choices is not None:
                gold_label = next((CHOICE_LABELS[i] for i, c in enumerate(d.choices)
                                   if gold.strip().casefold() in (c.casefold(), CHOICE_LABELS[i].casefold())),
                                  gold)
            correct = gold_label == (d.choice if d.choices is not None else d.answer)
            st.coverage_n += 1
            st.covered += gold_label in d.members
        elif correct:
            st.coverage_n += 1
            st.covered += 1
        st.graded += 1
        st.correct += bool(correct)
        remaining = float("inf") if self.budget is None else self.budget - self.spent
        return FeedbackResult(decision_id, d.arm, float(bool(correct)), None, {}, self.spent, remaining)

    def status(self) -> PipelineStatusOut:
        """Every arm's counts (no coverage bounds: 0 to 1), the newest 100 decisions awaiting feedback."""
        with self.lock:
            pending = [PendingOut(decision_id=k, arm=d.arm, question=d.question)
                       for k, d in self.decisions.items()]
            arms = [ArmStatusOut(name=a.name, selections=a.selections, graded=a.graded, correct=a.correct,
                                 accuracy=a.correct / a.graded if a.graded else None, covered=a.covered,
                                 coverage_n=a.coverage_n,
                                 coverage=a.covered / a.coverage_n if a.coverage_n else None,
                                 coverage_lower=0.0, coverage_upper=1.0, drift=False,
                                 coverage_target=None if self.alpha is None else 1.0 - self.alpha,
                                 calibration_questions=None, open_certified=None)
                    for a in self.arms.values()]
            return PipelineStatusOut(name="", cost_unit=self.cost_unit, budget=self.budget, spent=self.spent,
                                     alpha=self.alpha, arms=arms, pending_total=len(pending),
                                     pending=pending[-100:], history=[])

    def spend(self) -> float:
        with self.lock:
            return self.spent

    def state_health(self) -> dict[str, object]:
        return {"backend": "test double", "ok": True}


REAL_TRIPLES = (  # covers the server tests' questions: hypertension, diabetes, infection, thyroid
    ("lisinopril", "treats", "hypertension"), ("lisinopril", "lowers", "blood pressure"),
    ("hypertension", "is a", "cardiovascular disease"), ("insulin", "treats", "diabetes"),
    ("insulin", "is a", "hormone"), ("type 1 diabetes", "is a", "diabetes"),
    ("penicillin", "treats", "infection"), ("penicillin", "is a", "antibiotic"),
    ("levothyroxine", "treats", "hypothyroidism"), ("levothyroxine", "is a", "hormone"),
    ("medication", "treats", "disease"), ("drug", "is a", "medication"))

REAL_CONFIG = """\
[kg]
graph = "kg.tsv"

[[arms]]
name = "smollm2"
kind = "llm"
spec = "smollm2-135m"
price = 0.001

[[arms]]
name = "inject"
kind = "inject"
spec = "smollm2-135m"
price = 0.002

[router]
budget_usd = 1.0
seed = 0
"""


def real_pipeline(tmp: Path) -> Any:
    """``kgwise.app.Pipeline`` from a kgwise.toml over a small drug/disease TSV graph, with smollm2-135m
    as a plain LLM arm and as a KG-injection arm, wrapped for the server."""
    from kgwise.server.pipeline_adapter import ServedPipeline

    (tmp / "kg.tsv").write_text("".join(f"{h}\t{r}\t{t}\n" for h, r, t in REAL_TRIPLES), encoding="utf-8")
    (tmp / "kgwise.toml").write_text(REAL_CONFIG, encoding="utf-8")
    return ServedPipeline.from_config(tmp / "kgwise.toml", tmp / "state")


@dataclass
class LiveServer:
    """A real uvicorn serving ``pipeline`` on 127.0.0.1:``port``."""

    url: str
    pipeline: Any



@contextlib.contextmanager
def serve(pipelines: Mapping[str, PipelineLike] | PipelineHub, app: Any = None) -> Iterator[str]:
    """Run uvicorn on a free loopback port in a thread; yields its base URL and stops it afterwards."""
    port = free_port()
    config = uvicorn.Config(app or create_app(ServerSettings(), pipelines=pipelines), host="127.0.0.1",
                            port=port, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


@pytest.fixture(params=["fake", pytest.param("real", marks=pytest.mark.slow)])
def live(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LiveServer]:
    """A live server over ``FakePipeline`` or (when the branch has it) the real ``kgwise.app.Pipeline``."""
    if request.param == "fake":
        pipeline: Any = FakePipeline()
        with serve({"kgwise": pipeline}) as url:
            yield LiveServer(url, pipeline)
        return
    from kgwise.server.pipeline_adapter import pipeline_hub

    pipeline = real_pipeline(tmp_path)
    try:
        with serve(pipeline_hub({"kgwise": pipeline})) as url:
            yield LiveServer(url, pipeline)
    finally:
        pipeline.close()


@pytest.fixture(scope="module")
def real_live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """A live server over the real ``kgwise.app.Pipeline`` (smollm2-135m arms), shared by a module."""
    from kgwise.server.pipeline_adapter import pipeline_hub

    pipeline = real_pipeline(tmp_path_factory.mktemp("real"))
    try:
        with serve(pipeline_hub({"kgwise": pipeline})) as url:
            yield LiveServer(url, pipeline)
    finally:
        pipeline.close()


@pytest.fixture
def fake_pipeline() -> type[FakePipeline]:
    """The ``FakePipeline`` class (test modules cannot import ``conftest`` under importlib mode)."""
    return FakePipeline


@pytest.fixture
def serve_pipelines() -> Any:
    """:func:`serve`, for tests that build their own pipelines or application."""
    return serve


def external_pipeline(tmp: Path, gnn: float = 0.0, small: float = 0.1, big: float = 0.4, budget: float = 1.0,
                      **router: float) -> Any:
    """``kgwise.app.Pipeline`` whose three arms are external (the caller runs them: gnn, small, big at
    these prices) over the small drug/disease TSV graph, its config written by ``kgwise init``'s
    :func:`~kgwise.app.config.starter_toml`, with the real question encoder, wrapped for the server;
    ``router``: more ``[router]`` keys."""
    from kgwise.app.config import starter_toml
    from kgwise.server.pipeline_adapter import ServedPipeline

    (tmp / "kg.tsv").write_text("".join(f"{h}\t{r}\t{t}\n" for h, r, t in REAL_TRIPLES), encoding="utf-8")
    arms: list[tuple[str, str, str, float | None]] = [
        (name, "external", "", price) for name, price in (("gnn", gnn), ("small", small), ("big", big))]
    body = starter_toml("kg.tsv", arms, budget_usd=budget)
    body = body.replace("[router]\n", "[router]\n" + "".join(f"{k} = {v!r}\n" for k, v in router.items()))
    (tmp / "kgwise.toml").write_text(body, encoding="utf-8")
    return ServedPipeline.from_config(tmp / "kgwise.toml", tmp / "state")


@pytest.fixture
def make_external() -> Any:
    """:func:`external_pipeline` (test modules cannot import ``conftest`` under importlib mode)."""
    return external_pipeline


REPLAY_EXTERNAL_CONFIG = (
    '[kg]\ngraph = "kg.tsv"\n\n[[arms]]\nname = "chatgpt"\nkind = "llm"\nspec = "replay:chatgpt"\n\n'
    '[[arms]]\nname = "mine"\nkind = "external"\nprice = 0.01\n\n[router]\nbudget_usd = 1\n')


def replay_external_pipeline(tmp: Path) -> Any:
    """``kgwise.app.Pipeline`` with an arm kgwise runs (ChatGPT's recorded WebQSP answers, at its list
    price) and an external arm ``mine`` (0.01), budget $1, over a one-triple graph; wrapped for the server.
    Set ``KGWISE_CACHE`` to a fresh folder first when spend is checked (a cached response costs nothing)."""
    import kgwise.eval.recorded  # noqa: F401  registers the recordings as replay:NAME models
    from kgwise.server.pipeline_adapter import ServedPipeline

    (tmp / "kg.tsv").write_text("samuel taylor coleridge\tinfluenced by\twilliam wordsworth\n",
                                encoding="utf-8")
    (tmp / "kgwise.toml").write_text(REPLAY_EXTERNAL_CONFIG, encoding="utf-8")
    return ServedPipeline.from_config(tmp / "kgwise.toml", tmp / "state")


@pytest.fixture
def make_replay_external() -> Any:
    """:func:`replay_external_pipeline` (test modules cannot import ``conftest`` under importlib mode)."""
    return replay_external_pipeline
